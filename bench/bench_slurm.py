"""One demo round under Slurm (submit-round.sh --wait, one job per stage) vs spade-loop
(one process running the same stages), on the same config and a local one-node Slurm
(examples/slurm/local-cluster.sh; needs root on Debian, or a running slurm-wlm).

The config is the one tests/test_slurm.py runs (tiny offline model, the bundled demo
corpus, both built once into a temporary directory). The Slurm figure includes every job's start (a fresh
`spade-loop --stage` process) and the scheduler's reaction time between jobs; with
SHARDS > 1 the map stages run as array tasks side by side.

    python bench/bench_slurm.py            # 1 shard
    python bench/bench_slurm.py --shards 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_slurm import write_config  # noqa: E402  (the round the Slurm tests run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", type=int, default=1)
    args = ap.parse_args()
    from spade_cli.tinymodel import build_tiny_model

    d = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    env = {
        **os.environ,
        "SPADE_SLURM_DIR": str(d / "slurm"),
        "SPADE_SLURM_PORT": "6917",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "SPADE_WAIT_POLL": "0.5",
    }
    bin_dir = d / "bin"
    bin_dir.mkdir()
    (bin_dir / "spade-loop").write_text(
        f'#!/bin/sh\nexec {sys.executable} -m spade_cli loop "$@"\n'
    )
    (bin_dir / "spade-loop").chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["SLURM_CONF"] = str(d / "slurm" / "slurm.conf")
    cluster = str(ROOT / "examples" / "slurm" / "local-cluster.sh")
    subprocess.run([cluster, "start"], env=env, check=True)
    try:
        model = build_tiny_model(d / "tiny-model", seed=0)
        corpus = d / "demo-corpus.jsonl.zst"
        subprocess.run(
            [sys.executable, "-m", "spade_cli", "sample-docs", "--build-demo-corpus", str(corpus)],
            env=env,
            check=True,
        )
        times = {}
        for name, cmd in (
            ("spade-loop", ["spade-loop", "-q"]),
            ("slurm", [str(ROOT / "examples/slurm/submit-round.sh"), "--wait"]),
        ):
            config = write_config(
                {"runs": d / "runs", "model": str(model), "corpus": str(corpus)}, name
            )
            extra = ["1", str(args.shards)] if name == "slurm" else []
            t = time.perf_counter()
            subprocess.run(
                [*cmd, str(config), *extra],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            times[name] = time.perf_counter() - t
        print(f"{'round wall time':24} {'spade-loop':>12} {'slurm':>12} {'ratio':>8}")
        print(
            f"{f'{args.shards} shard(s)':24} {times['spade-loop']:11.1f}s {times['slurm']:11.1f}s "
            f"{times['slurm'] / times['spade-loop']:7.2f}x"
        )
    finally:
        subprocess.run([cluster, "stop"], env=env)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
