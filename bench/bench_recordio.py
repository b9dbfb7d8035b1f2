"""Record I/O throughput vs the zstd command line, side by side in one run.

Reading: RecordReader (decompress + split + orjson parse of every record) vs
`zstd -dc FILE > /dev/null`. Writing: RecordWriter to a .zst file vs `zstd -3` on the
same plain JSONL. Target: reading and parsing takes at most 2x `zstd -dc`.

    python bench/bench_recordio.py            # >= 300 MB uncompressed corpus
    python bench/bench_recordio.py --mb 50    # quicker
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402

from spade_cli.recordio import RecordReader, RecordWriter  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def make_corpus(mb: int) -> tuple[Path, Path, int]:
    """A JSONL corpus of document records whose text compresses like real prose."""
    DATA.mkdir(parents=True, exist_ok=True)
    plain = DATA / f"io-corpus-{mb}mb.jsonl"
    zst = DATA / f"io-corpus-{mb}mb.jsonl.zst"
    if not zst.exists() or not plain.exists():
        words = sorted({w for w in Path(os.__file__).read_text().split() if w.isalpha()})
        rng = random.Random(0)
        target = mb * 1_000_000
        size = 0
        with open(plain, "wb") as fh:
            i = 0
            while size < target:
                text = " ".join(rng.choices(words, k=rng.randint(150, 450)))
                line = (
                    orjson.dumps(
                        {
                            "kind": "doc",
                            "v": 1,
                            "id": f"doc-{i:08d}",
                            "parents": [],
                            "text": text,
                            "source": {"path": "bench", "line": i},
                        }
                    )
                    + b"\n"
                )
                fh.write(line)
                size += len(line)
                i += 1
        subprocess.run(["zstd", "-q", "-f", "-3", str(plain), "-o", str(zst)], check=True)
    n = sum(1 for _ in open(plain, "rb"))
    return plain, zst, n


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def best_of(n: int, fn) -> float:
    return min(timed(fn) for _ in range(n))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mb", type=int, default=320, help="uncompressed corpus size in MB")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    plain, zst, n = make_corpus(args.mb)
    mb = plain.stat().st_size / 1e6
    print(f"corpus: {n} records, {mb:.0f} MB plain, {zst.stat().st_size / 1e6:.0f} MB zstd")

    def zstd_dc():
        subprocess.run(f"zstd -dc {zst} > /dev/null", shell=True, check=True)

    def reader():
        count = sum(1 for _ in RecordReader([str(zst)]))
        assert count == n

    out = DATA / "io-out.jsonl.zst"

    def zstd_c():
        subprocess.run(f"zstd -q -3 -c {plain} > {out}", shell=True, check=True)

    records = list(RecordReader([str(plain)]))

    def writer():
        with RecordWriter(str(out)) as w:
            w.write_all(records)

    t_zdc = best_of(args.repeat, zstd_dc)
    t_read = best_of(args.repeat, reader)
    t_zc = best_of(args.repeat, zstd_c)
    t_write = best_of(args.repeat, writer)
    out.unlink(missing_ok=True)
    print(f"read  zstd -dc > /dev/null   {t_zdc:7.2f} s  {mb / t_zdc:7.0f} MB/s")
    print(
        f"read  RecordReader (parsed)  {t_read:7.2f} s  {mb / t_read:7.0f} MB/s  {n / t_read:9.0f} rec/s"
    )
    print(f"read  ratio RecordReader / zstd -dc = {t_read / t_zdc:.2f}x  (target <= 2x)")
    print(f"write zstd -3                {t_zc:7.2f} s  {mb / t_zc:7.0f} MB/s")
    print(
        f"write RecordWriter (.zst)    {t_write:7.2f} s  {mb / t_write:7.0f} MB/s  {n / t_write:9.0f} rec/s"
    )
    print(f"write ratio RecordWriter / zstd -3 = {t_write / t_zc:.2f}x")


if __name__ == "__main__":
    main()
