"""A validated environment, running in the sandbox, as an ordinary `gymnasium.Env`.

    from spade_cli.envs.gym_wrapper import SandboxedEnv
    with SandboxedEnv(rec["env"]["code"], SandboxConfig()) as env:   # or env.close()
        obs, info = env.reset(seed=7)          # info["hint"], info["solution"]
        obs, reward, terminated, truncated, info = env.step("up")

Observations and actions are `Text` spaces that admit any string up to a length cap (the
stock `Text` space only admits its sampling charset, alphanumerics by default, which no
prose observation fits); sampling still draws from that charset. The wrapper:
- seeds like any gymnasium env: `reset(seed=s)` passes `s` through unchanged (so episode
  seeds in records replay exactly), `reset()` draws the next seed from `self.np_random`;
- truncates at `metadata["max_turns"]` (like TimeLimit) unless the env ends sooner; an
  env that declares none truncates at `envs.actions.DEFAULT_MAX_TURNS`, as in spade-rollout
  and spade-eval (`enforce_max_turns=False` leaves ending to the env);
- returns rewards as float and raises `spade_cli.sandbox.EnvError` when the sandboxed env
  fails (the worker is then gone; close the wrapper).
A session belongs to the thread that created it: create and use the wrapper in one thread.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.spaces import Text

from .actions import turn_limit

MAX_OBS_CHARS = 1 << 20
MAX_ACTION_CHARS = 1 << 16


class AnyText(Text):
    """A Text space whose members are any str of allowed length, whatever its characters."""

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"


class SandboxedEnv(gym.Env):
    """One sandboxed worker holding the environment `code` (validated by spade-validate)."""

    def __init__(
        self,
        code: str,
        cfg=None,
        *,
        enforce_max_turns: bool = True,
        max_obs_chars: int = MAX_OBS_CHARS,
        max_action_chars: int = MAX_ACTION_CHARS,
        render_mode: str | None = None,
    ):
        from ..sandbox import EnvSession, SandboxConfig

        self.session = EnvSession(code, cfg or SandboxConfig())
        meta = dict(self.session.metadata or {})
        self.metadata = {**meta, "render_modes": []}
        self.max_turns = turn_limit(meta.get("max_turns"))
        self.tools = meta.get("tools")
        self.enforce_max_turns = enforce_max_turns
        self.render_mode = render_mode
        self.observation_space = AnyText(max_obs_chars, min_length=0)
        self.action_space = AnyText(max_action_chars, min_length=0)
        self._turns = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(0, 2**31 - 1))
        obs, info = self.session.reset(seed=seed, options=options)
        self._turns = 0
        return str(obs), dict(info)

    def step(self, action: str):
        obs, reward, terminated, truncated, info = self.session.step(str(action))
        self._turns += 1
        terminated, truncated = bool(terminated), bool(truncated)
        if self.enforce_max_turns and not terminated and self._turns >= self.max_turns:
            truncated = True
        return str(obs), float(reward), terminated, truncated, dict(info or {})

    def render(self):
        return None

    def close(self) -> None:
        session = getattr(self, "session", None)
        if session is not None:
            session.close()

    def __enter__(self) -> SandboxedEnv:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
