"""spade-train: sample building, bad input, real learning, masking, data parallel, checkpoints.

Token ids come from the tiny model's tokenizer; samples are made by hand so every test
knows which completions deserve to rise and which to fall.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from spade_cli.errors import DataError, UsageError
from spade_cli.train.samples import mix_groups, read_groups

from .helpers import run_cli

# --------------------------------------------------------------------------- records


def _cand(cid: str, group: str, **fields) -> dict:
    return {
        "kind": "candidate",
        "v": 1,
        "id": cid,
        "parents": [],
        "round": 0,
        "group": group,
        **fields,
    }


def designer(cid, group, prompt, completion, reward, logprobs=None):
    design = {"prompt_ids": prompt, "completion_ids": completion}
    if logprobs is not None:
        design["logprobs"] = logprobs
    return _cand(
        cid,
        group,
        origin="design",
        design=design,
        score={"valid": True, "reward": reward, "regret": reward},
    )


def episode(prompt, segments, ret, stop="terminated"):
    """segments: [(ids, is_model)]; the env_mask marks the model's own tokens."""
    comp, mask = [], []
    for ids, is_model in segments:
        comp += ids
        mask += [int(is_model)] * len(ids)
    return {
        "seed": 0,
        "prompt_ids": prompt,
        "completion_ids": comp,
        "env_mask": mask,
        "return": ret,
        "stop": stop,
        "turns": [],
    }


def agent(cid, nohint, hint=()):
    return _cand(
        cid,
        "g-" + cid,
        origin="replay",
        design=None,
        rollouts={"k": len(nohint), "nohint": list(nohint), "hint": list(hint)},
    )


def write(path: Path, records) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


# --------------------------------------------------------------------------- sample building (no model)


def test_groups_by_role_and_hint_flag(tmp_path):
    recs = [designer(f"d{i}", "g1", [1, 2], [3, 4 + i], float(i)) for i in range(3)]
    recs.append(
        agent(
            "e1",
            [episode([5], [([6], 1), ([7, 8], 0), ([9], 1)], r) for r in (0.0, 1.0)],
            hint=[episode([5, 50], [([6], 1)], r) for r in (1.0, 0.0)],
        )
    )
    f = write(tmp_path / "c.jsonl", recs)
    groups, stats = read_groups([str(f)], role="both")
    assert [(g[0].role, len(g)) for g in groups] == [("designer", 3), ("agent", 2)]
    assert groups[1][0].env_mask == [1, 0, 0, 1] and groups[1][1].reward == 1.0
    assert stats.skipped["no_rollouts"] == 3 and stats.skipped["no_design"] == 1
    assert [g[0].role for g in read_groups([str(f)], role="designer")[0]] == ["designer"]
    empty = {
        **episode([5], [([6], 1)], 0.5),
        "prompt_ids": [],
        "completion_ids": [],
        "env_mask": [],
        "logprobs": None,
        "stop": "context",
    }
    broken = {**episode([5], [([6], 1)], 0.0), "stop": "env_error"}
    recs[-1]["rollouts"]["nohint"] += [empty, broken]
    f = write(tmp_path / "c.jsonl", recs)
    assert read_groups([str(f)], role="agent")[1].skipped == {
        "empty_episode": 1,
        "env_error_episode": 1,
        "no_rollouts": 3,
    }
    hinted, _ = read_groups([str(f)], role="agent", include_hinted=True)
    assert [g[0].group for g in hinted] == ["agent:e1:nohint", "agent:e1:hint"]


def test_skips_are_counted_and_all_skipped_is_an_error(tmp_path):
    recs = [designer(f"d{i}", "flat", [1], [2, i], 0.5) for i in range(3)]  # zero advantage
    recs.append(designer("alone", "single", [1], [2], 1.0))  # a group of one
    recs += [designer(f"x{i}", "ok", [1], [3, i], float(i)) for i in range(2)]
    f = write(tmp_path / "c.jsonl", recs)
    groups, stats = read_groups([str(f)], role="designer")
    assert len(groups) == 1 and stats.skipped == {"flat_reward_group": 1, "singleton_group": 1}
    f2 = write(tmp_path / "flat.jsonl", recs[:4])
    with pytest.raises(DataError, match="nothing to train on.*flat_reward_group"):
        read_groups([str(f2)], role="designer")


@pytest.mark.parametrize(
    "broken, message",
    [
        (lambda r: r["design"].pop("completion_ids"), "design.completion_ids is missing"),
        (
            lambda r: r["design"].update(prompt_ids=["a"]),
            "prompt_ids must be a list of non-negative",
        ),
        (lambda r: r.pop("score"), "no score.reward"),
        (lambda r: r["design"].update(logprobs=[0.1]), "logprobs has 1 entries"),
    ],
)
def test_bad_records_name_file_and_line(tmp_path, broken, message):
    recs = [designer(f"d{i}", "g", [1], [2, 3], float(i)) for i in range(3)]
    broken(recs[2])
    f = write(tmp_path / "bad.jsonl", recs)
    with pytest.raises(DataError, match=message) as e:
        read_groups([str(f)], role="designer")
    assert "bad.jsonl:3" in str(e.value)


def test_agent_episode_needs_env_mask(tmp_path):
    ep = episode([1], [([2], 1)], 1.0)
    del ep["env_mask"]
    f = write(tmp_path / "a.jsonl", [agent("e", [episode([1], [([2], 1)], 0.0), ep])])
    with pytest.raises(DataError, match=r"a.jsonl:1: .*env_mask is missing"):
        read_groups([str(f)], role="agent")


