"""spade-memory: inspect the environment memory and draw replay candidates from it."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import orjson
import typer

from .. import memory as mem
from ..cli import Output, Quiet, Seed, Verbose, Zstd, entry, log, make_app, open_output
from ..errors import DataError, UsageError
from ..recordio import RecordReader
from ..regret import is_valid

app = make_app(
    "Inspect the environment memory written by spade-regret --memory: count, top, list, show "
    "the code of one environment, pick exemplars, draw replay candidates for spade-rollout "
    "--replay, or add validated candidates (for example the example library) to it.\n\n"
    "Example: spade-memory top memory.jsonl.zst -n 5; spade-memory show memory.jsonl.zst nim-single-heap"
)

Memory = Annotated[
    str, typer.Argument(help="Memory file (env records, any compression).", show_default=False)
]
SORT_KEYS = ("regret", "reward", "learnability", "round", "replays")


def _load(path: str) -> list[dict]:
    if path != "-" and not os.path.exists(path):
        raise DataError("no such file", path)
    return mem.load_memory(path)


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
    sys.stdout.flush()


def _key(e: dict, by: str) -> float:
    if by in ("round", "replays"):
        return float(e.get(by) or 0)
    v = (e.get("scores") or {}).get(by)
    return float(v) if isinstance(v, (int, float)) else float("-inf")


def _fmt(x: object) -> str:
    return f"{x:.3f}" if isinstance(x, float) else ("-" if x is None else str(x))


@app.command()
def count(memory: Memory, verbose: Verbose = 0, quiet: Quiet = False) -> None:
    """Print the number of environments in memory."""
    _out(str(len(_load(memory))))


@app.command()
def top(
    memory: Memory,
    n: Annotated[int, typer.Option("-n", min=1, help="How many.")] = 10,
    by: Annotated[str, typer.Option("--by", help=f"Sort key: {', '.join(SORT_KEYS)}.")] = "regret",
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """The top N environments as tab-separated lines with a header (id, name, round, regret, learnability, success rates, replays, summary)."""
    if by not in SORT_KEYS:
        raise UsageError(f"--by must be one of {', '.join(SORT_KEYS)}, got {by!r}")
    entries = sorted(_load(memory), key=lambda e: (-_key(e, by), e["id"]))[:n]
    lines = [
        "id\tname\tround\tregret\tlearnability\tsuccess_nohint\tsuccess_hint\treplays\tsummary"
    ]
    for e in entries:
        s = e.get("scores") or {}
        lines.append(
            "\t".join(
                _fmt(x)
                for x in (
                    e["id"],
                    e.get("name"),
                    e.get("round"),
                    s.get("regret"),
                    s.get("learnability"),
                    (s.get("nohint") or {}).get("success_rate"),
                    (s.get("hint") or {}).get("success_rate"),
                    e.get("replays"),
                    e.get("summary"),
                )
            )
        )
    _out("\n".join(lines))


@app.command("list")
def list_(
    memory: Memory,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many lines.")] = 1000,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """The compact listing the designer prompt shows: `- name: summary`, newest first."""
    _out(mem.listing(_load(memory), limit=limit, width=10_000))


@app.command()
def show(
    memory: Memory,
    key: Annotated[
        str,
        typer.Argument(
            help="Environment id, id prefix, or name (newest wins).", show_default=False
        ),
    ],
    record: Annotated[
        bool, typer.Option("--record", help="Print the whole record as JSON, not only the code.")
    ] = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Print the code of one environment."""
    e = mem.find_entry(_load(memory), key)
    if e is None:
        raise DataError(f"no environment with id, id prefix or name {key!r}", memory)
    _out(orjson.dumps(e).decode() if record else e["code"])


