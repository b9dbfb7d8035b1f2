"""spade-sample-docs: exactness, determinism, shards, uniformity, formats, mix, filters,
dedup, excerpts, bad input, and the demo corpus."""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import zstandard

from spade_cli import recordio
from spade_cli.corpus import (
    Options,
    Plan,
    Reservoir,
    excerpt_window,
    expand_inputs,
    merge,
    quotas,
    sample,
    sampler,
)
from spade_cli.corpus.keys import file_seed, key_for, keys_for
from spade_cli.corpus.sources import sampling_key
from spade_cli.recordio import iter_lines

from .helpers import run_cli

# --------------------------------------------------------------------------- helpers


def write_jsonl(path: Path, rows: list, compress: str | None = None) -> Path:
    data = b"".join(
        orjson.dumps(r) + b"\n" if not isinstance(r, bytes) else r + b"\n" for r in rows
    )
    if compress == "zst":
        data = zstandard.ZstdCompressor().compress(data)
    elif compress == "gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def texts(k: int, start: int = 0, length: int = 60) -> list[dict]:
    rng = random.Random(start)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()
    return [
        {"text": f"doc {i}: " + " ".join(rng.choices(words, k=length // 6)), "id": f"c{i}"}
        for i in range(start, start + k)
    ]


def run(paths, n, seed=0, jobs=1, **kw) -> list[dict]:
    plan = Plan(expand_inputs([str(p) for p in paths]), {None: n})
    docs, _ = sample(plan, Options(n, seed, **kw), jobs)
    return docs


def content_id(text: str) -> str:
    return "doc-" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()[:16]


def naive(paths, n, seed=0, min_chars=0, max_chars=None) -> list[tuple[str, str, int]]:
    """The definition of the sample, computed the slow way: parse every line."""
    best: dict[str, tuple[int, str, int]] = {}
    for index, path in enumerate(map(str, paths)):
        fs = file_seed(seed, sampling_key(index, path, None))
        for lineno, _off, line in iter_lines(path):
            if not line.strip():
                continue
            text = orjson.loads(line)["text"]
            if (
                not (text or "").strip()
                or len(text) < min_chars
                or (max_chars and len(text) > max_chars)
            ):
                continue
            rid, k = content_id(text), key_for(fs, lineno)
            if rid not in best or k < best[rid][0]:
                best[rid] = (k, os.path.normpath(path), lineno)
    top = sorted((k, rid, p, line) for rid, (k, p, line) in best.items())[:n]
    return [(rid, p, line) for _k, rid, p, line in top]


def summary(docs) -> list[tuple[str, str, int]]:
    return [(d["id"], d["source"]["path"], d["source"]["line"]) for d in docs]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Path]:
    """Five JSONL.zst files of uneven size with duplicates inside and across files."""
    d = tmp_path_factory.mktemp("corpus")
    rows = texts(700)
    rows[50] = rows[10]  # duplicate inside a file
    rows[400] = rows[11]  # duplicate across files
    cuts = [0, 40, 200, 330, 600, 700]
    return [
        write_jsonl(d / f"part-{i}.jsonl.zst", rows[a:b], "zst")
        for i, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False))
    ]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo.jsonl.zst"
    r = run_cli("sample-docs", "--build-demo-corpus", out)
    assert r.returncode == 0, r.stderr
    return out


# --------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("chunk", [None, 97])
def test_sample_is_exactly_the_smallest_keys(corpus, monkeypatch, chunk):
    # Tiny chunks put line boundaries everywhere, including lines spanning chunks.
    if chunk:
        monkeypatch.setattr(recordio, "CHUNK", chunk)
        monkeypatch.setattr(sampler, "CHUNK", chunk)
        plain = [
            write_jsonl(p.with_suffix(".plain.jsonl"), list(recordio.RecordReader([str(p)])))
            for p in corpus
        ]
    else:
        plain = corpus
    for n in (1, 25, 2000):
        docs = run(plain, n, excerpt_chars=0)
        assert summary(docs) == naive(plain, n)
    for d in docs:
        data = b"".join(recordio.iter_chunks(d["source"]["path"]))
        line = data[d["source"]["offset"] :].split(b"\n", 1)[0]
        assert orjson.loads(line)["text"] == d["text"]


