"""The published designer rewards against hand-computed values, and dropped designs."""

from __future__ import annotations

import orjson
import pytest

from spade_cli import regret
from spade_cli.stage_settings import RewardShape
from spade_cli.train.samples import read_groups

from .helpers import run_cli
from .test_memory import GUESS, NIM
from .test_regret import cand, jsonl, parse

SHAPE = RewardShape()


@pytest.mark.parametrize(
    "w,expected",
    [
        (0.1, 0.0),  # 1 - 0.3/0.25 < 0
        (0.3, 0.6),  # 1 - 0.1/0.25
        (0.5, 1.0),  # on the plateau
        (0.7, 0.6),  # 1 - 0.1/0.25
        (0.95, 0.0),  # 1 - 0.35/0.25 < 0
    ],
)
def test_plateau_by_hand(w, expected):
    assert regret.plateau(w) == pytest.approx(expected)
    sc = regret.valid_score(
        cand("c", GUESS, [w, w], [w, w]), regret.ScoreConfig(estimator="solve-rate")
    )
    assert sc["reward"] == pytest.approx(expected)
    assert sc["components"]["win_rate"] == pytest.approx(w)


def test_blend_by_hand():
    # w = 0.5 (plateau 1), regret 0.55 - 0.5 = 0.05: 0.6 * 1 + 0.4 * (0.05 / 0.15)
    small = regret.valid_score(cand("a", GUESS, [1.0, 0.0], [1.0, 0.1]), regret.ScoreConfig())
    assert small["estimator"] == "blend"
    assert small["reward"] == pytest.approx(0.6 + 0.4 / 3)
    c = small["components"]
    assert c["regret"] == pytest.approx(0.05) and c["plateau"] == 1.0
    assert c["scaled_regret"] == pytest.approx(1 / 3) and c["win_rate"] == 0.5
    # w = 0.3 (plateau 0.6), regret 0.3 saturates: 0.6 * 0.6 + 0.4 * 1
    big = regret.valid_score(cand("b", GUESS, [0.3, 0.3], [0.6, 0.6]), regret.ScoreConfig())
    assert big["reward"] == pytest.approx(0.76)
    assert big["regret"] == pytest.approx(0.3) and big["components"]["scaled_regret"] == 1.0
    # every constant is a setting
    shape = RewardShape(solve_weight=0.5, regret_weight=0.5, regret_scale=0.3)
    other = regret.valid_score(
        cand("b", GUESS, [0.3, 0.3], [0.6, 0.6]), regret.ScoreConfig(shape=shape)
    )
    assert other["reward"] == pytest.approx(0.5 * 0.6 + 0.5 * 1.0)


def test_regret_is_floored_at_zero():
    neg = regret.valid_score(
        cand("a", GUESS, [1.0, 1.0], [0.0, 1.0]), regret.ScoreConfig(estimator="regret")
    )
    assert neg["reward"] == 0.0 and neg["regret"] == pytest.approx(-0.5)
    pos = regret.valid_score(
        cand("a", GUESS, [0.0, 0.0], [0.0, 1.0]), regret.ScoreConfig(estimator="regret")
    )
    assert pos["reward"] == pytest.approx(0.5)


def test_regret_var_by_hand():
    # no-hint 1, 0: variance 0.25, the bell's top (1); regret 0.75 - 0.5 = 0.25
    coin = regret.valid_score(
        cand("a", GUESS, [1.0, 0.0], [1.0, 0.5]), regret.ScoreConfig(estimator="regret-var")
    )
    assert coin["reward"] == pytest.approx(0.25 + 1.0)
    assert coin["components"]["variance_reward"] == 1.0
    # no-hint 0, 0.5, 1, 0: variance 0.171875, exp(-(0.078125^2) / 0.02) = 0.736994; regret floored at 0
    spread = regret.valid_score(
        cand("b", GUESS, [0.0, 0.5, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]),
        regret.ScoreConfig(estimator="regret-var"),
    )
    assert spread["reward"] == pytest.approx(0.7369938, abs=1e-6) and spread[
        "regret"
    ] == pytest.approx(-0.375)
    # an environment the agent always wins (or always loses) earns no bonus to speak of
    flat = regret.valid_score(
        cand("c", GUESS, [1.0, 1.0], [1.0, 1.0]), regret.ScoreConfig(estimator="regret-var")
    )
    assert flat["reward"] == pytest.approx(0.0439369, abs=1e-6)  # exp(-0.0625 / 0.02)
    # the bell's constants are settings
    wide = RewardShape(variance_target=0.0, variance_width=0.5)
    other = regret.valid_score(
        cand("c", GUESS, [1.0, 1.0], [1.0, 1.0]),
        regret.ScoreConfig(estimator="regret-var", shape=wide),
    )
    assert other["reward"] == 1.0


