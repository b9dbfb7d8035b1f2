"""The two paper presets against the authors' launchers, value for value.

LAUNCHERS holds what each launcher (spade-rl/spade @9b2b813) sets, with file and line;
CODE what their code fixes without a launcher flag. Every key a preset file sets must be
in one of those tables or in OURS (settings that have no published counterpart, with the
reason), and every table value must be the loaded preset's value (a default counts).
The test also changes each preset value in turn and checks that the comparison notices.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spade_cli import declare as st
from spade_cli.declare import read_toml
from spade_cli.errors import UsageError
from spade_cli.loop.config import STAGE_TABLES, TOP, load_config
from spade_cli.skills import GAMES as GAME_SKILLS

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GAMES = "cmd/games/train_spade_30b.sh"
TOOLS = "cmd/tool_use/_train_spade_blend.sh"

# key -> (value, its line in the games launcher, in the tool-use launcher)
SHARED = {
    "rollout.episodes": (16, 126, 179),
    "rollout.max_turns": (25, 118, 172),
    "rollout.temperature": (0.6, 114, 168),
    "rollout.max_tokens": (8192, 115, 169),
    "rollout.max_context": (32768, 117, 171),
    "rollout.hint_source": ("self", 131, 197),
    "design.temperature": (0.6, 113, 167),
    "design.max_tokens": (16384, 116, 170),
    "design.difficulty": ("medium", 125, 178),
    "hint.temperature": (0.3, 132, 198),
    "regret.estimator": ("blend", 141, 187),
    "regret.solve_weight": (0.6, 142, 188),
    "regret.regret_weight": (0.4, 143, 189),
    "regret.regret_scale": (0.15, 145, 191),
    "regret.plateau_lo": (0.4, 148, 194),
    "regret.plateau_hi": (0.6, 149, 195),
    "regret.plateau_ramp": (0.25, 150, 196),
    "regret.gamma_fast": (0.98, 111, 165),
    "regret.gamma_slow": (0.85, 112, 166),
    "regret.memory_capacity": (200, 199, 207),
    "train.learning_rate": (1e-6, 247, 243),
    "train.lr_scheduler": ("constant", 248, 244),
    "train.weight_decay": (0.1, 249, 245),
    "train.epsilon": (0.2, 224, 221),
    "train.epsilon_high": (0.28, 225, 222),
    "train.temperature": (0.6, 114, 168),
    "train.tis": (True, 226, 223),
}
LAUNCHERS = {
    "paper-games": {
        **{k: (v, f"{GAMES}:{line}") for k, (v, line, _) in SHARED.items()},
        "rounds*loop.agent_steps": (400, f"{GAMES}:99 --num-rollout 400"),
        "loop.agent_steps": (
            4,
            f"{GAMES}:120 --spade-game-regeneration-interval 4, "
            ":135 --spade-proposer-training-delay 4",
        ),
        "corpus.docs_per_round*design.designs_per_doc": (
            24,
            f"{GAMES}:123 --spade-num-games-per-rollout",
        ),
        "design.doc_tokens": (6000, f"{GAMES}:186 --spade-corpus-max-doc-tokens 6000"),
        "design.skill_set": ("games", f"{GAMES}:42-49 the six game skills"),
        "design.skills_per_round": (3, f"{GAMES}:55 SKILLS_PER_REGEN 3"),
        "hint.max_tokens": (4096, f"{GAMES}:133 --spade-hint-max-tokens 4096"),
        "train.beta": (0.0, f"{GAMES}:221 --kl-loss-coef 0.00"),
        "train.compact_filter": (False, f"{GAMES}:110-136 no --spade-compact-filter"),
        "validate.judge": (False, f"{GAMES}:110-136 no --spade-use-env-validator"),
        "train.designer_interval": (4, f"{GAMES}:120 the regeneration interval"),
    },
    "paper-tool-use": {
        **{k: (v, f"{TOOLS}:{line}") for k, (v, _, line) in SHARED.items()},
        "rounds*loop.agent_steps": (400, f"{TOOLS}:153 --num-rollout 400"),
        "loop.agent_steps": (
            8,
            f"{TOOLS}:174 --spade-game-regeneration-interval 8, "
            ":175 --spade-proposer-training-delay 8",
        ),
        "corpus.docs_per_round*design.designs_per_doc": (
            24,
            f"{TOOLS}:176 --spade-num-games-per-rollout",
        ),
        "design.doc_tokens": (4000, f"{TOOLS}:204 --spade-corpus-max-doc-tokens 4000"),
        "design.skill_set": ("tool-use", f"{TOOLS}:182 --spade-skills API_Orchestration ..."),
        "design.skills_per_round": (0, f"{TOOLS}:182 all six, no --spade-skills-per-regen"),
        "hint.max_tokens": (2048, f"{TOOLS}:199 --spade-hint-max-tokens 2048"),
        "train.beta": (0.005, f"{TOOLS}:218 --kl-loss-coef 0.005"),
        "train.compact_filter": (True, f"{TOOLS}:202 --spade-compact-filter"),
        "validate.judge": (True, f"{TOOLS}:185 --spade-use-env-validator"),
        "train.designer_interval": (8, f"{TOOLS}:174 the regeneration interval"),
    },
}
# What their code fixes without a flag (both settings).
CODE = {
    "design.attempts": (3, "spade/core/corpus_orchestrator.py:72 max_attempts=3"),
    "rollout.episode_return": ("final", "spade/core/utils/rewards.py:47-50 episode_reward"),
    "regret.invalid": ("drop", "RECIPE.md: invalid designs are re-generated, never trained on"),
    "train.designer_scale": (
        "balance",
        "spade/core/utils/rewards.py:53-61 compute_env_reward_scale",
    ),
    "train.designer_scale_cap": (50.0, "spade/core/utils/rewards.py:57 max_scale=50.0"),
    "design.exemplar_chars": (2000, "spade/core/env_memory.py:41 code_snippet_max_chars=2000"),
}
# Preset keys with no published counterpart.
OURS = {
    "name": "the run's name",
    "seed": "our master seed",
    "model.path": "the user's checkpoint",
    "model.engine": "our engine (theirs: SGLang)",
    "rounds": "checked as rounds x agent steps",
    "design.designs_per_doc": "checked as documents x designs = games per rollout",
    "corpus.docs_per_round": "checked as documents x designs = games per rollout",
    "corpus.excerpt_chars": "a character pre-cut before the token budget (design.doc_tokens)",
    "rollout.replay": "memory replay is ours; 0 = none, as theirs",
}


def flat_keys(data: dict) -> dict[str, object]:
    out = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def loaded_values(cfg) -> dict[str, object]:
    values = {name: getattr(cfg, name) for name in TOP}
    for table in STAGE_TABLES:
        for f in st.fields_of(type(getattr(cfg, table)), getattr(cfg, table)):
            values[f"{table}.{f.name}"] = f.default
    return values


def value_of(values: dict, key: str) -> object:
    if "*" in key:
        a, b = key.split("*")
        return values[a] * values[b]
    return values[key]


def dump_toml(raw: dict) -> str:
    """A preset's dict as TOML (flat tables of str, bool and numbers)."""

    def lit(v):
        return (
            str(v).lower() if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else repr(v)
        )

    top = [f"{k} = {lit(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    tables = [
        f"[{k}]\n" + "\n".join(f"{kk} = {lit(vv)}" for kk, vv in v.items())
        for k, v in raw.items()
        if isinstance(v, dict)
    ]
    return "\n".join(top) + "\n\n" + "\n\n".join(tables) + "\n"


