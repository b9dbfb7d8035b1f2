"""Evaluation tasks played through the rollout library's one agent loop.

`run_model` and `run_oracle` hand the tasks to `rollout.run_rollouts` with a job factory
(`EvalJob`): each task is one job of `samples` episodes (`TaskEpisode`, a rollout
`Episode` over the task's in-process or sandboxed environment object, no hint), played
by `rollout.ModelAgent` (batched generation across every episode in flight) or
`rollout.ReplayAgent` (the task's oracle). So prompts, the reply parser
(`envs.actions.reply_actions`), the turn limit (`envs.actions.turn_limit`: step calls,
capped by --max-turns) and the stop codes are spade-rollout's.

What an evaluation episode adds to a rollout episode:
- the environment is `task.make_env()`, reset with the task's seed; its system prompt is
  `metadata["system"]` when the suite gives one (none otherwise: the suite's own framing);
- a generation with tool calls is announced with `env.begin_model_step()` (BFCL counts
  model steps per user turn);
- `info["tools"]` from `step` replaces the tool list (BFCL miss_func): the next prompt is
  then re-rendered from the conversation's messages under the new tools, since a token
  prompt extended turn by turn would keep showing the old list;
- environments marked `threadsafe = False` (textarena: process-global randomness; BFCL:
  its executor keeps instances in module globals) are called under one shared lock, as
  is `make_env` of a task not marked `parallel`; the loop steps episodes on a thread pool;
- the sampling seed of generation t of sample i is `seed_for(seed_for(--seed, "eval",
  "suite/task/i"), "turn", t)`;
- the oracle plays `task.oracle(env, observation, info)`: one item per generation, a list
  item being one reply with several tool calls; when the items run out before the
  episode ends it stops with "max_turns" ("oracle actions ran out...");
- the record: returns clipped to [0, 1], observations and actions cut to OBS_CHARS.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from functools import partial

from ..envs.actions import reply_actions, turn_limit
from ..records import seed_for
from ..rollout.episode import Episode
from ..rollout.trajectory import Trajectory
from .base import Task, clip01

OBS_CHARS = 2000  # observations kept in records are cut to this many characters

# In-process environments that are not thread-safe take turns on this lock.
_SERIAL = threading.Lock()


def _cut(text: str, n: int = OBS_CHARS) -> str:
    text = str(text)
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more chars]"


class TaskEnv:
    """A task's environment as an episode's session: serialised when it is not
    thread-safe, rewards read as floats (None is 0), each completed step kept for the
    record, and the info extensions (`tools`, `detail`) picked up."""

    def __init__(self, env):
        self.env = env
        self.lock = contextlib.nullcontext() if getattr(env, "threadsafe", True) else _SERIAL
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.steps: list[tuple[str, str, float]] = []  # (action, observation, reward)
        self.new_tools: list | None = None
        self.detail: str | None = None

    def reset(self, seed=None):
        with self.lock:
            return self.env.reset(seed=seed)

    def step(self, action: str):
        with self.lock:
            obs, reward, terminated, truncated, info = self.env.step(action)
        reward = float(reward or 0.0)
        obs = str(obs)
        info = info if isinstance(info, dict) else {}
        self.steps.append((action, obs, reward))
        if info.get("tools") is not None:
            self.new_tools = info["tools"]
        if info.get("detail"):
            self.detail = str(info["detail"])
        return obs, reward, terminated, truncated, info

    def begin_model_step(self) -> None:
        if hasattr(self.env, "begin_model_step"):
            with self.lock:
                self.env.begin_model_step()

    def close(self) -> None:
        if hasattr(self.env, "close"):
            try:
                with self.lock:
                    self.env.close()
            except Exception:
                pass


class TaskEpisode(Episode):
    """One sample of a task (see the module docstring for what differs from rollout)."""

    def __init__(self, job: EvalJob, index: int, seed: int):
        super().__init__(job, False, index, seed)
        self.env: TaskEnv | None = None
        self.messages: list[dict] = []
        self.completion_tokens = 0
        self.t_start = time.monotonic()
        self.t_end: float | None = None

    def sampling_seed(self, base: int) -> int:
        return seed_for(self.seed, "turn", str(self.generations))

    def finish(self, stop: str, detail: str | None = None) -> None:
        super().finish(stop, detail)
        self.t_end = self.t_end or time.monotonic()

    def spawn(self, cfg) -> None:
        task = self.job.task
        try:
            with contextlib.nullcontext() if task.parallel else _SERIAL:
                self.env = self.session = TaskEnv(task.make_env())
        except Exception as e:
            self.spawn_error = e

    def begin(self, fmt, prompt, timeout: float) -> None:
        # A sample's `seconds` run from here: its environment may have been built ahead.
        self.t_start = time.monotonic()
        if self.spawn_error is not None:
            e = self.spawn_error
            self.finish("env_error", f"reset: {type(e).__name__}: {e}")
            return
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        task = self.job.task
        try:
            obs, info = self.env.reset(seed=task.seed)
        except Exception as e:
            self.finish("env_error", f"reset: {type(e).__name__}: {e}")
            return
        info = dict(info) if isinstance(info, dict) else {}
        meta = self.env.metadata
        self.tools = meta.get("tools") or None
        self.max_turns = turn_limit(meta.get("max_turns"), self.job.turn_cap)
        self.obs = str(obs)
        self.system = str(meta.get("system") or "")
        self.messages = [{"role": "system", "content": self.system}] if self.system else []
        self.messages.append({"role": "user", "content": self.obs})
        self.traj = Trajectory(fmt.prompt_ids(self.messages, self.tools))
        if self.job.oracle:
            self._oracle(obs, info)

    def _oracle(self, obs, info) -> None:
        task, detail, actions = self.job.task, None, None
        try:
            if task.oracle:
                with self.env.lock:
                    actions = task.oracle(self.env.env, str(obs), info)
        except Exception as e:
            detail = f"oracle: {type(e).__name__}: {e}"
        if actions is None:
            self.finish("no_oracle", detail or "the suite has no oracle for this task")
        self.solution = list(actions or [])

    def check_room(self, budget: int) -> bool:
        if self.job.oracle and self.generations >= len(self.solution):
            self.finish(
                "max_turns", self.env.detail or "oracle actions ran out before the episode ended"
            )
            return False
        return super().check_room(budget)

    def action_format(self) -> str:
        # A pool environment of the published contract says so in its metadata.
        return (getattr(self.env, "metadata", None) or {}).get("action_format", "plain")

    def advance(self, gen, fmt, parse_tool_calls, max_context: int) -> None:
        self.completion_tokens += len(gen.completion_ids)
        calls, _ = reply_actions(gen.text, self.tools, parse_tool_calls, self.action_format())
        if calls and gen.finish_reason != "context":
            self.env.begin_model_step()
        first = len(self.env.steps)
        super().advance(gen, fmt, parse_tool_calls, max_context)
        if self.done:
            return
        # The conversation as messages, so the prompt can be rendered afresh.
        self.messages.append({"role": "assistant", "content": gen.text})
        role = "tool" if calls else "user"
        self.messages += [{"role": role, "content": obs} for _, obs, _ in self.env.steps[first:]]
        if self.env.new_tools is not None:
            self.tools, self.env.new_tools = self.env.new_tools or None, None
            # Eval records keep no token fields, so restarting the trajectory loses nothing.
            self.traj = Trajectory(fmt.prompt_ids(self.messages, self.tools))

    def result(self) -> dict:
        ret = clip01(self.ret)
        steps = self.env.steps if self.env is not None else []
        out = {
            "sample": self.index,
            "seed": self.seed,
            "return": ret,
            "success": ret >= 1.0 - 1e-9,
            "num_turns": len(self.turns),
            "stop": self.stop or "terminated",
            "completion_tokens": self.completion_tokens,
            "seconds": round((self.t_end or time.monotonic()) - self.t_start, 4),
            "turns": [
                {"action": _cut(a), "observation": _cut(o), "reward": r} for a, o, r in steps
            ],
        }
        detail = self.detail or (self.env.detail if self.env is not None else None)
        if detail:
            out["detail"] = _cut(detail, 500)
        return out


class EvalJob:
    """One task on its way through `run_rollouts`: `samples` episodes, no hint."""

    def __init__(
        self,
        task: Task,
        k: int,
        seed: int,
        max_turns: int | None,
        timeout: float,
        oracle: bool = False,
    ):
        self.task = task
        self.id = f"{task.suite}/{task.task_id}"
        self.turn_cap = max_turns
        self.timeout = timeout
        self.oracle = oracle
        self.active = True
        self.episodes = [
            TaskEpisode(self, i, 0 if oracle else seed_for(seed, "eval", f"{self.id}/{i}"))
            for i in range(k)
        ]
        self.left = len(self.episodes)
        self.replays: list = []  # verification futures: none, eval runs with verify=0
        self.to_replay: list = []
        # A suite's score is its rewards summed (clipped in the record), or for a pool
        # environment of the published contract, its final reward.
        self.return_mode = task.meta.get("return", "sum")

    def output(self, agent_info: dict, k: int) -> list[dict]:
        return [ep.result() for ep in self.episodes]


def _play(
    tasks: list[Task],
    agent,
    samples: int,
    seed: int,
    oracle: bool,
    max_turns: int | None,
    max_in_flight: int,
    workers: int,
    on_task,
) -> list[list[dict]]:
    from ..rollout import run_rollouts

    out = []
    # No wall-time limit per episode: an evaluation waits for its model. No replay
    # verification: the suites are held-out benchmarks, not designer code being scored.
    played = run_rollouts(
        tasks,
        agent,
        k=samples,
        seed=seed,
        max_turns=max_turns,
        episode_timeout=math.inf,
        batch_size=max_in_flight,
        workers=workers,
        job_factory=partial(EvalJob, oracle=oracle),
        verify=0.0,
    )
    for i, episodes in enumerate(played):
        if on_task:
            on_task(i, episodes)
        out.append(episodes)
    return out


def run_model(
    engine,
    tasks: list[Task],
    samples: int,
    sampling,
    seed: int,
    max_in_flight: int = 64,
    max_turns: int | None = None,
    on_task: Callable[[int, list[dict]], None] | None = None,
    workers: int = 8,
) -> list[list[dict]]:
    """Play every task `samples` times with the model. Returns, per task, its episodes.
    `on_task(index, episodes)` is called in task order as soon as a task and all tasks
    before it are done (so records can stream out in a deterministic order)."""
    from ..rollout import ModelAgent

    return _play(
        tasks,
        ModelAgent(engine, sampling, seed),
        samples,
        seed,
        False,
        max_turns,
        max_in_flight,
        workers,
        on_task,
    )


def run_oracle(
    tasks: list[Task],
    workers: int = 8,
    max_in_flight: int = 64,
    on_task: Callable[[int, list[dict]], None] | None = None,
) -> list[list[dict]]:
    """Play every task once with its oracle; tasks without one end with stop "no_oracle"
    (counted as failures, and listed by the caller)."""
    from ..rollout import ReplayAgent

    return _play(tasks, ReplayAgent(), 1, 0, True, None, max_in_flight, workers, on_task)
