"""The micro world: its families validate in full, its difficulty spans trivial to out of
reach, its hint pays where exploring does not fit the budget, its transcripts are the real
prompts, and its library and suite are what the experiment plays."""

from __future__ import annotations

import random
import re
import statistics

import pytest

from spade_cli.micro import LIBRARY
from spade_cli.micro import transcripts as tr
from spade_cli.micro.pool import FAMILIES, LEVELS, env_name, library_source


def win_rate(family: str, level: int, hinted: bool, skill: float, n: int = 200) -> float:
    rng = random.Random(f"{family}:{level}:{hinted}:{skill}")
    return statistics.fmean(
        tr.play(family, level, 1000 + i, hinted, skill, rng)[1] for i in range(n)
    )


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_expert_solves_every_level_with_the_hint(family):
    for level in LEVELS:
        assert win_rate(family, level, True, 1.0, n=40) == 1.0, level


@pytest.mark.parametrize("family", list(FAMILIES))
def test_levels_span_easy_to_hard_and_the_hint_pays_in_the_middle(family):
    """For a weak expert (70% of its actions right), no-hint wins fall with the level from
    likely to rare, and at the middle levels the hint is worth at least 0.1."""
    nohint = [win_rate(family, lv, False, 0.7) for lv in LEVELS]
    hint = [win_rate(family, lv, True, 0.7) for lv in LEVELS]
    assert nohint[0] >= 0.6 and nohint[-1] <= 0.15, nohint
    assert all(b <= a + 0.08 for a, b in zip(nohint, nohint[1:], strict=False)), nohint
    assert max(h - w for h, w in zip(hint[2:5], nohint[2:5], strict=True)) >= 0.1, (hint, nohint)


def test_a_level_outside_the_table_is_refused():
    with pytest.raises(ValueError, match="level must be one of"):
        tr.env_class("code", 7)
    with pytest.raises(ValueError, match="level must be one of"):
        tr.env_class("switch", True)


def test_actions_are_exact_and_malformed_ones_cost_a_turn():
    env = tr.env_class("corridor", 1)()
    obs, info = env.reset(seed=3)
    assert env.step("walk " + info["solution"][0])[1:4] == (0.0, False, False)
    for a in info["solution"]:
        obs, r, term, trunc, _ = env.step(a)
    assert (r, term) == (1.0, True) and obs.endswith("Solved.")


@pytest.mark.parametrize("first_press", ["right", "wrong"])
def test_once_the_rule_is_known_each_switch_stage_ends_with_its_switch(first_press):
    """The hint, and after the first press every observation, end with the switch to
    press: only the first move without the hint needs the rule itself."""
    env = tr.env_class("switch", 5)()
    obs, info = env.reset(seed=11)
    solution = info["solution"]
    assert "Press" not in obs  # the rule is not shown yet
    assert info["hint"].endswith(f": {solution[0]}.")
    if first_press == "wrong":
        wrong = next(s for s in obs.split(": ")[1].rstrip(".").split() if s != solution[0])
        obs = env.step(wrong)[0]
        assert obs.endswith(f"one: {solution[0]}.")
    for i, action in enumerate(solution[:-1]):
        obs, reward, *_ = env.step(action)
        assert obs.endswith(f"one: {solution[i + 1]}.") and reward == 0.0


def test_the_library_files_are_the_generated_designs():
    files = sorted(p.name for p in LIBRARY.glob("*.py"))
    assert files == sorted(f"{env_name(f, lv)}.py" for f in FAMILIES for lv in LEVELS)
    for f in FAMILIES:
        for lv in LEVELS:
            assert (LIBRARY / f"{env_name(f, lv)}.py").read_text() == library_source(f, lv)


