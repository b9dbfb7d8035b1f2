"""The micro model's build: the shipped weights are the default recipe's, a fresh cache
copies them, and the pretraining behind them still runs (at a few steps) and caches."""

from __future__ import annotations

import json

import pytest

from spade_cli.micro import model as micro


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPADE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "micro-model"


def test_the_shipped_build_is_the_default_recipe():
    # A change to the recipe (steps, sizes, transcripts' settings, RECIPE_VERSION) must
    # ship a new build, else a fresh machine would pretrain for minutes.
    assert micro.shipped_recipe() == micro.recipe(0), (
        "spade_cli/micro/weights holds another recipe's build: run `just micro-weights`"
    )
    meta = json.loads((micro.WEIGHTS / "spade_micro_model.json").read_text())
    assert meta["micro"]["steps"] == micro.TRAIN["steps"]
    assert (micro.WEIGHTS / "model.safetensors").stat().st_size > 1_000_000


def test_a_fresh_cache_copies_the_shipped_build(tmp_path, empty_cache):
    out = micro.build_micro_model(tmp_path / "model", log=lambda m: None)
    for f in micro.WEIGHTS.iterdir():
        assert (out / f.name).read_bytes() == f.read_bytes(), f.name
    assert not empty_cache.exists()  # nothing was pretrained


def test_another_recipe_is_pretrained_once_and_then_cached(tmp_path, empty_cache):
    lines = []
    out = micro.build_micro_model(tmp_path / "a", steps=6, warmup=2, log=lines.append)
    meta = json.loads((out / "spade_micro_model.json").read_text())
    assert meta["micro"]["steps"] == 6 and meta["final_loss"] > 0
    assert any("step 6/6" in line for line in lines)
    key = micro.recipe_key(micro.recipe(0, steps=6, warmup=2))
    assert (empty_cache / key / "model.safetensors").is_file()
    assert not list(empty_cache.glob(".*partial*"))

    lines.clear()
    again = micro.build_micro_model(tmp_path / "b", steps=6, warmup=2, log=lines.append)
    assert not lines  # copied from the cache, not pretrained again
    assert (again / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()


@pytest.mark.slow
def test_rebuild_pretrains_and_leaves_the_cache_alone(tmp_path, empty_cache):
    lines = []
    micro.build_micro_model(tmp_path / "m", steps=3, warmup=1, use_cache=False, log=lines.append)
    assert any("step 3/3" in line for line in lines)
    assert not empty_cache.exists() or not any(empty_cache.iterdir())


def test_rebuild_is_for_the_micro_kind(tmp_path, cli):
    res = cli("init-model", str(tmp_path / "m"), "--rebuild")
    assert res.returncode == 2 and b"--rebuild is for --kind micro" in res.stderr


def test_the_pretraining_loss_is_the_causal_lm_loss_on_the_assistant_tokens():
    import random

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from spade_cli.micro import transcripts as tr

    tok = AutoTokenizer.from_pretrained(micro.WEIGHTS)
    model = AutoModelForCausalLM.from_pretrained(micro.WEIGHTS, dtype=torch.float32)
    rng = random.Random(0)
    rows = [micro.encode(tok, tr.agent_transcript(rng, 0.7, True).messages) for _ in range(3)]
    width = max(len(x) for x, _ in rows)
    ids = torch.full((3, width), tok.pad_token_id)
    labels = torch.full((3, width), -100)
    for i, (x, m) in enumerate(rows):
        ids[i, : len(x)] = torch.tensor(x)
        labels[i, : len(x)] = torch.tensor([t if k else -100 for t, k in zip(x, m, strict=True)])
    with torch.no_grad():
        full = model(input_ids=ids, labels=labels).loss.item()
        assert micro.assistant_loss(model, ids, labels).item() == pytest.approx(full, abs=1e-5)
        labels[0, -2] = -100 if labels[0, -2] != -100 else ids[0, -2]  # another token counts
        assert micro.assistant_loss(model, ids, labels).item() != pytest.approx(full, abs=1e-5)


def test_the_shipped_designer_names_its_skills_family_in_most_designs(tmp_path, cli):
    """A weak designer still reads its target skill, and a new build need not: the shipped
    build names the skill's family in 30 of these 36 designs, the first build of recipe 5
    in 17 (at 0dc30bc), and that build's loop lost a family from its agents' curriculum
    (docs/evidence.md)."""
    from spade_cli.envs.skill_check import named_families
    from spade_cli.envs.validation import candidate_code
    from spade_cli.micro import LIBRARY, skill_families
    from spade_cli.recordio import RecordReader

    corpus, docs = tmp_path / "corpus.jsonl.zst", tmp_path / "docs.jsonl.zst"
    memory, cands = tmp_path / "memory.jsonl.zst", tmp_path / "cands.jsonl.zst"
    for args in (
        ("sample-docs", "--build-demo-corpus", corpus),
        ("sample-docs", corpus, "--num", "36", "--seed", "1", "-o", docs),
        ("memory", "init", memory, "--library", LIBRARY),
        ("design", docs, "--engine", "hf", "--model", micro.WEIGHTS, "--num-designs", "1",
         "--temperature", "0.6", "--max-tokens", "64", "--doc-tokens", "48", "--prompt",
         "micro", "--skill-set", "micro", "--memory", memory, "--seed", "1", "-o", cands),
    ):  # fmt: skip
        r = cli(*map(str, args))
        assert r.returncode == 0, r.stderr
    families = skill_families()  # what spade-validate --skill micro holds a design to
    designs = list(RecordReader([str(cands)]))
    assert len(designs) == 36

    def names_its_family(c: dict) -> bool:  # a design that does not parse names no family
        try:
            return named_families(candidate_code(c) or "", families) == {families[c["skill"]]}
        except SyntaxError:
            return False

    on_skill = sum(map(names_its_family, designs))
    assert on_skill >= 20, f"{on_skill} of 36 designs name their skill's family"
