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

The contract holds in rollout as in validation: an observation that is not a str, a
reward that is not a finite number, a return outside [0, 1], terminated/truncated that
are not bools, an info that is not a dict (or a reset info whose hint/solution have the
wrong types), or a reply the sandbox rejects (protocol, bad_reset, bad_step, flood) end
the episode as `env_error` and set `contract_broken`: the candidate's record says so
and spade-regret scores it invalid.

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
from .returns import episode_returns
from .trajectory import Trajectory, tool_call_message

RETURN_EPS = 1e-6
# Sandbox failures that are the environment breaking the contract (not running out of
# a resource, which an agent's actions may cause).
CONTRACT_REASONS = frozenset({"protocol", "bad_reset", "bad_step", "flood"})


def reset_problem(obs: Any, info: Any) -> str | None:
    if not isinstance(obs, str):
        return f"reset() observation is a {type(obs).__name__}, not a str"
    if not isinstance(info, dict):
        return f"reset() info is a {type(info).__name__}, not a dict"
    if "hint" in info and not isinstance(info["hint"], str):
        return "info['hint'] is not a str"
    sol = info.get("solution")
    if sol is not None and not (isinstance(sol, list) and all(isinstance(a, str) for a in sol)):
        return "info['solution'] is not a list of str"
    return None


def step_problem(out: Any, ret: float, return_mode: str = "sum") -> str | None:
    """What is wrong with a step's reply, if anything. The range follows the return:
    summed rewards stay in [0, 1]; with the published `final` return each reward is in
    [-1, 1] (the last is the return; earlier ones shape progress)."""
    if not (isinstance(out, (list, tuple)) and len(out) == 5):
        return "step() did not return 5 values"
    obs, reward, terminated, truncated, info = out
    if not isinstance(obs, str):
        return f"step() observation is a {type(obs).__name__}, not a str"
    if (
        isinstance(reward, bool)
        or not isinstance(reward, (int, float))
        or not math.isfinite(reward)
    ):
        return f"step() reward {reward!r} is not a finite number"
    if return_mode == "final":
        if not -1 - RETURN_EPS <= reward <= 1 + RETURN_EPS:
            return f"the reward {reward:g} is outside [-1, 1]"
    elif not -RETURN_EPS <= ret + reward <= 1 + RETURN_EPS:
        return f"the return {ret + reward:g} is outside [0, 1]"
    if not isinstance(terminated, bool) or not isinstance(truncated, bool):
        return "terminated and truncated must be bools"
    if not isinstance(info, dict):
        return f"step() info is a {type(info).__name__}, not a dict"
    return None