def test_design_transcripts_are_the_micro_prompt_and_a_parsable_design(tiny_tokenizer):
    from spade_cli.design import Template, render
    from spade_cli.skills import MICRO

    rng = random.Random(0)
    template = Template.load("micro")
    docs = [("topic", "Plain words about Python and numbers.")]
    t = tr.design_transcript(rng, template, docs, MICRO)
    system, user, answer = (m["content"] for m in t.messages)
    assert system == render(template.system, {}).strip()
    assert "Target skill." in user and "Difficulty:" in user and '<document source="topic">' in user
    code = re.search(r"```python\n(.*?)```", answer, re.S)[1]
    assert code.startswith("import spade_micro\n")  # the family is named once, in the base
    ns: dict = {}
    exec(
        code.replace(
            "import spade_micro", "import spade_cli.micro.site.spade_micro as spade_micro"
        ),
        ns,
    )
    cls = next(
        v
        for k, v in ns.items()
        if isinstance(v, type) and k != "spade_micro" and hasattr(v, "level")
    )
    assert cls.level in LEVELS and cls.metadata["max_turns"] >= 1


def test_design_transcripts_show_memory_as_the_published_policy_renders_it():
    """Exemplars are the library's files and avoid lines are memory.avoid_line's, so a
    round's prompts with a scored memory are not new to the pretrained designer."""
    from spade_cli.design import Template
    from spade_cli.memory import avoid_line
    from spade_cli.skills import MICRO

    rng, template = random.Random(2), Template.load("micro")
    library = {p.stem: p.read_text().rstrip() for p in LIBRARY.glob("*.py")}
    shown = avoided = 0
    for _ in range(200):
        (_, user, _) = (
            m["content"] for m in tr.design_transcript(rng, template, [("t", "x")], MICRO).messages
        )
        for name, code in re.findall(
            r"### Example \d: (\w+) — .*?\n```python\n(.*?)\n```", user, re.S
        ):
            assert code == library[name]
            shown += 1
        if m := re.search(
            r"^Avoid tasks like (\w+) .*: it was (too easy|too hard), the agent won (\d+)%.*$",
            user,
            re.M,
        ):
            entry = {"name": m[1], "summary": re.search(r"\((.*)\)", m[0])[1]}
            entry["scores"] = {"nohint": {"won_rate": int(m[3]) / 100}}
            assert m[0] == avoid_line((entry, m[2]))
            avoided += 1
    assert shown > 100 and 60 < avoided < 140


def test_the_loss_mask_covers_the_assistant_turns_only(tiny_tokenizer):
    from spade_cli.micro.model import encode

    t = tr.agent_transcript(random.Random(1), 0.7, hinted=True)
    ids, mask = encode(tiny_tokenizer, t.messages)
    taught = tiny_tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
    actions = [m["content"] for m in t.messages if m["role"] == "assistant"]
    assert taught.replace("<|im_end|>", " ").split() == actions
    assert "HINT:" in t.messages[1]["content"]


@pytest.mark.requires_bwrap
def test_every_family_and_level_passes_spade_validate(tmp_path, cli):
    import orjson

    from spade_cli.records import make_id, new_record

    recs = [
        new_record(
            "candidate",
            make_id("cand", f, lv),
            [],
            origin="design",
            round=1,
            group="g",
            design={"text": f"A design.\n```python\n{tr.design_code(f, f'Probe{lv}', lv)}```"},
        )
        for f in FAMILIES
        for lv in LEVELS
    ]
    src = tmp_path / "c.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    r = cli("validate", str(src), "--seeds", "4")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    out = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [(c["validation"]["valid"], c["validation"]["reason"]) for c in out] == [
        (True, "ok")
    ] * len(recs)
    assert {c["env"]["name"] for c in out} == {f"probe{lv}" for lv in LEVELS}


@pytest.mark.requires_bwrap
def test_the_heldout_suite_covers_every_family_and_level_and_the_oracle_solves_it(cli):
    import orjson

    r = cli("eval", "--suite", "micro", "--oracle", "-n", "36")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    recs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(recs) == 36
    assert {(x["meta"]["family"], x["meta"]["level"]) for x in recs} == {
        (f, lv) for f in FAMILIES for lv in LEVELS
    }
    assert all(x["stats"]["pass@1"] == 1.0 for x in recs)
    again = [
        orjson.loads(x)
        for x in cli("eval", "--suite", "micro", "--oracle", "-n", "36").stdout.splitlines()
    ]
    assert [x["meta"]["episode_seed"] for x in again] == [x["meta"]["episode_seed"] for x in recs]


