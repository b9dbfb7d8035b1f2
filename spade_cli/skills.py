"""Skill curriculum of the designer: named skill sets, the round's active skills, and
the skill and difficulty of one design attempt.

Each design targets one skill and one difficulty. A round activates `per_round` skills
of the chosen list in round-robin order: round r (from 1) takes the skills at positions
(r-1)*k, (r-1)*k+1, ... (mod the list's length), so six skills at three per round
alternate between the first three and the last three. The round number alone picks
them, so shards and resumed runs agree. Within a round, the attempt's id (with the seed
and round) picks one of the active skills and, with `mixed`, a difficulty, by hash:
deterministic whatever the shard or input order.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UsageError
from .records import stable_hash

DIFFICULTIES = ("easy", "medium", "hard")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    examples: str

    def prompt_text(self) -> str:
        return f"{self.name}: {self.description} For example: {self.examples}."


GAMES = (
    Skill(
        "Mathematical Reasoning",
        "the agent must compute, estimate or prove quantities step by step.",
        "budget puzzles with running totals, modular-arithmetic locks, unit conversions chained over turns",
    ),
    Skill(
        "Logical Deduction",
        "the agent must infer hidden facts from clues and rule out possibilities.",
        "who-owns-what grids, liar-and-truth-teller questioning, deducing a secret code from feedback",
    ),
    Skill(
        "Spatial Reasoning",
        "the agent must track positions, directions and shapes in a space it cannot see whole.",
        "navigating a grid maze from local views, rotating pieces to fit, placing items without overlaps",
    ),
    Skill(
        "Pattern Recognition",
        "the agent must find the rule behind a sequence or structure and apply it.",
        "continuing number or symbol sequences, spotting the odd one out, decoding a substitution cipher",
    ),
    Skill(
        "Optimization",
        "the agent must reach a goal at least cost under constraints, not just reach it.",
        "packing a knapsack, scheduling jobs on machines, routing a delivery with a fuel limit",
    ),
    Skill(
        "Causal Inference",
        "the agent must run interventions and tell cause from coincidence.",
        "finding which switch drives which lamp, diagnosing a faulty component, testing a hypothesis by experiment",
    ),
)

TOOL_USE = (
    Skill(
        "API Orchestration",
        "the agent must call several tools in the right order, passing results between them.",
        "look up an id, then fetch its record, then submit a change that needs both",
    ),
    Skill(
        "Data Retrieval",
        "the agent must find specific facts by querying, filtering and paging through tools.",
        "searching a catalogue with filters, reading paged results, joining two lookups",
    ),
    Skill(
        "State Modification",
        "the agent must change a system's state correctly and verify the result.",
        "booking and cancelling reservations, editing inventory counts, updating account settings",
    ),
    Skill(
        "Error Recovery",
        "the agent must notice tool failures or bad results and work around them.",
        "retrying after a rate limit, correcting a rejected argument, falling back to another tool",
    ),
    Skill(
        "Tool Selection",
        "the agent must choose the right tool among many similar ones.",
        "picking the precise search among near-duplicates, avoiding a costly tool when a cheap one suffices",
    ),
    Skill(
        "Multi-Step Workflows",
        "the agent must carry a long procedure to its end, keeping track of progress.",
        "onboarding a user across several systems, a refund that needs approval steps, a multi-leg itinerary",
    ),
)

# The micro world's three skills, one per family of `spade_micro` (spade_cli/micro/).
MICRO = (
    Skill(
        "Spatial Reasoning",
        "the agent must find its way along a corridor it cannot see.",
        "CorridorEnv: walk to a door on a hidden side, then enter it",
    ),
    Skill(
        "Pattern Recognition",
        "the agent must reproduce a code from what it was shown.",
        "CodeEnv: type a code slot by slot while one slot may be hidden",
    ),
    Skill(
        "Logical Deduction",
        "the agent must work out the rule that says which switch is right.",
        "SwitchEnv: press the first or the last switch of each stage, by a hidden rule",
    ),
)

SKILL_SETS: dict[str, tuple[Skill, ...]] = {"games": GAMES, "tool-use": TOOL_USE, "micro": MICRO}
ALL_SKILLS: dict[str, Skill] = {s.name.lower(): s for s in GAMES + TOOL_USE}


def resolve(skill_set: str | None, names: str | None) -> list[Skill]:
    """The skill list: `names` (comma-separated, case-insensitive, any set's skill or a
    new name) when given, else the named set; an empty list disables the curriculum."""
    if names:
        out = []
        for n in (x.strip() for x in names.split(",")):
            if n:
                out.append(ALL_SKILLS.get(n.lower()) or Skill(n, "", ""))
        if not out:
            raise UsageError("--skills names no skill")
        return out
    if not skill_set or skill_set == "none":
        return []
    if skill_set not in SKILL_SETS:
        raise UsageError(
            f"--skill-set must be one of {', '.join(SKILL_SETS)} or none, got {skill_set!r}"
        )
    return list(SKILL_SETS[skill_set])


def active_skills(skills: list[Skill], per_round: int, round_: int) -> list[Skill]:
    """The round's skills in round-robin order (module docstring); all when per_round is
    0 or at least the list's length."""
    if not skills or per_round <= 0 or per_round >= len(skills):
        return list(skills)
    start = (max(round_, 1) - 1) * per_round
    return [skills[(start + j) % len(skills)] for j in range(per_round)]


def pick(
    active: list[Skill], difficulty: str, seed: int, round_: int, attempt: str
) -> tuple[Skill | None, str | None]:
    """The skill and difficulty of one design attempt (None, None without a curriculum
    and a fixed difficulty of None)."""
    skill = None
    if active:
        skill = active[int(stable_hash(seed, "skill", round_, attempt, n=8), 16) % len(active)]
    if difficulty == "mixed":
        level = DIFFICULTIES[int(stable_hash(seed, "difficulty", round_, attempt, n=8), 16) % 3]
    elif difficulty == "none":
        level = None
    else:
        level = difficulty
    return skill, level


def min_steps(difficulty: str | None) -> int:
    """Interaction steps the prompt asks for: 2 on easy, 3 otherwise."""
    return 2 if difficulty == "easy" else 3
