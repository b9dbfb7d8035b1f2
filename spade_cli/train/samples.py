"""Training samples from scored candidates: what spade-train feeds to GRPO.

A *sample* is one stored generation with its reward: prompt token ids, completion token
ids, an `env_mask` over the completion (1 = the model wrote this token, 0 = the
environment did) and, when the engine gave them, the sampling logprobs. A *group* is
the set of samples that share a prompt, so GRPO's baseline (the group mean) is fair:

- designer: reward `score.reward` (the designer reward of a valid environment; an
  invalid or duplicate design has `score.sample` false and no reward under
  `spade-regret --invalid drop`, and gives no sample, or carries the penalty under
  `--invalid penalty`). Its advantage is computed here, not by TRL, from a *pool* of
  designs: with the `skill-mean` baseline (as published) the designs of one
  skill in the input (a candidate without a skill pools by its group), advantage =
  reward - the pool's mean, no division by a std (a small pool's std blows rewards up);
  with `group`, the designs of one `candidate.group`, advantage = (reward - mean) /
  (sample std + 1e-4), TRL's z-score; `--designer-negatives zero` sets the negative ones
  to 0 (a design below the mean is then not pushed down). The `balance` scale then
  multiplies designer advantages by min(cap, agent samples / designer samples x
  interval) so the few designs weigh in against the many agent plays. Skill pools are
  cut into groups of at most the agent's group size (or --group-size) for batching; the
  trainer puts these advantages in place of TRL's;
- agent: the K no-hint episodes of one environment (the candidate), reward = the
  episode `return`. Hinted episodes are a measuring stick and are used only with
  `include_hinted` (as their own groups: their prompt differs by the hint).

Documented skips (counted in `BuildStats`, logged, never silent):
- groups with fewer than two samples (no baseline),
- groups whose rewards are all equal (zero advantage everywhere: GRPO learns nothing
  from them; this is DAPO's "dynamic sampling" filter),
- designs spade-regret dropped (`score.sample` false: invalid or duplicate),
- every episode of an environment that trains nobody (`refusal`): one rollout marked
  `contract_broken` or `nondeterministic`, or one whose score spade-regret did not accept
  as a measured, valid environment (`score.valid` false, or a `score.reason` other than
  "ok": duplicate, below_min_regret, no_episodes), counted per episode as
  `refused_<reason>`. An environment that pays nonsense, or pays differently on replay,
  would teach the agent exactly that. (A replayed environment whose memory entry got
  the fresh score is "ok" though not newly accepted; a record with no score at all,
  never seen by spade-regret, is trained on unless rollout marked it.) A design whose
  rollout was marked gives no designer sample either, whatever its score says,
- agent episodes that ended in `env_error` (the reward says nothing about the agent),
- agent episodes with no completion tokens (ended before the model generated anything),
- samples with no model token (an all-zero env_mask).
Missing or malformed token ids are errors naming FILE:LINE, not skips. Only `design`
and `rollouts` give samples: a candidate's `hint` (spade-hint's generation) never does.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..errors import DataError, UsageError
from ..recordio import RecordReader
from ..regret.scoring import ROLLOUT_REFUSALS

ROLES = ("designer", "agent", "both")
TURN_LIMIT_STOPS = ("truncated", "max_turns")  # episodes the compact filter leaves out


class NothingToTrain(DataError):
    """Every group was skipped (flat rewards, singletons...): there is no learning signal."""

    def __init__(self, message: str, stats: BuildStats):
        super().__init__(message)
        self.stats = stats


@dataclass
class Sample:
    role: str  # "designer" | "agent"
    group: str
    source: str  # candidate id (+ episode position), for error messages and logs
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None] | None
    reward: float
    skill: str | None = None
    advantage: float | None = None
    """Set for designer samples (see the module docstring); None: TRL's group z-score."""
    stop: str | None = None
    """An agent episode's stop reason (the compact filter reads it)."""
    valid: bool = True
    """False for a design trained on at the invalid penalty (regret's --invalid penalty)."""


@dataclass
class BuildStats:
    candidates: int = 0
    samples: int = 0
    groups: dict[str, int] = field(default_factory=lambda: {"designer": 0, "agent": 0})
    skipped: Counter = field(default_factory=Counter)
    truncated_prompts: int = 0
    truncated_completions: int = 0
    compact_filtered: int = 0
    designer_scale: float = 1.0

    def refused(self) -> dict[str, int]:
        """Episodes (and designs) skipped because their environment trains no one."""
        return {
            k.removeprefix("refused_"): v
            for k, v in self.skipped.items()
            if k.startswith("refused_")
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "samples": self.samples,
            "groups": dict(self.groups),
            "skipped": dict(self.skipped),
            "truncated_prompts": self.truncated_prompts,
            "truncated_completions": self.truncated_completions,
            "compact_filtered": self.compact_filtered,
            "designer_scale": self.designer_scale,
        }