def test_negative_control_permutes_designer_rewards_within_a_skill(tmp_path):
    import orjson

    from spade_cli.train.samples import read_groups

    recs = []
    for i in range(6):
        recs.append(
            {
                "kind": "candidate",
                "v": 1,
                "id": f"d{i}",
                "parents": [],
                "round": 1,
                "group": "g",
                "origin": "design",
                "skill": "Logical Deduction",
                "design": {"prompt_ids": [1, 2], "completion_ids": [3, 4 + i]},
                "score": {"valid": True, "reward": float(i)},
            }
        )
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    plain, _ = read_groups([str(path)], role="designer")
    shuffled, _ = read_groups([str(path)], role="designer", shuffle_designer_rewards=7)
    rewards = [s.reward for s in plain[0]]
    mixed = [s.reward for s in shuffled[0]]
    assert rewards == [float(i) for i in range(6)]
    assert sorted(mixed) == rewards and mixed != rewards
    assert [
        s.reward
        for s in read_groups([str(path)], role="designer", shuffle_designer_rewards=7)[0][0]
    ] == mixed

    # Under the invalid penalty the broken designs keep it: only the signal is shuffled.
    for r in recs[:2]:
        r["score"] = {"valid": False, "reward": -1.0}
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    penalised, _ = read_groups([str(path)], role="designer", shuffle_designer_rewards=7)
    mixed = [s.reward for s in penalised[0]]
    assert mixed[:2] == [-1.0, -1.0]
    assert sorted(mixed[2:]) == [2.0, 3.0, 4.0, 5.0] and mixed[2:] != [2.0, 3.0, 4.0, 5.0]


def test_the_heldout_suite_hides_each_value_of_a_fact_equally_often():
    """Twelve episodes of a corridor hide six doors on each side, so an agent that always
    walks one way wins what a guess is worth; every episode is the fact it says it is."""
    import collections

    from spade_cli.evals import micro

    tasks = micro.tasks(216, 0)
    facts = collections.defaultdict(collections.Counter)
    for t in tasks:
        facts[t.category][t.meta["secret"]] += 1
        env = tr.env_class(t.meta["family"], t.meta["level"])()
        _, info = env.reset(seed=t.seed)
        assert env.secret == t.meta["secret"]
        if t.meta["family"] == "corridor":
            assert info["hint"] == f"The door is to your {env.secret}."
    for level in LEVELS:
        assert facts[f"corridor/L{level}"] == {"left": 6, "right": 6}
        assert facts[f"switch/L{level}"] == {"first": 6, "last": 6}
    assert facts["code/L4"] == {f"rank {k} of 4": 3 for k in range(1, 5)}
    assert max(facts["code/L5"].values()) - min(facts["code/L5"].values()) == 1
    # Another suite seed: other episodes, the same balance.
    other = micro.tasks(216, 1)
    assert {t.seed for t in other}.isdisjoint(t.seed for t in tasks)


def test_the_ceiling_is_what_a_flawless_agent_wins_without_the_hint():
    from spade_cli.micro.ceiling import ceiling, ceilings

    assert ceiling("corridor", 1, 200) == 1.0  # turns to spare: a wrong side costs nothing
    assert ceiling("switch", 3, 200) == 1.0  # a spare turn: the first press shows the rule
    assert abs(ceiling("corridor", 6, 400) - 0.5) < 0.08  # no spare turn: a guess
    assert abs(ceiling("code", 6, 600) - 1 / 6) < 0.05  # the hidden one of six symbols
    table = ceilings(episodes=100)
    assert set(table) == {f"{f}/L{lv}" for f in FAMILIES for lv in LEVELS} | {*FAMILIES, "all"}
    assert 0.5 < table["all"] < 0.8