def test_mixing_ratio_subsamples_the_plentiful_role(tmp_path):
    recs = []
    for g in range(6):
        recs += [designer(f"d{g}{i}", f"g{g}", [1], [2, i], float(i)) for i in range(2)]
    for a in range(2):
        recs.append(agent(f"e{a}", [episode([1], [([2], 1)], r) for r in (0.0, 1.0)]))
    groups, _ = read_groups([str(write(tmp_path / "m.jsonl", recs))], role="both")
    mixed = mix_groups(groups, 0.5, seed=0)
    assert sorted(g[0].role for g in mixed) == ["agent", "agent", "designer", "designer"]
    assert len(mix_groups(groups, None, seed=0)) == 8
    with pytest.raises(UsageError):
        mix_groups(groups, 1.5, seed=0)


def test_batch_plan_spans_steps_when_a_step_holds_part_of_a_group(tmp_path):
    from spade_cli.train.batches import plan_batches
    from spade_cli.train.config import TrainJob

    recs = []
    for g in range(5):
        recs += [designer(f"d{g}{i}", f"g{g}", [1], [2, i], float(i)) for i in range(4)]
    groups, _ = read_groups([str(write(tmp_path / "p.jsonl", recs))], role="designer")
    plan = lambda **kw: plan_batches(TrainJob(model="m", output_dir="o", **kw), groups, 1)  # noqa: E731
    assert plan()["steps"] == 5 and plan()["steps_per_generation"] == 1
    # 2 rows per step: a group of 4 spans 2 optimizer steps.
    p = plan(per_device_batch_size=2)
    assert (p["steps_per_generation"], p["steps"], p["left_out_groups"]) == (2, 10, 0)
    # 6 rows per step: whole groups need 12 rows = 2 steps = 3 groups; 2 groups left out.
    p = plan(per_device_batch_size=6, epochs=2)
    assert (p["steps_per_generation"], p["groups_per_step"], p["steps"], p["left_out_groups"]) == (
        2,
        3,
        4,
        2,
    )
    with pytest.raises(DataError, match="needs 6"):
        plan(per_device_batch_size=24)


def test_whole_batch_plan_takes_one_optimizer_step_over_every_group(tmp_path):
    from spade_cli.train.batches import plan_batches
    from spade_cli.train.config import TrainJob

    recs = []
    for g in range(5):
        recs += [designer(f"d{g}{i}", f"g{g}", [1], [2, i], float(i)) for i in range(4)]
    groups, _ = read_groups([str(write(tmp_path / "p.jsonl", recs))], role="designer")
    job = TrainJob(model="m", output_dir="o", whole_batch=True, grad_accum=3)

    def plan(processes=1, **kw):
        p = plan_batches(replace(job, **kw), groups, processes)
        return p["grad_accum"], p["steps"], p["left_out_groups"]

    assert plan() == (5, 1, 0)  # five micro-steps of one group each, one optimizer step
    assert plan(epochs=2) == (5, 2, 0)  # GRPO's mu passes over the same batch
    assert plan(per_device_batch_size=2) == (10, 1, 0)
    # Two processes share the micro-steps; the odd group is left out, as for any batch.
    assert plan(processes=2) == (2, 1, 1)
    # Micro-steps of 3 rows hold whole groups of 4 only in fours (12 rows, 3 groups).
    assert plan(per_device_batch_size=3) == (4, 1, 2)
    with pytest.raises(DataError, match="whole-batch"):
        plan(per_device_batch_size=24)


def test_cli_rejects_bad_model_and_empty_input(cli, tmp_path):
    f = write(
        tmp_path / "c.jsonl", [designer(f"d{i}", "g", [1], [2, i], float(i)) for i in range(2)]
    )
    (tmp_path / "notamodel").mkdir()
    r = cli("train", f, "--model", tmp_path / "notamodel", "--output-dir", tmp_path / "out")
    assert r.returncode == 4 and b"not a model: no config.json" in r.stderr, r.stderr
    assert r.stdout == b""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    r = cli("train", f, "--model", tmp_path / "m", "--output-dir", tmp_path / "out")
    assert r.returncode == 4 and b"no weights" in r.stderr
    r = cli(
        "train",
        "-",
        "--model",
        tmp_path / "m",
        "--output-dir",
        tmp_path / "out",
        input=b'{"kind": "candidate", "id": "c", "design": {"prompt_ids": [1]}, "score": {"reward": 1}, "group": "g"}\n',
    )
    assert r.returncode == 3 and b"<stdin>:1: design.completion_ids is missing" in r.stderr, (
        r.stderr
    )
    flat = b"".join(
        orjson.dumps(designer(f"d{i}", "g", [1], [2, i], 0.0)) + b"\n" for i in range(3)
    )
    r = cli(
        "train",
        "--model",
        tmp_path / "m",
        "--output-dir",
        tmp_path / "out",
        "--if-empty",
        "fail",
        input=flat,
    )
    assert (
        r.returncode == 3
        and b"nothing to train on" in r.stderr
        and b"flat_reward_group" in r.stderr
    )