def mismatches(preset: str, raw: dict, tmp_path: Path) -> list[str]:
    """Where the preset `raw` (its TOML as a dict) differs from the release."""
    path = tmp_path / f"{preset}.toml"
    path.write_text(dump_toml(raw))
    values = loaded_values(load_config(str(path)))
    table = {**LAUNCHERS[preset], **CODE}
    bad = [
        f"{k}: not a launcher value, nor ours"
        for k in flat_keys(raw)
        if k not in table and k not in OURS and not any(k in t.split("*") for t in table)
    ]
    for key, (want, where) in table.items():
        got = value_of(values, key)
        if got != want:
            bad.append(f"{key} = {got!r}, the release has {want!r} ({where})")
    return bad


@pytest.mark.parametrize("preset", sorted(LAUNCHERS))
def test_the_preset_equals_the_launcher(preset, tmp_path):
    raw = read_toml(EXAMPLES / f"{preset}.toml")
    assert raw["name"] == preset
    assert mismatches(preset, raw, tmp_path) == []
    # and the comparison fails on any one changed value
    for key, value in flat_keys(raw).items():
        if key in OURS:
            continue
        changed = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
        table, _, field = key.rpartition(".")
        other = (
            not value
            if isinstance(value, bool)
            else value * 2 + 1
            if isinstance(value, (int, float))
            else {"games": "tool-use"}.get(value, "games")
        )
        if table:
            changed[table][field] = other
        else:
            changed[field] = other
        try:
            noticed = bool(mismatches(preset, changed, tmp_path))
        except UsageError:  # a value out of bounds is refused by the loader: noticed too
            noticed = True
        assert noticed, f"{preset}: changing {key} to {other!r} went unnoticed"


