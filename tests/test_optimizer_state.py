"""--optimizer-state carry: AdamW's moments go from one spade-train run to the next, with
each run's own learning rate; a state for other parameters is refused by name. --optimizer
sgd: a step as large as the gradient, where a fresh AdamW's is as large as the rate."""

from __future__ import annotations

import pytest
import torch

from spade_cli.errors import DataError, UsageError
from spade_cli.train import optimizer_state
from spade_cli.train.config import TrainJob
from spade_cli.train.grpo import run

from .test_train import round_records, write


@pytest.fixture(scope="module")
def tok(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


def job(model, out, data, **kw) -> TrainJob:
    settings = dict(role="both", learning_rate=1e-2, per_device_batch_size=8, seed=1)
    return TrainJob(model=str(model), output_dir=str(out), inputs=[str(data)], **settings | kw)


def steps_taken(state: dict) -> int:
    return int(next(iter(state["state"].values()))["step"])


@pytest.mark.slow  # three real training runs on the tiny model
def test_carried_moments_resume_with_the_runs_own_learning_rate(tiny_model, tok, tmp_path):
    from safetensors.torch import load_file

    data = write(tmp_path / "round.jsonl", round_records(tok))
    first = run(job(tiny_model, tmp_path / "r1", data, optimizer_state="carry"))
    saved = torch.load(tmp_path / "r1" / optimizer_state.FILE, weights_only=True)
    assert steps_taken(saved) == first["steps"] > 0

    carried = run(
        job(tmp_path / "r1", tmp_path / "r2", data, optimizer_state="carry", learning_rate=1e-3)
    )
    resumed = torch.load(tmp_path / "r2" / optimizer_state.FILE, weights_only=True)
    assert steps_taken(resumed) == first["steps"] + carried["steps"]
    assert {g["lr"] for g in resumed["param_groups"]} == {1e-3}

    fresh = run(job(tmp_path / "r1", tmp_path / "r2-fresh", data, learning_rate=1e-3))
    assert fresh["steps"] == carried["steps"]
    assert not (tmp_path / "r2-fresh" / optimizer_state.FILE).exists()
    a = load_file(tmp_path / "r2" / "model.safetensors")
    b = load_file(tmp_path / "r2-fresh" / "model.safetensors")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) > 0  # the moments changed the step


@pytest.mark.slow  # two real training runs on the tiny model
def test_whole_batch_takes_one_optimizer_step_over_the_run(tiny_model, tok, tmp_path):
    data = write(tmp_path / "round.jsonl", round_records(tok))
    batched = run(job(tiny_model, tmp_path / "batched", data))
    assert batched["steps"] > 1
    whole = run(
        job(tiny_model, tmp_path / "whole", data, whole_batch=True, optimizer_state="carry")
    )
    saved = torch.load(tmp_path / "whole" / optimizer_state.FILE, weights_only=True)
    assert whole["steps"] == steps_taken(saved) == 1


def test_a_state_for_other_parameters_is_refused_by_name(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    optimizer_state.save(opt, tmp_path)
    other = torch.optim.AdamW(torch.nn.Linear(4, 2).parameters())
    with pytest.raises(DataError, match=r"optimizer\.pt: .*shape \(2, 3\).*\(2, 4\)"):
        optimizer_state.load(other, tmp_path / optimizer_state.FILE)
    fewer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2, 3))])
    with pytest.raises(DataError, match="other parameters"):
        optimizer_state.load(fewer, tmp_path / optimizer_state.FILE)
    (tmp_path / "torn.pt").write_bytes(b"PK\x03")
    with pytest.raises(DataError, match=r"torn\.pt: not an optimizer state"):
        optimizer_state.load(opt, tmp_path / "torn.pt")


def test_carry_needs_full_fine_tuning_in_one_process(tiny_model, tmp_path):
    from spade_cli.train.grpo import check_config

    base = dict(model=str(tiny_model), output_dir=str(tmp_path / "out"), optimizer_state="carry")
    check_config(TrainJob(**base))
    with pytest.raises(UsageError, match="full fine-tuning"):
        check_config(TrainJob(**base, lora_r=4))
    with pytest.raises(UsageError, match="DeepSpeed or FSDP"):
        check_config(TrainJob(**base, accelerate_config="examples/accelerate/fsdp.yaml"))


@pytest.mark.slow  # two real training runs on the tiny model
def test_sgd_steps_with_the_gradient_where_a_fresh_adamw_steps_with_the_rate(
    tiny_model, tok, tmp_path
):
    """One step each, from the same model on the same batch: AdamW's first step moves the
    weights it changes by about the learning rate each; SGD's moves each by the rate times
    its share of a gradient clipped to norm 1, so at the same rate its largest change is a
    small fraction of AdamW's."""
    from safetensors.torch import load_file

    data = write(tmp_path / "round.jsonl", round_records(tok))
    one = dict(whole_batch=True, learning_rate=1e-3, epochs=1)
    run(job(tiny_model, tmp_path / "adamw", data, **one))
    run(job(tiny_model, tmp_path / "sgd", data, optimizer="sgd", **one))
    base = load_file(tiny_model / "model.safetensors")

    def moved(name):
        new = load_file(tmp_path / name / "model.safetensors")
        return torch.cat([(new[k] - base[k]).abs().flatten() for k in base])

    adamw, sgd = moved("adamw"), moved("sgd")
    changed = adamw[adamw > 0]
    assert float(changed.median()) == pytest.approx(1e-3, rel=0.2)
    assert 0 < float(sgd.max()) < 0.1 * float(adamw.max())


def test_sgd_takes_no_weight_decay_and_no_carried_state(tiny_model, tmp_path):
    from spade_cli.train.grpo import check_config

    base = dict(model=str(tiny_model), output_dir=str(tmp_path / "out"), optimizer="sgd")
    check_config(TrainJob(**base))
    with pytest.raises(UsageError, match="--optimizer sgd takes no --weight-decay"):
        check_config(TrainJob(**base, weight_decay=0.1))
    with pytest.raises(UsageError, match="carry resumes AdamW"):
        check_config(TrainJob(**base, optimizer_state="carry"))
