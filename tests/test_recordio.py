"""The shared record I/O layer: formats, atomic writes, and every corrupt-input case."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import zstandard

from spade_cli.errors import DataError
from spade_cli.recordio import RecordReader, RecordWriter, iter_lines, load_all, write_records

from .helpers import ROOT, run_cli

RECORDS = [
    {"kind": "doc", "v": 1, "id": f"d-{i}", "parents": [], "text": "é" * i} for i in range(50)
]


def encode(records, fmt):
    data = b"".join(orjson.dumps(r) + b"\n" for r in records)
    if fmt == "zst":
        return zstandard.ZstdCompressor().compress(data)
    if fmt == "gz":
        return gzip.compress(data)
    return data


@pytest.mark.parametrize("fmt", ["plain", "gz", "zst"])
def test_round_trip_every_format(tmp_path, fmt):
    path = tmp_path / f"out.jsonl.{fmt}" if fmt != "plain" else tmp_path / "out.jsonl"
    assert write_records(str(path), RECORDS) == len(RECORDS)
    raw = path.read_bytes()
    assert raw.startswith({"plain": b"{", "gz": b"\x1f\x8b", "zst": b"\x28\xb5\x2f\xfd"}[fmt])
    assert load_all(str(path)) == RECORDS


@pytest.mark.parametrize("fmt", ["plain", "gz", "zst"])
def test_compression_is_detected_from_content_not_name(tmp_path, fmt):
    path = tmp_path / "misleading.txt"
    path.write_bytes(encode(RECORDS, fmt))
    assert load_all(str(path)) == RECORDS


def test_several_inputs_in_order(tmp_path):
    a, b = tmp_path / "a.zst", tmp_path / "b.gz"
    write_records(str(a), RECORDS[:20])
    write_records(str(b), RECORDS[20:])
    assert list(RecordReader([str(a), str(b)])) == RECORDS


def test_multi_frame_zstd_is_read_whole(tmp_path):
    path = tmp_path / "frames.zst"
    path.write_bytes(encode(RECORDS[:10], "zst") + encode(RECORDS[10:], "zst"))
    assert load_all(str(path)) == RECORDS


def test_large_stream_crosses_chunks(tmp_path):
    recs = [{"kind": "doc", "id": str(i), "text": "x" * (i % 3000)} for i in range(3000)]
    path = tmp_path / "big.zst"
    write_records(str(path), recs)
    assert load_all(str(path)) == recs
    offsets = [off for _, off, _ in iter_lines(str(path))]
    plain = zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())
    assert all(plain[o : o + 1] == b"{" for o in offsets[:100] + offsets[-100:])


def test_stdin_and_stdout_through_cat(tmp_path):
    data = encode(RECORDS, "zst")
    r = run_cli("cat", "-", input=data)
    assert r.returncode == 0, r.stderr
    assert [orjson.loads(x) for x in r.stdout.splitlines()] == RECORDS
    r = run_cli("cat", "--zstd", input=data)
    assert r.stdout.startswith(b"\x28\xb5\x2f\xfd")


def test_kind_and_required_fields_checked(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(encode([RECORDS[0], {"kind": "env", "id": "e"}], "plain"))
    with pytest.raises(DataError, match=r"mixed.jsonl:2: expected a 'doc' record, got kind 'env'"):
        list(RecordReader([str(path)], kind="doc"))
    with pytest.raises(DataError, match=r"mixed.jsonl:1: missing field 'score'"):
        list(RecordReader([str(path)], required=["score"]))


def test_skip_bad_counts(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"id": 1}\n{oops\n[1]\n{"id": 2, "v": 2}\n{"id": 3, "v": 1}\n')
    reader = RecordReader([str(path)], skip_bad=True)
    assert [r["id"] for r in reader] == [1, 3]
    assert reader.bad == 3


def test_a_stage_refuses_records_of_an_unknown_schema_version(tmp_path):
    path = tmp_path / "scored.jsonl"
    path.write_bytes(encode([{**RECORDS[0], "kind": "candidate", "v": 99}], "plain"))
    r = run_cli("regret", str(path))
    assert r.returncode == 3
    assert r.stderr.decode().strip() == (
        f"spade-regret: error: {path}:1: schema version 99, but this spade reads version 1 records"
    )
    assert r.stdout == b""


# --------------------------------------------------------------------------- corrupt input


def corrupt_cases():
    good = encode(RECORDS, "plain")
    zst = encode(RECORDS, "zst")
    cases = {
        "bad_json": (good.replace(b'"d-3"', b'"d-3', 1), r"bad\.jsonl:4: bad JSON at column"),
        "not_object": (good + b"[1, 2]\n", r"bad\.jsonl:51: a record must be a JSON object"),
        "truncated_zstd": (zst[: len(zst) // 2], r"bad\.jsonl: truncated zstd stream"),
        "corrupt_gzip": (
            encode(RECORDS, "gz")[:-12],
            r"bad\.jsonl: corrupt or truncated gzip stream",
        ),
        "unknown_version": (
            encode([*RECORDS[:6], {**RECORDS[6], "v": 99}], "zst"),
            r"bad\.jsonl:7: schema version 99, but this spade reads version 1 "
            r"records$",
        ),
    }
    return cases


@pytest.mark.parametrize(
    "case", ["bad_json", "not_object", "truncated_zstd", "corrupt_gzip", "unknown_version"]
)
def test_corrupt_input_one_line_error_exit_3_no_output(tmp_path, case):
    data, pattern = corrupt_cases()[case]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    out = tmp_path / "out.jsonl.zst"
    r = run_cli("cat", str(bad), "-o", str(out))
    assert r.returncode == 3, r.stderr
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert re.match(r"spade-cat: error: .*" + pattern, lines[0]), lines[0]
    assert r.stdout == b""
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if "partial" in p]


def test_missing_file_exit_3(tmp_path):
    r = run_cli("cat", str(tmp_path / "nope.jsonl"))
    assert r.returncode == 3
    assert r.stderr.decode().strip() == f"spade-cat: error: {tmp_path / 'nope.jsonl'}: no such file"


def test_writer_is_atomic_when_killed(tmp_path):
    """A process killed mid-write leaves no file under the final name."""
    out = tmp_path / "out.zst"
    script = (
        "import os, signal\n"
        "from spade_cli.recordio import RecordWriter\n"
        f"w = RecordWriter({str(out)!r})\n"
        "for i in range(200000): w.write({'i': i, 'pad': 'x' * 50})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=False)
    assert not out.exists()


def test_writer_abort_removes_temp(tmp_path):
    out = tmp_path / "out.jsonl"
    with pytest.raises(RuntimeError):
        with RecordWriter(str(out)) as w:
            w.write({"a": 1})
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_writer_replaces_existing_only_on_success(tmp_path):
    out = tmp_path / "out.jsonl"
    write_records(str(out), [{"old": 1}])
    with pytest.raises(RuntimeError):
        with RecordWriter(str(out)) as w:
            w.write({"new": 1})
            raise RuntimeError("boom")
    assert load_all(str(out)) == [{"old": 1}]


def test_head_closes_pipe_cleanly(tmp_path):
    path = tmp_path / "many.zst"
    write_records(str(path), ({"i": i, "pad": "y" * 200} for i in range(200000)))
    cmd = f"{sys.executable} -m spade_cli cat {path} | head -n 2"
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=os.environ)
    assert r.stdout.count(b"\n") == 2
    assert b"Traceback" not in r.stderr and b"BrokenPipe" not in r.stderr, r.stderr
    assert r.stderr == b""


def test_remove_dead_partials_keeps_live_writers_files(tmp_path):
    from spade_cli.recordio import remove_dead_partials

    dead = subprocess.Popen(["true"])
    dead.wait()
    out = tmp_path / "rollouts.jsonl.zst"
    left = tmp_path / f".rollouts.jsonl.zst.partial-{dead.pid}"
    live = tmp_path / f".rollouts.jsonl.zst.partial-{os.getpid()}"
    other = tmp_path / f".scored.jsonl.zst.partial-{dead.pid}"
    for p in (left, live, other):
        p.write_bytes(b"{}\n")
    assert remove_dead_partials(out) == [left.name]
    assert not left.exists() and live.exists() and other.exists()
    assert remove_dead_partials(tmp_path / "missing" / "x.jsonl") == []


def test_a_partial_older_than_the_process_with_its_pid_is_a_dead_writers(tmp_path):
    # PIDs are reused: a file last written before its PID's process started is not that
    # process's, so it goes even though the PID is alive.
    import time

    from spade_cli.recordio import remove_dead_partials

    child = subprocess.Popen(["sleep", "30"])
    try:
        stale = tmp_path / f".rollouts.jsonl.zst.partial-{child.pid}"
        stale.write_bytes(b"{}\n")
        an_hour_ago = time.time() - 3600
        os.utime(stale, (an_hour_ago, an_hour_ago))
        assert remove_dead_partials(tmp_path / "rollouts.jsonl.zst") == [stale.name]
        stale.write_bytes(b"{}\n")  # written now: the live process may be writing it
        assert remove_dead_partials(tmp_path / "rollouts.jsonl.zst") == []
    finally:
        child.kill()
        child.wait()


def test_a_killed_writer_not_yet_reaped_is_dead(tmp_path):
    # A stage the kernel killed with its loop stays a zombie until it is reaped, and a
    # zombie still answers kill(pid, 0): its partial is a dead writer's all the same.
    import time

    from spade_cli.recordio import remove_dead_partials

    child = subprocess.Popen(["sleep", "30"])
    try:
        partial = tmp_path / f".rollouts.jsonl.zst.partial-{child.pid}"
        partial.write_bytes(b"{}\n")
        assert remove_dead_partials(tmp_path / "rollouts.jsonl.zst") == []  # alive
        child.kill()  # not waited for: a zombie
        deadline = time.time() + 10
        stat = Path(f"/proc/{child.pid}/stat")
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.time() < deadline
            time.sleep(0.01)
        assert remove_dead_partials(tmp_path / "rollouts.jsonl.zst") == [partial.name]
    finally:
        child.kill()
        child.wait()