def test_the_designer_scale_is_above_one_under_both_presets(tmp_path):
    from spade_cli.train.samples import designer_scale_of

    for preset in LAUNCHERS:
        cfg = load_config(str(EXAMPLES / f"{preset}.toml"))
        designs = cfg.corpus.docs_per_round * cfg.design.designs_per_doc
        plays = designs * cfg.rollout.episodes  # one agent step's samples
        scale = designer_scale_of(
            cfg.train.designer_scale,
            plays,
            designs,
            cfg.train.designer_scale_cap,
            cfg.train.designer_interval,
        )
        assert scale == min(50.0, 16 * cfg.loop.agent_steps) and scale > 1, preset


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset,skill_names",
    [
        (
            "paper-tool-use",
            {
                "API Orchestration",
                "Data Retrieval",
                "State Modification",
                "Error Recovery",
                "Tool Selection",
                "Multi-Step Workflows",
            },
        ),
        ("paper-games", {"Mathematical Reasoning", "Logical Deduction", "Spatial Reasoning"}),
    ],
)
def test_the_preset_design_stage_targets_its_skills(tiny_model, preset, skill_names):
    """The preset's own [design] table, on the tiny model: every prompt names a skill of
    the preset's set (tool use: any of its six; games round 1: the first three) at medium."""
    import dataclasses

    from spade_cli.design import design_records
    from spade_cli.engines import Sampling, load_engine

    cfg = load_config(str(EXAMPLES / f"{preset}.toml"))
    s = dataclasses.replace(
        cfg.design,
        designs_per_doc=1,
        sampling=Sampling(max_tokens=4),
        max_prompt_tokens=4000,
        doc_tokens=64,
    )
    eng = load_engine(str(tiny_model), "hf")
    docs = [
        {
            "kind": "doc",
            "v": 1,
            "id": f"d{i}",
            "parents": [],
            "text": f"Document {i} on ledgers.",
            "chars": 24,
        }
        for i in range(12)
    ]
    recs = list(design_records(docs, eng, s, [], seed=1, round=1))
    assert len(recs) == 12
    seen = set()
    for rec in recs:
        d = rec["design"]
        assert rec["skill"] in skill_names and rec["difficulty"] == "medium"
        prompt = " ".join(m["content"] for m in d["messages"])
        assert rec["skill"] in prompt
        seen.add(rec["skill"])
    assert len(seen) >= 2  # picked per document, by hash
    if preset == "paper-tool-use":  # no game skill anywhere in its prompts
        text = " ".join(m["content"] for r in recs for m in r["design"]["messages"])
        assert not [sk.name for sk in GAME_SKILLS if sk.name in text]