class Episode:
    def action_format(self) -> str:
        """How a reply becomes actions (`envs.actions.reply_actions`): the job's choice."""
        return getattr(self.job, "action_format", "plain")

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
        self.hint_source = "none"
        self.solution: list = []
        self.system = ""
        self.tools: list[dict] | None = None
        self.t0: float | None = None
        self.deadline = math.inf
        self.generations = 0
        self.contract_broken: str | None = None
        self.final_obs: str | None = None  # the observation after the last step
        self.verified: bool | None = None  # replayed and reproduced (None: not replayed)
        self.mismatch: str | None = None
        self.filtered = True  # its worker ran under the seccomp filter

    # -- bookkeeping --------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.stop is not None

    @property
    def condition(self) -> str:
        return "hint" if self.hinted else "nohint"

    def sampling_seed(self, base: int) -> int:
        """The model's sampling seed for this episode's next generation, from the agent's
        `base` seed: one per (candidate, condition, episode, turn), so reruns with the same
        --seed sample the same. A driver with its own seed scheme overrides it."""
        from ..records import seed_for

        return seed_for(
            base,
            "rollout-sample",
            f"{self.job.id}/{self.condition}/{self.index}/{self.generations}",
        )

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
                if e.reason in CONTRACT_REASONS:
                    self.contract_broken = self.contract_broken or detail
                self.finish("env_error", detail)
        else:
            self.finish("env_error", f"{type(e).__name__}: {e}")

    def _broke_contract(self, what: str) -> None:
        self.contract_broken = self.contract_broken or what
        self.finish("env_error", f"contract: {what}")

    # -- transitions --------------------------------------------------------------

    def spawn(self, cfg) -> None:
        """Start the sandboxed worker holding this episode's environment."""
        from ..sandbox import EnvSession

        try:
            self.session = EnvSession(self.job.code, cfg)
            self.filtered = self.session.filtered
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
        problem = reset_problem(obs, info)
        if problem is not None:
            self._broke_contract(problem)
            return
        meta = self.session.metadata or {}
        self.max_turns = turn_limit(
            self.job.env.get("max_turns") or meta.get("max_turns"), self.job.turn_cap
        )
        self.tools = self.job.env.get("tools") or meta.get("tools") or None
        self.obs = obs
        self.hint, self.hint_source = self.job.hint_for(info)
        # The published contract has no solution list: its solution() text, where it
        # spells out commands, is what the replay agent plays.
        self.solution = list(info.get("solution") or []) or solution_actions(
            info.get("solution_text")
        )
        name = self.job.env.get("name") or meta.get("name") or "environment"
        self.system = prompt.system(name, self.max_turns, bool(self.tools), self.action_format())
        first = self.obs + (prompt.hint_text(self.hint) if self.hinted and self.hint else "")
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": first}]
        self.traj = Trajectory(fmt.prompt_ids(messages, self.tools))

    def check_time(self) -> bool:
        if time.monotonic() > self.deadline:
            self.finish("timeout", f"episode wall time over {self.job.timeout:g}s")
            return False
        return True

    def check_room(self, budget: int) -> bool:
        if self.traj.length >= budget:
            self.finish(
                "context", f"{self.traj.length} tokens reach the context budget of {budget}"
            )
            return False
        return True

    def advance(self, gen, fmt, parse_tool_calls, max_context: int) -> None:
        """Apply one generation: record its tokens, step the environment with its
        action(s), and append the env tokens the next turn starts from."""
        self.generations += 1
        self.traj.add_model(list(gen.completion_ids), gen.logprobs)
        if gen.finish_reason == "context":
            self.finish(
                "context", f"the prompt ({self.traj.length} tokens) fills the model's context"
            )
            return
        fmt_name = self.action_format()
        calls, actions = reply_actions(gen.text, self.tools, parse_tool_calls, fmt_name)
        observations = []
        for action in actions:
            if not self.check_time():
                break
            observation = self.obs
            try:
                out = self.session.step(action)
            except Exception as e:
                self.turns.append({"observation": observation, "action": action, "reward": 0.0})
                self._env_failed(e)
                break
            problem = step_problem(out, self.ret, self.job.return_mode)
            if problem is not None:
                self.turns.append({"observation": observation, "action": action, "reward": 0.0})
                self._broke_contract(problem)
                break
            obs, reward, terminated, truncated, _info = out
            reward = float(reward)
            self.obs = self.final_obs = obs
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
            messages = [
                {"role": "tool", "name": c["name"], "tool_call_id": f"call_{i}", "content": o}
                for i, (c, o) in enumerate(zip(calls, observations, strict=False))
            ]
        else:
            assistant = {"role": "assistant", "content": actions[0] or "..."}
            messages = [{"role": "user", "content": observations[0]}]
        ids = gen.completion_ids
        ended = gen.finish_reason == "stop" and ids and ids[-1] in getattr(fmt, "special_ids", ())
        env = fmt.env_ids(self.system, self.tools, assistant, messages, ids[-1] if ended else None)
        if self.traj.length + len(env) >= max_context:
            self.finish(
                "context",
                f"{self.traj.length + len(env)} tokens would reach the "
                f"context budget of {max_context}",
            )
            return
        self.traj.add_env(env)

    def replay(self, env) -> bool:
        """Play this episode's action log again in `env`, a worker on the candidate's code
        as it first loaded (fresh, or its module executed again), on the same seed: the
        return counts only if the observations and rewards come out the same. An
        environment that reads the clock, counts calls across episodes or listens to a
        peer gives itself away here (it runs alone, later). Sets `verified`/`mismatch`;
        returns whether `env` may replay the next episode (not after any failure)."""
        from ..sandbox import EnvError

        try:
            obs, _info = env.reset(seed=self.seed)
            seen = [obs]
            rewards = []
            for turn in self.turns:
                out = env.step(turn["action"])
                problem = step_problem(out, sum(rewards), self.job.return_mode)
                if problem is not None:
                    raise ValueError(problem)
                seen.append(out[0])
                rewards.append(float(out[1]))
        except EnvError as e:
            self.replay_failed(e)
            return False
        except ValueError as e:
            self.verified, self.mismatch = False, f"on replay: {e}"
            return False
        want = (
            [t["observation"] for t in self.turns] + [self.final_obs] if self.turns else [self.obs]
        )
        if seen[: len(want)] != want:
            first = next(i for i, (a, b) in enumerate(zip(seen, want, strict=False)) if a != b)
            self.verified, self.mismatch = False, f"on replay, observation {first} differs"
        elif rewards != [t["reward"] for t in self.turns]:
            self.verified, self.mismatch = False, "on replay, the rewards differ"
        else:
            self.verified = True
        return True

    def replay_failed(self, e: Any) -> None:
        """A replay's worker failed (an EnvError): the contract broken on replay counts
        against the candidate; out of time or memory, the episode is not verified either way."""
        if e.reason in CONTRACT_REASONS:
            self.verified, self.mismatch = False, f"on replay: {e.reason}: {e.detail}"

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    # -- the record --------------------------------------------------------------

    @property
    def value(self) -> float:
        """The episode's return as the run counts it (--return)."""
        return episode_returns(self.turns, self.stop, self.job.return_mode)["return"]

    def record(self) -> dict:
        traj = self.traj
        returns = episode_returns(self.turns, self.stop, self.job.return_mode)
        ep = {
            "seed": self.seed,
            "hint": self.hinted,
            "turns": self.turns,
            **returns,
            "success": returns["return"] >= 1.0 - 1e-6,
            "num_turns": len(self.turns),
            "stop": self.stop,
        }
        if self.hinted:
            ep["hint_source"] = self.hint_source
        if self.detail:
            ep["detail"] = self.detail
        if self.contract_broken:
            ep["contract_broken"] = True
        if self.verified is not None:
            ep["verified"] = self.verified
        if self.mismatch:
            ep["mismatch"] = self.mismatch
        if not self.filtered:
            ep["seccomp"] = False  # the user accepted workers without a filter here
        ep["prompt_ids"] = traj.prompt_ids if traj else []
        ep["completion_ids"] = traj.completion_ids if traj else []
        ep["env_mask"] = traj.env_mask if traj else []
        ep["logprobs"] = traj.logprobs if traj and traj.completion_ids else None
        return ep
