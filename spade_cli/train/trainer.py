"""The TRL subclass spade-train runs, and the callback that writes its metrics file.

`SpadeGRPOTrainer` is trl's `GRPOTrainer`: it counts the tokens through each step for
`perf/tokens_per_second`, swaps in the designer's stored advantages, checks once that the
stored logprobs match the model and, with `_spade_tis_cap` set (--tis), weights each
token's loss by truncated importance sampling against them. It reaches into
TRL's private API, so every item below is a thing to check on a TRL upgrade (all read
from trl 1.16.0, `trl/trainer/grpo_trainer.py`):

Overridden hooks (each calls TRL's own first or last):
  - `_prepare_inputs(generation_batch)`: its returned micro-batch must hold
    `prompt_mask` and `completion_mask` (the token count);
  - `_generate_and_score_completions(inputs)`: its output dict must hold
    `advantages`, `prompt_ids`, `completion_ids`, `prompt_mask`, `completion_mask`, and
    `sampling_per_token_logps` (when the samples carry logprobs) and `tool_mask` (when
    an environment mask is given);
  - `log(logs, start_time=None)`: Trainer's public hook with GRPOTrainer's signature;
  - `create_optimizer()`: Trainer's public hook, returning the optimizer it sets; with
    `_spade_optimizer_from` set (--optimizer-state carry) its state is resumed from there;
  - `_compute_loss(model, inputs)`: multiplies the per-token loss by
    `inputs["importance_sampling_ratio"]` only when `use_vllm` and
    `vllm_importance_sampling_correction` are both set (and the loss is not vespo), and
    reads neither flag for anything else: TIS sets both for the call alone.
    With --design-replay the override adds the replayed design's loss to what TRL
    returns, on training steps only. Its forward must be one `model(..., labels=...)`
    call over the whole micro-batch, with the completion as the labels' last
    `tool_mask.shape[1]` columns, and positions labelled -100 must come back with
    log-probability and entropy 0 (`scored_only_where_model_wrote`); it reads
    `old_per_token_logps` and `ref_per_token_logps` from `inputs`;
  - `old_per_token_logps` in that output when TRL computed them (else TIS computes them).

Private attributes and methods used:
  - `_get_per_token_logps_and_entropies(model, input_ids, attention_mask,
    logits_to_keep, batch_size=...)`, returning (logps, entropies, aux_loss);
  - `_logs["advantages"]` (a deque of the latest generation batch's advantages, which
    `_use_stored_advantages` rewrites) and `_logs["rewards"]["stored"]` (per reward
    function name; ours is `feeder.stored_reward`);
  - `_metrics["train"]` (a defaultdict(list) of what `log` averages);
  - `accelerator` (gather, reduce, is_main_process).
  - `trl.trainer.utils._use_triton`, the name `_fused_forward` reads to decide whether to
    score only the labelled positions (`score_labelled_positions_only`).
Our own attributes carry the prefix `_spade_` (set in grpo.build_trainer) so they cannot
collide with TRL's. How stored samples enter TRL's data path (`rollout_func`) is in
feeder.py, with its own list.
"""

from __future__ import annotations

import json
import math
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from ..logs import log
from . import optimizer_state

_RENAME = {
    "loss": "losses/loss",
    "policy_loss": "losses/policy",
    "kl": "losses/kl",
    "entropy": "policy/entropy",
    "grad_norm": "optim/grad_norm",
    "learning_rate": "optim/learning_rate",
    "reward": "rewards/mean",
    "reward_std": "rewards/std",
    "frac_reward_zero_std": "advantages/frac_zero_std",
    "num_tokens": "perf/model_tokens_seen",
    "step_time": "perf/step_time",
    "epoch": "train/epoch",
    "train_runtime": "perf/train_runtime",
    "train_samples_per_second": "perf/samples_per_second",
    "train_steps_per_second": "perf/steps_per_second",
    "train_loss": "losses/train_mean",
    "total_flos": "perf/total_flos",
}


def score_labelled_positions_only() -> None:
    """Make TRL's fused LM head score only the completion's positions on every device.

    TRL projects only the labelled positions (the completion, not the prompt or the pads)
    through the LM head where it runs its Triton kernels, and every position elsewhere,
    so that the tile shapes stay fixed for devices that recompile on a new shape. A CPU
    does not recompile: there the prompt and pad positions were most of the LM head's
    work, a third of a micro-model step. The log-probabilities are the same (TRL sets the
    unlabelled ones to 0 either way); the kernel module keeps its own `_use_triton`, so
    the CPU still folds the tiles in torch."""
    from trl.kernels.chunked_logprob import _use_triton
    from trl.trainer import utils as trl_utils

    if getattr(trl_utils._use_triton, "_spade", False):
        return

    def compact(device) -> bool:
        return device.type == "cpu" or _use_triton(device)

    compact._spade = True
    trl_utils._use_triton = compact