def _ids(value: Any, what: str, reader: RecordReader, allow_empty: bool = False) -> list[int]:
    if value is None:
        raise reader.error(f"{what} is missing (records need token ids to train on)")
    if not isinstance(value, list) or not all(type(t) is int and t >= 0 for t in value):
        raise reader.error(f"{what} must be a list of non-negative integers")
    if not value and not allow_empty:
        raise reader.error(f"{what} is empty")
    return value


def _logprobs(value: Any, n: int, mask: list[int], what: str, reader: RecordReader) -> list | None:
    """Stored logprobs aligned to the completion. Engines may store one per completion
    token (env tokens null/0) or one per model token only; both are accepted."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        v is None or isinstance(v, (int, float)) for v in value
    ):
        raise reader.error(f"{what} must be a list of numbers")
    if len(value) == n:
        return [None if v is None else float(v) for v in value]
    if len(value) == sum(mask):
        it = iter(value)
        return [(None if (v := next(it)) is None else float(v)) if m else None for m in mask]
    raise reader.error(
        f"{what} has {len(value)} entries; expected one per completion token ({n}) "
        f"or per model token ({sum(mask)})"
    )


def _reward(value: Any, what: str, reader: RecordReader) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise reader.error(f"{what} must be a finite number, got {value!r}")
    return float(value)


def refusal(rec: dict) -> str | None:
    """Why this candidate's environment may train no one (module docstring), or None."""
    ro = rec.get("rollouts")
    if isinstance(ro, dict):
        for mark in ROLLOUT_REFUSALS:
            if ro.get(mark):
                return mark
    score = rec.get("score")
    if not isinstance(score, dict):
        return None
    if score.get("valid") is not True:
        return str(score.get("reason") or "invalid")
    if score.get("reason", "ok") != "ok":
        return str(score["reason"])
    return None


def _designer_sample(rec: dict, reader: RecordReader, stats: BuildStats) -> Sample | None:
    design = rec.get("design")
    if not isinstance(design, dict):
        stats.skipped["no_design"] += (
            1  # replayed / library candidates were not designed this round
        )
        return None
    score = rec.get("score")
    if not isinstance(score, dict) or "reward" not in score:
        raise reader.error("candidate has no score.reward: run spade-regret before spade-train")
    if score.get("sample") is False:
        stats.skipped["dropped_design"] += 1  # invalid or duplicate, under --invalid drop
        return None
    why = refusal(rec)
    if why in ROLLOUT_REFUSALS and score.get("valid") is not False:
        stats.skipped[f"refused_{why}"] += 1  # a score that missed rollout's mark
        return None
    if not rec.get("group"):
        raise reader.error(
            "candidate has no group: designer samples are grouped by the prompt they share"
        )
    prompt = _ids(design.get("prompt_ids"), "design.prompt_ids", reader)
    completion = _ids(design.get("completion_ids"), "design.completion_ids", reader)
    mask = [1] * len(completion)
    return Sample(
        role="designer",
        group=f"designer:{rec['group']}",
        source=str(rec.get("id")),
        prompt_ids=prompt,
        completion_ids=completion,
        env_mask=mask,
        logprobs=_logprobs(
            design.get("logprobs"), len(completion), mask, "design.logprobs", reader
        ),
        reward=_reward(score["reward"], "score.reward", reader),
        skill=rec.get("skill") or None,
        valid=score.get("valid") is not False,
    )


def _agent_samples(
    rec: dict, reader: RecordReader, stats: BuildStats, include_hinted: bool
) -> list[Sample]:
    rollouts = rec.get("rollouts")
    if not isinstance(rollouts, dict):
        stats.skipped["no_rollouts"] += 1  # invalid designs are never rolled out
        return []
    why = refusal(rec)
    out = []
    for cond in ("nohint", "hint") if include_hinted else ("nohint",):
        episodes = rollouts.get(cond) or []
        if not isinstance(episodes, list):
            raise reader.error(f"rollouts.{cond} must be a list of episodes")
        if why is not None:
            stats.skipped[f"refused_{why}"] += len(episodes)
            continue
        for j, ep in enumerate(episodes):
            what = f"rollouts.{cond}[{j}]"
            if not isinstance(ep, dict):
                raise reader.error(f"{what} must be an object")
            if ep.get("stop") == "env_error":
                stats.skipped["env_error_episode"] += 1
                continue
            if ep.get("completion_ids") == []:
                # The episode ended before the model generated anything (e.g. the prompt did
                # not fit the context): nothing the model did to reward or blame.
                stats.skipped["empty_episode"] += 1
                continue
            prompt = _ids(ep.get("prompt_ids"), f"{what}.prompt_ids", reader)
            completion = _ids(ep.get("completion_ids"), f"{what}.completion_ids", reader)
            mask = ep.get("env_mask")
            if mask is None:
                raise reader.error(f"{what}.env_mask is missing (multi-turn episodes need it)")
            if (
                not isinstance(mask, list)
                or len(mask) != len(completion)
                or any(m not in (0, 1) for m in mask)
            ):
                raise reader.error(f"{what}.env_mask must be 0/1 values, one per completion token")
            if not any(mask):
                stats.skipped["no_model_tokens"] += 1
                continue
            out.append(
                Sample(
                    role="agent",
                    group=f"agent:{rec.get('id')}:{cond}",
                    source=f"{rec.get('id')}:{cond}[{j}]",
                    prompt_ids=prompt,
                    completion_ids=completion,
                    env_mask=[int(m) for m in mask],
                    logprobs=_logprobs(
                        ep.get("logprobs"), len(completion), mask, f"{what}.logprobs", reader
                    ),
                    reward=_reward(ep.get("return"), f"{what}.return", reader),
                    stop=ep.get("stop"),
                )
            )
    return out