def test_cli_if_empty_keep_passes_the_model_on(cli, tiny_model, tmp_path):
    flat = write(
        tmp_path / "flat.jsonl", [designer(f"d{i}", "g", [1], [2, i], -1.0) for i in range(4)]
    )
    r = cli(
        "train", flat, "--model", tiny_model, "--output-dir", tmp_path / "out", "--if-empty", "fail"
    )
    assert r.returncode == 3 and b"nothing to train on" in r.stderr and r.stdout == b""
    r = cli(
        "train", flat, "--model", tiny_model, "--output-dir", tmp_path / "out"
    )  # keep: the default
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["kind"] == "checkpoint" and rec["format"] == "unchanged" and rec["steps"] == 0
    assert (
        rec["path"] == str(Path(tiny_model).resolve()) and rec["skipped"]["flat_reward_group"] == 1
    )
    assert b"no learning signal" in r.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow  # loads torch + transformers in a subprocess
def test_cli_corrupt_weights_fail_cleanly(cli, tiny_model, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(tiny_model, bad)
    (bad / "model.safetensors").write_bytes(b"not safetensors at all")
    f = write(
        tmp_path / "c.jsonl", [designer(f"d{i}", "g", [1], [2, i], float(i)) for i in range(2)]
    )
    r = cli("train", f, "--model", bad, "--output-dir", tmp_path / "out")
    assert r.returncode == 4 and b"cannot load the model" in r.stderr, r.stderr[-2000:]
    assert r.stdout == b"" and not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- training (tiny model)


@pytest.fixture(scope="module")
def tok(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


def _enc(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def token_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    """The model's own logprob of each completion token after the prompt."""
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits[0, len(prompt) - 1 : -1].float(), -1)
    return lp.gather(1, torch.tensor(completion)[:, None])[:, 0].tolist()


POS = ["class Maze(gym.Env): pass", "def step(self, action): return 1"]
NEG = ["import os; os.system('x')", "while True: print('loop')"]


def round_records(tok) -> list[dict]:
    """Two designer groups and two agent groups; positives and negatives alternate."""
    eos = tok.eos_token_id
    recs = []
    for g in range(2):
        prompt = _enc(tok, f"Design environment number {g}.")
        texts = [(POS[0], 1.0), (NEG[0], 0.0), (POS[1], 1.0), (NEG[1], 0.0)]
        recs += [
            designer(f"d{g}{i}", f"g{g}", prompt, _enc(tok, t) + [eos], r)
            for i, (t, r) in enumerate(texts)
        ]
    for a in range(2):
        prompt = _enc(tok, f"You stand in room {a}. Find the key.")
        obs = _enc(tok, " You see a table.")
        eps = [
            episode(prompt, [(_enc(tok, "look"), 1), (obs, 0), (_enc(tok, x), 1)], r)
            for x, r in (("take key", 1.0), ("sleep", 0.0), ("take key", 1.0), ("sleep", 0.0))
        ]
        recs.append(agent(f"e{a}", eps))
    return recs


def seq_logprob(model, prompt, completion, mask):
    import torch

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    lp = torch.log_softmax(logits, -1).gather(1, torch.tensor(completion)[:, None])[:, 0]
    return float((lp * torch.tensor(mask, dtype=torch.float)).sum())


def training_batch(cfg, groups, work: Path):
    """A trainer built for `cfg`, in training mode, and its first prepared micro-batch."""
    from spade_cli.train.grpo import build_trainer

    trainer, _, _ = build_trainer(cfg, groups, str(work))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    return trainer, trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))


TRAIN_ARGS = [
    "--role",
    "both",
    "--lr",
    "3e-3",
    "--epochs",
    "3",
    "--seed",
    "1",
    "--max-grad-norm",
    "100",
]


