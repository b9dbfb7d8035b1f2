"""How stored samples enter TRL's GRPOTrainer (trl 1.16) without any generation.

GRPOTrainer's data path, read from its source:
- the train dataset holds prompts; `RepeatSampler` yields each prompt `num_generations`
  (G) times in a row, and a generation batch (per-device batch x processes x
  steps_per_generation rows, a multiple of G) holds whole groups; process p receives
  rows [p*L, (p+1)*L) of the global generation batch;
- `_generate` calls `rollout_func(prompts, trainer)` with this process's L prompts and
  needs back `prompt_ids`, `completion_ids`, `logprobs`; every other key is an "extra
  field": `env_mask` becomes the tool mask (loss mask = completion mask x env_mask), the
  rest are merged into the rows and reach reward functions as keyword arguments;
- rewards are gathered from all processes and viewed as (-1, G): the group baseline.

So each dataset row is one group (its `prompt` is the group's index as a string), and
`StoredRollouts` answers row i of process p with member (p*L + i) mod G of that group.
A group smaller than G is padded with a copy of its first member whose env_mask is all
zeros (no token reaches the loss) and whose reward is None: TRL marks a row whose every
reward is None as unscorable, keeps it out of the group mean/std and zeroes its
advantage.

The stored logprobs travel as `logprobs` (TRL's `sampling_per_token_logps`). Without vLLM,
TRL uses them only for the off-policy sequence mask (`off_policy_mask_threshold`); the
"old" logprobs of the PPO ratio are recomputed by the trainer at the start of each batch,
which is exact when the checkpoint being trained is the one that sampled the round.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from .samples import Sample


class StoredRollouts:
    """`rollout_func` for GRPOTrainer that replays stored samples."""

    def __init__(self, groups: list[list[Sample]], group_size: int):
        self.groups = groups
        self.group_size = group_size
        self.served = 0  # rows handed to the trainer by this process, padding included
        self.padded = 0
        self.last_advantages: list[float] = []
        """Stored advantages of the rows of the latest call (NaN: TRL computes it)."""

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        rank = trainer.accelerator.process_index
        n = len(prompts)
        out: dict[str, list] = {
            "prompt_ids": [],
            "completion_ids": [],
            "logprobs": [],
            "env_mask": [],
            "reward": [],
        }
        has_logprobs = False
        advantages = []
        for i, prompt in enumerate(prompts):
            pos = rank * n + i
            member = pos % self.group_size
            if member > 0 and i > 0 and prompts[i - 1] != prompt:
                # Would mean TRL changed how it lays groups out over processes.
                raise RuntimeError(
                    f"group layout broken at row {i}: TRL sampler assumptions do not hold"
                )
            group = self.groups[int(prompt)]
            if member < len(group):
                s = group[member]
                mask, reward = s.env_mask, s.reward
                advantages.append(math.nan if s.advantage is None else s.advantage)
            else:
                s = group[0]
                mask, reward = [0] * len(s.completion_ids), None
                self.padded += 1
                advantages.append(0.0 if s.advantage is not None else math.nan)
            out["prompt_ids"].append(list(s.prompt_ids))
            out["completion_ids"].append(list(s.completion_ids))
            out["env_mask"].append(list(mask))
            out["reward"].append(reward)
            lp = s.logprobs
            has_logprobs = has_logprobs or bool(lp)
            out["logprobs"].append(
                [math.nan if v is None else v for v in lp]
                if lp
                else [math.nan] * len(s.completion_ids)
            )
        if not has_logprobs:
            out["logprobs"] = None  # nothing stored: TRL then skips everything that uses them
        self.served += n
        self.last_advantages = advantages
        return out


def stored_reward(
    prompts: list, completions: list, reward: list, **kwargs: Any
) -> list[float | None]:
    """The reward function TRL calls: the stored reward, passed through as an extra field."""
    return list(reward)


stored_reward.__name__ = "stored"  # metric keys: rewards/stored/mean, rewards/stored/std


class _DropPaddingWarning(logging.Filter):
    # TRL warns (with the whole row) whenever every reward function returned None for a
    # row; for our padding rows that is the intended signal, not a problem.
    def filter(self, record: logging.LogRecord) -> bool:
        return "All reward functions returned None" not in record.getMessage()


def quiet_padding_warning() -> None:
    logging.getLogger("trl.trainer.grpo_trainer").addFilter(_DropPaddingWarning())