def test_learning_potential_is_the_release_formula_on_hand_computed_windows(tmp_path):
    """One tracker per skill, updated with the skill's mean no-hint return of the window
    before its rewards: the first update sets both means, then mu <- (1 - g) mu + g r
    (g_fast 0.98, g_slow 0.85); the reward is |the environment's win rate - mu_slow|."""
    state = tmp_path / "lp.json"

    def window(envs: list[tuple[str, str, list[float]]]) -> list[dict]:
        recs = jsonl([cand(cid, GUESS, r, r, skill=sk) for cid, sk, r in envs])
        out = run_cli(
            "regret", "-e", "learning-potential", "--no-dedup", "--state", state, input=recs
        )
        assert out.returncode == 0, out.stderr
        return [x["score"] for x in parse(out.stdout)]

    # window 1: skill S at win rates 0.25 and 0.75 (mean 0.5), skill T at 0.25 alone
    first = window([("a", "S", [0, 0, 0, 1]), ("b", "S", [1, 1, 1, 0]), ("c", "T", [0, 0, 0, 1])])
    assert [x["reward"] for x in first] == pytest.approx([0.25, 0.25, 0.0])
    assert first[0]["components"]["lp_slow"] == first[0]["components"]["lp_fast"] == 0.5
    assert first[0]["components"]["lp_gap"] == 0.0
    # window 2: S at 1.0 and 0.5 (mean 0.75): fast 0.02*0.5 + 0.98*0.75 = 0.745,
    # slow 0.15*0.5 + 0.85*0.75 = 0.7125; gap |0.745 - 0.7125| / 0.26 = 0.125
    second = window([("d", "S", [1, 1, 1, 1]), ("e", "S", [1, 0, 1, 0])])
    assert [x["reward"] for x in second] == pytest.approx([0.2875, 0.2125])
    c = second[0]["components"]
    assert (c["lp_fast"], c["lp_slow"], c["lp_gap"]) == pytest.approx((0.745, 0.7125, 0.125))
    # window 3: S at 0 (an invalid design's plays do not count): slow 0.15 * 0.7125
    invalid = cand("g", None, valid=False, reason="bad_step", skill="S")
    recs = jsonl([cand("f", GUESS, [0, 0], [0, 0], skill="S"), invalid])
    third = run_cli(
        "regret", "-e", "learning-potential", "--no-dedup", "--state", state, input=recs
    )
    assert parse(third.stdout)[0]["score"]["reward"] == pytest.approx(0.106875)
    saved = orjson.loads(state.read_bytes())
    assert saved["S"]["n"] == 3 and saved["T"] == {"fast": 0.25, "slow": 0.25, "n": 1}
    assert saved["S"]["fast"] == pytest.approx(0.02 * 0.745)


def test_learning_potential_state_carries_across_runs(tmp_path):
    state = tmp_path / "round-001-lp.json"
    recs = jsonl([cand("a", GUESS, [0.5, 0.5], [0.5, 0.5], skill="S")])
    first = run_cli("regret", "-e", "learning-potential", "--state", state, input=recs)
    assert first.returncode == 0, first.stderr
    assert parse(first.stdout)[0]["score"]["reward"] == 0.0  # the first window sets mu_slow = w
    # reading the previous round's state into a new file leaves the old one as it was
    nxt = tmp_path / "round-002-lp.json"
    before = state.read_bytes()
    third = run_cli(
        "regret", "-e", "learning-potential", "--state", nxt, "--state-from", state, input=recs
    )
    assert third.returncode == 0 and state.read_bytes() == before and nxt.exists()
    assert orjson.loads(nxt.read_bytes())["S"]["n"] == 2
    state.write_bytes(b"[1, 2]")
    bad = run_cli("regret", "-e", "learning-potential", "--state", state, input=recs)
    assert bad.returncode == 3 and b"round-001-lp.json" in bad.stderr


