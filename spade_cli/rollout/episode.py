"""One episode: its sandboxed environment, its conversation, its token trajectory.

State machine (the runner drives it; every transition that touches the sandbox runs on a
worker thread, so many episodes step at once):

    new --spawn()--> spawned --begin()--> acting <--advance(generation)--+
                                            |                            |
                                            +-- stop --> done  <---------+

`spawn` starts the sandboxed worker and loads the module (the expensive part, so the
runner does it ahead of time, while the model generates for other episodes); `begin`
resets the environment with the episode's seed and renders the first prompt; `advance`
takes one model generation, turns it into action(s), steps the environment and appends
the env tokens of the next turn. Any EnvError ends the episode with stop "env_error" (or
"timeout" when the episode's wall time ran out) and a detail; nothing propagates.

Actions: `envs.actions.reply_actions` (thinking removed; every native tool call one
action, in order, several calls in one reply being several turns whose results go back
as consecutive tool messages; otherwise the text). The turn limit: `envs.actions.turn_limit`.
"""

from __future__ import annotations

import math
import time
from typing import Any

# The turn limit and the action parser are the contract's, shared with spade-eval and
# the gym wrapper (action_text and DEFAULT_MAX_TURNS are re-exported from here).
from ..envs.actions import DEFAULT_MAX_TURNS, action_text, reply_actions, turn_limit  # noqa: F401
from ..envs.contracts import solution_actions
from .trajectory import Trajectory, tool_call_message


