"""Episode returns: `final` (published) against `sum`, by hand and on scripted episodes."""

from __future__ import annotations

import pytest

from spade_cli.rollout import ReplayAgent, run_rollouts
from spade_cli.rollout.returns import episode_returns

from .test_rollout import CFG, cand

# Partial rewards on the way, then a final reward: the replay agent plays the solution.
# `finish` True: the last step terminates with 0.5 (sum 0.2 + 0.2 + 0.5 = 0.9);
# False: the turn limit cuts the episode after the same steps (final 0, sum 0.9).
SHAPED = """
import gymnasium as gym

class Shaped(gym.Env):
    metadata = {"name": "shaped", "max_turns": 3}

    def reset(self, seed=None, options=None):
        self._n = 0
        return "Say go three times.", {"hint": "go", "solution": ["go", "go", "go"]}

    def step(self, action):
        self._n += 1
        if self._n < 3:
            return "again", 0.2, False, False, {}
        return "done", FINAL_REWARD, FINISH, False, {}
"""


def turns(*rewards: float) -> list[dict]:
    return [{"observation": "", "action": "", "reward": r} for r in rewards]


def test_final_and_sum_by_hand():
    assert episode_returns(turns(0.3, 0.3, 0.5), "terminated", "final") == {
        "return": 0.5,
        "return_final": 0.5,
        "return_sum": pytest.approx(1.1),
    }
    assert episode_returns(turns(0.3, 0.3, 0.5), "terminated", "sum")["return"] == pytest.approx(
        1.1
    )
    for stop in ("max_turns", "truncated", "timeout", "env_error", "context"):
        assert episode_returns(turns(0.3, 1.0), stop, "final")["return"] == 0.0
    assert episode_returns(turns(0.0, 3.0), "terminated", "final")["return"] == 1.0  # clipped
    assert episode_returns(turns(-7.0), "terminated", "final")["return"] == -1.0
    assert episode_returns([], "terminated", "final")["return"] == 0.0
    with pytest.raises(ValueError):
        episode_returns([], None, "mean")


@pytest.mark.parametrize(
    "finish,final_reward,want_final,want_sum",
    [
        (True, 0.5, 0.5, 0.9),
        (True, 0.6, 0.6, 1.0),
        (False, 0.5, 0.0, 0.9),  # the turn limit, not the environment, ended it
    ],
)
def test_final_and_sum_on_scripted_episodes(finish, final_reward, want_final, want_sum):
    code = SHAPED.replace("FINAL_REWARD", str(final_reward)).replace("FINISH", str(finish))
    for mode, want in (("final", want_final), ("sum", want_sum)):
        (rec,) = run_rollouts(
            [cand(code, "shaped")],
            ReplayAgent(),
            k=2,
            sandbox_cfg=CFG,
            episode_return=mode,
            hint_source="env",
        )
        ro = rec["rollouts"]
        assert ro["return"] == mode
        for ep in ro["nohint"] + ro["hint"]:
            assert ep["return"] == pytest.approx(want)
            assert ep["return_final"] == pytest.approx(want_final)
            assert ep["return_sum"] == pytest.approx(want_sum)
            assert ep["success"] == (want >= 1.0)
        assert ro["summary"]["nohint"]["mean_return_final"] == pytest.approx(want_final)
        assert ro["summary"]["nohint"]["mean_return_sum"] == pytest.approx(want_sum)


def test_shaping_past_one_is_the_published_form_but_breaks_a_summed_return():
    """Rewards 0.2, 0.2, 1.0: with `final` the return is 1.0 (solved); summed they exceed
    1, which breaks the contract of a summed return (the environment is scored invalid)."""
    code = SHAPED.replace("FINAL_REWARD", "1.0").replace("FINISH", "True")
    (rec,) = run_rollouts(
        [cand(code, "shaped")],
        ReplayAgent(),
        k=1,
        sandbox_cfg=CFG,
        episode_return="final",
        hint_source="env",
    )
    assert [ep["return"] for ep in rec["rollouts"]["nohint"]] == [1.0]
    (rec,) = run_rollouts(
        [cand(code, "shaped")],
        ReplayAgent(),
        k=1,
        sandbox_cfg=CFG,
        episode_return="sum",
        hint_source="env",
    )
    (ep,) = rec["rollouts"]["nohint"]
    assert ep["stop"] == "env_error" and "outside [0, 1]" in ep["detail"]
    assert rec["rollouts"]["contract_broken"]