def test_offsets_find_the_document_again(corpus):
    for d in run(corpus, 60, excerpt_chars=0):
        src = d["source"]
        data = zstandard.ZstdDecompressor().stream_reader(open(src["path"], "rb")).read()
        line = data[src["offset"] :].split(b"\n", 1)[0]
        assert orjson.loads(line)["text"] == d["text"]
        assert data[: src["offset"]].count(b"\n") == src["line"] - 1


def test_memory_is_bounded_by_n_and_most_lines_are_never_parsed(tmp_path):
    path = write_jsonl(tmp_path / "big.jsonl", texts(20000))
    plan = Plan(expand_inputs([str(path)]), {None: 10})
    docs, stats = sample(plan, Options(10), 1)
    assert len(docs) == 10 and stats.docs == 20000
    assert stats.parsed < 300  # about n * (1 + ln(20000 / n)) = 86
    res = Reservoir(3)
    for k in [9, 1, 8, 2, 7, 3, 6]:
        res.offer(k, f"d{k}", lambda: None)
    assert [e[0] for e in res.entries()] == [1, 2, 3]


# --------------------------------------------------------------------------- determinism, shards


def test_same_seed_same_sample_and_another_seed_another(corpus):
    a, b, c = run(corpus, 30, seed=1), run(corpus, 30, seed=1), run(corpus, 30, seed=2)
    assert a == b
    assert {d["id"] for d in a} != {d["id"] for d in c}


def test_the_same_corpus_at_another_path_gives_the_same_sample(corpus, tmp_path, monkeypatch):
    # Given as a directory, as files and as a glob, absolute and relative: the sample
    # depends on the files' names within the inputs, not on where the corpus lies.
    other = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(corpus[0].parent, other)
    moved = [other / p.name for p in corpus]

    def ids(inputs) -> list[tuple[str, float]]:
        return [(d["id"], d["sample"]["key"]) for d in run(inputs, 25, seed=4, excerpt_chars=0)]

    assert ids([corpus[0].parent]) == ids([other])
    assert ids(corpus) == ids(moved)
    assert ids([corpus[0].parent / "*.zst"]) == ids([other / "*.zst"])
    monkeypatch.chdir(other.parent)
    assert ids([other]) == ids(["deeper"]) == ids(["./deeper/../deeper"])
    assert ids(corpus) == ids([Path("deeper") / p.name for p in corpus])
    # Another seed, or the files in another order, is another sample.
    assert ids(corpus) != ids(corpus[::-1])


def test_processes_give_the_same_sample(corpus):
    assert run(corpus, 40, jobs=2) == run(corpus, 40, jobs=1)


def test_shards_merged_equal_one_run(corpus, tmp_path):
    files = [str(p) for p in corpus]
    one = run_cli("sample-docs", "-n", "40", "--seed", "3", *files)
    assert one.returncode == 0, one.stderr
    outs = []
    for i in range(3):
        out = tmp_path / f"s{i}.jsonl.zst"
        r = run_cli(
            "sample-docs", "-n", "40", "--seed", "3", "--shard", f"{i}/3", "-o", out, *files
        )
        assert r.returncode == 0, r.stderr
        outs.append(out)
    merged = run_cli("sample-docs", "--merge", *outs)
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout == one.stdout and len(merged.stdout.splitlines()) == 40
    # Each shard alone is a sample of its own files only.
    shard0 = recordio.load_all(str(outs[0]))
    assert {d["source"]["path"] for d in shard0} <= {
        os.path.normpath(files[0]),
        os.path.normpath(files[3]),
    }


