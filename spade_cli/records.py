"""Record kinds, ids, sharding and per-record randomness: the contract between stages.

Every record is one JSON object on one line with `kind`, `v` (schema version), a stable
`id` and `parents` (ids of the records it came from). There is one record per candidate
environment, enriched stage by stage; each stage adds its own top-level field and passes
through everything it does not handle, so invalid candidates flow on untouched.

kind "doc" (spade-sample-docs)
    text, chars, source {path, name, line?, row?, offset?, id?}, excerpt {start, end, total_chars}?,
    sample {seed, key, pool, n}   (the sampling key in [0, 1); `--merge` combines shards by it)
kind "candidate"
    origin      "design" | "replay" | "library" | "fixed" (a benchmark family as a fixed env)
    round       int
    group       id of the GRPO group (the G designs of one prompt)
    doc         {id, text, source, chars} the grounding document as shown to the designer
                (text: the excerpt in the prompt; chars: the full document's length),
                or null (--no-doc)
    design      {messages, text, prompt_ids, completion_ids, logprobs?, finish_reason,
                 engine, model, sampling, index, exemplars}       (spade-design)
                sampling {temperature, top_p, max_tokens, seed, stop}; exemplars: names
                of the memory environments shown in the prompt
    env         {code, name, summary, max_turns, tools?}          (spade-validate, on success;
                 replayed candidates carry it from memory)
    validation  {valid, reason, detail, seconds, seeds}            (spade-validate)
    rollouts    {agent, k, seeds, max_turns, nohint: [episode], hint: [episode],
                 summary: {nohint: summary, hint: summary}}       (spade-rollout)
        agent   {name: "model"|"replay", engine, model, sampling?, seed?}
        seeds   the K environment seeds; episode i of both conditions plays seeds[i]
        summary {n, mean_return, success_rate, mean_turns, stops: {stop: count}}
        episode {seed, hint, turns: [{observation, action, reward}], return, success,
                 num_turns, stop, detail?, prompt_ids, completion_ids, env_mask, logprobs?}
                turns[t].observation is what the agent acted on at turn t; completion_ids
                holds model tokens (env_mask 1) and env tokens (env_mask 0); logprobs is
                aligned with it (0.0 on env tokens) or null when the engine gave none
    replay      {env_id, priority, staleness, replays}   (origin "replay": spade-memory replay)
    score       {valid, reason, estimator, regret, reward, estimates {mean-gap, max-gap,
                 learnability}, nohint: stats, hint: stats, accepted,
                 duplicate_of?, duplicate? ("exact"|"near"), similarity?,
                 memory_id? (replayed/library env whose memory entry was refreshed)}
                                                                   (spade-regret)
        stats   {n, mean_return, max_return, min_return, success_rate}
        reason  "ok", the validation reason of an invalid design, "duplicate",
                "no_episodes", "below_min_regret"
kind "env"  (environment memory, spade-regret --memory; parents = [candidate id])
    name, summary, code, max_turns, tools?, doc_id, round, origin, code_hash,
    scores {estimator, regret, reward, learnability, estimates, nohint, hint},
    replays, last_round (the round it was last played: added or replayed)
kind "checkpoint" (spade-train)
    path, base_model, role, metrics_path, steps, samples,
    format ("full" | "merged" | "adapter" | "unchanged": --if-empty keep, with reason),
    groups {designer, agent}, group_size,
    left_out_groups, padded_rows, skipped {reason: count}, truncated {prompts, completions},
    processes, threads (CPU threads per process), replayed_designs (--design-replay: the
    valid designs it drew from), seconds,
    train_loss
kind "round" (spade-loop's stdout; one per round, also RUN/metrics.jsonl)
    run, round, model, designs, valid, valid_rate, reasons {reason: count}, regret_mean,
    designer_reward_mean, success_nohint, success_hint, return_nohint, return_hint,
    episodes, train_steps, train_loss_last, stage_seconds {stage: s}, dir
kind "eval" (spade-eval; one per held-out task)
    suite, task (stable id within the suite), category, seed, meta {...},
    agent {kind: "model"|"oracle", engine?, model?, sampling?},
    samples [{sample, seed, return, success, num_turns, stop, detail?, completion_tokens,
              seconds, turns: [{action, observation, reward}]}],   (stop: STOPS or "no_oracle")
    stats {k, successes, pass@1, pass@k, mean_return}
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from . import SCHEMA_VERSION
from .errors import UsageError

KINDS = ("doc", "candidate", "env", "checkpoint", "eval", "round")

# Validation reason codes, stable across versions (docs/commands/spade-validate.md#reason-codes).
REASONS = (
    "ok",
    "no_code",
    "syntax_error",
    "import_crash",
    "no_env_class",
    "bad_reset",
    "bad_step",
    "nondeterministic",
    "reward_out_of_range",
    "infeasible",
    "trivial",
    "hint_leak",
    "never_terminates",
    "single_shot",  # with --reject-single-shot: no observation depends on the actions
    "timeout",
    "memory",
    "crash",
    "limit",  # sandbox: processes, open files, file size, /tmp or /dev/shm exhausted
    "flood",  # sandbox: a reply or the environment's printing exceeded its cap
    "protocol",  # sandbox: the worker wrote something that is not a well-formed reply
    "duplicate",
    "off_skill",  # with --skill micro: the design is not of its target skill's family
    "judged_invalid",  # with --judge: the model under test found a fatal bug (envs/judge.py)
)

# Why an episode ended.
STOPS = ("terminated", "truncated", "max_turns", "context", "env_error", "timeout")


def stable_hash(*parts: Any, n: int = 12) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\x1f")
    return h.hexdigest()[:n]


def make_id(prefix: str, *parts: Any) -> str:
    """A stable id: the same inputs give the same id on every machine and rerun."""
    return f"{prefix}-{stable_hash(*parts)}"


def new_record(kind: str, rid: str, parents: list[str] | None = None, **fields: Any) -> dict:
    assert kind in KINDS, kind
    return {"kind": kind, "v": SCHEMA_VERSION, "id": rid, "parents": parents or [], **fields}


def rng_for(seed: int, stage: str, rid: str) -> random.Random:
    """Randomness of one record in one stage: reruns, shards and resumes agree."""
    return random.Random(int(stable_hash(seed, stage, rid, n=16), 16))


def seed_for(seed: int, stage: str, rid: str) -> int:
    """A 31-bit integer seed for libraries that want one (torch, vLLM, env.reset)."""
    return int(stable_hash(seed, stage, rid, n=8), 16) & 0x7FFFFFFF


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`i/n` with 0 <= i < n, or None for everything."""
    if text is None or text == "":
        return None
    try:
        i_s, n_s = text.split("/")
        i, n = int(i_s), int(n_s)
    except ValueError:
        raise UsageError(f"--shard must look like i/n (for example 0/4), got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise UsageError(f"--shard {text}: need 0 <= i < n")
    return i, n


def in_shard(rid: str, shard: tuple[int, int] | None) -> bool:
    """Records are split between shards by a hash of their id, not their position."""
    if shard is None:
        return True
    i, n = shard
    return int(stable_hash("shard", rid, n=8), 16) % n == i
