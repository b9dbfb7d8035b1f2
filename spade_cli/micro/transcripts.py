"""Synthetic transcripts in the real prompts' formats: what the micro model is pretrained on.

Two kinds, each rendered through the very code the toolchain prompts with:

- **design**: the micro design template (`prompts/design_micro.md`, filled by
  `design.render` with a document excerpt, a target skill, a difficulty, and memory as
  the published policy renders it: sometimes the library's entries as exemplars,
  sometimes an avoid line) -> a one-line description and a subclass of a family at a
  uniformly random level. The family matches the skill most of the time, not always: a
  weak designer that already writes valid code but knows nothing about which level pays.
- **agent**: spade-rollout's micro agent prompt (`AgentPrompt("micro")`: system text, first
  observation, the hint appended as published in the hinted condition) -> the actions of
  a noisy expert, played against the real family classes. The expert acts only on what
  the agent can see (the hint, revealed facts, the last observation); each action is
  replaced by a uniformly random valid one with probability `1 - skill`, so the
  pretrained agent is weak but not random, and GRPO has something to sharpen.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass

from .site import spade_micro as world

SUMMARIES = {
    "corridor": "A dark corridor with a door on a hidden side.",
    "code": "A lock whose code is typed slot by slot, one slot maybe hidden.",
    "switch": "Stages of switches where a hidden rule says which one to press.",
}
SUFFIX = {"corridor": "Hall", "code": "Lock", "switch": "Board"}
# The class a design names: one per family keeps the designer's answer short and regular
# (its one decision is the level); memory tells designs apart by their code and scores.
DESIGN_NAME = {"corridor": "DarkHall", "code": "CodeLock", "switch": "SwitchBoard"}
CLASS_OF = {f: c.__name__ for f, c in world.FAMILIES.items()}


@dataclass
class Transcript:
    messages: list[dict]
    kind: str  # design | agent


def design_code(family: str, name: str, level: int) -> str:
    """The module is imported whole and the family named once, in the base class: a small
    model that writes `from spade_micro import A` and `class N(B)` names two families
    and raises NameError (docs/evidence.md), and one name cannot disagree with itself."""
    return f"import spade_micro\n\n\nclass {name}(spade_micro.{CLASS_OF[family]}):\n    level = {level}\n"


def design_answer(family: str, name: str, level: int) -> str:
    return f"{SUMMARIES[family]}\n```python\n{design_code(family, name, level)}```"


def env_class(family: str, level: int, name: str = "Episode"):
    """A design's class, built on the host from trusted code (pretraining and tests)."""
    return type(name, (world.FAMILIES[family],), {"level": level})


# --------------------------------------------------------------------------- designs


def _name_from(text: str, family: str, rng: random.Random) -> str:
    words = [w for w in re.findall(r"[A-Za-z]{4,12}", text)] or ["Plain"]
    return rng.choice(words).capitalize() + SUFFIX[family]


def design_transcript(
    rng: random.Random, template, documents: list[tuple[str, str]], skills, match: float = 0.85
) -> Transcript:
    from ..design import format_exemplars, render

    source, text = rng.choice(documents)
    skill = rng.choice(skills)
    own = world.SKILLS[skill.name].family
    family = own if rng.random() < match else rng.choice(list(world.FAMILIES))
    # Memory as the published policy shows it (spade-design --memory-policy published): up
    # to two exemplars of the skill, sometimes an avoid line.
    exemplars = [_memory_entry(rng, own, match)[0] for _ in range(rng.choice((0, 0, 1, 2)))]
    values = {
        "document": text,
        "source": source,
        "skill": skill.prompt_text(),
        "difficulty": rng.choice(("easy", "medium", "medium", "hard")),
        "exemplars": format_exemplars(exemplars),
        "avoid": _avoid_line(rng, own, match) if rng.random() < 0.5 else "",
    }
    messages = []
    if system := render(template.system, values).strip():
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": render(template.user, values).strip()})
    answer = design_answer(family, DESIGN_NAME[family], rng.choice(world.LEVELS))
    messages.append({"role": "assistant", "content": answer})
    return Transcript(messages, "design")


@functools.cache
def _library_entries() -> dict[str, dict]:
    """Memory's first entries by name (`pool.env_name`): what the published policy shows
    as exemplars and names in its avoid line, rendered by the code that renders memory."""
    from ..envs.library import load_library
    from ..memory import entries_from_library
    from . import LIBRARY

    return {e["name"]: e for e in entries_from_library(load_library(LIBRARY))}


