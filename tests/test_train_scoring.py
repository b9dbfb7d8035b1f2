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


def test_the_loss_forward_scores_only_the_models_own_tokens(tiny_model, trl_choice, monkeypatch):
    """In a multi-turn completion the environment's tokens (tool_mask 0) go unlabelled
    through the loss's forward: never projected, log-probability 0, as are the old ones
    there; the model's own tokens keep their log-probabilities."""
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from spade_cli.train.trainer import score_labelled_positions_only, scored_only_where_model_wrote

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model))
    add_fused_lm_head(model)
    score_labelled_positions_only()
    torch.manual_seed(1)
    ids = torch.randint(5, 200, (2, 30))
    labels = ids.clone()
    labels[:, :20] = -100  # the prompt; the completion is the last 10 tokens
    env = torch.ones(2, 10, dtype=torch.long)
    env[0, 2:7] = 0  # an observation inside row 0's completion
    env[1, 4:] = 0
    old = torch.full((2, 10), -3.0)
    inputs = {"tool_mask": env, "old_per_token_logps": old, "ref_per_token_logps": None}
    full, n_full = scored_rows(model, ids, labels, monkeypatch)
    with scored_only_where_model_wrote(model, inputs) as scored_inputs:
        ours, n_ours = scored_rows(model, ids, labels, monkeypatch)
    assert n_full == 2 * 10 and n_ours == int(env.sum()) == 9
    tail, full_tail = ours[:, -10:], full[:, -10:]
    assert torch.allclose(tail[env == 1], full_tail[env == 1], atol=1e-5)
    assert tail[env == 0].eq(0).all() and full_tail[env == 0].lt(0).all()
    assert scored_inputs["old_per_token_logps"].tolist() == (old * env).tolist()
    assert inputs["old_per_token_logps"] is old  # the caller's inputs are not rewritten
    after, n_after = scored_rows(model, ids, labels, monkeypatch)
    assert n_after == n_full  # the hook is gone with the context
    everything = {"tool_mask": torch.ones(2, 10, dtype=torch.long), "old_per_token_logps": old}
    with scored_only_where_model_wrote(model, everything) as same:
        assert same is everything
