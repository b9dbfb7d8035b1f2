"""The micro experiment's results read out: the summary tables, each run's verdict and the
plots, from the results bench/micro_experiment.py writes (its --report rewrites them from
OUT/results.json alone).

Tables: first the experiment's bars and whether each holds (bench/micro_criteria.py);
per arm the held-out solve rate, round 0 → last, per seed, the designer's reward
in its first and last third of the rounds (as trained on, on its valid designs alone, and
with a fixed agent), the valid share, the levels chosen and the agent's trained groups;
per round the held-out solve rate, the plateau share and the level entropy; a held-out
figure's sampling error, each arm's mean gain with its standard error over the seeds and
the first arm against the others, the designer's reward change with its error; per
family the held-out figures against their ceiling; the answers refused for holding no
code block; the designer's landscape per family and level.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from micro_criteria import criteria_table  # noqa: E402
from micro_figures import (  # noqa: E402
    change_error,
    final_difference,
    heldout_gain,
    reward_thirds,
    standard_error,
    thirds,
)

from spade_cli.micro.ceiling import ceilings  # noqa: E402
from spade_cli.micro.site.spade_micro import FAMILIES  # noqa: E402

# The designer's reward as it trained on it, on its valid designs alone (where its invalid
# ones were trained on at a penalty), and as a fixed agent (the micro model) sees it.
REWARDS = (
    ("designer_reward", "designer reward"),
    ("designer_reward_valid", "on its valid designs"),
    ("designer_reward_fixed_agent", "with a fixed agent"),
)


def verdicts(results: dict) -> list[str]:
    out = []
    for arm, runs in results["runs"].items():
        for seed, res in runs.items():
            rs = res["rounds"]
            line = f"{arm:17s} seed {seed}: held-out {rs[0]['heldout']['all']:.3f} -> {rs[-1]['heldout']['all']:.3f} ({heldout_gain(res):+.3f})"
            for key, what in REWARDS:
                if ends := reward_thirds(res, key):
                    a, b = ends
                    line += f"; {what} first third {a:.3f}, last third {b:.3f} ({'up' if b > a else 'not up'})"
            share = [r["plateau_share"] for r in rs[1:] if r.get("plateau_share") is not None]
            if len(share) >= 3:
                a, b = thirds(share)
                line += f"; plateau share {a:.2f} -> {b:.2f}"
            spread = [e for e in map(level_entropy, rs[1:]) if e is not None]
            if len(spread) >= 3:
                a, b = thirds(spread)
                line += f"; level entropy {a:.2f} -> {b:.2f} bits"
            out.append(line)
    return out


def level_entropy(rnd: dict) -> float | None:
    """Entropy in bits of the levels a round's designs chose (log2 6 = 2.58: uniform; 0:
    one level). A designer that learns narrows its choice; one that drifts need not."""
    counts = [c for c in (rnd.get("levels") or {}).values() if c]
    n = sum(counts)
    return -sum(c / n * math.log2(c / n) for c in counts) if n else None


def mean_of(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def shown(x, fmt: str = ".3f") -> str:
    return "–" if x is None else format(x, fmt)


def by_round(runs: dict, get) -> list[list[float]]:
    """Per round, `get(round)` of every seed that has that round and a value for it."""
    n = max(len(r["rounds"]) for r in runs.values())
    return [
        [
            v
            for r in runs.values()
            if i < len(r["rounds"]) and (v := get(r["rounds"][i])) is not None
        ]
        for i in range(n)
    ]


def _row(cells) -> str:
    return "| " + " | ".join(cells) + " |"


def summary(results: dict) -> str:
    """The results as Markdown: one row per arm (seeds side by side), then per round the
    held-out solve rate, the plateau share and the level entropy, and per family the
    held-out solve rate and the levels chosen, each a mean over seeds."""
    rows = [
        "| arm | held-out, round 0 → last, per seed | mean gain | designer reward, first → last "
        "third, per seed | the same on its valid designs | the same with a fixed agent | valid "
        "designs | mean level, round 1 → last | agent groups trained / flat per round | wall "
        "per run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    per_round, plateau, spread, on_skill = [], [], [], []
    for arm, runs in results["runs"].items():
        seeds = list(runs.values())
        held = [f"{r['rounds'][-1]['heldout']['all']:.3f}" for r in seeds]
        gains = [heldout_gain(r) for r in seeds]
        rewards = {key: [] for key, _ in REWARDS}
        for r in seeds:
            for key, cells in rewards.items():
                if ends := reward_thirds(r, key):
                    cells.append(f"{ends[0]:.2f} → {ends[1]:.2f}")
        reward_cells = " | ".join("; ".join(cells) or "–" for cells in rewards.values())
        later = [x for r in seeds for x in r["rounds"][1:]]
        groups = [x["agent_groups"] for x in later if x.get("agent_groups")]
        first = mean_of(r["rounds"][1].get("mean_level") for r in seeds if len(r["rounds"]) > 1)
        last = mean_of(r["rounds"][-1].get("mean_level") for r in seeds)
        rows.append(
            f"| {arm} | {seeds[0]['rounds'][0]['heldout']['all']:.3f} → {' / '.join(held)} "
            f"| {statistics.fmean(gains):+.3f} | {reward_cells} "
            f"| {shown(mean_of(x.get('valid_rate') for x in later), '.0%')} "
            f"| {shown(first, '.2f')} → {shown(last, '.2f')} "
            f"| {shown(mean_of(g['trained'] for g in groups), '.1f')} / "
            f"{shown(mean_of(g['flat'] for g in groups), '.1f')} "
            f"| {statistics.fmean(r['wall_seconds'] for r in seeds) / 60:.1f} min |"
        )
        curve = by_round(runs, lambda x: x["heldout"]["all"])
        per_round.append(_row([arm, *(shown(mean_of(v)) for v in curve)]))
        for table, get in (
            (plateau, lambda x: x.get("plateau_share")),
            (spread, level_entropy),
            (on_skill, lambda x: x.get("on_skill_share")),
        ):
            values = by_round(runs, get)[1:]
            if any(values):
                table.append(_row([arm, *(shown(mean_of(v), ".2f") for v in values)]))
    n = max(len(r["rounds"]) for runs in results["runs"].values() for r in runs.values())
    refs = [
        i["reference_seconds"] for i in results.get("invocations", []) if "reference_seconds" in i
    ]
    if refs:  # what a wall time means: how fast the machine ran the fixed workload
        took = (
            f"{min(refs):.2f}" if min(refs) == max(refs) else f"{min(refs):.2f} to {max(refs):.2f}"
        )
        rows += [
            "",
            f"Wall times from a machine whose reference workload took {took} s "
            "(`reference_seconds`).",
        ]
    out = [
        *criteria_table(results),
        *rows,
        "",
        "Held-out solve rate per round (mean over seeds):",
        "",
    ]
    out += [_row(["arm", *(f"round {i}" for i in range(n))]), "|---|" + "---|" * n, *per_round]
    out += sampling_error(results) + gain_table(results)
    for title, table in (
        ("Share of valid designs in the plateau band (mean over seeds):", plateau),
        ("Entropy of the chosen levels in bits (uniform: 2.58; mean over seeds):", spread),
        (
            "Share of the designs that subclass their target skill's family (mean over seeds):",
            on_skill,
        ),
    ):
        if table:
            out += ["", title, "", _row(["arm", *(f"round {i}" for i in range(1, n))])]
            out += ["|---|" + "---|" * (n - 1), *table]
    tables = reward_change_table(results) + family_table(results) + erosion_table(results)
    tables += landscape_table(results)
    return "\n".join(out + tables) + "\n"


def sampling_error(results: dict) -> list[str]:
    """How far one held-out figure moves by chance: each is the pass rate of eval_items
    sampled episodes, so its binomial standard error at the final rates bounds the noise
    of one seed's gain (round 0's figure is the same measurement in every run)."""
    n = results.get("eval_items")
    if not n:
        return []
    finals = [
        r["rounds"][-1]["heldout"]["all"]
        for runs in results["runs"].values()
        for r in runs.values()
    ]
    errs = [math.sqrt(p * (1 - p) / n) for p in finals]
    return [
        "",
        f"Each held-out figure is the pass rate of {n} sampled episodes: at the final rates "
        f"above its binomial standard error is {min(errs):.3f} to {max(errs):.3f}, so one "
        f"seed's gain is known to about ±{2 * max(errs):.2f} (two standard errors).",
    ]


def gain_table(results: dict) -> list[str]:
    """Per arm, the mean held-out gain over its seeds and its standard error from the
    seeds' spread (training and sampling noise together), and the first arm's final mean
    against each other arm's, with the standard error of that difference."""
    runs = {arm: list(by_seed.values()) for arm, by_seed in results["runs"].items()}
    gains = {arm: [heldout_gain(r) for r in rs] for arm, rs in runs.items()}
    if not any(len(g) > 1 for g in gains.values()):
        return []
    first = next(iter(runs))
    rows = []
    for arm in runs:
        err = standard_error(gains[arm])
        apart = final_difference(runs[first], runs[arm]) if arm != first else None
        diff = "–" if apart is None else f"{apart[0]:+.3f} ± {apart[1]:.3f}"
        rows.append(
            _row(
                [
                    arm,
                    str(len(gains[arm])),
                    f"{statistics.fmean(gains[arm]):+.3f}",
                    shown(err),
                    f"{min(gains[arm]):+.3f} to {max(gains[arm]):+.3f}",
                    diff,
                ]
            )
        )
    head = _row(
        ["arm", "seeds", "mean gain", "standard error", "range", f"{first} minus the arm, final"]
    )
    return [
        "",
        "Held-out gain per arm, round 0 → last: the standard error is the seeds' spread "
        f"(sample standard deviation / √seeds), and {first}'s final solve rate is set "
        "against each arm's with the standard error of the difference:",
        "",
        head,
        "|---|---|---|---|---|---|",
        *rows,
    ]