def test_uniform_inclusion(tmp_path):
    # 200 documents in two files of unequal size; each of 600 seeds samples 20. Every
    # document should be drawn 600 * 20 / 200 = 60 times; chi-square with 199 degrees
    # of freedom has mean 199 and sd 20, so 300 is a 5-sd bound (fixed seeds: no flake).
    a = write_jsonl(tmp_path / "a.jsonl", texts(150))
    b = write_jsonl(tmp_path / "b.jsonl.gz", texts(50, start=150), "gz")
    plan = Plan(expand_inputs([str(a), str(b)]), {None: 20})
    counts: dict[str, int] = {}
    for seed in range(600):
        docs, _ = sample(plan, Options(20, seed, excerpt_chars=0), 1)
        assert len(docs) == 20
        for d in docs:
            counts[d["text"]] = counts.get(d["text"], 0) + 1
    assert len(counts) == 200
    chi2 = sum((c - 60) ** 2 / 60 for c in counts.values())
    assert chi2 < 300, chi2
    first_file = sum(c for t, c in counts.items() if int(t.split(":")[0][4:]) < 150)
    assert abs(first_file / (600 * 20) - 0.75) < 0.02


def test_keys_look_uniform():
    ks = keys_for(file_seed(0, "x"), 1, 100000) / float(1 << 53)
    hist = [int(((ks >= i / 10) & (ks < (i + 1) / 10)).sum()) for i in range(10)]
    assert all(abs(h - 10000) < 500 for h in hist), hist


# --------------------------------------------------------------------------- formats