def _memory_entry(rng: random.Random, family: str, match: float) -> tuple[dict, int]:
    """An entry memory may show for a skill, and its level: mostly of the skill's family,
    as memory labels an entry with the skill of the first design that played it, which
    may be another."""
    if rng.random() >= match:
        family = rng.choice(list(world.FAMILIES))
    level = rng.choice(world.LEVELS)
    return _library_entries()[f"{family}_l{level}"], level  # pool.env_name


def _avoid_line(rng: random.Random, family: str, match: float) -> str:
    """The published policy's avoid line about an entry the agent found too easy (mostly a
    low level) or too hard (mostly a high one). The designer's answer does not follow it:
    GRPO teaches what the line is worth."""
    from ..memory import avoid_line

    entry, level = _memory_entry(rng, family, match)
    easy = rng.random() < (max(world.LEVELS) - level) / (max(world.LEVELS) - 1)
    won = rng.uniform(0.91, 1.0) if easy else rng.uniform(0.0, 0.09)
    scored = {**entry, "scores": {"nohint": {"won_rate": won}}}
    return avoid_line((scored, "too easy" if easy else "too hard"))


# --------------------------------------------------------------------------- agent


class Expert:
    """The best play on what the agent sees: the end of the last observation, and for the
    first move the hint (corridor: the side; code: the hidden symbol; switch: the rule)."""

    def __init__(self, env, hint: str | None, rng: random.Random):
        self.env, self.rng = env, rng
        m = re.search(
            r"to your (left|right)|slot holds (\w)\.|Press the (first|last) one", hint or ""
        )
        self.known = next((g for g in m.groups() if g), None) if m else None
        if env.family == "switch" and not self.known:
            self.known = rng.choice(("first", "last"))  # a guess, until the first press tells

    def act(self, obs: str) -> str:
        e, last = self.env, obs.rstrip(".").split()[-1]
        if e.family == "corridor":
            if last == "enter":
                return "enter"
            if obs.startswith("You stand"):  # the first move: the hint's side, or a guess
                return self.known or self.rng.choice(("left", "right"))
            return last
        if e.family == "code":
            if last != "?":
                return last
            return self.known or self.rng.choice(e._alphabet)
        rule = re.search(r"Press the (first|last) one: \w+\.$", obs)
        rule = rule[1] if rule else self.known
        switches = self._switches(obs)
        return switches[0 if rule == "first" else -1]

    @staticmethod
    def _switches(obs: str) -> list[str]:
        return re.search(r"Stage \d+ of \d+: ([\w ]+)\.", obs)[1].split()

    def random_action(self, obs: str) -> str:
        e = self.env
        if e.family == "corridor":
            return self.rng.choice(("left", "right", "enter"))
        if e.family == "code":
            return self.rng.choice(e._alphabet)
        return self.rng.choice(self._switches(obs))


def play(
    family: str,
    level: int,
    seed: int,
    hinted: bool,
    skill: float,
    rng: random.Random,
    name: str = "Episode",
) -> tuple[list[tuple[str, str]], float, str, str]:
    """One noisy-expert episode: [(observation, action)], return, first observation, hint."""
    env = env_class(family, level, name)()
    obs, info = env.reset(seed=seed)
    expert = Expert(env, info["hint"] if hinted else None, rng)
    turns, ret = [], 0.0
    for _ in range(env.metadata["max_turns"]):
        action = expert.act(obs) if rng.random() < skill else expert.random_action(obs)
        nxt, reward, term, trunc, _ = env.step(action)
        turns.append((obs, action))
        obs, ret = nxt, reward
        if term or trunc:
            break
    return turns, ret, turns[0][0], info["hint"]


def agent_transcript(rng: random.Random, skill: float, hinted: bool) -> Transcript:
    from ..rollout.agents import AgentPrompt

    family = rng.choice(list(world.FAMILIES))
    level = rng.choice(world.LEVELS)
    name = _name_from("Amber Basalt Cedar Delta Ember Fjord Grove Harbor", family, rng)
    turns, _, first, hint = play(family, level, rng.randrange(1 << 30), hinted, skill, rng, name)
    prompt = AgentPrompt("micro")
    cls = env_class(family, level, name)
    messages = [
        {
            "role": "system",
            "content": prompt.system(
                cls.metadata["name"], cls.metadata["max_turns"], False, "plain"
            ),
        }
    ]
    for i, (obs, action) in enumerate(turns):
        content = obs + (prompt.hint_text(hint) if hinted and i == 0 else "")
        messages += [{"role": "user", "content": content}, {"role": "assistant", "content": action}]
    return Transcript(messages, "agent")
