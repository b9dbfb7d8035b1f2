"""Start-up time of the commands that load no model, side by side with the interpreter's.

    python bench/bench_startup.py              # 20 runs each, median and best
    python bench/bench_startup.py --repeat 50

Commands run in shell loops and Slurm jobs, so the time before they read their first record
matters. Measured for each command: `--help`, and an empty input on stdin (`</dev/null`),
through the installed console script and through `python -m spade_cli`; next to them the
floors: `python3 -c pass`, `python3 -c 'import typer'` and a one-option Typer app (the
argument parser every command is built on). Printed: seconds (median, best), CPU seconds
(on a loaded machine they vary less than wall time) and the ratio of the median to
`python3 -c pass`. Target: 0.1 s or less for `--help` and an empty input.

The console scripts are run from the interpreter's own bin directory (not through a pyenv
shim, whose bash wrapper alone costs more than the budget) with PYTHONPATH set to this
checkout, so they run this tree's code.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# Commands that load no model on these inputs (the model-loading ones still answer
# --help and an empty input without loading one).
COMMANDS = [
    "cat",
    "sample-docs",
    "regret",
    "memory",
    "design",
    "validate",
    "rollout",
    "train",
    "eval",
    "loop",
    "init-model",
]

# The floor under every command: Typer builds each option's converter with pydantic when
# the app runs, so a command can start no faster than this.
TYPER_APP = """
import typer
app = typer.Typer(add_completion=False, rich_markup_mode=None)
@app.command()
def main(output: str = typer.Option("-", "-o")) -> None:
    pass
app()
"""


def timed(argv: list[str], repeat: int, env: dict[str, str]) -> tuple[float, float, float]:
    """(median wall s, best wall s, median CPU s) of `repeat` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        _, _, ru = os.wait4(p.pid, 0)
        walls.append(time.perf_counter() - t0)
        cpus.append(ru.ru_utime + ru.ru_stime)
    return statistics.median(walls), min(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--commands", nargs="*", default=COMMANDS)
    args = ap.parse_args()
    # Bytecode caches as a user's install has them: without them every module this tree
    # imports is compiled again at each start (PYTHONDONTWRITEBYTECODE forbids writing them).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    py = sys.executable
    rows: list[tuple[str, list[str]]] = [
        ("python3 -c pass", [py, "-c", "pass"]),
        ("python3 -c 'import typer'", [py, "-c", "import typer"]),
        ("a one-option Typer app", [py, "-c", TYPER_APP]),
        ("a one-option Typer app --help", [py, "-c", TYPER_APP, "--help"]),
    ]
    for name in args.commands:
        script = BIN / f"spade-{name}"
        if script.exists():
            rows.append((f"spade-{name} --help", [str(script), "--help"]))
        rows.append((f"python -m spade_cli {name} --help", [py, "-m", "spade_cli", name, "--help"]))
    # An empty input: the record-stream commands that need no model for it.
    for name in ("cat", "sample-docs", "regret"):
        script = BIN / f"spade-{name}"
        extra = ["-n", "10"] if name == "sample-docs" else []
        if script.exists():
            rows.append((f"spade-{name} </dev/null", [str(script), *extra]))
        rows.append(
            (f"python -m spade_cli {name} </dev/null", [py, "-m", "spade_cli", name, *extra])
        )
    base = None
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.repeat} runs each"
    )
    print(f"{'command':44} {'median s':>9} {'best s':>8} {'CPU s':>7} {'x pass':>7}")
    for label, argv in rows:
        timed(argv, 1, env)  # writes the bytecode caches and warms the page cache
        med, best, cpu = timed(argv, args.repeat, env)
        base = base or med
        flag = "" if label.startswith("python3 -c") or med <= 0.1 else "  > 0.1 s"
        print(f"{label:44} {med:9.3f} {best:8.3f} {cpu:7.3f} {med / base:7.2f}{flag}", flush=True)


if __name__ == "__main__":
    main()