@contextmanager
def scored_only_where_model_wrote(model, inputs: dict):
    """The loss's forward with the environment's tokens unlabelled: TRL labels every
    completion token, so its fused LM head projects the observations of a multi-turn
    completion (nine in ten of a micro agent's completion tokens) only for the loss to
    mask them (`tool_mask`, our env_mask). Unlabelled, their log-probabilities are 0
    and are never computed; the old and reference log-probabilities there are set to 0
    too, so every masked ratio is exp(0) rather than exp(-logp), which could overflow to
    inf and make inf x 0 a NaN. Yields the inputs to use."""
    env = inputs.get("tool_mask")
    if env is None or bool(env.all()):
        yield inputs
        return
    inputs = dict(inputs)
    for key in ("old_per_token_logps", "ref_per_token_logps"):
        if inputs.get(key) is not None:
            inputs[key] = inputs[key] * env

    def unlabel(module, args, kwargs):
        labels = kwargs.get("labels")
        if labels is None or labels.shape[0] != env.shape[0] or labels.shape[1] < env.shape[1]:
            return None  # not the loss's forward over this batch: left as it is
        labels = labels.clone()
        labels[:, -env.shape[1] :][env == 0] = -100
        return args, {**kwargs, "labels": labels}

    handle = model.register_forward_pre_hook(unlabel, with_kwargs=True)
    try:
        yield inputs
    finally:
        handle.remove()


def namespaced(logs: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in logs.items():
        key = _RENAME.get(k, k if "/" in k else f"train/{k}")
        if key.startswith("clip_ratio"):
            key = "policy/" + key
        out[key] = v
    return out


class SpadeGRPOTrainer(GRPOTrainer):
    """GRPOTrainer plus token counting for perf/tokens_per_second, a check of the stored
    logprobs and, with `_spade_tis_cap`, truncated importance sampling against them (TRL
    applies its own correction only to generations of its vLLM path)."""

    _spade_tokens, _spade_total, _spade_t0 = 0, 0.0, 0.0
    _spade_checked, _spade_logp_warn = False, 0.5
    _spade_tis_cap: float | None = None

    _spade_optimizer_from = None  # optimizer.pt to resume AdamW from (optimizer_state.py)
    _spade_replay = None  # design_replay.DesignReplay under --design-replay

    def __init__(self, *args, **kwargs):
        score_labelled_positions_only()
        super().__init__(*args, **kwargs)

    def create_optimizer(self, *args, **kwargs):
        optimizer = super().create_optimizer(*args, **kwargs)
        if self._spade_optimizer_from is not None:
            optimizer_state.load(optimizer, self._spade_optimizer_from)
        return optimizer

    def _prepare_inputs(self, generation_batch):
        inputs = super()._prepare_inputs(generation_batch)
        if self.model.training:
            # Tokens through the policy forward/backward of this micro-step (prompt + completion,
            # environment tokens included: they are computed even though they carry no loss).
            self._spade_tokens += int(inputs["prompt_mask"].sum() + inputs["completion_mask"].sum())
        return inputs

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self._use_stored_advantages(output)
        if "sampling_per_token_logps" in output:
            policy = None
            if not self._spade_checked:
                self._spade_checked = True
                policy = self._check_sampling_logprobs(output)
            if self._spade_tis_cap is not None:
                self._set_tis_weights(output, policy)
        return output

    def _policy_logps(self, output):
        """This model's logprobs of the batch's completions, before any update."""
        old = output.get("old_per_token_logps")
        if old is not None:
            return old
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        att = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        with torch.no_grad():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model,
                ids,
                att,
                output["completion_ids"].size(1),
                batch_size=self.args.per_device_train_batch_size,
            )
        return logps

    def _set_tis_weights(self, output, policy=None):
        """Truncated importance sampling (the launchers' --use-tis): each token's loss is
        weighted by min(cap, pi / mu), pi this model, mu the stored generation logprob. A
        designer's samples were written by the window's first model and train its last;
        tokens without a stored logprob keep weight 1."""
        pi = self._policy_logps(output) if policy is None else policy
        mu = output["sampling_per_token_logps"]
        diff = torch.nan_to_num((pi - mu) * output["completion_mask"], nan=0.0)
        weight = torch.exp(diff.clamp(max=math.log(self._spade_tis_cap)))
        output["importance_sampling_ratio"] = weight
        # The logged mean is over the model's own tokens: environment tokens carry no loss
        # and a stored logprob of 0, so their weight says nothing about the policy's drift.
        mask = output["completion_mask"].bool() & ~torch.isnan(mu)
        if "tool_mask" in output:
            mask &= output["tool_mask"].bool()
        local = torch.stack([weight[mask].sum(), mask.sum().to(weight.dtype)])
        total, count = self.accelerator.reduce(local, reduction="sum").tolist()
        if count:
            self._metrics["train"]["sampling/tis_weight_mean"].append(total / count)

    def _compute_loss(self, model, inputs):
        loss = self._policy_loss(model, inputs)
        if self._spade_replay is not None and model.training:
            replay = self._spade_replay.loss(model)
            self._metrics["train"]["losses/design_replay"].append(float(replay.detach()))
            loss = loss + self._spade_replay.coef * replay
        return loss

    def _policy_loss(self, model, inputs):
        with scored_only_where_model_wrote(model, inputs) as inputs:
            if "importance_sampling_ratio" not in inputs or self.use_vllm:
                return super()._compute_loss(model, inputs)
            saved = self.use_vllm, self.vllm_importance_sampling_correction
            self.use_vllm, self.vllm_importance_sampling_correction = True, True
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self.use_vllm, self.vllm_importance_sampling_correction = saved

    def _use_stored_advantages(self, output):
        """Designer rows carry their own advantage (samples.py): it replaces TRL's group
        z-score in what reaches the loss and in the logged advantages."""
        stored = getattr(self, "_spade_rollouts", None)
        stored = stored.last_advantages if stored is not None else []
        adv = output["advantages"]
        if len(stored) == adv.shape[0]:
            mine = torch.tensor(stored, dtype=adv.dtype, device=adv.device)
            output["advantages"] = torch.where(torch.isnan(mine), adv, mine)
        # Every rank gathers, whatever its rows: a collective that one rank skips hangs
        # the others.
        everyone = self.accelerator.gather(output["advantages"]).tolist()
        logged = self._logs["advantages"]
        for _ in range(min(len(everyone), len(logged))):
            logged.pop()
        logged.extend(everyone)

    def _check_sampling_logprobs(self, output):
        """Once, on the first batch: do the stored logprobs match this model? If not, the
        samples came from another checkpoint and the ratio's "old" policy is wrong.
        Returns this model's logprobs."""
        logps = self._policy_logps(output)
        stored = output["sampling_per_token_logps"]
        mask = output["completion_mask"].bool() & ~torch.isnan(stored)
        if "tool_mask" in output:
            mask &= output["tool_mask"].bool()
        diff = (logps - stored).abs()[mask]
        local = torch.stack([diff.sum(), torch.tensor(float(diff.numel()), device=diff.device)])
        total, count = self.accelerator.reduce(local, reduction="sum").tolist()
        if count == 0:
            return logps
        mean = total / count
        self._metrics["train"]["sampling/logp_abs_diff"].append(mean)
        if mean > self._spade_logp_warn and self.accelerator.is_main_process:
            log.warning(
                "stored logprobs differ from --model's by %.3f nats per token on average: the samples "
                "were probably generated by another checkpoint or at another temperature "
                "(--temperature); GRPO's ratio then starts from the wrong policy",
                mean,
            )
        return logps

    def log(self, logs, start_time=None):
        now = time.perf_counter()
        local = torch.tensor(float(self._spade_tokens), device=self.accelerator.device)
        total = float(self.accelerator.reduce(local, reduction="sum").item())
        dt = now - self._spade_t0
        logs["perf/tokens"] = total
        logs["perf/tokens_per_second"] = total / dt if dt > 0 else None
        if "train_runtime" in logs:  # the final summary: whole-run throughput
            logs["perf/tokens"] = self._spade_total + total
            logs["perf/tokens_per_second"] = (self._spade_total + total) / max(
                logs["train_runtime"], 1e-9
            )
        self._spade_total += total
        self._spade_tokens = 0
        self._spade_t0 = now
        super().log(logs, start_time)