def _agent_plays(rec: dict) -> int:
    """The no-hint episodes of a record that give agent samples (for the balance scale of a
    designer-only step, which reads them without training on them)."""
    rollouts = rec.get("rollouts") if isinstance(rec.get("rollouts"), dict) else {}
    episodes = rollouts.get("nohint") if isinstance(rollouts.get("nohint"), list) else []
    return sum(
        1
        for ep in episodes
        if isinstance(ep, dict) and ep.get("stop") != "env_error" and ep.get("completion_ids")
    )


def _truncate(
    s: Sample, max_prompt: int | None, max_completion: int | None, stats: BuildStats
) -> None:
    # Prompts keep their end (the latest context); completions keep their start (what the
    # model did first, which the reward mostly reflects) and are masked past the limit.
    if max_prompt is not None and len(s.prompt_ids) > max_prompt:
        s.prompt_ids = s.prompt_ids[-max_prompt:]
        stats.truncated_prompts += 1
    if max_completion is not None and len(s.completion_ids) > max_completion:
        s.completion_ids = s.completion_ids[:max_completion]
        s.env_mask = s.env_mask[:max_completion]
        if s.logprobs is not None:
            s.logprobs = s.logprobs[:max_completion]
        stats.truncated_completions += 1


def read_groups(
    inputs: list[str],
    role: str = "both",
    include_hinted: bool = False,
    max_prompt_length: int | None = None,
    max_completion_length: int | None = None,
    designer_baseline: str = "skill-mean",
    designer_scale: str = "none",
    designer_scale_cap: float = 50.0,
    designer_interval: int = 1,
    group_size: int | None = None,
    shuffle_designer_rewards: int | None = None,
    compact_filter: bool = False,
    designer_negatives: str = "keep",
) -> tuple[list[list[Sample]], BuildStats]:
    """Read candidate records into groups of samples, in first-seen order.
    `shuffle_designer_rewards` (a seed) permutes the valid designs' rewards within each
    designer pool: the negative control, whose designer learns from no signal at all.
    Invalid designs (trained on under the invalid penalty) keep their penalty, so the
    control's designer, like SPADE's, still learns to write an environment at all. `compact_filter` zeroes
    the env_mask of agent episodes the turn limit cut off (TURN_LIMIT_STOPS): no gradient,
    but their return still counts in the group's baseline. `designer_negatives`: keep, or
    zero the designer's negative advantages (set_designer_advantages)."""
    if role not in ROLES:
        raise UsageError(f"--role must be one of {', '.join(ROLES)}, got {role!r}")
    reader = RecordReader(inputs, kind="candidate")
    stats = BuildStats()
    groups: dict[str, list[Sample]] = {}
    plays = 0
    for rec in reader:
        stats.candidates += 1
        if role == "designer":
            plays += _agent_plays(rec)
        found: list[Sample] = []
        if role in ("designer", "both"):
            s = _designer_sample(rec, reader, stats)
            if s is not None:
                found.append(s)
        if role in ("agent", "both"):
            found.extend(_agent_samples(rec, reader, stats, include_hinted))
        for s in found:
            _truncate(s, max_prompt_length, max_completion_length, stats)
            if not any(s.env_mask):
                stats.skipped["no_model_tokens"] += 1
                continue
            if compact_filter and s.role == "agent" and s.stop in TURN_LIMIT_STOPS:
                s.env_mask = [0] * len(s.env_mask)
                stats.compact_filtered += 1
            if s.role == "designer" and designer_baseline == "skill-mean" and s.skill:
                s.group = f"designer:skill:{s.skill}"
            groups.setdefault(s.group, []).append(s)
    if stats.candidates == 0:
        raise DataError("no candidate records in the input")
    kept = []
    agent_sizes = [len(m) for m in groups.values() if m[0].role == "agent" and len(m) > 1]
    chunk = group_size or (max(agent_sizes) if agent_sizes else None)
    # A designer-only step (the end of a window) trains on no agent sample: the agent's
    # plays of the window's first step, in its input, are what the designs weigh against.
    agent_n = sum(len(m) for m in groups.values() if m[0].role == "agent") or plays
    designer_n = sum(len(m) for m in groups.values() if m[0].role == "designer")
    scale = designer_scale_of(
        designer_scale, agent_n, designer_n, designer_scale_cap, designer_interval
    )
    stats.designer_scale = scale
    for members in groups.values():
        if members[0].role == "designer" and len(members) > 1:
            if shuffle_designer_rewards is not None:
                valid = [m for m in members if m.valid]
                rewards = [m.reward for m in valid]
                random.Random(f"{shuffle_designer_rewards}:{members[0].group}").shuffle(rewards)
                for m, r in zip(valid, rewards, strict=True):
                    m.reward = r
            if not set_designer_advantages(members, designer_baseline, scale, designer_negatives):
                stats.skipped["flat_reward_group"] += 1
                continue
            # A skill's pool can hold the whole round's designs: cut it to the agent's group
            # size for batching. A prompt's group stays whole, as it is TRL's group too.
            n = (chunk if members[0].group.startswith("designer:skill:") else None) or len(members)
            kept.extend(members[i : i + n] for i in range(0, len(members), n))
            continue
        if len(members) < 2:
            stats.skipped["singleton_group"] += 1
            continue
        rewards = [m.reward for m in members]
        if max(rewards) - min(rewards) <= 1e-9:
            stats.skipped["flat_reward_group"] += 1
            continue
        kept.append(members)
    for members in kept:
        stats.groups[members[0].role] += 1
        stats.samples += len(members)
    if not kept:
        raise NothingToTrain(
            f"nothing to train on: {stats.candidates} candidates gave no group with at least two "
            f"samples and a reward spread (skipped: {dict(stats.skipped) or 'none'}; role {role})",
            stats,
        )
    return kept, stats


