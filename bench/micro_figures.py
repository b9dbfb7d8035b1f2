"""One run's figures as the micro experiment's report and its bars read them: a run's
held-out gain, the designer's reward over the first and last third of its rounds and that
change's error, a mean's standard error, and two arms' final solve rates set apart."""

from __future__ import annotations

import math
import statistics


def thirds(xs: list[float]) -> tuple[float, float]:
    k = max(1, len(xs) // 3)
    return statistics.fmean(xs[:k]), statistics.fmean(xs[-k:])


def reward_thirds(run: dict, key: str) -> tuple[float, float] | None:
    """A run's designer reward (`key`: a round's field, e.g. designer_reward) over its
    first and last third of the rounds; None with fewer than three rounds that have one."""
    rew = [x[key] for x in run["rounds"][1:] if x.get(key) is not None]
    return thirds(rew) if len(rew) >= 3 else None


def change_error(run: dict, key: str) -> float | None:
    """The standard error of a run's last-third-minus-first-third change in `key`, from the
    spread of the designs' rewards within each round (`key`_se, where the results hold
    it): how far the draw of the designs alone moves one seed's change."""
    rounds = [x for x in run["rounds"][1:] if x.get(key) is not None]
    errs = [x.get(f"{key}_se") for x in rounds]
    if len(rounds) < 3 or any(e is None for e in errs):
        return None
    k = max(1, len(rounds) // 3)

    def of_mean(es: list[float]) -> float:  # of a third: the mean of its k rounds
        return math.sqrt(sum(e * e for e in es)) / k

    return math.hypot(of_mean(errs[:k]), of_mean(errs[-k:]))


def heldout_gain(run: dict) -> float:
    """A run's held-out solve rate after its last round minus round 0's."""
    return run["rounds"][-1]["heldout"]["all"] - run["rounds"][0]["heldout"]["all"]


def standard_error(xs: list[float]) -> float | None:
    """The standard error of a mean (over seeds, or a round's designs) from the spread of
    what it averages; None for one value."""
    return statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else None


def final_difference(ours: list[dict], theirs: list[dict]) -> tuple[float, float] | None:
    """One arm's mean final held-out solve rate minus another's, over their seeds' runs,
    with the standard error of that difference; None where either has one seed."""
    a, b = ([r["rounds"][-1]["heldout"]["all"] for r in runs] for runs in (ours, theirs))
    errs = (standard_error(a), standard_error(b))
    if None in errs:
        return None
    return statistics.fmean(a) - statistics.fmean(b), math.hypot(*errs)
