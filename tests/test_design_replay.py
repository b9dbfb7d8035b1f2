"""--design-replay: the agent's steps rehearse valid designs (the round's, or another
file's with --design-replay-from)."""

from __future__ import annotations

import json

import pytest

from spade_cli.train.design_replay import DesignReplay, valid_designs

from .helpers import run_cli
from .test_train import _enc, episode, training_batch, write


def _played(cid, prompt, answer, eps, valid=True, **extra):
    """A designed candidate as rollout writes it: its design, verdict and plays."""
    return {
        "kind": "candidate",
        "v": 1,
        "id": cid,
        "parents": [],
        "round": 1,
        "group": "g-" + cid,
        "origin": "design",
        "design": {"prompt_ids": prompt, "completion_ids": answer},
        "validation": {"valid": valid, "reason": "ok" if valid else "no_code"},
        "rollouts": {"k": len(eps), "nohint": eps, "hint": []},
        **extra,
    }


def _round(tok):
    eos = tok.eos_token_id
    prompt = _enc(tok, "Design an environment.")
    answer = _enc(tok, "class Maze(Env):\n    level = 3\n```") + [eos]
    play = _enc(tok, "You stand in a room. Find the key.")
    eps = [
        episode(play, [(_enc(tok, x), 1)], r)
        for x, r in (("take key", 1.0), ("sleep", 0.0), ("take key", 1.0), ("sleep", 0.0))
    ]
    return prompt, answer, eps


def test_valid_designs_are_the_valid_unrefused_ones_once_each(tmp_path):
    recs = [
        _played("a", [1, 2], [3, 4], []),
        _played("b", [1, 2], [3, 4], []),  # the same design again: replayed once
        _played("c", [1, 2], [5], [], valid=False),
        _played("d", [1, 2], [6], [], rollouts={"contract_broken": True}),
        _played("e", [1, 2], [7], [], score={"valid": False, "reason": "duplicate"}),
        _played("f", [9], [8, 8], []),
        {**_played("g", [1], [1], []), "design": None},  # replayed from memory: no answer
    ]
    assert valid_designs([str(write(tmp_path / "r.jsonl", recs))]) == [
        ([1, 2], [3, 4]),
        ([9], [8, 8]),
    ]


def test_replay_loss_is_the_answers_cross_entropy(tiny_model, tiny_tokenizer):
    """The loss is the mean token cross-entropy of the answer given its prompt, whatever
    the head computes for the prompt's positions."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    prompt, answer, _ = _round(tiny_tokenizer)
    with torch.no_grad():
        logits = model(torch.tensor([prompt + answer])).logits[0].float()
    lp = torch.log_softmax(logits[len(prompt) - 1 : -1], -1)
    expected = -lp.gather(1, torch.tensor(answer)[:, None]).mean()
    with torch.no_grad():
        got = DesignReplay([(prompt, answer)], 1.0, seed=0).loss(model)
    assert float(got) == pytest.approx(float(expected), rel=1e-5)


def test_the_agent_loss_gains_coef_times_the_designs_loss(tiny_model, tiny_tokenizer, tmp_path):
    """What reaches backward in an agent step is TRL's loss plus C x the replayed design's
    cross-entropy; without the option, TRL's loss alone."""
    import torch

    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import load_groups

    prompt, answer, eps = _round(tiny_tokenizer)
    data = write(tmp_path / "r.jsonl", [_played("a", prompt, answer, eps)])

    def loss(coef):
        cfg = TrainJob(
            model=str(tiny_model),
            output_dir=str(tmp_path / "o"),
            inputs=[str(data)],
            role="agent",
            design_replay=coef,
        )
        trainer, inputs = training_batch(cfg, load_groups(cfg)[0], tmp_path / f"w{coef}")
        with torch.no_grad():
            total = float(trainer.compute_loss(trainer.model, inputs))
            replay = DesignReplay([(prompt, answer)], coef or 1.0, 0).loss(trainer.model)
        return total, float(replay)

    plain, design_loss = loss(0.0)
    mixed, _ = loss(0.5)
    assert design_loss > 0.1  # a random model does not know the answer
    assert mixed - plain == pytest.approx(0.5 * design_loss, rel=1e-4)


def test_replay_from_other_records_rehearses_their_designs_not_the_inputs(
    tiny_model, tiny_tokenizer, tmp_path
):
    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import load_groups

    prompt, answer, eps = _round(tiny_tokenizer)
    first = _enc(tiny_tokenizer, "class Hall(Env):\n    level = 1\n```")
    data = write(tmp_path / "r.jsonl", [_played("a", prompt, answer, eps)])
    earlier = write(tmp_path / "first.jsonl", [_played("f", prompt, first, [])])
    replayed = {}
    for name, sources in (("inputs", []), ("first", [str(earlier)])):
        cfg = TrainJob(
            model=str(tiny_model),
            output_dir=str(tmp_path / name),
            inputs=[str(data)],
            role="agent",
            design_replay=1.0,
            design_replay_from=sources,
        )
        trainer, _ = training_batch(cfg, load_groups(cfg)[0], tmp_path / f"w-{name}")
        replayed[name] = trainer._spade_replay.designs
    assert replayed == {"inputs": [(prompt, answer)], "first": [(prompt, first)]}