def test_learning_potential_over_a_window_uses_all_its_plays(tmp_path):
    """With agent steps, the trackers take the window's plays (step 1 and the re-plays)
    and the rewards are computed from them (regret-window)."""
    scored = run_cli(
        "regret",
        "-e",
        "learning-potential",
        input=jsonl(
            [cand("a", GUESS, [0, 0], [0, 0], skill="S"), cand("b", NIM, [1, 1], [1, 1], skill="S")]
        ),
    )
    assert scored.returncode == 0, scored.stderr
    later = tmp_path / "rollouts-s2.jsonl"
    later.write_bytes(
        jsonl([cand("a", GUESS, [1, 1], [], skill="S"), cand("b", NIM, [1, 1], [], skill="S")])
    )
    state = tmp_path / "lp.json"
    w = run_cli(
        "regret",
        "-e",
        "learning-potential",
        "--window",
        later,
        "--state",
        state,
        input=scored.stdout,
    )
    assert w.returncode == 0, w.stderr
    # window win rates 0.5 and 1.0, skill mean 0.75 sets mu_slow: rewards 0.25, 0.25
    assert [x["score"]["reward"] for x in parse(w.stdout)] == pytest.approx([0.25, 0.25])
    assert orjson.loads(state.read_bytes())["S"] == {"fast": 0.75, "slow": 0.75, "n": 1}


def test_components_are_in_the_score_and_the_cli_defaults_are_the_published_ones():
    r = run_cli("regret", input=jsonl([cand("a", GUESS, [1.0, 0.0], [1.0, 0.1])]))
    assert r.returncode == 0, r.stderr
    sc = parse(r.stdout)[0]["score"]
    assert sc["estimator"] == "blend"
    assert set(sc["components"]) == {
        "regret",
        "win_rate",
        "plateau",
        "scaled_regret",
        "variance_reward",
    }


def test_invalid_and_duplicate_designs_are_dropped_not_trained(tmp_path):
    def designed(c: dict, reward_ids: int) -> dict:
        c["group"] = "g"
        c["design"] = {"prompt_ids": [1, 2, 3], "completion_ids": [4, reward_ids], "logprobs": None}
        return c

    batch = [
        designed(cand("a", GUESS, [0.3, 0.3], [0.6, 0.6]), 5),
        designed(cand("b", NIM, [0.5, 0.5], [0.5, 0.5]), 6),
        designed(cand("c", None, valid=False, reason="timeout"), 7),
        designed(cand("d", GUESS, [0.3, 0.3], [0.6, 0.6]), 8),
    ]  # a copy of a
    r = run_cli("regret", input=jsonl(batch))
    scored = parse(r.stdout)
    assert [s["score"].get("sample", True) for s in scored] == [True, True, False, False]
    assert scored[2]["score"]["reward"] is None and scored[3]["score"]["reason"] == "duplicate"
    path = tmp_path / "scored.jsonl"
    path.write_bytes(jsonl(scored))
    groups, stats = read_groups([str(path)], role="designer")
    assert [s.source for g in groups for s in g] == ["a", "b"]
    assert stats.skipped["dropped_design"] == 2
    # --invalid penalty: today's behaviour, the invalid design is a sample with -1
    pen = parse(run_cli("regret", "--invalid", "penalty", input=jsonl(batch)).stdout)
    path.write_bytes(jsonl(pen))
    groups, _ = read_groups([str(path)], role="designer")
    assert sorted(s.reward for g in groups for s in g)[:2] == [-1.0, -1.0]
    assert orjson.loads(jsonl(pen).splitlines()[2])["score"]["reward"] == -1.0