def designer_scale_of(
    mode: str, agent_samples: int, designer_samples: int, cap: float, interval: int
) -> float:
    """The balance scale min(cap, agent / designer samples x interval); 1 without it or
    without agent samples to balance against."""
    if mode != "balance" or not agent_samples or not designer_samples:
        return 1.0
    return min(cap, agent_samples / designer_samples * interval)


def set_designer_advantages(
    pool: list[Sample], baseline: str, scale: float = 1.0, negatives: str = "keep"
) -> bool:
    """Write each designer sample's advantage (module docstring); False when all are 0.
    With `negatives` "zero" a sample below the baseline gets 0: it is neither pushed down
    nor up, and the designs above it are what the designer learns from."""
    rewards = [s.reward for s in pool]
    mean = sum(rewards) / len(rewards)
    if baseline == "group":
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (len(rewards) - 1))
        advs = [(r - mean) / (std + 1e-4) for r in rewards]
    elif baseline == "skill-mean":
        advs = [r - mean for r in rewards]
    else:
        raise UsageError(f"--designer-baseline must be skill-mean or group, got {baseline!r}")
    if negatives == "zero":
        advs = [max(0.0, a) for a in advs]
    elif negatives != "keep":
        raise UsageError(f"--designer-negatives must be keep or zero, got {negatives!r}")
    for s, a in zip(pool, advs, strict=True):
        s.advantage = a * scale
    return max(abs(a) for a in advs) > 1e-9


def mix_groups(
    groups: list[list[Sample]], designer_fraction: float | None, seed: int
) -> list[list[Sample]]:
    """Subsample the more plentiful role so designer groups make up `designer_fraction`
    of all groups. None keeps every group (the natural ratio of the round)."""
    if designer_fraction is None:
        return groups
    if not 0.0 < designer_fraction < 1.0:
        raise UsageError("--designer-fraction must lie strictly between 0 and 1")
    des = [g for g in groups if g[0].role == "designer"]
    agt = [g for g in groups if g[0].role == "agent"]
    if not des or not agt:
        raise UsageError(
            "--designer-fraction needs both designer and agent groups (use --role both)"
        )
    rng = random.Random(seed)
    # Keep all of the scarcer role; sample the other down to the requested share.
    want_des = round(len(agt) * designer_fraction / (1 - designer_fraction))
    if want_des <= len(des):
        des = rng.sample(des, max(1, want_des))
    else:
        agt = rng.sample(agt, max(1, round(len(des) * (1 - designer_fraction) / designer_fraction)))
    keep = {id(g) for g in des + agt}
    return [g for g in groups if id(g) in keep]