def test_every_input_format(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = texts(30)
    write_jsonl(tmp_path / "a.jsonl", rows[:5])
    write_jsonl(tmp_path / "b.jsonl.gz", rows[5:10], "gz")
    write_jsonl(tmp_path / "c.jsonl.zst", rows[10:15], "zst")
    pq.write_table(
        pa.table(
            {"content": [r["text"] for r in rows[15:25]], "doc": [r["id"] for r in rows[15:25]]}
        ),
        tmp_path / "d.parquet",
        row_group_size=3,
    )
    (tmp_path / "txt" / "sub").mkdir(parents=True)
    for i, r in enumerate(rows[25:30]):
        (tmp_path / "txt" / ("sub" if i % 2 else "") / f"{i}.md").write_text(r["text"])
    (tmp_path / "txt" / ".hidden").write_text("not a document")

    docs = run(
        [tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz", tmp_path / "c.jsonl.zst", tmp_path / "txt"],
        100,
    )
    assert sorted(d["text"] for d in docs) == sorted(r["text"] for r in rows[:15] + rows[25:30])
    by_text = {r["text"]: r for r in rows}
    for d in docs:
        src = d["source"]
        if src["path"].endswith("md"):
            assert Path(src["path"]).read_text() == d["text"] and "line" not in src
        else:
            assert (
                d["text"] == orjson.loads(list(iter_lines(src["path"]))[src["line"] - 1][2])["text"]
            )

    # A directory of records files is a corpus of those; its README is not a document.
    (tmp_path / "shards").mkdir()
    write_jsonl(tmp_path / "shards" / "00.jsonl.gz", rows[:3], "gz")
    (tmp_path / "shards" / "README.md").write_text("# about this dataset")
    assert sorted(d["text"] for d in run([tmp_path / "shards"], 10)) == sorted(
        r["text"] for r in rows[:3]
    )

    pdocs = run([tmp_path / "d.parquet"], 4, text_field="content", id_field="doc")
    assert len(pdocs) == 4
    for d in pdocs:
        assert by_text[d["text"]]["id"] == d["source"]["id"]
        assert rows[15 + d["source"]["row"]]["text"] == d["text"]

    # stdin, through the command
    r = run_cli("sample-docs", "-n", "3", input=(tmp_path / "a.jsonl").read_bytes())
    assert r.returncode == 0, r.stderr
    out = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(out) == 3 and all(
        d["kind"] == "doc" and d["source"]["path"] == "<stdin>" for d in out
    )


def test_record_shape(demo):
    r = run_cli("sample-docs", "-n", "5", "--excerpt-chars", "500", demo)
    assert r.returncode == 0, r.stderr
    for d in map(orjson.loads, r.stdout.splitlines()):
        assert d["kind"] == "doc" and d["v"] == 1 and d["parents"] == []
        assert d["chars"] == len(d["text"]) <= 500
        assert set(d["source"]) >= {"path", "name", "line", "offset"}
        assert d["source"]["name"] == "demo"
        if "excerpt" in d:
            assert d["excerpt"]["end"] - d["excerpt"]["start"] == d["chars"]
            assert d["excerpt"]["total_chars"] > 500


# --------------------------------------------------------------------------- mix, filters, dedup, excerpts


def test_mix_proportions(tmp_path):
    web = write_jsonl(tmp_path / "web.jsonl", texts(300))
    code = write_jsonl(tmp_path / "code.jsonl.zst", texts(300, start=1000), "zst")
    r = run_cli("sample-docs", "-n", "40", f"web={web}", f"code={code}", "--mix", "web=3,code=1")
    assert r.returncode == 0, r.stderr
    docs = [orjson.loads(x) for x in r.stdout.splitlines()]
    names = [d["source"]["name"] for d in docs]
    assert names.count("web") == 30 and names.count("code") == 10
    assert all(d["sample"]["pool"] == d["source"]["name"] for d in docs)
    assert quotas(10, {"a": 1, "b": 1, "c": 1}) == {"a": 4, "b": 3, "c": 3}
    bad = run_cli("sample-docs", "-n", "4", f"web={web}", str(code), "--mix", "web=1")
    assert bad.returncode == 2 and b"--mix gives no weight" in bad.stderr
    assert run_cli("sample-docs", str(web), "--mix", "web=x").returncode == 2


def test_filters_and_empty_documents(tmp_path):
    rows = [{"text": "x" * k} for k in (0, 5, 50, 500, 5000)] + [
        {"text": "   \n "},
        {"text": None},
        b"",
    ]
    path = write_jsonl(tmp_path / "f.jsonl", rows)
    assert sorted(d["chars"] for d in run([path], 10, excerpt_chars=0)) == [5, 50, 500, 5000]
    kept = run([path], 10, min_chars=10, max_chars=1000, excerpt_chars=0)
    assert sorted(d["chars"] for d in kept) == [50, 500]
    assert summary(kept) == naive([path], 10, min_chars=10, max_chars=1000)


def test_exact_dedup(tmp_path):
    rows = texts(20) * 3
    random.Random(0).shuffle(rows)
    path = write_jsonl(tmp_path / "dup.jsonl", rows)
    docs = run([path], 100)
    assert len(docs) == 20 and len({d["text"] for d in docs}) == 20
    assert len({d["id"] for d in docs}) == 20


def test_excerpt_window_rule():
    text = "".join(f"Paragraph {i}. " + "word " * 40 + "\n\n" for i in range(100))
    for seed in range(20):
        start, end = excerpt_window(text, 1000, random.Random(seed))
        assert 500 <= end - start <= 1000
        assert start == 0 or text[start - 2 : start] == "\n\n"
        assert end == len(text) or text[end].isspace()
    assert excerpt_window(text, 1000, random.Random(1), at="start")[0] == 0
    assert excerpt_window("short", 1000, random.Random(1)) == (0, 5)
    # The window is the document's own: the same in any run, shard or file position.
    one = excerpt_window(text, 1000, random.Random(7))
    assert one == excerpt_window(text, 1000, random.Random(7))


# --------------------------------------------------------------------------- bad input


def test_bad_json_names_file_and_line(tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl", [*texts(3), b'{"text": "oops', *texts(2, start=3), b"[1, 2]"]
    )
    r = run_cli("sample-docs", "-n", "10", path)
    assert r.returncode == 3 and r.stdout == b""
    # Candidates are parsed in key order, so either bad line may be the one reported.
    last = r.stderr.decode().strip().splitlines()[-1]
    assert last in (
        f"spade-sample-docs: error: {path}:4: bad JSON at column 15: unexpected end of data",
        f"spade-sample-docs: error: {path}:7: a corpus line must be a JSON object",
    ), last
    r = run_cli("sample-docs", "-n", "10", "--skip-bad", path)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 5
    assert b"skipped 2 bad lines" in r.stderr and (
        f"{path}:4" in r.stderr.decode() or f"{path}:7" in r.stderr.decode()
    )


def test_missing_field_names_field_and_file(tmp_path):
    path = write_jsonl(tmp_path / "nofield.jsonl", [{"body": "hello"}])
    r = run_cli("sample-docs", path)
    assert r.returncode == 3
    assert f"{path}:1: missing field 'text'".encode() in r.stderr
    pq_path = tmp_path / "t.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["x"]}), pq_path)
    r = run_cli("sample-docs", pq_path)
    assert (
        r.returncode == 3
        and f"{pq_path}: missing field 'text' (columns: body)".encode() in r.stderr
    )


def test_corrupt_missing_and_binary_inputs(tmp_path):
    trunc = tmp_path / "t.jsonl.zst"
    trunc.write_bytes(zstandard.ZstdCompressor().compress(b'{"text": "a"}\n' * 1000)[:-10])
    r = run_cli("sample-docs", trunc)
    assert r.returncode == 3 and b"truncated zstd" in r.stderr
    r = run_cli("sample-docs", tmp_path / "nope.jsonl")
    assert r.returncode == 3 and b"no such file" in r.stderr
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("a real document")
    (tmp_path / "docs" / "b.bin").write_bytes(b"\x00\x01\x02")
    r = run_cli("sample-docs", tmp_path / "docs")
    assert r.returncode == 3 and b"b.bin: binary file" in r.stderr
    r = run_cli("sample-docs", "--skip-bad", tmp_path / "docs")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1
    assert run_cli("sample-docs", "--shard", "3/2", tmp_path / "docs").returncode == 2


def test_merge_rejects_records_that_are_not_samples(tmp_path):
    path = write_jsonl(
        tmp_path / "x.jsonl", [{"kind": "doc", "v": 1, "id": "doc-1", "parents": []}]
    )
    r = run_cli("sample-docs", "--merge", path)
    assert r.returncode == 3 and f"{path}:1: not a sample record".encode() in r.stderr
    with pytest.raises(Exception, match="different seeds"):
        merge(
            [
                {"id": "a", "sample": {"key": 0.1, "n": 1, "seed": 0}},
                {"id": "b", "sample": {"key": 0.2, "n": 1, "seed": 1}},
            ],
            lambda: "here",
        )


# --------------------------------------------------------------------------- demo corpus


def test_demo_corpus_is_real_and_deterministic(demo, tmp_path):
    docs = recordio.load_all(str(demo))
    assert 300 <= len(docs) <= 2000
    by_id = {d["id"]: d for d in docs}
    assert "json" in by_id and "JSON" in by_id["json"]["text"]
    assert len({d["text"] for d in docs}) == len(docs)
    assert not any(" at 0x" in d["text"] for d in docs)
    # Built again by the module entry point: byte for byte the same. (Not compared with
    # an in-process build: pytest patches sys and pdb, whose documentation then differs.)
    again = tmp_path / "again.jsonl.zst"
    r = subprocess.run(
        [sys.executable, "-m", "spade_cli.corpus.demo", str(again)], capture_output=True
    )
    assert r.returncode == 0, r.stderr
    assert again.read_bytes() == demo.read_bytes()
    # ... and by an interpreter of another name (python3 against python, say): its path is
    # a default of platform.architecture, bound when platform is first imported
    third = tmp_path / "third.jsonl.zst"
    renamed = (
        "import sys; sys.executable += '-by-another-name'; "
        "from spade_cli.corpus.demo import main; main([sys.argv[1]])"
    )
    r = subprocess.run([sys.executable, "-c", renamed, str(third)], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert third.read_bytes() == demo.read_bytes()
    assert not any(sys.executable in d["text"] for d in docs)
    lengths = sorted(len(d["text"]) for d in docs)
    assert lengths[0] > 200 and lengths[-1] > 10000  # short and long ones, for excerpting