class MetricsFile(TrainerCallback):
    """Writes every log event as one JSON line with namespaced keys (main process only)."""

    def __init__(self, path: str, trainer: Any):
        self.path = path
        self.trainer = trainer

    def on_train_begin(self, args, state, control, **kwargs):
        self.trainer._spade_t0 = time.perf_counter()
        if state.is_world_process_zero:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            Path(self.path).write_text("")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row: dict[str, Any] = {"step": state.global_step}
        row.update(namespaced(logs))
        row.update(self._advantages())
        with open(self.path, "a") as fh:
            fh.write(json.dumps({k: _finite(v) for k, v in row.items()}) + "\n")
        if "losses/loss" in row:
            reward = row.get("rewards/mean")  # only on steps that start a new batch of samples
            log.info(
                "step %d/%d  loss %.4g  reward %s  grad_norm %.3g  %.0f tokens/s",
                state.global_step,
                state.max_steps,
                row["losses/loss"],
                "-" if reward is None else f"{reward:.3g}",
                row.get("optim/grad_norm") or 0,
                row.get("perf/tokens_per_second") or 0,
            )

    def _advantages(self) -> dict[str, float]:
        # The latest generation batch (all processes), padding rows left out.
        adv = list(self.trainer._logs["advantages"])
        rew = list(self.trainer._logs["rewards"].get("stored", []))
        if rew and len(rew) == len(adv):
            adv = [a for a, r in zip(adv, rew, strict=True) if not math.isnan(r)]
        if not adv:
            return {}
        mean = sum(adv) / len(adv)
        return {
            "advantages/mean": mean,
            "advantages/std": math.sqrt(sum((a - mean) ** 2 for a in adv) / len(adv)),
            "advantages/abs_mean": sum(abs(a) for a in adv) / len(adv),
            "advantages/max": max(adv),
            "advantages/min": min(adv),
        }


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v