@pytest.fixture(scope="module")
def trained(tiny_model, tok, tmp_path_factory):
    """One real single-process spade-train run through the CLI."""
    d = tmp_path_factory.mktemp("train")
    data = write(d / "round.jsonl", round_records(tok))
    r = run_cli(
        "train",
        data,
        "--model",
        tiny_model,
        "--output-dir",
        d / "ckpt",
        "--per-device-batch-size",
        "8",
        "--threads",
        "2",
        *TRAIN_ARGS,
        timeout=600,
        env={"OMP_NUM_THREADS": "1"},  # --threads wins over the environment's pool size
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return {"dir": d, "data": data, "proc": r}


@pytest.mark.slow  # a real training run through the CLI (shared module fixture)
def test_cli_writes_checkpoint_record_and_metrics(trained):
    lines = trained["proc"].stdout.decode().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["kind"] == "checkpoint" and rec["format"] == "full" and rec["processes"] == 1
    assert rec["threads"] == 2
    assert (
        rec["steps"] == 6 and rec["samples"] == 16 and rec["groups"] == {"designer": 2, "agent": 2}
    )
    assert Path(rec["path"]) == (trained["dir"] / "ckpt").resolve()
    assert not (trained["dir"] / "ckpt.partial").exists()
    rows = [json.loads(x) for x in Path(rec["metrics_path"]).read_text().splitlines()]
    step_rows = [x for x in rows if "losses/loss" in x]
    assert len(step_rows) == 6
    for key in (
        "losses/loss",
        "optim/grad_norm",
        "rewards/mean",
        "advantages/abs_mean",
        "perf/tokens_per_second",
        "policy/clip_ratio/region_mean",
    ):
        assert key in step_rows[0], key
    assert all("/" in k or k == "step" for k in step_rows[0])
    assert step_rows[0]["rewards/mean"] == pytest.approx(0.5)
    assert rows[-1]["perf/tokens_per_second"] > 0


@pytest.mark.slow  # a real training run through the CLI (shared module fixture)
def test_learning_is_real(trained, tiny_model, tok):
    """After training, completions with positive advantage gained logprob, negative lost."""
    from transformers import AutoModelForCausalLM

    before = AutoModelForCausalLM.from_pretrained(tiny_model)
    after = AutoModelForCausalLM.from_pretrained(trained["dir"] / "ckpt")
    groups, _ = read_groups([str(trained["data"])], role="both")
    moved = {"pos": [], "neg": []}
    for g in groups:
        for s in g:
            delta = seq_logprob(after, s.prompt_ids, s.completion_ids, s.env_mask) - seq_logprob(
                before, s.prompt_ids, s.completion_ids, s.env_mask
            )
            moved["pos" if s.reward > 0.5 else "neg"].append(delta)
    assert all(d > 0 for d in moved["pos"]), moved
    assert all(d < 0 for d in moved["neg"]), moved


@pytest.mark.slow  # a real training run through the CLI (shared module fixture)
def test_checkpoint_loads_and_generates(trained):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = trained["dir"] / "ckpt"
    model = AutoModelForCausalLM.from_pretrained(path)
    tokz = AutoTokenizer.from_pretrained(path)
    ids = torch.tensor([tokz("class", add_special_tokens=False)["input_ids"]])
    out = model.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids.shape[1]

    from spade_cli.engines import Sampling, load_engine

    engine = load_engine(str(path), engine="hf")
    gen = engine.generate(
        [engine.chat_ids([{"role": "user", "content": "hi"}])], Sampling(max_tokens=5, seed=0)
    )[0]
    assert 0 < len(gen.completion_ids) <= 5


def test_environment_tokens_get_no_gradient(tiny_model, tok, tmp_path):
    """Through TRL's own loss: the positions that predict environment tokens get exactly
    zero gradient, those that predict model tokens do not; and changing the environment tokens at the end
    of a trajectory leaves the parameter gradient unchanged (a control shows the same change
    on tokens marked as the model's does change it)."""
    import torch

    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import build_trainer

    prompt = _enc(tok, "Find the key.")
    act, obs_a = _enc(tok, "take key"), _enc(tok, " You win, the door opens.")
    obs_b = [(t + 1) % tok.vocab_size for t in obs_a]
    assert len(act) >= 2 and obs_a != obs_b

    def backward(segments_of):
        eps = [episode(prompt, segments_of(k), float(k % 2)) for k in range(2)]
        f = write(tmp_path / "a.jsonl", [agent("e", eps)])
        cfg = TrainJob(
            model=str(tiny_model), output_dir=str(tmp_path / "o"), inputs=[str(f)], role="agent"
        )
        groups, _ = read_groups(cfg.inputs, role="agent")
        trainer, _, _ = build_trainer(cfg, groups, str(tmp_path / "w"))
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
        seen = []

        # TRL scores tokens with a fused lm-head, so watch the final norm's output instead:
        # after it nothing mixes positions, so its gradient at row t is the gradient of the
        # logits that predict token t+1.
        def keep(module, args, out):
            out.retain_grad()
            seen.append(out)

        trainer.model.get_decoder().norm.register_forward_hook(keep)
        inputs = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
        trainer.model.zero_grad()
        trainer.compute_loss(trainer.model, inputs).backward()
        grad = torch.cat(
            [p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None]
        )
        return inputs, seen[-1].grad, grad

    # Environment tokens in the middle of the trajectory.
    inputs, hidden_grad, _ = backward(lambda k: [(act[:1], 1), (obs_a, 0), (act[: k + 1], 1)])
    p_len = inputs["prompt_ids"].shape[1]
    # The mask the episodes define (rows may be shuffled: rebuild it from each row's length).
    mask = torch.zeros_like(inputs["completion_mask"])
    for row, n in enumerate(inputs["completion_mask"].sum(1).tolist()):
        mask[row, :n] = torch.tensor([1] + [0] * len(obs_a) + [1] * (n - 1 - len(obs_a)))
    mask[inputs["completion_mask"] == 0] = -1  # padding: neither
    per_pos = hidden_grad.abs().sum(-1)[
        :, p_len - 1 : p_len - 1 + mask.shape[1]
    ]  # row t predicts token t+1
    assert per_pos[mask == 0].max() == 0
    assert (per_pos[mask == 1] > 0).all()

    # Environment tokens after the last model token: their content does not matter.
    _, _, grad_a = backward(lambda k: [(act[: k + 1], 1), (obs_a, 0)])
    _, _, grad_b = backward(lambda k: [(act[: k + 1], 1), (obs_b, 0)])
    assert grad_a.abs().sum() > 0 and torch.equal(grad_a, grad_b)
    _, _, grad_c = backward(lambda k: [(act[: k + 1], 1), (obs_a, 1)])
    _, _, grad_d = backward(lambda k: [(act[: k + 1], 1), (obs_b, 1)])
    assert not torch.allclose(grad_c, grad_d)


def test_stored_logprobs_are_checked_against_the_model(tiny_model, tok, tmp_path):
    """Logprobs stored by the engine that sampled with this model agree with TRL's own;
    logprobs from some other policy show up in sampling/logp_abs_diff."""
    from transformers import AutoModelForCausalLM

    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import build_trainer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    prompt = _enc(tok, "Design environment number 0.")
    comps = [_enc(tok, t) + [tok.eos_token_id] for t in POS + NEG]

    def logp_diff(shift):
        recs = [
            designer(
                f"d{i}",
                "g",
                prompt,
                c,
                float(i % 2),
                [x + shift for x in token_logprobs(model, prompt, c)],
            )
            for i, c in enumerate(comps)
        ]
        f = write(tmp_path / f"lp{shift}.jsonl", recs)
        cfg = TrainJob(
            model=str(tiny_model), output_dir=str(tmp_path / "o"), inputs=[str(f)], role="designer"
        )
        groups, _ = read_groups(cfg.inputs, role="designer")
        trainer, _, _ = build_trainer(cfg, groups, str(tmp_path / "w"))
        trainer.model.train()
        trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
        return trainer._metrics["train"]["sampling/logp_abs_diff"][0]

    assert logp_diff(0.0) < 1e-4
    assert logp_diff(-1.0) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.slow
def test_two_processes_match_one(trained, tiny_model):
    """`--num-processes 2` (gloo, two real processes) gives the same losses, gradient
    norms and weights as one process with twice the per-device batch."""
    from safetensors.torch import load_file

    d = trained["dir"]
    r = run_cli(
        "train",
        trained["data"],
        "--model",
        tiny_model,
        "--output-dir",
        d / "ckpt2",
        "--per-device-batch-size",
        "4",
        "--num-processes",
        "2",
        *TRAIN_ARGS,
        timeout=900,
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    rec = json.loads(r.stdout)
    assert rec["processes"] == 2
    one = [json.loads(x) for x in (d / "ckpt" / "metrics.jsonl").read_text().splitlines()]
    two = [json.loads(x) for x in (d / "ckpt2" / "metrics.jsonl").read_text().splitlines()]
    for a, b in zip(one[:-1], two[:-1], strict=True):
        assert a["losses/loss"] == pytest.approx(b["losses/loss"], rel=1e-4, abs=1e-6)
        assert a["optim/grad_norm"] == pytest.approx(b["optim/grad_norm"], rel=1e-4)
    w0 = load_file(Path(tiny_model) / "model.safetensors")
    w1, w2 = (
        load_file(d / "ckpt" / "model.safetensors"),
        load_file(d / "ckpt2" / "model.safetensors"),
    )
    # Adam divides tiny gradients by tiny second moments, so gloo's different summation
    # order shows up in the weights at the 1e-4 level; the updates themselves are ~1e-2.
    between = max(float((w1[k] - w2[k]).abs().max()) for k in w1)
    update = max(float((w1[k] - w0[k]).abs().max()) for k in w1)
    assert between < 0.05 * update, (between, update)


@pytest.mark.slow
def test_lora_adapter_then_next_round(tiny_model, tok, tmp_path):
    """Round 1 saves a LoRA adapter; round 2 continues it and saves merged weights that
    load as a plain transformers model, different from the base."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import run

    data = write(tmp_path / "r.jsonl", round_records(tok))
    common = dict(
        inputs=[str(data)], role="designer", learning_rate=1e-2, lora_r=4, per_device_batch_size=8
    )
    info1 = run(
        TrainJob(
            model=str(tiny_model), output_dir=str(tmp_path / "r1"), lora_save="adapter", **common
        )
    )
    assert info1["format"] == "adapter"
    assert (tmp_path / "r1" / "adapter_config.json").exists() and not (
        tmp_path / "r1" / "config.json"
    ).exists()
    info2 = run(TrainJob(model=str(tmp_path / "r1"), output_dir=str(tmp_path / "r2"), **common))
    assert (
        info2["format"] == "merged"
        and (tmp_path / "r2" / "adapter" / "adapter_config.json").exists()
    )
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "r2")
    assert not any("lora" in n for n, _ in merged.named_parameters())
    base, new = (
        load_file(Path(tiny_model) / "model.safetensors"),
        load_file(tmp_path / "r2" / "model.safetensors"),
    )
    assert max(float((base[k] - new[k]).abs().max()) for k in base if k in new) > 0


@pytest.mark.slow
def test_kl_against_a_reference_model_and_uneven_groups(tiny_model, tok, tmp_path):
    """--beta with --ref-model loads the reference and logs KL; a group smaller than the
    others is padded with loss-free, reward-free rows instead of failing or being dropped."""
    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import run

    recs = round_records(tok)
    recs = [r for r in recs if r["id"] != "d13"]  # designer group g1 now has 3 designs
    data = write(tmp_path / "r.jsonl", recs)
    info = run(
        TrainJob(
            model=str(tiny_model),
            output_dir=str(tmp_path / "k"),
            inputs=[str(data)],
            role="designer",
            beta=0.1,
            ref_model=str(tiny_model),
            learning_rate=1e-2,
            epochs=2,
            per_device_batch_size=8,
            loss_type="grpo",
        )
    )
    assert info["group_size"] == 4 and info["padded_rows"] == 1
    rows = [json.loads(x) for x in Path(info["metrics_path"]).read_text().splitlines()]
    kls = [x["losses/kl"] for x in rows if "losses/kl" in x]
    assert len(kls) == 2 and kls[0] == pytest.approx(0.0, abs=1e-6) and kls[1] > 0
    # The pad row's NaN reward is excluded: the logged mean is over the 7 real rewards.
    assert rows[0]["rewards/mean"] == pytest.approx(4 / 7)


@pytest.mark.slow
def test_every_loss_type_trains(tiny_model, tok, tmp_path):
    """Each TRL loss spade-train offers runs on stored samples (one batch, two passes),
    with gradient checkpointing and a KL term on two of them."""
    from spade_cli.train.config import LOSS_TYPES, TrainJob
    from spade_cli.train.grpo import run

    data = write(tmp_path / "r.jsonl", round_records(tok)[:8])
    for lt in LOSS_TYPES:
        info = run(
            TrainJob(
                model=str(tiny_model),
                output_dir=str(tmp_path / lt),
                inputs=[str(data)],
                role="designer",
                loss_type=lt,
                learning_rate=1e-3,
                per_device_batch_size=8,
                epochs=2,
                gradient_checkpointing=lt == "grpo",
                beta=0.04 if lt == "dapo" else 0.0,
            )
        )
        assert info["steps"] == 2 and math.isfinite(info["train_loss"]), lt


@pytest.mark.slow
def test_benchmark_script_runs(tiny_model):
    """Smoke run of bench/bench_train.py at toy size (not a timing test)."""
    bench = Path(__file__).resolve().parent.parent / "bench" / "bench_train.py"
    r = subprocess.run(
        [
            sys.executable,
            str(bench),
            "--model",
            str(tiny_model),
            "--prompts",
            "2",
            "--group",
            "2",
            "--batch",
            "4",
            "--completion-length",
            "4",
        ],
        capture_output=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert b"ratio spade-stored / trl-generate" in r.stdout


# --------------------------------------------------------------------------- launching


def test_launch_command_uses_gloo_multi_process_not_cpu_flag():
    from spade_cli.train.launch import launch_command

    cmd = launch_command("s.json", "r.json", 2, gpu=False, main_process_port=1234)
    assert "--multi_gpu" in cmd and "--cpu" not in cmd
    assert cmd[cmd.index("--num_processes") + 1] == "2"
    assert cmd[-3:] == ["spade_cli.train.launch", "s.json", "r.json"]
    multi = launch_command(
        "s.json",
        "r.json",
        16,
        accelerate_config="z.yaml",
        num_machines=2,
        machine_rank=1,
        main_process_ip="node0",
        main_process_port=29500,
        gpu=True,
    )
    assert "--multi_gpu" not in multi and multi[multi.index("--config_file") + 1] == "z.yaml"
    for flag, value in (
        ("--machine_rank", "1"),
        ("--main_process_ip", "node0"),
        ("--num_machines", "2"),
    ):
        assert multi[multi.index(flag) + 1] == value


@pytest.mark.parametrize(
    "name, kind", [("zero2", "DEEPSPEED"), ("zero3", "DEEPSPEED"), ("fsdp", "FSDP")]
)
def test_shipped_accelerate_configs_parse(name, kind):
    from accelerate.commands.config.config_args import load_config_from_file

    path = Path(__file__).resolve().parent.parent / "examples" / "accelerate" / f"{name}.yaml"
    cfg = load_config_from_file(str(path))
    assert cfg.distributed_type.value == kind and not cfg.use_cpu
    if name == "zero3":
        assert cfg.deepspeed_config["zero3_save_16bit_model"] is True
    if name == "fsdp":
        assert cfg.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"


@pytest.mark.gpu
def test_bf16_training_on_gpu(tiny_model, tok, tmp_path):
    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import run

    data = write(tmp_path / "r.jsonl", round_records(tok))
    info = run(
        TrainJob(
            model=str(tiny_model),
            output_dir=str(tmp_path / "g"),
            inputs=[str(data)],
            per_device_batch_size=8,
            learning_rate=1e-3,
        )
    )
    assert info["steps"] == 2
    cfg = json.loads((tmp_path / "g" / "spade_train.json").read_text())
    assert cfg["result"]["format"] == "full"


# --------------------------------------------------------------------------- designer advantage


def _skilled(cid, skill, prompt, completion, reward):
    rec = designer(cid, "g-" + cid, prompt, completion, reward)  # one document per design
    rec["skill"] = skill
    return rec


def test_designer_advantage_skill_mean_and_group_baselines(tmp_path):
    recs = [
        _skilled("a", "Optimization", [1], [2], 0.9),
        _skilled("b", "Optimization", [1], [3], 0.3),
        _skilled("c", "Optimization", [1], [4], 0.0),
        _skilled("d", "Causal Inference", [1], [5], 0.5),
        _skilled("e", "Causal Inference", [1], [6], 0.5),
    ]  # flat skill: no signal
    f = write(tmp_path / "d.jsonl", recs)
    groups, stats = read_groups([str(f)], role="designer")
    assert [[s.source for s in g] for g in groups] == [["a", "b", "c"]]
    assert [s.advantage for s in groups[0]] == pytest.approx(
        [0.5, -0.1, -0.4]
    )  # centred, not divided
    assert stats.skipped["flat_reward_group"] == 1
    # The group baseline pools by candidate group: one design per document gives singletons.
    with pytest.raises(DataError, match="nothing to train on"):
        read_groups([str(f)], role="designer", designer_baseline="group")
    # Balance scale: 6 agent samples / 5 designer samples x interval 4 = 4.8.
    eps = [episode([7], [([8 + k], 1)], float(k % 2)) for k in range(6)]
    f2 = write(tmp_path / "b.jsonl", [*recs, agent("x", eps)])
    groups, _ = read_groups([str(f2)], designer_scale="balance", designer_interval=4)
    des = next(g for g in groups if g[0].role == "designer")
    assert [s.advantage for s in des] == pytest.approx([0.5 * 4.8, -0.1 * 4.8, -0.4 * 4.8])
    assert all(s.advantage is None for g in groups if g[0].role == "agent" for s in g)
    # A skill's designs are cut into groups no larger than the agent's for batching.
    groups, _ = read_groups([str(f2)], group_size=2)
    assert sorted(len(g) for g in groups if g[0].role == "designer") == [1, 2]


def test_designer_advantages_reach_trl_loss(tiny_model, tok, tmp_path):
    """What TRL's loss receives: the skill-centred designer advantages (no std division),
    TRL's own z-score for the agent's plays of one game."""
    from spade_cli.train.config import TrainJob
    from spade_cli.train.grpo import build_trainer

    p = _enc(tok, "Design a game.")
    rewards = {"a": 0.9, "b": 0.2, "c": 0.1, "d": 0.8}
    skill = {"a": "Optimization", "b": "Optimization", "c": "Logic", "d": "Logic"}
    recs = [_skilled(c, skill[c], p, _enc(tok, f" design {c}"), r) for c, r in rewards.items()]
    eps = [
        episode(_enc(tok, "Play."), [(_enc(tok, f" move {k}"), 1)], r)
        for k, r in enumerate([1.0, 0.0])
    ]
    f = write(tmp_path / "r.jsonl", [*recs, agent("x", eps)])
    cfg = TrainJob(
        model=str(tiny_model),
        output_dir=str(tmp_path / "o"),
        inputs=[str(f)],
        role="both",
        per_device_batch_size=6,
        scale_rewards="group",
    )
    groups, _ = read_groups(cfg.inputs, role="both")
    trainer, plan, _ = build_trainer(cfg, groups, str(tmp_path / "w"))
    assert plan["group_size"] == 2 and plan["groups_per_step"] == 3
    seen = []
    real = trainer._compute_loss

    def spy(model, inputs):
        n = inputs["completion_mask"].sum(1).tolist()
        seen.extend(
            zip(inputs["completion_ids"].tolist(), n, inputs["advantages"].tolist(), strict=True)
        )
        return real(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    by_text = {tok.decode(ids[:n]).strip(): a for ids, n, a in seen}
    expect = {
        "design a": 0.35,
        "design b": -0.35,
        "design c": -0.35,
        "design d": 0.35,
        "move 0": 0.5 / (0.5**0.5 + 1e-4),
        "move 1": -0.5 / (0.5**0.5 + 1e-4),
    }
    assert set(by_text) == set(expect)
    for text, a in expect.items():
        assert by_text[text] == pytest.approx(a, abs=1e-3), text


# --------------------------------------------------------------------------- refused environments


def _refused_round() -> list[dict]:
    """One environment that trains, and one of each kind that must train no one."""

    def env(cid, score=None, **marks):
        rec = agent(cid, [episode([5], [([6, len(cid)], 1)], r) for r in (0.0, 1.0, 0.5)])
        rec["rollouts"].update(marks)
        if score is not None:
            rec["score"] = score
        return rec

    ok = {"valid": True, "reason": "ok", "reward": 0.5, "accepted": True}
    broken = {"valid": False, "reason": "contract_broken", "reward": None, "sample": False}
    return [
        env("good", ok),
        env("broken", broken, contract_broken="a nonsense policy solves rollout seeds 1, 2"),
        env(
            "flaky",
            {**broken, "reason": "nondeterministic"},
            nondeterministic="on replay, observation 0 differs",
        ),
        env("stale", ok, contract_broken="scored before rollout marked it"),
        env("copy", {**ok, "reason": "duplicate", "accepted": False, "sample": False}),
        env("low", {**ok, "reason": "below_min_regret", "accepted": False}),
        env("bad", {"valid": False, "reason": "infeasible", "reward": None, "sample": False}),
        # A design whose score missed rollout's mark gives no designer sample either.
        {**designer("d0", "g", [1], [2, 0], 1.0), "rollouts": {"contract_broken": "x"}},
        designer("d1", "g", [1], [2, 1], 0.0),
        designer("d2", "g", [1], [2, 2], 0.5),
    ]


def test_refused_environments_train_no_one(tmp_path):
    f = write(tmp_path / "c.jsonl", _refused_round())
    groups, stats = read_groups([str(f)], role="both")
    assert sorted({s.source.split(":")[0] for g in groups for s in g}) == ["d1", "d2", "good"]
    assert stats.refused() == {
        "contract_broken": 7,
        "nondeterministic": 3,
        "duplicate": 3,
        "below_min_regret": 3,
        "infeasible": 3,
    }
    assert stats.as_dict()["skipped"]["refused_contract_broken"] == 7


def test_cli_says_how_many_episodes_it_dropped(cli, tmp_path):
    f = write(tmp_path / "c.jsonl", _refused_round()[1:3])
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    r = cli(
        "train",
        f,
        "--model",
        tmp_path / "m",
        "--output-dir",
        tmp_path / "out",
        "--role",
        "agent",
        "--if-empty",
        "fail",
    )
    assert r.returncode == 3 and b"nothing to train on" in r.stderr, r.stderr
    assert b"dropped 6 episodes" in r.stderr
    assert b"(contract_broken 3, nondeterministic 3)" in r.stderr


def test_the_designer_only_step_balances_against_the_windows_agent_plays(tmp_path):
    """At the end of a window the designer trains alone (role designer) on records that
    still hold the first step's plays: those are the agent samples its scale counts."""
    recs = [
        _skilled("a", "Optimization", [1], [2], 0.9),
        _skilled("b", "Optimization", [1], [3], 0.3),
    ]
    eps = [episode([7], [([8 + k], 1)], float(k % 2)) for k in range(16)]
    f = write(tmp_path / "w.jsonl", [*recs, agent("x", eps)])
    groups, stats = read_groups(
        [str(f)], role="designer", designer_scale="balance", designer_interval=4
    )
    assert [g[0].role for g in groups] == ["designer"]
    assert stats.designer_scale == 16 / 2 * 4 == 32.0
    assert [s.advantage for s in groups[0]] == pytest.approx([0.3 * 32, -0.3 * 32])
    _, capped = read_groups(
        [str(f)], role="designer", designer_scale="balance", designer_interval=8
    )
    assert capped.designer_scale == 50.0
    _, off = read_groups([str(f)], role="designer", designer_interval=4)
    assert off.designer_scale == 1.0


def test_designer_negatives_zero_reinforces_only_the_designs_above_their_skills_mean(tmp_path):
    recs = [
        _skilled("a", "Optimization", [1], [2], 0.9),
        _skilled("b", "Optimization", [1], [3], 0.3),
        _skilled("c", "Optimization", [1], [4], 0.6),
    ]
    f = write(tmp_path / "d.jsonl", recs)
    kept, _ = read_groups([str(f)], role="designer")
    assert [s.advantage for s in kept[0]] == pytest.approx([0.3, -0.3, 0.0])
    zeroed, _ = read_groups([str(f)], role="designer", designer_negatives="zero")
    assert [s.advantage for s in zeroed[0]] == pytest.approx([0.3, 0.0, 0.0])
    eps = [episode([7], [([8 + k], 1)], float(k % 2)) for k in range(16)]
    f = write(tmp_path / "w.jsonl", [*recs, agent("x", eps)])
    scaled, stats = read_groups(
        [str(f)],
        role="designer",
        designer_negatives="zero",
        designer_scale="balance",
        designer_interval=3,
    )
    assert stats.designer_scale == 16 / 3 * 3
    assert [s.advantage for s in scaled[0]] == pytest.approx([0.3 * 16, 0.0, 0.0])
    with pytest.raises(UsageError, match="designer-negatives"):
        read_groups([str(f)], role="designer", designer_negatives="drop")


def test_compact_filter_takes_the_gradient_off_turn_limit_episodes(tmp_path):
    eps = [
        episode([7], [([8], 1)], 1.0),
        episode([7], [([9], 1), ([4], 0)], 0.0, stop="truncated"),
        episode([7], [([10], 1)], 0.0, stop="max_turns"),
        episode([7], [([11], 1)], 0.0),
    ]
    f = write(tmp_path / "c.jsonl", [agent("x", eps)])
    (plain,), _ = read_groups([str(f)], role="agent")
    assert [s.env_mask for s in plain] == [[1], [1, 0], [1], [1]]
    (group,), stats = read_groups([str(f)], role="agent", compact_filter=True)
    # still in the group (their 0 counts in its baseline), but no token carries loss
    assert [s.reward for s in group] == [1.0, 0.0, 0.0, 0.0]
    assert [s.env_mask for s in group] == [[1], [0, 0], [0], [1]]
    assert stats.compact_filtered == 2 and stats.as_dict()["compact_filtered"] == 2


def test_tis_weights_the_designer_loss_by_the_behaviour_logprobs(tiny_model, tok, tmp_path):
    """With --tis each token's loss is weighted by min(cap, pi / mu), mu the stored
    logprobs: designs whose stored logprobs are 1 nat above this model's get e^-1 of the
    gradient, 1 nat below the cap 2; without --tis the stored logprobs change nothing."""
    import torch
    from transformers import AutoModelForCausalLM

    from spade_cli.train.config import TrainJob

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    prompt = _enc(tok, "Design environment number 0.")
    comps = [_enc(tok, t) + [tok.eos_token_id] for t in POS + NEG]

    def gradient(shift, tis):
        recs = [
            designer(
                f"d{i}",
                "g",
                prompt,
                c,
                float(i % 2),
                [x + shift for x in token_logprobs(model, prompt, c)],
            )
            for i, c in enumerate(comps)
        ]
        f = write(tmp_path / f"tis{shift}{tis}.jsonl", recs)
        cfg = TrainJob(
            model=str(tiny_model),
            output_dir=str(tmp_path / "o"),
            inputs=[str(f)],
            role="designer",
            tis=tis,
            designer_baseline="group",
        )
        groups, _ = read_groups(cfg.inputs, role="designer", designer_baseline="group")
        trainer, inputs = training_batch(cfg, groups, tmp_path / "w")
        trainer.model.zero_grad()
        trainer.compute_loss(trainer.model, inputs).backward()
        weights = inputs.get("importance_sampling_ratio")
        if weights is not None:  # the completion's tokens (padding keeps 1)
            weights = weights[inputs["completion_mask"].bool()]
        return torch.cat(
            [p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None]
        ), weights

    def scale(a, b):  # a = k * b: k, and how far a is from it
        k = float(a @ b / (b @ b))
        return k, float((a - k * b).norm() / a.norm())

    base, w0 = gradient(0.0, True)
    assert w0 is not None and float((w0 - 1).abs().max()) < 1e-3
    late, w1 = gradient(1.0, True)
    assert float((w1 - math.exp(-1)).abs().max()) < 1e-3
    k, off_line = scale(late, base)
    assert k == pytest.approx(math.exp(-1), rel=1e-3) and off_line < 1e-3
    early, _ = gradient(-1.0, True)
    k, off_line = scale(early, base)
    assert k == pytest.approx(2.0, rel=1e-3) and off_line < 1e-3  # truncated at the cap
    off, w_off = gradient(1.0, False)
    assert w_off is None and scale(off, base)[0] == pytest.approx(1.0, rel=1e-4)