def reward_change_table(results: dict) -> list[str]:
    """Per designer arm and measure, the designer's reward over the last third of the
    rounds minus the first third's, per seed and as a mean with its standard error over
    the seeds: where the criterion reads one sign per seed, this reads the size."""
    rows, within = [], False
    for arm, runs in results["runs"].items():
        cells = []
        for key, _ in REWARDS:
            measured = [(r, ends) for r in runs.values() if (ends := reward_thirds(r, key))]
            changes = [b - a for _, (a, b) in measured]
            errors = [change_error(r, key) for r, _ in measured]
            if len(changes) > 1:
                err = standard_error(changes)
                each = [
                    f"{c:+.2f}" if e is None else f"{c:+.2f} ± {e:.2f}"
                    for c, e in zip(changes, errors, strict=True)
                ]
                within |= any(e is not None for e in errors)
                cells.append(f"{statistics.fmean(changes):+.3f} ± {err:.3f} ({' / '.join(each)})")
            else:
                cells.append("–")
        if any(c != "–" for c in cells):
            rows.append(_row([arm, *cells]))
    if not rows:
        return []
    head = _row(["arm", *(f"{what}: mean ± standard error (per seed)" for _, what in REWARDS)])
    note = [
        "",
        "A seed's own ± is the standard error of its change from the spread of the designs' "
        "rewards within each round: how far the draw of its designs alone moves it.",
    ]
    return [
        "",
        "The designer's reward, last third of the rounds minus the first third:",
        "",
        head,
        "|---|" + "---|" * len(REWARDS),
        *rows,
        *(note if within else []),
    ]