@app.command()
def exemplars(
    memory: Memory,
    k: Annotated[int, typer.Option("-k", min=1, help="How many exemplars.")] = 3,
    seed: Seed = 0,
    output: Output = "-",
    zstd: Zstd = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """The env records the designer prompt would show as exemplars (docs/concepts/memory.md)."""
    with open_output(output, zstd) as out:
        out.write_all(mem.select_exemplars(_load(memory), k, seed))


@app.command()
def replay(
    memory: Memory,
    n: Annotated[int, typer.Option("-n", min=0, help="How many environments to replay.")] = 8,
    round_: Annotated[
        int, typer.Option("--round", min=0, help="The round they are replayed in (staleness).")
    ] = 0,
    beta: Annotated[
        float, typer.Option("--beta", min=1e-6, help="PLR rank temperature; lower is greedier.")
    ] = mem.REPLAY_BETA,
    rho: Annotated[
        float, typer.Option("--rho", min=0.0, max=1.0, help="PLR weight of staleness.")
    ] = mem.REPLAY_RHO,
    seed: Seed = 0,
    output: Output = "-",
    zstd: Zstd = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Candidate records (origin "replay", valid) for spade-rollout --replay, drawn by prioritised level replay (learnability rank and staleness)."""
    entries = _load(memory)
    cands = mem.replay_candidates(entries, n, round_, seed, beta, rho)
    with open_output(output, zstd) as out:
        out.write_all(cands)
    log.info("%d of %d environments drawn for replay in round %d", len(cands), len(entries), round_)


@app.command()
def init(
    memory: Annotated[
        str, typer.Argument(help="Memory file to create (written atomically).", show_default=False)
    ],
    library: Annotated[
        str | None,
        typer.Option(
            "--library",
            help="Directory of example environments (default: the packaged library, "
            "or $SPADE_ENV_LIBRARY).",
        ),
    ] = None,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Create a run's first memory from the example environment library (unplayed entries: replay ranks them first)."""
    from ..envs.library import load_library

    n = mem.save_memory(memory, mem.entries_from_library(load_library(library)))
    log.info("memory %s: %d environments from the library", memory, n)


@app.command()
def pool(
    source: Annotated[
        str,
        typer.Argument(
            help="A directory of environments (the example library, or a released pool as spade-cat --from-dir reads it), a memory file or a candidates file (with --by reward, one spade-regret scored).",
            show_default=False,
        ),
    ],
    n: Annotated[
        int, typer.Option("-n", min=0, help="How many environments to draw (0: all).")
    ] = 8,
    round_: Annotated[
        int, typer.Option("--round", min=0, help="Round recorded on the candidates.")
    ] = 0,
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help="How: uniform (a uniform draw) or reward: the N with the highest designer reward "
            "in a file spade-regret scored, the skills (`family`) in turn as the designer's "
            "prompts take them (ties at random; unscored and invalid records are never "
            "drawn), kept whole, rollouts and score included.",
        ),
    ] = "uniform",
    seed: Seed = 0,
    output: Output = "-",
    zstd: Zstd = False,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Draw N environments from a fixed pool, uniformly (without replacement, deterministic for seed and round) or by the designer's reward, as candidate records for spade-validate: the fixed-environment baselines."""
    if by not in mem.POOL_DRAWS:
        raise UsageError(f"--by must be one of {', '.join(mem.POOL_DRAWS)}, got {by!r}")
    if by == "reward" and os.path.isdir(source):
        raise UsageError(
            f"{source}: --by reward ranks a scored file (spade-regret's output), not a directory"
        )
    if os.path.isdir(source):
        from ..envs.library import library_candidates, load_library
        from ..envs.pool_import import is_released_pool, pool_from_dir

        if is_released_pool(source):  # a manifest, subdirectories or the published contract
            items = pool_from_dir(source, round=round_)
        else:
            items = library_candidates(load_library(source), round=round_)
    else:
        items = []
        for rec in RecordReader([source], kind=("env", "candidate"), required=("id",)):
            if rec["kind"] == "env":
                items.append(mem.pool_candidate(rec, round_))
            else:
                items.append({**rec, "round": round_})
    if by == "reward":
        picked = mem.draw_best(items, n, seed, "pool", round_)
        if items and not picked:
            raise DataError(
                "no valid scored record to rank by reward (spade-regret scores them)", source
            )
        best = ", ".join(f"{mem.designer_reward(r):.2f}" for r in picked)
        log.info(
            "%d of %d scored environments kept for round %d (rewards %s)",
            len(picked),
            len(items),
            round_,
            best,
        )
    else:
        picked = mem.draw(items, n, seed, "pool", round_)
        log.info("%d of %d pool environments drawn for round %d", len(picked), len(items), round_)
    with open_output(output, zstd) as out:
        out.write_all(picked)


@app.command()
def add(
    memory: Memory,
    candidates: Annotated[
        list[str],
        typer.Argument(help="Validated candidate files (`-` for stdin).", show_default=False),
    ],
    round_: Annotated[
        int, typer.Option("--round", min=0, help="Round recorded on the new entries.")
    ] = 0,
    dedup: Annotated[
        bool,
        typer.Option("--dedup/--no-dedup", help="Skip duplicates of memory and of each other."),
    ] = True,
    verbose: Verbose = 0,
    quiet: Quiet = False,
) -> None:
    """Add valid candidates (no rollouts needed: for example the example library after spade-validate) to memory; invalid ones and duplicates are skipped."""
    reader = RecordReader(candidates, kind="candidate", required=("id",))
    new, skipped = [], 0
    entries = mem.load_memory(memory)
    idx = mem.index_of(entries) if dedup else None
    for cand in reader:
        code = (cand.get("env") or {}).get("code")
        if not is_valid(cand) or not isinstance(code, str):
            skipped += 1
            continue
        if idx is not None:
            if (m := idx.find(code)) is not None:
                log.debug("%s: %s duplicate of %s", cand["id"], m.how, m.key)
                skipped += 1
                continue
            idx.add(cand["id"], code)
        new.append(mem.entry_from_candidate(cand, {}, round_))

    def change(old: list[dict]) -> list[dict]:
        have = {e["id"] for e in old}
        return old + [e for e in new if e["id"] not in have]

    final = mem.update_memory(memory, change)
    log.info("added %d environments (%d skipped); memory holds %d", len(new), skipped, len(final))


main = entry(app, "spade-memory")
