"""The agents that play evaluation tasks: the model (batched, multi-turn) and the oracle.

The model agent advances every episode in flight together: one batched generation per
turn across all of them (`engine.chat_ids` + `engine.generate`, each episode with its own
tools and sampling seed). The conversation follows the environment contract: the
environment's first observation is the user message; a reply becomes its actions through
`envs.actions.reply_actions`, the parser spade-rollout uses: tool calls in the model's
native format (`engine.parse_tool_calls`, outside <think>) go to `step` call by call as
JSON `{"name", "arguments"}` and each result comes back as a `tool` message; a reply
without tool calls goes to `step` as text (thinking removed) and the next observation is
the next user message.
The assistant message keeps the model's raw text, so the next prompt re-renders exactly
what it generated.

An episode ends when the environment terminates or truncates, at `max_turns`
generations (`envs.actions.turn_limit`: the environment's own, DEFAULT_MAX_TURNS when it
declares none, capped by --max-turns), when the prompt no longer fits the model's context ("context"), or when the
environment raises ("env_error"). Every episode gets a stop code from records.STOPS.

The oracle agent plays a task's privileged action list (`Task.oracle`); an item that is
itself a list is one model step with several tool calls (`env.begin_model_step()` is
called first, as for a generation with parallel calls).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from ..envs.actions import DEFAULT_MAX_TURNS, reply_actions, turn_limit
from ..records import seed_for
from .base import Task, clip01

OBS_CHARS = 2000  # observations kept in records are cut to this many characters

def _cut(text: str, n: int = OBS_CHARS) -> str:
    text = str(text)
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more chars]"


@dataclass
class _Episode:
    task: Task
    sample: int
    seed: int
    env: object = None
    messages: list = field(default_factory=list)
    tools: list | None = None
    turns: list = field(default_factory=list)
    ret: float = 0.0
    num_turns: int = 0
    max_turns: int = DEFAULT_MAX_TURNS
    stop: str | None = None
    detail: str | None = None
    completion_tokens: int = 0
    seconds: float = 0.0
    info: dict = field(default_factory=dict)

    def result(self) -> dict:
        out = {
            "sample": self.sample,
            "seed": self.seed,
            "return": clip01(self.ret),
            "success": clip01(self.ret) >= 1.0 - 1e-9,
            "num_turns": self.num_turns,
            "stop": self.stop or "terminated",
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4),
            "turns": self.turns,
        }
        if self.detail:
            out["detail"] = _cut(self.detail, 500)
        return out


def _close(ep: _Episode) -> None:
    if ep.env is not None and hasattr(ep.env, "close"):
        try:
            ep.env.close()
        except Exception:
            pass


def _apply(ep: _Episode, action: str, role: str) -> bool:
    """Step the environment with one action; True when the episode ended."""
    try:
        obs, reward, terminated, truncated, info = ep.env.step(action)
    except Exception as e:  # the environment failed: end this episode, keep the others
        ep.stop, ep.detail = "env_error", f"{type(e).__name__}: {e}"
        return True
    ep.ret += float(reward or 0.0)
    ep.turns.append({"action": _cut(action), "observation": _cut(obs), "reward": float(reward or 0.0)})
    info = info or {}
    if info.get("tools") is not None:
        ep.tools = info["tools"]
    if info.get("detail"):
        ep.detail = str(info["detail"])
    if terminated or truncated:
        ep.stop = "terminated" if terminated else "truncated"
        return True
    ep.messages.append({"role": role, "content": str(obs)})
    return False


def _start(ep: _Episode) -> bool:
    """Build and reset the environment; False when that failed (episode over)."""
    try:
        ep.env = ep.task.make_env()
        obs, info = ep.env.reset(seed=ep.task.seed)
        ep.info = dict(info or {})
    except Exception as e:
        ep.stop, ep.detail = "env_error", f"reset: {type(e).__name__}: {e}"
        return False
    meta = getattr(ep.env, "metadata", {}) or {}
    ep.tools = meta.get("tools") or None
    ep.max_turns = turn_limit(meta.get("max_turns"))
    if meta.get("system"):
        ep.messages.append({"role": "system", "content": meta["system"]})
    ep.messages.append({"role": "user", "content": str(obs)})
    return True


def _timed_start(ep: _Episode) -> bool:
    t0 = time.perf_counter()
    ok = _start(ep)
    ep.seconds += time.perf_counter() - t0
    return ok


def run_model(engine, tasks: list[Task], samples: int, sampling, seed: int,
              max_in_flight: int = 64, max_turns: int | None = None,
              on_task: Callable[[int, list[dict]], None] | None = None,
              workers: int = 8) -> list[list[dict]]:
    """Play every task `samples` times with the model. Returns, per task, its episodes.
    `on_task(index, episodes)` is called in task order as soon as a task and all tasks
    before it are done (so records can stream out in a deterministic order).
    Tasks marked `parallel` start in `workers` threads, which live until the run ends
    (a sandbox worker dies with the thread that started it)."""
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="eval-start") as pool:
        return _run_model(engine, tasks, samples, sampling, seed, max_in_flight, max_turns, on_task, pool)


def _run_model(engine, tasks, samples, sampling, seed, max_in_flight, max_turns, on_task,
               pool) -> list[list[dict]]:
    queue = deque(
        _Episode(t, i, seed_for(seed, "eval", f"{t.suite}/{t.task_id}/{i}"))
        for t in tasks for i in range(samples)
    )
    results: dict[tuple[int, int], dict] = {}
    index = {id(t): n for n, t in enumerate(tasks)}
    active: list[_Episode] = []
    limit = getattr(engine, "max_model_len", None)
    flushed = 0  # tasks [0, flushed) have been handed to on_task

    def finish(ep: _Episode) -> None:
        nonlocal flushed
        _close(ep)
        results[(index[id(ep.task)], ep.sample)] = ep.result()
        while flushed < len(tasks) and all((flushed, i) in results for i in range(samples)):
            if on_task:
                on_task(flushed, [results[(flushed, i)] for i in range(samples)])
            flushed += 1

    while queue or active:
        admitted = []
        while queue and len(active) + len(admitted) < max_in_flight:
            admitted.append(queue.popleft())
        started = {id(ep): pool.submit(_timed_start, ep) for ep in admitted if ep.task.parallel}
        for ep in admitted:
            ok = started[id(ep)].result() if id(ep) in started else _timed_start(ep)
            if max_turns:
                ep.max_turns = min(ep.max_turns, max_turns)
            (active.append if ok else finish)(ep)
        prompts, samplings, batch = [], [], []
        for ep in active:
            ids = engine.chat_ids(ep.messages, ep.tools)
            if limit and len(ids) + sampling.max_tokens > limit:
                ep.stop, ep.detail = "context", f"prompt of {len(ids)} tokens leaves no room in {limit}"
                continue
            prompts.append(ids)
            samplings.append(replace(sampling, seed=seed_for(ep.seed, "turn", str(ep.num_turns))))
            batch.append(ep)
        for ep in [e for e in active if e.stop]:
            active.remove(ep)
            finish(ep)
        if not batch:
            continue
        t_gen = time.perf_counter()
        gens = engine.generate(prompts, samplings)
        # Wall time of a batched generation, shared equally among the episodes in it.
        gen_share = (time.perf_counter() - t_gen) / len(batch)
        for ep, g in zip(batch, gens, strict=True):
            t0 = time.perf_counter()
            ep.num_turns += 1
            ep.completion_tokens += len(g.completion_ids)
            ep.messages.append({"role": "assistant", "content": g.text})
            fmt = (getattr(ep.env, "metadata", {}) or {}).get("action_format", "plain")
            calls, actions = reply_actions(g.text, ep.tools, engine.parse_tool_calls, fmt)
            if calls and hasattr(ep.env, "begin_model_step"):
                ep.env.begin_model_step()
            # Actions in order until one ends the episode (any() stops at the first True).
            ended = any(_apply(ep, action, "tool" if calls else "user") for action in actions)
            if not ended and g.finish_reason == "context":
                ep.stop, ended = "context", True
            if not ended and ep.num_turns >= ep.max_turns:
                ep.stop, ended = "max_turns", True
            ep.seconds += time.perf_counter() - t0 + gen_share
            if ended:
                active.remove(ep)
                finish(ep)
    return [[results[(n, i)] for i in range(samples)] for n in range(len(tasks))]


def run_oracle(tasks: list[Task], workers: int = 8) -> list[list[dict]]:
    """Play every task once with its oracle; tasks without one end with stop "no_oracle"
    (counted as failures, and listed by the caller). `parallel` tasks play in threads."""
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="eval-oracle") as pool:
        futures = {n: pool.submit(_oracle_episode, t) for n, t in enumerate(tasks) if t.parallel}
        return [[futures[n].result() if n in futures else _oracle_episode(t)] for n, t in enumerate(tasks)]


def _oracle_episode(t: Task) -> dict:
    ep = _Episode(t, 0, 0)
    t0 = time.perf_counter()
    if _start(ep):
        _play_oracle(ep)
    ep.seconds = time.perf_counter() - t0
    _close(ep)
    return ep.result()


def _play_oracle(ep: _Episode) -> None:
    t = ep.task
    try:
        actions = t.oracle(ep.env, ep.messages[-1]["content"], ep.info) if t.oracle else None
    except Exception as e:
        actions, ep.detail = None, f"oracle: {type(e).__name__}: {e}"
    if actions is None:
        ep.stop = "no_oracle"
        ep.detail = ep.detail or "the suite has no oracle for this task"
        return
    for a in actions:
        group = a if isinstance(a, list) else [a]
        if isinstance(a, list) and hasattr(ep.env, "begin_model_step"):
            ep.env.begin_model_step()
        ep.num_turns += 1
        for action in group:
            if _apply(ep, action, "tool" if isinstance(a, list) else "user"):
                return
    ep.stop, ep.detail = "max_turns", ep.detail or "oracle actions ran out before the episode ended"