def erosion_table(results: dict) -> list[str]:
    """Per designer arm and round, summed over seeds: the answers refused for holding no
    code block, and how many of them end in an agent action where the fence belongs."""
    rows, n = [], 0
    for arm, runs in results["runs"].items():
        bad = by_round(runs, lambda x: x.get("malformed"))[1:]
        acts = by_round(runs, lambda x: x.get("malformed_action_end"))[1:]
        designed = any(x.get("designs") for r in runs.values() for x in r["rounds"][1:])
        if not designed or not any(bad):  # no designer, or results from before the count
            continue
        n = max(n, len(bad))
        rows.append(_row([arm, *(f"{sum(a)} / {sum(b)}" for a, b in zip(acts, bad, strict=True))]))
    if not rows:
        return []
    title = (
        "Answers with no code block per round, summed over seeds: those ending in an agent "
        "action (a symbol, left, right or enter) / all of them:"
    )
    head = _row(["arm", *(f"round {i}" for i in range(1, n + 1))])
    return ["", title, "", head, "|---|" + "---|" * n, *rows]


def family_table(results: dict) -> list[str]:
    """Per arm and family, means over seeds: the held-out solve rate, round 0 → last, and
    the level the designs chose and its no-hint win rate, first round → last."""
    top = ceilings()
    head = ["arm", *(f"{f} (ceiling {top[f]:.2f}): held-out / level / win rate" for f in FAMILIES)]
    rows = []
    for arm, runs in results["runs"].items():
        seeds = list(runs.values())
        cells = []
        for fam in FAMILIES:
            held = [mean_of(r["rounds"][i]["heldout"].get(fam) for r in seeds) for i in (0, -1)]
            cell = f"{shown(held[0], '.2f')} → {shown(held[1], '.2f')}"
            ends = [
                [(r["rounds"][i].get("families") or {}).get(fam) or {} for r in seeds]
                for i in (1, -1)
            ]
            if any(ends[0] + ends[1]):
                for key in ("mean_level", "win_rate_nohint"):
                    a, b = (mean_of(x.get(key) for x in end) for end in ends)
                    cell += f" / {shown(a, '.2f')} → {shown(b, '.2f')}"
            cells.append(cell)
        rows.append(_row([arm, *cells]))
    title = (
        "Per family, mean over seeds: held-out solve rate (round 0 → last); level chosen and "
        "no-hint win rate on the valid designs (round 1 → last):"
    )
    return ["", title, "", _row(head), "|---|" + "---|" * len(FAMILIES), *rows]


