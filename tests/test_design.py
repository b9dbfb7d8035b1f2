"""spade-design on the tiny model: complete candidate records, consistent ids,
determinism, prompt budgets, ablation switches and templates."""

from __future__ import annotations

import json

import pytest

from spade_cli.design import (
    DesignSettings,
    Template,
    build_prompt,
    excerpt,
    load_contract,
    render,
)
from spade_cli.design import (
    design_records as _design_records,
)
from spade_cli.engines import Sampling, load_engine
from spade_cli.errors import UsageError
from tests.helpers import assert_same


def doc(i: int, text: str | None = None) -> dict:
    return {
        "kind": "doc",
        "v": 1,
        "id": f"doc-{i}",
        "parents": [],
        "text": text
        or f"Document {i}. A ferry crosses a river carrying at most two passengers. " * 5,
        "chars": 0,
        "source": {"path": "corpus.jsonl", "name": "demo", "line": i + 1},
    }


def jsonl(records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


@pytest.fixture(scope="module")
def eng(tiny_model):
    return load_engine(str(tiny_model), "hf")


@pytest.fixture(scope="module")
def library_memory():
    from spade_cli.envs.library import load_library
    from spade_cli.memory import entries_from_library

    return entries_from_library(load_library())


class Run:
    """Design settings plus the run-time seed and round the command passes."""

    def __init__(self, seed: int = 5, round: int = 3, **kw):
        # One document per group of G and the diverse memory policy unless a test says otherwise.
        base = dict(
            designs_per_doc=2,
            sampling=Sampling(max_tokens=12),
            doc_tokens=64,
            max_prompt_tokens=3000,
            doc_per_design=False,
            memory_policy="diverse",
        )
        self.settings, self.seed, self.round = DesignSettings(**{**base, **kw}), seed, round


def settings(**kw) -> Run:
    return Run(**kw)


def design_records(docs, eng, run: Run, memory=None, template=None):
    return _design_records(
        docs, eng, run.settings, memory, template, seed=run.seed, round=run.round
    )


def _parse(stdout: bytes) -> list[dict]:
    return [json.loads(x) for x in stdout.splitlines()]


def _without_logprobs(stdout: bytes) -> list[dict]:
    recs = _parse(stdout)
    for r in recs:
        r["design"].pop("logprobs", None)
    return recs


@pytest.mark.slow
def test_cli_records_complete_consistent_and_deterministic(cli, tiny_model):
    args = [
        "design",
        "--model",
        tiny_model,
        "-G",
        "3",
        "--max-tokens",
        "10",
        "--doc-tokens",
        "48",
        "--seed",
        "11",
        "--round",
        "2",
        "--max-prompt-tokens",
        "2500",
        "--doc-per-group",
        "--memory-policy",
        "diverse",
    ]
    inp = jsonl([doc(0), doc(1)])
    r1, r2 = cli(*args, input=inp), cli(*args, input=inp)
    assert r1.returncode == 0, r1.stderr.decode()
    # Same seed, same designs: every field equal, the logprobs to 1e-4 (a CPU kernel may
    # round the last float digits differently from one run to the next).
    assert _without_logprobs(r1.stdout) == _without_logprobs(r2.stdout)
    for a, b in zip(_parse(r1.stdout), _parse(r2.stdout), strict=True):
        assert a["design"]["logprobs"] == pytest.approx(b["design"]["logprobs"], abs=1e-4)
    recs = [json.loads(x) for x in r1.stdout.splitlines()]
    assert len(recs) == 6 and len({r["id"] for r in recs}) == 6
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    for i, r in enumerate(recs):
        assert r["kind"] == "candidate" and r["origin"] == "design" and r["round"] == 2
        assert r["parents"] == [f"doc-{i // 3}"] and r["doc"]["id"] == f"doc-{i // 3}"
        assert (
            r["doc"]["source"]["name"] == "demo"
            and r["doc"]["text"] in doc(i // 3)["text"] + "\n[…]"
            or r["doc"]["text"].endswith("[…]")
        )
        d = r["design"]
        assert set(d) >= {
            "messages",
            "text",
            "prompt_ids",
            "completion_ids",
            "logprobs",
            "engine",
            "model",
            "sampling",
            "index",
        }
        assert d["index"] == i % 3 and d["engine"] == "hf" and d["model"] == str(tiny_model)
        prompt = tok.apply_chat_template(d["messages"], tokenize=False, add_generation_prompt=True)
        assert d["prompt_ids"] == tok.encode(prompt, add_special_tokens=False)
        assert len(d["prompt_ids"]) <= 2500
        assert 0 < len(d["completion_ids"]) <= 10 and len(d["logprobs"]) == len(d["completion_ids"])
        assert d["text"] == tok.decode(d["completion_ids"], skip_special_tokens=True)
        assert d["sampling"]["max_tokens"] == 10 and isinstance(d["sampling"]["seed"], int)
    # One group per document; the G designs of a group share the prompt, not the seed.
    groups = [r["group"] for r in recs]
    assert groups[0] == groups[1] == groups[2] != groups[3]
    assert recs[0]["design"]["prompt_ids"] == recs[2]["design"]["prompt_ids"]
    assert len({r["design"]["sampling"]["seed"] for r in recs[:3]}) == 3


@pytest.mark.slow
def test_cli_errors(cli, tiny_model, tmp_path):
    bad = cli(
        "design", "--model", tiny_model, input=jsonl([doc(0), {"kind": "env", "v": 1, "id": "x"}])
    )
    assert bad.returncode == 3 and b"<stdin>:2" in bad.stderr or b":2:" in bad.stderr
    missing = cli("design", "--model", tmp_path / "nope", input=jsonl([doc(0)]))
    assert missing.returncode == 4 and b"model not found" in missing.stderr
    tpl = tmp_path / "t.md"
    tpl.write_text("=== user ===\n{{document}} {{nonsense}}\n")
    unknown = cli("design", "--model", tiny_model, "--prompt", tpl, input=jsonl([doc(0)]))
    assert unknown.returncode == 2 and b"nonsense" in unknown.stderr


@pytest.mark.slow
def test_library_is_default_memory_and_ablations(eng, library_memory):
    recs = list(
        design_records([doc(0)], eng, settings(exemplars=2, max_prompt_tokens=None), library_memory)
    )
    user = recs[0]["design"]["messages"][-1]["content"]
    assert "<document" in user and "```python" in user and "already exist" in user
    assert len(recs[0]["design"]["exemplars"]) == 2
    assert set(recs[0]["design"]["exemplars"]) <= {e["name"] for e in library_memory}
    assert sum(f"- {e['name']}" in user for e in library_memory) == len(library_memory)

    nodoc = list(design_records([doc(0)], eng, settings(no_doc=True), library_memory))
    assert (
        nodoc[0]["doc"] is None and "<document" not in nodoc[0]["design"]["messages"][-1]["content"]
    )
    assert "Choose any domain" in nodoc[0]["design"]["messages"][-1]["content"]

    nomem = list(design_records([doc(0)], eng, settings(no_memory=True), library_memory))
    content = nomem[0]["design"]["messages"][-1]["content"]
    assert "### Example" not in content and "already exist" not in content
    assert nomem[0]["design"]["exemplars"] == []


def test_seed_changes_designs_and_reruns_repeat(eng):
    a = list(design_records([doc(0)], eng, settings(seed=1)))
    b = list(design_records([doc(0)], eng, settings(seed=1)))
    c = list(design_records([doc(0)], eng, settings(seed=2)))
    assert_same(a, b)  # logprobs to 1e-3: a batch's float sums may round differently
    assert [r["design"]["completion_ids"] for r in a] != [r["design"]["completion_ids"] for r in c]
    assert a[0]["group"] != c[0]["group"]


def test_memory_entries_feed_exemplars(eng, library_memory):
    mem = [
        dict(e, scores={"regret": 0.9 if e["name"] == "nim" else 0.1}) for e in library_memory[:5]
    ]
    names = {e["name"] for e in mem}
    if "nim" not in names:
        mem.append(
            dict(next(e for e in library_memory if e["name"] == "nim"), scores={"regret": 0.9})
        )
    recs = list(design_records([doc(0)], eng, settings(exemplars=1), mem))
    assert recs[0]["design"]["exemplars"] == ["nim"]  # the highest regret goes first


def test_prompt_budget_respected_for_very_long_document(eng, library_memory):
    words = "Tides rise twice a day because the moon pulls the oceans. Überraschung! 潮汐 "
    huge = doc(0, words * 40_000)  # ~3 MB
    s = settings(doc_tokens=300, max_prompt_tokens=1800, exemplars=3)
    rec = next(iter(design_records([huge], eng, s, library_memory)))
    assert len(rec["design"]["prompt_ids"]) <= 1800
    shown = rec["doc"]["text"]
    assert shown.endswith("[…]") and len(eng.tokenizer.encode(shown)) <= 300 + 5
    assert rec["doc"]["chars"] == len(huge["text"])
    # Exemplars (3-4k tokens each here) cannot fit in 1800 tokens: they were dropped.
    assert rec["design"]["exemplars"] == []
    # A tighter budget shortens the document itself.
    tight = next(
        iter(design_records([huge], eng, settings(doc_tokens=300, max_prompt_tokens=1400), []))
    )
    assert len(tight["design"]["prompt_ids"]) <= 1400 and len(tight["doc"]["text"]) < len(shown)
    with pytest.raises(UsageError, match="max-prompt-tokens"):
        list(design_records([huge], eng, settings(max_prompt_tokens=100), []))


def test_excerpt_and_render():
    class Chars:  # a tokenizer with one token per character
        def encode(self, text, add_special_tokens=False):
            return [ord(c) for c in text]

        def decode(self, ids):
            return "".join(map(chr, ids))

    text = "First line.\nSecond line is longer.\nThird."
    assert excerpt(text, 1000, Chars()) == text
    assert excerpt(text, 37, Chars()) == "First line.\nSecond line is longer.\n[…]"
    assert excerpt(text, 30, Chars()) == "First line.\nSecond line is lon\n[…]"
    assert excerpt("x" * 100, 10, Chars()) == "x" * 10 + "\n[…]"
    tpl = "{{#document}}Doc: {{document}}\n{{/document}}{{^document}}No doc.\n{{/document}}End {{round}}"
    assert render(tpl, {"document": "a {{round}} b", "round": "3"}) == "Doc: a {{round}} b\nEnd 3"
    assert render(tpl, {"document": "", "round": "3"}) == "No doc.\nEnd 3"


def test_custom_template(eng, tmp_path):
    p = tmp_path / "mine.md"
    p.write_text("=== system ===\nSYS {{contract}}\n=== user ===\nMake one about: {{document}}\n")
    t = Template.load(p)
    prompt = build_prompt(eng, t, load_contract(), doc(0), [], "", 0, 64, 4000)
    assert prompt.messages[0]["content"].startswith("SYS Write one complete Python module")
    assert prompt.messages[1]["content"].startswith("Make one about: Document 0.")
    (tmp_path / "bad.md").write_text("no markers")
    with pytest.raises(UsageError, match="=== user ==="):
        Template.load(tmp_path / "bad.md")


# --------------------------------------------------------------------------- skills, difficulty


def test_round_robin_skills_over_four_rounds():
    from spade_cli.skills import GAMES, active_skills

    names = [[s.name for s in active_skills(list(GAMES), 3, r)] for r in (1, 2, 3, 4)]
    first = ["Mathematical Reasoning", "Logical Deduction", "Spatial Reasoning"]
    second = ["Pattern Recognition", "Optimization", "Causal Inference"]
    assert names == [first, second, first, second]
    # 4 per round wraps around the list; 0 keeps all.
    assert [s.name for s in active_skills(list(GAMES), 4, 2)] == [*second[1:], *first[:2]]
    assert len(active_skills(list(GAMES), 0, 7)) == 6


def test_skill_lists_and_explicit_names():
    from spade_cli.skills import SKILL_SETS, min_steps, resolve

    assert [len(v) for v in SKILL_SETS.values()] == [6, 6, 3]
    assert all(s.description and s.examples for v in SKILL_SETS.values() for s in v)
    two = resolve("games", "mathematical reasoning, Pattern Recognition")
    assert [s.name for s in two] == ["Mathematical Reasoning", "Pattern Recognition"]
    assert resolve("none", None) == []
    assert (min_steps("easy"), min_steps("medium"), min_steps("hard")) == (2, 3, 3)


def test_published_design_targets_skill_and_difficulty_one_doc_each(eng):
    from spade_cli.skills import GAMES

    run = settings(doc_per_design=True, memory_policy="published", round=2, designs_per_doc=4)
    recs = list(design_records([doc(i) for i in range(6)], eng, run, []))
    assert len(recs) == 6 and [r["doc"]["id"] for r in recs] == [f"doc-{i}" for i in range(6)]
    active = {s.name for s in GAMES[3:]}
    for r in recs:
        assert r["skill"] in active and r["difficulty"] in ("easy", "medium", "hard")
        user = r["design"]["messages"][-1]["content"]
        assert f"Target skill. {r['skill']}:" in user
        steps = 2 if r["difficulty"] == "easy" else 3
        assert (
            f"Difficulty: {r['difficulty']}. Solving the task must take at least {steps} interaction"
            in user
        )
        assert "already exist (do not repeat" not in user  # no listing under the published policy
    # Designs of one skill share a group (their baseline); different skills do not.
    by_skill = {}
    for r in recs:
        by_skill.setdefault(r["skill"], set()).add(r["group"])
    assert all(len(g) == 1 for g in by_skill.values())
    assert len({next(iter(g)) for g in by_skill.values()}) == len(by_skill)
    # The same attempt in a shard of its own gets the same skill, difficulty and id.
    alone = list(design_records([doc(4)], eng, run, []))
    assert (alone[0]["id"], alone[0]["skill"], alone[0]["difficulty"]) == (
        recs[4]["id"],
        recs[4]["skill"],
        recs[4]["difficulty"],
    )
    hard = list(design_records([doc(0)], eng, settings(doc_per_design=True, difficulty="hard"), []))
    assert hard[0]["difficulty"] == "hard"


def test_published_exemplars_of_the_skill_cut_and_avoid_line(eng, library_memory):
    big = next(e for e in library_memory if len(e["code"]) > 2500)

    def played(e, skill, w, regret):
        return dict(
            e,
            id=e["id"] + skill[:3] + str(w),
            skill=skill,
            scores={"regret": regret, "nohint": {"success_rate": w}},
        )

    run = settings(
        doc_per_design=True,
        memory_policy="published",
        round=1,
        skills="Logical Deduction",
        difficulty="medium",
        max_prompt_tokens=None,
        exemplars=2,
    )
    mem = [
        played(big, "Logical Deduction", 0.5, 0.4),
        played(big, "Logical Deduction", 0.3, 0.2),
        played(big, "Logical Deduction", 0.95, 0.0),
        played(big, "Optimization", 0.5, 0.9),
    ]
    rec = next(iter(design_records([doc(0)], eng, run, mem)))
    user = rec["design"]["messages"][-1]["content"]
    assert rec["skill"] == "Logical Deduction" and user.count("### Example") == 2
    assert user.count("# ... (cut)") == 2 and big["code"] not in user
    assert "Avoid tasks like" in user and "too easy, the agent won 95%" in user
    # Prompt length: each exemplar contributes at most 2,000 characters of code.
    blocks = user.split("```python\n")[1:]
    assert all(len(b.split("\n```")[0]) <= 2000 + len("\n# ... (cut)") for b in blocks)
    whole = next(
        iter(
            design_records(
                [doc(0)], eng, settings(**{**run.settings.__dict__, "exemplar_chars": 0}), mem
            )
        )
    )
    assert len(whole["design"]["prompt_ids"]) > len(rec["design"]["prompt_ids"]) + 300


def test_a_redesign_shows_a_fresh_document_and_keeps_skill_and_group(eng):
    """As released, every attempt gets a fresh document: a stand-in's text is shown, while
    the skill, difficulty, group and parent stay the failed document's."""
    run = settings(doc_per_design=True, round=2, designs_per_doc=4)
    first = list(design_records([doc(0), doc(1)], eng, run, []))
    fresh = doc(9, "Document nine: a lighthouse keeper logs the ships that pass. " * 5)
    again = list(
        _design_records(
            [doc(1)],
            eng,
            run.settings,
            [],
            seed=run.seed,
            round=run.round,
            attempt=2,
            stand_ins={"doc-1": fresh},
        )
    )
    rec = again[0]
    assert rec["doc"]["id"] == "doc-9" and rec["doc"]["stands_in_for"] == "doc-1"
    assert rec["parents"] == ["doc-1"] and rec["design"]["attempt"] == 2
    assert (rec["skill"], rec["difficulty"], rec["group"]) == (
        first[1]["skill"],
        first[1]["difficulty"],
        first[1]["group"],
    )
    user = rec["design"]["messages"][-1]["content"]
    assert "lighthouse keeper" in user and "ferry" not in user
