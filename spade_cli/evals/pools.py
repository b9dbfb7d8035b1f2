"""The project's own pools: the example environment library and an environment memory file.

Both hold contract environments as code, which is untrusted (memory environments were
written by the designer), so every episode runs in the bubblewrap sandbox
(`spade_cli.sandbox.EnvSession`, one worker per episode). `-n` episodes are spread
round-robin over the pool's environments, each on its own seed derived from `--seed`; the
oracle plays the episode's own `info["solution"]` (the contract's feasibility proof), so
on a validated pool it scores 100%. The model sees spade-rollout's agent system prompt
(spade_cli/prompts/agent.toml) when that module is present, so evaluation and training
frame these environments the same way; no hint is ever shown.
"""

from __future__ import annotations

from ..envs.actions import turn_limit
from ..errors import DataError, UsageError
from ..records import seed_for
from .base import Task


class SandboxEnv:
    """An EnvSession started on first use, with the contract's interface."""

    threadsafe = True

    def __init__(self, code: str, cfg, prompt: str | None = None):
        from ..envs.contracts import action_format
        from ..sandbox import EnvSession

        self.session = EnvSession(code, cfg)
        self.metadata = dict(self.session.metadata or {})
        contract = "published" if self.metadata.get("contract") == "published" else "spade"
        self.metadata["action_format"] = action_format("auto", contract, code)
        try:  # the agent prompt spade-rollout uses, so eval and training see the same framing
            from ..rollout import AgentPrompt
        except ImportError:
            AgentPrompt = None
        if AgentPrompt is not None:
            self.metadata["system"] = AgentPrompt(prompt).system(
                self.metadata.get("name") or "environment",
                turn_limit(self.metadata.get("max_turns")),
                bool(self.metadata.get("tools")),
                self.metadata["action_format"],
            )

    def reset(self, seed=None, options=None):
        return self.session.reset(seed=seed, options=options)

    def step(self, action: str):
        return self.session.step(action)

    def close(self) -> None:
        self.session.close()


def _solution(env, obs, info):
    """The oracle's actions: info["solution"], or the commands a published environment's
    solution() text spells out."""
    from ..envs.contracts import solution_actions

    sol = (info or {}).get("solution")
    if isinstance(sol, list):
        return [str(a) for a in sol]
    return solution_actions((info or {}).get("solution_text")) or None


def _tasks(
    suite: str,
    entries: list[dict],
    n: int,
    seed: int,
    cfg,
    subset: list[str] | None,
    prompt: str | None = None,
) -> list[Task]:
    """`prompt`: the agent prompt the episodes are framed with (AgentPrompt's argument)."""
    from ..envs.contracts import resolve_contract

    if subset:
        names = {e["name"] for e in entries}
        bad = [s for s in subset if s not in names]
        if bad:
            raise UsageError(
                f"unknown {suite} environment {', '.join(bad)} (have: {', '.join(sorted(names))})"
            )
        entries = [e for e in entries if e["name"] in subset]
    if not entries:
        raise DataError(f"the {suite} pool is empty")
    out = []
    count: dict[str, int] = {}
    for i in range(n or len(entries)):  # n = 0: every environment once
        e = entries[i % len(entries)]
        idx = count.get(e["name"], 0)
        count[e["name"]] = idx + 1
        ep_seed = seed_for(seed, suite, f"{e['name']}/{idx}")

        def make_env(code=e["code"]):
            return SandboxEnv(code, cfg, prompt)

        # An environment of the published contract scores its final reward, as published.
        returns = "final" if resolve_contract(e["code"], "auto") == "published" else "sum"
        out.append(
            Task(
                suite,
                f"{e['name']}/{idx}",
                e.get("family") or e["name"],
                make_env,
                seed=ep_seed,
                oracle=_solution,
                parallel=True,
                meta={"env": e["name"], "episode_seed": ep_seed, "return": returns},
            )
        )
    return out


def sandbox_config(sandbox=None):
    """The limits pool environments run under (`SandboxConfig()` by default); bwrap is
    checked first unless the config is explicitly unsafe."""
    from ..sandbox import SandboxConfig, check_sandbox

    sandbox = sandbox or SandboxConfig()
    if not sandbox.unsafe:
        check_sandbox()
    return sandbox


def library_tasks(n: int, seed: int, subset: list[str] | None = None, sandbox=None) -> list[Task]:
    from ..envs.library import load_library

    return _tasks("library", load_library(), n, seed, sandbox_config(sandbox), subset)


def memory_tasks(
    path: str | None, n: int, seed: int, subset: list[str] | None = None, sandbox=None
) -> list[Task]:
    from ..memory import load_memory

    if not path:
        raise UsageError(
            "suite 'memory' needs --memory FILE (an environment memory written by spade-regret)"
        )
    entries = load_memory(path)
    if not entries:
        raise DataError(f"{path}: no environments in this memory file")
    entries = [{**e, "family": "memory"} for e in entries]
    return _tasks("memory", entries, n, seed, sandbox_config(sandbox), subset)


def file_tasks(path: str, n: int, seed: int, sandbox=None) -> list[Task]:
    """A suite from a file of candidate records (valid ones, or not yet validated: an
    import of spade-cat --from-dir) or env records, or from a directory of environment
    files (as spade-cat --from-dir reads it). Environments are named by their env name."""
    import os

    from ..recordio import RecordReader

    if os.path.isdir(path):
        from ..envs.pool_import import pool_from_dir

        recs = pool_from_dir(path)
    else:
        recs = list(RecordReader([path], kind=("candidate", "env")))
    entries = []
    for r in recs:
        env = r.get("env") if r.get("kind") == "candidate" else r
        valid = (r.get("validation") or {}).get("valid", True)
        if isinstance(env, dict) and isinstance(env.get("code"), str) and valid:
            entries.append(
                {
                    "name": str(env.get("name") or r.get("id")),
                    "code": env["code"],
                    "family": r.get("skill") or r.get("family") or "file",
                }
            )
    if not entries:
        raise DataError(f"{path}: no valid environments to evaluate on")
    return _tasks(
        os.path.basename(path.rstrip("/")) or "file",
        entries,
        n,
        seed,
        sandbox_config(sandbox),
        None,
    )
