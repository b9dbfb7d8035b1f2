"""The micro experiment's bars, each read from its results: what the experiment must show
(the README's Evidence section), per seed where a bar is per seed, and whether it holds.

    python bench/micro_criteria.py OUT/results.json [...]    # one table per results file
    python bench/micro_criteria.py --rounds 6 OUT/results.json  # as if the runs stopped there

The bars: SPADE's held-out solve rate gains at least 15 points in every seed; in every
seed the designer's reward over the last third of the rounds is above the first third's
and the negative control's is not (as trained on; with a fixed agent, where the results
hold it, as a second reading that the agent's progress cannot move); the share of valid
designs in the plateau band rises under SPADE; SPADE beside the fixed pool and the frozen
designer; the whole experiment within an hour and every run within five minutes. A SPADE
variant (`spade-invalid-penalty`) is read against its own control
(`negative-control-invalid-penalty`).

`--rounds N` reads every run's first N rounds: a loop's rounds are seeded by their number
and nothing in one looks ahead, so a longer run's first N rounds are an N-round run's (a
seven-round run gave a five-round run's figures to the digit), but for the fixed agent's
reading, which plays all of a run's rounds in one batch (within sampling noise). The
times are the longer runs', so that reading leaves the time bars out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from micro_figures import (  # noqa: E402
    final_difference,
    heldout_gain,
    reward_thirds,
    standard_error,
    thirds,
)

AGENT_GAIN = 0.15  # 15 points of held-out solve rate
RUN_SECONDS = 300.0
EXPERIMENT_SECONDS = 3600.0
DESIGNER_READINGS = (
    ("designer_reward", "as trained on"),
    ("designer_reward_fixed_agent", "with a fixed agent"),
)
BESIDE = ("fixed-pool", "frozen-designer")


def _verdict(held: int, of: int) -> str:
    return "met" if of and held == of else f"not met ({held} of {of})"


def agent_row(arm: str, runs: dict) -> list[str]:
    # At the results' four decimals: 0.488 - 0.338 is 0.15, not 0.1499999.
    gains = [round(heldout_gain(r), 4) for r in runs.values()]
    held = sum(g >= AGENT_GAIN for g in gains)
    return [
        f"{arm}'s held-out solve rate, last round over round 0, at least +{AGENT_GAIN:.2f} "
        "in every seed",
        " / ".join(f"{g:+.3f}" for g in gains),
        _verdict(held, len(gains)),
    ]


def designer_rows(arm: str, control: str, results: dict) -> list[list[str]]:
    """Per reading, each seed run under both arms: the arm's change and the control's; the
    bar holds in a seed where the arm's rises and the control's does not."""
    runs, controls = results["runs"][arm], results["runs"][control]
    rows = []
    for key, reading in DESIGNER_READINGS:
        cells, held = [], 0
        for seed, run in runs.items():
            if seed not in controls:  # a seed the control has not run is no pair
                continue
            ours, theirs = reward_thirds(run, key), reward_thirds(controls[seed], key)
            if ours is None or theirs is None:
                continue
            up, control_up = ours[1] - ours[0], theirs[1] - theirs[0]
            holds = up > 0 and not control_up > 0
            held += holds
            cells.append(f"seed {seed} {up:+.2f} vs {control_up:+.2f} {'✓' if holds else '✗'}")
        if cells:
            rows.append(
                [
                    f"designer reward {reading}, first third of the rounds to the last: "
                    f"{arm}'s up and {control}'s not, in every seed",
                    "; ".join(cells),
                    _verdict(held, len(cells)),
                ]
            )
    return rows


def plateau_row(arm: str, runs: dict) -> list[str] | None:
    """The plateau share's change from the first third of the rounds to the last: a rise
    when its mean over the seeds clears two standard errors of the seeds' changes (one
    seed: when it rises), not a drift a seed or two make alone."""
    changes = []
    for run in runs.values():
        share = [r.get("plateau_share") for r in run["rounds"][1:]]
        if len(share) >= 3 and all(s is not None for s in share):
            first, last = thirds(share)
            changes.append((first, last))
    if not changes:
        return None
    first, last = (statistics.fmean(x) for x in zip(*changes, strict=True))
    deltas = [b - a for a, b in changes]
    err = standard_error(deltas)
    rises = last - first > (2 * err if err is not None else 0.0)
    up = sum(d > 0 for d in deltas)
    return [
        f"share of {arm}'s valid designs in the plateau band rises from the first third of "
        "the rounds to the last",
        f"{first:.2f} → {last:.2f} ({last - first:+.2f}"
        + (f" ± {err:.2f}" if err is not None else "")
        + f"; up in {up} of {len(deltas)} seeds)",
        "met" if rises else "not met",
    ]


def beside_row(arm: str, results: dict) -> list[str] | None:
    """The arm's final held-out solve rate against the fixed pool's and the frozen
    designer's: reported whichever way it comes out, `ahead` only beyond two standard
    errors of the difference."""
    ours = list(results["runs"][arm].values())
    cells = []
    for other in BESIDE:
        apart = final_difference(ours, list(results["runs"].get(other, {}).values()))
        if apart is None:
            continue
        diff, err = apart
        where = "ahead" if diff > 2 * err else "behind" if diff < -2 * err else "not apart"
        cells.append(f"{other} {diff:+.3f} ± {err:.3f} ({where})")
    if not cells:
        return None
    return [
        f"{arm} beside the fixed pool and the frozen designer: final held-out solve rate, "
        f"{arm} minus the arm",
        "; ".join(cells),
        "reported",
    ]


def time_rows(results: dict) -> list[list[str]]:
    """The experiment's time is its runs' wall times summed (each run's loop and its
    measurements, one run at a time as `--jobs 1` runs them), whether they ran in one
    invocation or several."""
    walls = [r.get("wall_seconds") for runs in results["runs"].values() for r in runs.values()]
    if not walls or any(w is None for w in walls):
        return []
    total = sum(walls)
    within = sum(w <= RUN_SECONDS for w in walls)
    measured = f"{min(walls):.0f} to {max(walls):.0f} s"
    loops = [r.get("loop_seconds") for runs in results["runs"].values() for r in runs.values()]
    if loops != walls and all(loops):
        # The verdict is the run's; what its spade-loop took alone says where the time went.
        measured += (
            f"; the loops alone {min(loops):.0f} to {max(loops):.0f} s, "
            f"{sum(x <= RUN_SECONDS for x in loops)} of {len(loops)} within"
        )
    return [
        [
            f"the whole experiment within {EXPERIMENT_SECONDS / 60:.0f} minutes",
            f"{total / 60:.1f} min over {len(walls)} runs",
            "met" if total <= EXPERIMENT_SECONDS else "not met",
        ],
        [
            f"every run within {RUN_SECONDS / 60:.0f} minutes",
            measured,
            _verdict(within, len(walls)),
        ],
    ]


def first_rounds(results: dict, n: int) -> dict:
    """The results as if every run had stopped after round n, without its times."""
    runs = {
        arm: {
            seed: {"rounds": run["rounds"][: n + 1]}
            for seed, run in seeds.items()
            if len(run["rounds"]) > n
        }
        for arm, seeds in results["runs"].items()
    }
    return {**results, "runs": runs}


def criteria(results: dict) -> list[list[str]]:
    """[bar, what the results show, verdict] for every bar the results can be read on."""
    rows: list[list[str]] = []
    for arm, runs in results["runs"].items():
        if not arm.startswith("spade"):
            continue
        rows.append(agent_row(arm, runs))
        control = "negative-control" + arm.removeprefix("spade")
        if control in results["runs"]:
            rows += designer_rows(arm, control, results)
        rows += [r for r in (plateau_row(arm, runs), beside_row(arm, results)) if r]
    return rows + time_rows(results)


def criteria_table(results: dict) -> list[str]:
    rows = criteria(results)
    if not rows:
        return []
    return [
        "The experiment's bars, read from these results:",
        "",
        "| bar | measured | verdict |",
        "|---|---|---|",
        *(f"| {' | '.join(r)} |" for r in rows),
        "",
    ]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="micro_criteria.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("results", nargs="+", help="a results.json of bench/micro_experiment.py")
    ap.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="read every run's first N rounds (runs with fewer are left out; no time bars)",
    )
    args = ap.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        ap.error("--rounds must be at least 1")
    for path in args.results:
        try:
            results = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            print(f"micro_criteria: {path}: {e}", file=sys.stderr)
            return 1
        if args.rounds is not None:
            results = first_rounds(results, args.rounds)
        print(f"{path}:" + (f" (read at round {args.rounds})" if args.rounds else ""))
        print("\n".join(criteria_table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
