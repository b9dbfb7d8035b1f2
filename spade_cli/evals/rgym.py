"""reasoning-gym: procedural reasoning tasks at fixed seeds, scored by each task's scorer.

Items come from `reasoning_gym.create_dataset(family, size, seed)` with a per-family seed
derived from `--seed`, so the same seed gives the same questions on every machine; `-n`
items are spread round-robin over the chosen families. The agent answers in one turn
with reasoning-gym's own default system prompt (answer inside `<answer>...</answer>`);
the answer is extracted with `reasoning_gym.utils.extract_answer` and scored by the
dataset's `score_answer` (many scorers give partial credit: that is the return; success
means a full score). The oracle answers with the item's reference answer.

Families without a reference answer (boxnet, graph_color, propositional_logic,
rubiks_cube, rush_hour: any valid solution is accepted) can be evaluated but have no
oracle; `composite` needs a configuration and is not offered.

`fixed_env_code(family)` writes a family as a contract-following environment module (for
the sandbox), and `fixed_pool_candidates` makes `candidate` records of those modules: the
fixed-environment baseline pool that `spade-loop` can train the agent on instead of (or
beside) designed environments.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import UsageError
from ..records import make_id, new_record, seed_for
from .base import Task, clip01, require

SUITE = "reasoning-gym"

# A spread of fast families (all generate 20 items in well under a second): arithmetic,
# strings, logic, graphs and small planning puzzles.
DEFAULT_FAMILIES = (
    "basic_arithmetic",
    "chain_sum",
    "gcd",
    "lcm",
    "fraction_simplification",
    "number_sorting",
    "letter_counting",
    "spell_backward",
    "word_sorting",
    "caesar_cipher",
    "family_relationships",
    "knights_knaves",
    "syllogism",
    "maze",
    "shortest_path",
    "mini_sudoku",
    "tower_of_hanoi",
    "number_sequence",
)
NO_REFERENCE = ("boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour")
EXCLUDED = ("composite",)


def available_families() -> list[str]:
    require("reasoning_gym", "reasoning-gym", SUITE)
    import reasoning_gym

    return sorted(n for n in reasoning_gym.factory.DATASETS if n not in EXCLUDED)


def system_prompt() -> str:
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return SYSTEM_PROMPTS["default"]


@lru_cache(maxsize=256)
def _dataset(family: str, seed: int, size: int):
    import reasoning_gym

    return reasoning_gym.create_dataset(family, size=size, seed=seed)


class ReasoningGymEnv:
    """One reasoning-gym item as a one-turn environment."""

    threadsafe = True

    def __init__(self, family: str, dataset, index: int):
        self.family, self.dataset, self.index = family, dataset, index
        self.entry = dataset[index]
        self.metadata = {
            "name": f"reasoning-gym/{family}",
            "max_turns": 1,
            "system": system_prompt(),
        }

    def reset(self, seed=None, options=None):
        answer = self.entry["answer"]
        solution = None if answer is None else [f"<answer>{answer}</answer>"]
        return self.entry["question"], {"hint": "", "solution": solution}

    def step(self, action: str):
        from reasoning_gym.utils import extract_answer

        answer = extract_answer(action)
        try:
            score = (
                float(self.dataset.score_answer(answer, self.entry)) if answer is not None else 0.0
            )
        except Exception as e:  # a scorer crashing on odd model output scores zero
            return (
                "",
                0.0,
                True,
                False,
                {"answer": answer, "detail": f"scorer error: {type(e).__name__}: {e}"},
            )
        return "", clip01(score), True, False, {"answer": answer, "score": score}

    def close(self) -> None:
        pass


def tasks(n: int, seed: int, subset: list[str] | None = None) -> list[Task]:
    if n < 1:
        raise UsageError(f"suite {SUITE!r} has no fixed set of items: give -n > 0")
    families = list(subset) if subset else list(DEFAULT_FAMILIES)
    known = set(available_families())
    bad = [f for f in families if f not in known]
    if bad:
        raise UsageError(
            f"unknown reasoning-gym famil{'y' if len(bad) == 1 else 'ies'} {', '.join(bad)} "
            f"(available: {', '.join(sorted(known))})"
        )
    per_family = {f: 0 for f in families}
    picks = []
    for i in range(n):
        fam = families[i % len(families)]
        picks.append((fam, per_family[fam]))
        per_family[fam] += 1
    out = []
    for fam, idx in picks:
        fam_seed = seed_for(seed, SUITE, fam)
        size = max(per_family[fam], 1)

        def make_env(fam=fam, idx=idx, fam_seed=fam_seed, size=size):
            return ReasoningGymEnv(fam, _dataset(fam, fam_seed, size), idx)

        def oracle(env, obs, info):
            return info.get("solution")

        out.append(
            Task(
                SUITE,
                f"{fam}/{idx}",
                fam,
                make_env,
                seed=None,
                oracle=oracle,
                meta={"family": fam, "index": idx, "dataset_seed": fam_seed},
            )
        )
    return out


# --------------------------------------------------------------------------- fixed pool

_ENV_TEMPLATE = '''"""reasoning-gym family {family!r} as a SPADE environment (fixed-environment pool)."""

import gymnasium as gym
import reasoning_gym
from reasoning_gym.utils import extract_answer

FAMILY = {family!r}
FORMAT = ("\\n\\nThink step by step, then give only the final answer inside "
          "<answer></answer> tags.")


class ReasoningGymEnv(gym.Env):
    metadata = {{"name": {name!r}, "max_turns": 1}}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._seed = 0 if seed is None else int(seed) % (2 ** 31)
        self._data = reasoning_gym.create_dataset(FAMILY, size=1, seed=self._seed)
        self._item = self._data[0]
        answer = str(self._item["answer"])
        hint = (f"The expected answer is {{len(answer)}} characters long"
                + (f" and ends with {{answer[-1]!r}}." if len(answer) > 3 else "."))
        return self._item["question"] + FORMAT, {{"hint": hint, "solution": ["<answer>" + answer + "</answer>"]}}

    def step(self, action):
        answer = extract_answer(str(action))
        score = float(self._data.score_answer(answer, self._item)) if answer is not None else 0.0
        return "", min(1.0, max(0.0, score)), True, False, {{}}
'''


def fixed_env_code(family: str) -> str:
    """A contract-following environment module for one family (runs in the sandbox,
    which must be able to import reasoning_gym)."""
    if family in NO_REFERENCE or family in EXCLUDED:
        raise UsageError(
            f"reasoning-gym family {family!r} has no reference answer to build a solution from"
        )
    return _ENV_TEMPLATE.format(family=family, name=f"reasoning-gym-{family.replace('_', '-')}")


def fixed_pool_candidates(families: list[str] | None = None, round: int = 0) -> list[dict]:
    """`candidate` records (origin "fixed") whose `env.code` wraps each family: the
    fixed-environment baseline pool. They carry `env` like replayed memory entries, so
    spade-validate can check them and spade-rollout can play them directly."""
    fams = list(families or DEFAULT_FAMILIES)
    known = set(available_families())
    out = []
    for fam in fams:
        if fam not in known:
            raise UsageError(f"unknown reasoning-gym family {fam!r}")
        code = fixed_env_code(fam)
        rid = make_id("cand", "fixed", SUITE, fam)
        out.append(
            new_record(
                "candidate",
                rid,
                [],
                origin="fixed",
                round=round,
                group=rid,
                doc=None,
                env={
                    "code": code,
                    "name": f"reasoning-gym-{fam.replace('_', '-')}",
                    "summary": f"reasoning-gym task family {fam} (procedural, scored by its own scorer)",
                    "max_turns": 1,
                },
            )
        )
    return out
