"""Benchmark spade-sample-docs against `zstd -dc` and `zstd -dc | shuf -n N`.

    python bench/bench_sample_docs.py            # 320 MB corpus (uncompressed), n=1000
    python bench/bench_sample_docs.py --size-mb 600 --repeat 5

The corpus is built once under bench/data/ from the demo corpus's real text (paragraphs of
the standard library's documentation recombined into web-page-sized documents, so it
compresses like text does): one JSONL.zst file, and the same documents split into four
shard files. Measured side by side in one run, each the median of --repeat runs:

- wall time of sampling n documents from the one file, as a ratio to `zstd -dc FILE >
  /dev/null` (target <= 1.25) and to `zstd -dc FILE | shuf -n N` (target < 1);
- the four shard files with one process and with one per core (CPU use above 100% means
  more than one core worked);
- peak memory (max RSS) sampling one shard file vs the whole corpus (4x the data): it
  must not grow with the corpus.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Only the standard library up here: children inherit the parent's peak RSS through
# fork, so the measuring process stays small and the corpus is built in a child.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "bench" / "data"
SHARDS = 4


def build(size_mb: int) -> tuple[Path, list[Path]]:
    """corpus-<size>.jsonl.zst and its 4 shard files; reused when already there."""
    big = DATA / f"corpus-{size_mb}mb.jsonl.zst"
    parts = [DATA / f"corpus-{size_mb}mb-part{i}.jsonl.zst" for i in range(SHARDS)]
    if big.exists() and all(p.exists() for p in parts):
        return big, parts
    import orjson
    import zstandard

    from spade_cli.corpus import demo_documents

    DATA.mkdir(parents=True, exist_ok=True)
    # Half the paragraphs are real ones, half are drawn word by word from the corpus's
    # own word frequencies: the text then compresses like real text (about 4x with zstd -3)
    # instead of like a few megabytes repeated.
    paragraphs = [p for d in demo_documents() for p in d["text"].split("\n\n") if len(p) > 40]
    words = " ".join(paragraphs).split()
    rng = random.Random(0)
    target = size_mb * 1_000_000

    def paragraph() -> str:
        if rng.random() < 0.5:
            return rng.choice(paragraphs)
        return " ".join(rng.choices(words, k=rng.randint(20, 200)))

    t0 = time.time()
    per_part = target // SHARDS
    with open(big, "wb") as fb:
        whole = zstandard.ZstdCompressor(level=3, threads=-1).stream_writer(fb, closefd=False)
        writers = [zstandard.ZstdCompressor(level=3).stream_writer(open(p, "wb")) for p in parts]
        written, i = 0, 0
        while written < target:
            k = min(60, int(rng.expovariate(1 / 6)) + 1)  # long-tailed document lengths
            text = "\n\n".join(paragraph() for _ in range(k))
            line = (
                orjson.dumps({"id": f"bench-{i}", "url": f"https://example.org/{i}", "text": text})
                + b"\n"
            )
            whole.write(line)
            writers[min(SHARDS - 1, written // per_part)].write(line)
            written += len(line)
            i += 1
        whole.flush(zstandard.FLUSH_FRAME)
        for w in writers:
            w.close()
    print(
        f"built {big.name}: {i} documents, {written / 1e6:.0f} MB uncompressed, "
        f"{big.stat().st_size / 1e6:.0f} MB zstd, in {time.time() - t0:.1f} s",
        file=sys.stderr,
    )
    return big, parts


TIME = shutil.which("time") and os.path.exists("/usr/bin/time")


def timed(cmd: list[str] | str) -> tuple[float, float, float]:
    """(wall seconds, cpu seconds, peak RSS in MiB) of one command and its children."""
    argv = ["bash", "-c", cmd] if isinstance(cmd, str) else cmd
    if TIME:  # GNU time measures the RSS of a process forked from a small one
        argv = ["/usr/bin/time", "-f", "%M", "-o", str(DATA / ".rss"), *argv]
    t0 = time.perf_counter()
    p = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {cmd}")
    rss_kb = int((DATA / ".rss").read_text().split()[-1]) if TIME else ru.ru_maxrss
    return wall, ru.ru_utime + ru.ru_stime, rss_kb / 1024


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--size-mb", type=int, default=320, help="uncompressed corpus size (>= 300 for the target)"
    )
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build_only:
        build(args.size_mb)
        return
    subprocess.run(
        [sys.executable, __file__, "--build-only", "--size-mb", str(args.size_mb)], check=True
    )
    big = DATA / f"corpus-{args.size_mb}mb.jsonl.zst"
    parts = [DATA / f"corpus-{args.size_mb}mb-part{i}.jsonl.zst" for i in range(SHARDS)]
    empty = DATA / "empty.jsonl"
    empty.write_bytes(b"")
    n = str(args.n)
    sample = [sys.executable, "-m", "spade_cli", "sample-docs", "-q", "-n", n]
    cases = {
        "zstd -dc": f"zstd -dc {big} > /dev/null",
        "zstd -dc | shuf": f"zstd -dc {big} | shuf -n {n} > /dev/null",
        "spade-sample-docs": sample + ["-j", "1", str(big)],
        "zstd -dc 4 shards": f"zstd -dc {' '.join(map(str, parts))} > /dev/null",
        "4 shards, -j 1": sample + ["-j", "1", *map(str, parts)],
        "4 shards, -j 2": sample + ["-j", "2", *map(str, parts)],
        "1 shard (1/4 corpus)": sample + ["-j", "1", str(parts[0])],
        "start-up (empty input)": sample + ["-j", "1", str(empty)],
    }
    runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cases}
    load0 = f"{os.getloadavg()[0]:.1f}"
    for _ in range(args.repeat):  # interleaved, so load changes hit every case alike
        for name, cmd in cases.items():
            runs[name].append(timed(cmd))
    med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in runs.items()}
    print(
        f"corpus {big.name} ({args.size_mb} MB uncompressed), n={n}, median of {args.repeat}, "
        f"{os.cpu_count()} cores, load average before/after {load0} / {os.getloadavg()[0]:.1f}"
    )
    print(f"{'case':24} {'wall s':>8} {'CPU s':>7} {'max RSS MiB':>12}")
    for k, (wall, cpu, rss) in med.items():
        print(f"{k:24} {wall:8.2f} {cpu:7.2f} {rss:12.0f}")
    s, z, sh = med["spade-sample-docs"][0], med["zstd -dc"][0], med["zstd -dc | shuf"][0]
    print(
        f"sample / zstd -dc          = {s / z:.2f}  (target <= 1.25); "
        f"CPU seconds {med['spade-sample-docs'][1]:.2f} vs {med['zstd -dc'][1]:.2f}"
    )
    up = med["start-up (empty input)"][0]
    print(f"  of which start-up {up:.2f} s: (sample - start-up) / zstd -dc = {(s - up) / z:.2f}")
    print(f"sample / zstd -dc | shuf   = {s / sh:.2f}  (target < 1)")
    print(
        f"4 shards: -j 2 / -j 1      = {med['4 shards, -j 2'][0] / med['4 shards, -j 1'][0]:.2f}; "
        f"-j 2 / zstd -dc = {med['4 shards, -j 2'][0] / med['zstd -dc 4 shards'][0]:.2f}"
    )
    print(
        f"peak memory, 4x corpus / 1x = {med['spade-sample-docs'][2] / med['1 shard (1/4 corpus)'][2]:.2f}"
    )


if __name__ == "__main__":
    main()
