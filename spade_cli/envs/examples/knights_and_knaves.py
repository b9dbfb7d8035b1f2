"""Knights and knaves: knights always tell the truth, knaves always lie; name every knight.

Family: single-answer reasoning
"""

import itertools
import random
import re

import gymnasium as gym

NAMES = ["Ada", "Bram", "Cleo", "Dev", "Esme", "Finn", "Gus", "Hana", "Ivo", "Juno"]


def _statement(rng, speaker, others):
    kind = rng.choice(["is", "isnot", "both", "either_knave", "same", "different"])
    a = rng.choice(others)
    b = rng.choice([o for o in others if o != a] or [a])
    if kind == "is":
        return f"{a} is a knight.", lambda w: w[a]
    if kind == "isnot":
        return f"{a} is a knave.", lambda w: not w[a]
    if kind == "both" and a != b:
        return f"{a} and {b} are both knights.", lambda w: w[a] and w[b]
    if kind == "either_knave" and a != b:
        return f"At least one of {a} and {b} is a knave.", lambda w: not (w[a] and w[b])
    if kind == "same" and a != b:
        return f"{a} and {b} are the same kind.", lambda w: w[a] == w[b]
    if a != b:
        return f"{a} and {b} are different kinds.", lambda w: w[a] != w[b]
    return f"{a} is a knave.", lambda w: not w[a]


class KnightsAndKnaves(gym.Env):
    metadata = {"name": "knights_and_knaves", "max_turns": 1}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        rng = random.Random(seed)
        while True:
            people = rng.sample(NAMES, rng.choice([3, 4]))
            said = []
            for p in people:
                others = [o for o in people if o != p]
                said.append((p, *_statement(rng, p, others)))
            worlds = []
            for values in itertools.product([True, False], repeat=len(people)):
                w = dict(zip(people, values, strict=False))
                if all(w[p] == claim(w) for p, _, claim in said):
                    worlds.append(w)
            # Exactly one consistent world with at least one knight and one knave.
            if len(worlds) == 1 and 0 < sum(worlds[0].values()) < len(people):
                break
        world = worlds[0]
        self._people = people
        self._knights = {p for p in people if world[p]}
        self._done = False
        lines = [f'{p} says: "{text}"' for p, text, _ in said]
        obs = (
            f"On an island every inhabitant is a knight (always tells the truth) or a knave "
            f"(always lies). You meet {', '.join(people)}.\n" + "\n".join(lines)
            + "\nWho are the knights? Answer with their names separated by commas, nothing else."
        )
        knave = rng.choice([p for p in people if not world[p]])
        hint = f"{knave} is a knave, so the opposite of what {knave} says is true."
        solution = ", ".join(p for p in people if world[p])
        return obs, {"hint": hint, "solution": [solution]}

    def step(self, action):
        if self._done:
            return "The episode is over.", 0.0, True, False, {}
        self._done = True
        words = {w.lower() for w in re.findall(r"[A-Za-z]+", str(action))}
        named = {p for p in self._people if p.lower() in words}
        if named == self._knights:
            return "Correct.", 1.0, True, False, {}
        return "Incorrect.", 0.0, True, False, {}