def test_replay_from_without_a_coefficient_is_a_usage_error(tiny_model, tmp_path):
    from spade_cli.errors import UsageError
    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import check_config

    cfg = TrainJob(model=str(tiny_model), output_dir=str(tmp_path / "o"))
    check_config(cfg)
    with pytest.raises(UsageError, match="--design-replay-from is only used with"):
        check_config(TrainJob(**{**cfg.__dict__, "design_replay_from": ["first.jsonl"]}))


@pytest.mark.slow  # two real training runs through the CLI
def test_an_agent_run_with_replay_keeps_the_design_that_one_without_loses(
    tiny_model, tiny_tokenizer, tmp_path
):
    """Agent steps at a high learning rate move the design's logprob; with replay it rises,
    and the run logs the replayed loss."""
    from transformers import AutoModelForCausalLM

    from .test_train import seq_logprob

    prompt, answer, eps = _round(tiny_tokenizer)
    data = write(tmp_path / "r.jsonl", [_played("a", prompt, answer, eps)])
    mask = [1] * len(answer)
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    before = seq_logprob(base, prompt, answer, mask)
    after = {}
    for coef in ("0", "1"):
        out = tmp_path / f"ck{coef}"
        r = run_cli(
            "train",
            data,
            "--model",
            tiny_model,
            "--output-dir",
            out,
            "--role",
            "agent",
            "--lr",
            "3e-3",
            "--epochs",
            "3",
            "--seed",
            "1",
            "--design-replay",
            coef,
            "--metrics",
            tmp_path / f"m{coef}.jsonl",
            timeout=600,
        )
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        model = AutoModelForCausalLM.from_pretrained(out)
        after[coef] = seq_logprob(model, prompt, answer, mask)
        rows = [json.loads(x) for x in (tmp_path / f"m{coef}.jsonl").read_text().splitlines()]
        logged = [x["losses/design_replay"] for x in rows if "losses/design_replay" in x]
        assert bool(logged) == (coef == "1")
    assert after["1"] > before + 1.0
    assert after["1"] > after["0"] + 1.0


def test_the_loop_gives_replay_to_the_agents_steps_not_the_designers(cli, tmp_path):
    """train.design_replay reaches the window's agent steps; the designer's own step,
    which trains on the designs' rewards, runs without it."""
    from pathlib import Path

    micro = (Path(__file__).resolve().parents[1] / "examples" / "micro.toml").read_text()
    cfg = tmp_path / "replay.toml"
    cfg.write_text(micro.replace("[train]\n", "[train]\ndesign_replay = 1.0\n", 1))
    r = cli("loop", cfg, "--print-commands", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    trains = [c for c in r.stdout.decode().split("\n") if c.lstrip().startswith("spade-train ")]
    agent = [c for c in trains if "--role agent" in c]
    designer = [c for c in trains if "--role designer" in c]
    assert len(agent) == 4 and len(designer) == 1
    assert all("--design-replay 1.0" in c for c in agent)
    assert "--design-replay" not in designer[0]


def test_the_loop_replays_round_ones_designs_when_asked(cli, tmp_path):
    """loop.replayed_designs = "first-round": every round's agent steps rehearse the
    designs round 1 scored (the starting model's), never the designer's step."""
    from pathlib import Path

    micro = (Path(__file__).resolve().parents[1] / "examples" / "micro.toml").read_text()
    cfg = tmp_path / "replay.toml"
    cfg.write_text(
        micro.replace("[train]\n", "[train]\ndesign_replay = 1.0\n", 1).replace(
            "[loop]\n", '[loop]\nreplayed_designs = "first-round"\n', 1
        )
    )
    r = cli("loop", cfg, "--print-commands", "--round", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    trains = [c for c in r.stdout.decode().split("\n") if c.lstrip().startswith("spade-train ")]
    agent = [c for c in trains if "--role agent" in c]
    designer = [c for c in trains if "--role designer" in c]
    first = "--design-replay-from runs/micro/round-001/scored.jsonl.zst"
    assert len(agent) == 4 and all(first in c for c in agent)
    assert "--design-replay-from" not in designer[0]
    cfg.write_text(micro.replace("[loop]\n", '[loop]\nreplayed_designs = "first-round"\n', 1))
    r = cli("loop", cfg, "--print-commands", cwd=tmp_path)
    assert r.returncode == 2
    assert "'loop.replayed_designs' chooses what train.design_replay rehearses" in r.stderr.decode()