class Episode:
    def __init__(self, job: Any, hinted: bool, index: int, seed: int):
        self.job = job  # the candidate's bookkeeping (runner.Job)
        self.hinted = hinted
        self.index = index
        self.seed = seed
        self.max_turns = 0  # known at begin(): the env's own, capped by --max-turns
        self.session = None
        self.spawn_error: Exception | None = None
        self.traj: Trajectory | None = None
        self.turns: list[dict] = []
        self.ret = 0.0
        self.stop: str | None = None
        self.detail: str | None = None
        self.obs = ""
        self.hint = ""
        self.solution: list = []
        self.system = ""
        self.tools: list[dict] | None = None
        self.t0: float | None = None
        self.deadline = math.inf
        self.generations = 0

    # -- bookkeeping --------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.stop is not None

    @property
    def condition(self) -> str:
        return "hint" if self.hinted else "nohint"

    def finish(self, stop: str, detail: str | None = None) -> None:
        if self.stop is None:
            self.stop, self.detail = stop, detail

    def _env_failed(self, e: Exception) -> None:
        from ..sandbox import EnvError

        if isinstance(e, EnvError):
            detail = f"{e.reason}: {e.detail}" if e.detail else e.reason
            if e.reason == "timeout" and "episode limit" in e.detail:
                self.finish("timeout", detail)
            else:
                self.finish("env_error", detail)
        else:
            self.finish("env_error", f"{type(e).__name__}: {e}")

    # -- transitions --------------------------------------------------------------

    def spawn(self, cfg) -> None:
        """Start the sandboxed worker holding this episode's environment."""
        from ..sandbox import EnvSession

        try:
            self.session = EnvSession(self.job.code, cfg)
        except Exception as e:  # EnvError ends this episode; anything else the run (begin)
            self.spawn_error = e

    def begin(self, fmt, prompt, timeout: float) -> None:
        """Reset the environment and render the first prompt."""
        if self.spawn_error is not None:
            from ..sandbox import EnvError

            if not isinstance(self.spawn_error, EnvError):
                raise self.spawn_error  # no sandbox here (ResourceError), or a bug
            self._env_failed(self.spawn_error)
            return
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        try:
            obs, info = self.session.reset(seed=self.seed)
        except Exception as e:  # EnvError, or a malformed reply
            self._env_failed(e)
            return
        info = info if isinstance(info, dict) else {}
        meta = self.session.metadata or {}
        self.max_turns = turn_limit(self.job.env.get("max_turns") or meta.get("max_turns"), self.job.turn_cap)
        self.tools = self.job.env.get("tools") or meta.get("tools") or None
        self.obs = obs if isinstance(obs, str) else str(obs)
        self.hint = str(info.get("hint", ""))
        # The published contract has no solution list: its solution() text, where it
        # spells out commands, is what the replay agent plays.
        self.solution = list(info.get("solution") or []) or solution_actions(info.get("solution_text"))
        name = self.job.env.get("name") or meta.get("name") or "environment"
        self.system = prompt.system(name, self.max_turns, bool(self.tools),
                                    getattr(self.job, "action_format", "plain"))
        first = self.obs + (prompt.hint_text(self.hint) if self.hinted else "")
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": first}]
        self.traj = Trajectory(fmt.prompt_ids(messages, self.tools))

    def check_time(self) -> bool:
        if time.monotonic() > self.deadline:
            self.finish("timeout", f"episode wall time over {self.job.timeout:g}s")
            return False
        return True

    def check_room(self, budget: int) -> bool:
        if self.traj.length >= budget:
            self.finish("context", f"{self.traj.length} tokens reach the context budget of {budget}")
            return False
        return True

    def advance(self, gen, fmt, parse_tool_calls, max_context: int) -> None:
        """Apply one generation: record its tokens, step the environment with its
        action(s), and append the env tokens the next turn starts from."""
        self.generations += 1
        self.traj.add_model(list(gen.completion_ids), gen.logprobs)
        if gen.finish_reason == "context":
            self.finish("context", f"the prompt ({self.traj.length} tokens) fills the model's context")
            return
        fmt_name = getattr(self.job, "action_format", "plain")
        calls, actions = reply_actions(gen.text, self.tools, parse_tool_calls, fmt_name)
        observations = []
        for action in actions:
            if not self.check_time():
                break
            observation = self.obs
            try:
                obs, reward, terminated, truncated, _info = self.session.step(action)
                reward = float(reward)
                if not math.isfinite(reward):
                    raise ValueError(f"step() returned reward {reward}")
            except Exception as e:
                self.turns.append({"observation": observation, "action": action, "reward": 0.0})
                self._env_failed(e)
                break
            self.obs = obs if isinstance(obs, str) else str(obs)
            self.ret += reward
            self.turns.append({"observation": observation, "action": action, "reward": reward})
            observations.append(self.obs)
            if terminated:
                self.finish("terminated")
            elif truncated:
                self.finish("truncated")
            elif len(self.turns) >= self.max_turns:
                self.finish("max_turns")
            if self.done:
                break
        if self.done:
            return
        if calls:
            assistant = tool_call_message(calls[: len(observations)])
            messages = [{"role": "tool", "name": c["name"], "tool_call_id": f"call_{i}", "content": o}
                        for i, (c, o) in enumerate(zip(calls, observations, strict=False))]
        else:
            assistant = {"role": "assistant", "content": actions[0] or "..."}
            messages = [{"role": "user", "content": observations[0]}]
        ids = gen.completion_ids
        ended = gen.finish_reason == "stop" and ids and ids[-1] in getattr(fmt, "special_ids", ())
        env = fmt.env_ids(self.system, self.tools, assistant, messages, ids[-1] if ended else None)
        if self.traj.length + len(env) >= max_context:
            self.finish("context", f"{self.traj.length + len(env)} tokens would reach the "
                        f"context budget of {max_context}")
            return
        self.traj.add_env(env)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    # -- the record --------------------------------------------------------------

    def record(self) -> dict:
        traj = self.traj
        ep = {
            "seed": self.seed,
            "hint": self.hinted,
            "turns": self.turns,
            "return": self.ret,
            "success": self.ret >= 1.0 - 1e-6,
            "num_turns": len(self.turns),
            "stop": self.stop,
        }
        if self.detail:
            ep["detail"] = self.detail
        ep["prompt_ids"] = traj.prompt_ids if traj else []
        ep["completion_ids"] = traj.completion_ids if traj else []
        ep["env_mask"] = traj.env_mask if traj else []
        ep["logprobs"] = traj.logprobs if traj and traj.completion_ids else None
        return ep
