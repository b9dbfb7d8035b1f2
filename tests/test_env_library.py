"""The example environment library and code extraction (no sandbox needed here; the
sandboxed validation of every library env is in tests/test_validate.py)."""

from __future__ import annotations

import importlib.util
from collections import Counter

import gymnasium as gym
import pytest

from spade_cli import dedup
from spade_cli.envs import extract_code, module_summary
from spade_cli.envs.checks import check_hint_text
from spade_cli.envs.library import FAMILIES, broken_designs, library_candidates, load_library
from spade_cli.records import REASONS

LIB = load_library()


def _env_class(path):
    spec = importlib.util.spec_from_file_location("libenv_" + path.replace("/", "_"), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    classes = [
        v
        for v in vars(mod).values()
        if isinstance(v, type) and issubclass(v, gym.Env) and v.__module__ == mod.__name__
    ]
    assert len(classes) == 1
    return classes[0]


# --------------------------------------------------------------------------- extract_code


def test_extract_code_single_block():
    text = "Here it is.\n\n```python\nimport gymnasium\nx = 1\n```\nThat's all."
    assert extract_code(text) == "import gymnasium\nx = 1\n"


@pytest.mark.parametrize("tag", ["python", "py", "Python", "python3"])
def test_extract_code_tags(tag):
    assert extract_code(f"```{tag}\nx = 1\n```") == "x = 1\n"


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "no code at all",
        "```\nx = 1\n```",  # untagged: not python
        "```json\n{}\n```",
        "```python\nx = 1\n```\n```python\ny = 2\n```",  # two blocks: ambiguous
        "```python\n\n```",  # empty block
        "```python\nx = 1\n",  # never closed
    ],
)
def test_extract_code_rejects(text):
    assert extract_code(text) is None


def test_extract_code_keeps_inner_fences_in_strings_out():
    # a fence must start its own line to close the block
    text = "```python\ns = 'not ``` a fence'\n```"
    assert extract_code(text) == "s = 'not ``` a fence'\n"


# --------------------------------------------------------------------------- the library


def test_library_size_and_families():
    assert len(LIB) >= 16
    fams = Counter(e["family"] for e in LIB)
    assert set(fams) == set(FAMILIES), fams
    assert all(n >= 4 for n in fams.values()), fams


def test_library_entries_are_memory_like():
    names = [e["name"] for e in LIB]
    assert len(set(names)) == len(names)
    for e in LIB:
        assert e["summary"] and "\n" not in e["summary"]
        assert isinstance(e["max_turns"], int) and e["max_turns"] >= 1
        assert e["code"].startswith('"""')
        assert e["summary"] == module_summary(e["code"])
        if e["family"] == "stateful tool use":
            assert e["tools"] and all(t["type"] == "function" for t in e["tools"])
        else:
            assert e["tools"] is None


def test_library_has_no_duplicates():
    hashes = {dedup.code_hash(e["code"]) for e in LIB}
    assert len(hashes) == len(LIB)


def test_library_candidates():
    recs = library_candidates(LIB, round=3)
    assert len(recs) == len(LIB)
    assert len({r["id"] for r in recs}) == len(recs)
    for r, e in zip(recs, LIB, strict=True):
        assert r["kind"] == "candidate" and r["origin"] == "library" and r["round"] == 3
        assert r["env"]["code"] == e["code"] and r["env"]["name"] == e["name"]
        assert ("tools" in r["env"]) == bool(e["tools"])


@pytest.mark.parametrize("entry", LIB, ids=[e["name"] for e in LIB])
def test_library_env_in_process(entry):
    """Our own examples (trusted code): metadata matches, each seed is deterministic, the
    solution solves it, the hint does not simply contain the answer, seeds vary."""
    cls = _env_class(entry["path"])
    assert cls.metadata["name"] == entry["name"]
    env = cls()
    observations = set()
    for seed in (1, 2, 3, 4):
        obs, info = env.reset(seed=seed)
        assert (obs, info) == env.reset(seed=seed)
        observations.add((obs, tuple(info["solution"])))
        assert isinstance(info["hint"], str) and info["hint"]
        total, terminated = 0.0, False
        for action in info["solution"]:
            _, r, terminated, truncated, _ = env.step(action)
            total += r
            if terminated or truncated:
                break
        assert terminated and total == pytest.approx(1.0)
        check_hint_text(info["hint"], info["solution"], seed)  # raises Rejected on a leak
    assert len(observations) >= 3


def test_broken_designs_cover_every_reason():
    reasons = [r for r, _ in broken_designs()]
    # judged_invalid is the judge model's verdict and off_skill a design's against its
    # target skill, not properties of code alone (test_validate)
    assert sorted(reasons) == sorted(
        r for r in REASONS if r not in ("ok", "judged_invalid", "off_skill")
    )


def test_no_code_design_has_no_block():
    text = dict(broken_designs())["no_code"]
    assert extract_code(text) is None
    assert extract_code(dict(broken_designs())["syntax_error"]) is not None
