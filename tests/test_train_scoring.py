"""spade-train's LM head on CPU scores only the labelled (completion) positions, with the
log-probabilities TRL's own path computes over every position."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def trl_choice():
    """trl.trainer.utils with TRL's own `_use_triton` (an earlier trainer in this process
    replaced it), and whatever it held put back after the test."""
    from trl.kernels.chunked_logprob import _use_triton
    from trl.trainer import utils

    before = utils._use_triton
    utils._use_triton = _use_triton
    yield utils
    utils._use_triton = before


def scored_rows(model, ids, labels, monkeypatch) -> tuple[torch.Tensor, int]:
    """The fused head's log-probabilities, and how many positions it projected."""
    from trl.trainer import utils

    rows = []
    real = utils._ChunkedLogProbFunction.apply

    def apply(hidden, *args):
        rows.append(hidden.shape[0])
        return real(hidden, *args)

    monkeypatch.setattr(utils._ChunkedLogProbFunction, "apply", apply)
    with torch.no_grad():
        out = model(input_ids=ids, labels=labels, fused_lm_head=True)
    monkeypatch.undo()
    return out.log_probs, rows[0]


def test_completion_positions_only_with_the_same_logprobs(tiny_model, trl_choice, monkeypatch):
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from spade_cli.train.trainer import score_labelled_positions_only

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    add_fused_lm_head(model)
    torch.manual_seed(0)
    ids = torch.randint(5, 200, (3, 40))
    labels = ids.clone()
    labels[:, :30] = -100  # the prompt
    labels[0, 36:] = -100  # one row's pads
    every, n_every = scored_rows(model, ids, labels, monkeypatch)
    score_labelled_positions_only()
    score_labelled_positions_only()  # idempotent: patched once
    assert getattr(trl_choice._use_triton, "_spade", False)
    compact, n_compact = scored_rows(model, ids, labels, monkeypatch)
    assert n_every == 3 * 39 and n_compact == 10 + 10 + 6  # labels shift by one
    assert torch.allclose(compact, every, atol=1e-5)
    assert (compact[:, :29] == 0).all() and compact[0, 35:].eq(0).all()
    assert compact[1, 29:].lt(0).all()
    # The kernels still fold their tiles in torch on a CPU.
    from trl.kernels.chunked_logprob import _use_triton

    assert not _use_triton(torch.device("cpu"))