def landscape_table(results: dict) -> list[str]:
    """Per family and level, pooled over the arms' seeds and the first and the second half
    of the rounds: designs, mean reward, no-hint win rate and regret. Where the reward
    peaks is each family's edge; a regret near 0 is a hint the agent cannot use."""
    rows = []
    for arm, runs in results["runs"].items():
        halves: list[dict[str, list]] = [{}, {}]
        for r in runs.values():
            later = r["rounds"][1:]
            for i, rnd in enumerate(later):
                for cell, x in (rnd.get("landscape") or {}).items():
                    halves[2 * i >= len(later)].setdefault(cell, []).append(x)
        if not any(halves):
            continue
        for cell in sorted(set(halves[0]) | set(halves[1])):
            cells = [arm, cell]
            for half in halves:
                xs = half.get(cell, [])
                n = sum(x["designs"] for x in xs)
                cells.append(
                    "–"
                    if not n
                    else f"{n}: {shown(_weighted(xs, 'reward'), '.2f')} / "
                    f"{shown(_weighted(xs, 'win_rate'), '.2f')} / {shown(_weighted(xs, 'regret'), '+.2f')}"
                )
            rows.append(_row(cells))
    if not rows:
        return []
    title = (
        "The designer's landscape: per arm, family and level, over the seeds, valid designs: "
        "mean reward / no-hint win rate / regret, first half of the rounds and second half:"
    )
    head = _row(["arm", "design", "first half", "second half"])
    return ["", title, "", head, "|---|---|---|---|", *rows]


def _weighted(xs: list[dict], key: str) -> float | None:
    """The mean of `key` over all the designs behind per-round means `xs`."""
    pairs = [(x[key], x["designs"]) for x in xs if x.get(key) is not None]
    n = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / n if n else None


def report(results: dict, out: Path) -> None:
    """Table, verdicts and plots from a results file (also what a finished run prints)."""
    (out / "summary.md").write_text(summary(results))
    for line in verdicts(results):
        print(line)
    for line in criteria_table(results):
        print(line)
    for p in plot(results, out):
        print(f"plot: {p}", file=sys.stderr)
    print(f"summary: {out / 'summary.md'}", file=sys.stderr)


def plot(results: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels = [
        ("heldout", "held-out solve rate", lambda r: r["heldout"]["all"]),
        ("level", "mean level chosen by the designer", lambda r: r.get("mean_level")),
        ("level_entropy", "entropy of the chosen levels (bits)", level_entropy),
        (
            "on_skill",
            "share of designs of their skill's family",
            lambda r: r.get("on_skill_share"),
        ),
        ("designer_reward", "designer reward (blend)", lambda r: r.get("designer_reward")),
        (
            "designer_reward_fixed_agent",
            "designer reward, fixed agent",
            lambda r: r.get("designer_reward_fixed_agent"),
        ),
    ]
    paths = []
    for name, title, get in panels:
        fig, ax = plt.subplots(figsize=(6, 4))
        for color, (arm, runs) in enumerate(results["runs"].items()):
            xs, mean, lo, hi = [], [], [], []
            for i, vals in enumerate(by_round(runs, get)):
                if vals:
                    xs.append(i)
                    mean.append(statistics.fmean(vals))
                    lo.append(min(vals))
                    hi.append(max(vals))
            if xs:
                # One colour per arm in every plot, whether or not the arm has this figure.
                ax.plot(xs, mean, marker="o", label=arm, color=f"C{color}")
                ax.fill_between(xs, lo, hi, alpha=0.2, color=f"C{color}")
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(title)
        ax.set_title(f"{title} (mean, range over seeds)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        fig.tight_layout()
        p = out / f"micro-{name}.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        paths.append(p)
    return paths
