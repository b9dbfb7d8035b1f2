"""The verifiers (v1, `verifiers==0.4.0`) classes of an exported pool: a taskset whose tasks
are (environment, seed) pairs and an env whose `run()` plays each episode in spade's
sandbox, the environment playing the user (as verifiers' own TextArena env plays its game
engine). The exported package (`verifiers_env.py` writes it) subclasses these with its
own folder of environments.

A task's prompt is the episode's first observation; each assistant reply becomes the
action (spade's rule: thinking removed; for a tool-use environment a reply that is a JSON
tool call `{"name": ..., "arguments": {...}}` is that call), the environment's next
observation comes back as the user turn, and the episode ends when the environment says
so or at its max_turns. The reward `spade_return` is the episode's return as spade counts
it; `trace.info` gets the environment's id, seed, skill and how the episode stopped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import verifiers.v1 as vf

from ..envs.actions import action_text
from .spec import Episode, find_specs, load_spec, sandbox_config

SYSTEM_PROMPT = (
    "You act in a multi-turn text environment. Each user message is what the environment "
    "shows you; your whole reply is your next action, exactly in the form the environment "
    "asks for."
)
TOOLS_RULE = (
    " This environment takes tool calls: reply with exactly one JSON object "
    '{"name": <tool>, "arguments": {...}} per turn, using these tools: '
)


def reply_action(reply: str, tools: list | None) -> str:
    """The action of one assistant reply, by spade's rules (envs.actions)."""
    text = action_text(reply or "")
    if tools:
        try:
            call = json.loads(text.removeprefix("```json").removeprefix("```").removesuffix("```"))
        except ValueError:
            return text
        if isinstance(call, dict) and isinstance(call.get("name"), str):
            return json.dumps({"name": call["name"], "arguments": call.get("arguments") or {}})
    return text


class SpadePoolConfig(vf.TasksetConfig):
    seeds_per_env: int | None = None
    """How many of each environment's exported seeds become tasks (all by default)."""


class SpadeData(vf.TaskData):
    info: dict
    """The environment's folder (under the pool's envs/), its id and the episode's seed."""


class SpadeTask(vf.Task[SpadeData, vf.State, vf.TaskConfig]):
    pass


class SpadeEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class SpadePoolEnv(vf.Env[SpadeEnvConfig]):
    ENVS: ClassVar[Path]
    """The folder of exported environments (set by the exported package)."""

    async def run(self, task, agents):
        info = task.data.info
        spec = load_spec(self.ENVS / info["env"])
        episode = await asyncio.to_thread(Episode, spec, sandbox_config())
        try:
            first, _ = await asyncio.to_thread(episode.reset, info["seed"])
            async with agents.player.interaction(task) as interaction:
                # The first observation is the task's prompt: the model moves first.
                segment = await interaction.turn()
                while not segment.terminated:
                    action = reply_action(segment.last_reply, spec.tools)
                    obs, _reward, done = await asyncio.to_thread(episode.step, action)
                    if done:
                        break
                    segment = await interaction.turn(obs)
            trace = interaction.trace
            trace.record_reward("spade_return", episode.episode_return, 1.0)
            trace.info.update(
                {
                    "spade_id": spec.id,
                    "seed": info["seed"],
                    "stop": episode.stop,
                    "skill": spec.record.get("skill"),
                    "first_observation": first,
                }
            )
        finally:
            await asyncio.to_thread(episode.close)


class SpadePoolTaskset(vf.Taskset[SpadeTask, SpadePoolConfig]):
    ENVS: ClassVar[Path]

    def load(self) -> Iterator[SpadeTask]:
        for d in find_specs(self.ENVS):
            spec = load_spec(d)
            system = SYSTEM_PROMPT + (TOOLS_RULE + json.dumps(spec.tools) if spec.tools else "")
            for seed in spec.seeds[: self.config.seeds_per_env or None]:
                yield SpadeTask(
                    SpadeData(
                        name=f"{spec.name}#{seed}",
                        prompt=spec.observations[str(seed)],
                        system_prompt=system,
                        info={"env": str(d.relative_to(self.ENVS)), "id": spec.id, "seed": seed},
                    ),
                    self.config.task,
                )
