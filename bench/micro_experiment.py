#!/usr/bin/env python3
"""Does the loop make a model better? SPADE against its baselines in the micro world.

Arms (each `examples/micro.toml` with one change, `--seeds` seeds each):
    spade             the full loop
    fixed-pool        no designer: each round the agent trains on environments drawn from
                      the micro library (every family at a uniformly random level)
    frozen-designer   the designer is never updated (train.role = agent); memory stays on
    negative-control  each round the designer's rewards are permuted within their skill,
                      in its training (train.shuffle_designer_rewards) and in the memory
                      whose exemplars it is shown (regret.shuffle_memory_scores): neither
                      its updates nor its prompts carry the signal
and, on request, spade-invalid-penalty (SPADE with regret.invalid = penalty: the designer
is also trained on its invalid designs, which the published recipe drops) and
spade-design-replay (SPADE whose agent steps rehearse the round's valid designs,
train.design_replay = 1; spade_cli/train/design_replay.py) with its own negative control,
negative-control-design-replay; spade-first-round-replay and
negative-control-first-round-replay rehearse round 1's designs instead, which the starting
model wrote (loop.replayed_designs = first-round).

Per round it records the valid rate, the designer's reward (as it trained on it, and as a
fixed agent, the micro model itself, sees the same designs), the levels the designs chose,
the no-hint win rate on the round's environments, the share of valid designs whose win
rate lies in the plateau band [0.4, 0.6], and the held-out solve rate (`spade-eval --suite
micro` on the round's checkpoint, sampled at the agent's temperature, on seeds no round
plays), and the answers refused for holding no code block, with those that end in an
agent action. Round 0 is the micro model itself, once for all arms. The summary states a
held-out figure's sampling error, reads the figures against their ceiling
(spade_cli/micro/ceiling.py: what a flawless agent wins without the hint), and lays out the designer's landscape: per family and
level, the valid designs' reward, no-hint win rate and regret. The loop runs the held-out
suite itself (its [eval] table), and the fixed agent plays every round's designs in one
rollout after the loop: a run starts Python three times, not once per measurement.

Everything is resumable: each run is a spade-loop run directory (a rerun continues it),
and each evaluation is a file written atomically, so an interrupted experiment picks up
where it stopped. An invocation with other arms or seeds but the same settings (--config,
--rounds, --eval-items, --eval-seed, --set) adds its runs to the same results file.
Writes OUT/results.json (with each invocation's commit, package versions and --jobs),
OUT/summary.md (the tables) and five PNG plots beside them, and prints a verdict per run.

    python bench/micro_experiment.py                       # 4 arms x 3 seeds
    python bench/micro_experiment.py --arms spade --seeds 0 --rounds 2    # a smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spade_cli.micro.ceiling import ceilings  # noqa: E402
from spade_cli.micro.site.spade_micro import LEVELS, SYMBOLS, CorridorEnv  # noqa: E402
from spade_cli.recordio import RecordReader  # noqa: E402

ARMS = {
    "spade": {},
    # As many environments per round as SPADE's rounds have valid designs, about 8 of 12.
    "fixed-pool": {
        "baseline": {"mode": "fixed-pool", "pool": "micro", "pool_size": 8},
        "train": {"role": "agent"},
    },
    "frozen-designer": {"train": {"role": "agent"}},
    "negative-control": {
        "train": {"shuffle_designer_rewards": True},
        "regret": {"shuffle_memory_scores": True},
    },
    # Not one of the four, and not the published recipe (which drops invalid designs): the
    # designer is also trained on its invalid designs, at the invalid penalty.
    "spade-invalid-penalty": {"regret": {"invalid": "penalty"}},
    # Its negative control: the valid designs' rewards shuffled, the penalties kept.
    "negative-control-invalid-penalty": {
        "train": {"shuffle_designer_rewards": True},
        "regret": {"invalid": "penalty", "shuffle_memory_scores": True},
    },
    # Not the published recipe either: the agent's steps also rehearse the round's valid
    # designs (train.design_replay), against the agent's steps wearing the designs away.
    "spade-design-replay": {"train": {"design_replay": 1.0}},
    # Its negative control: the same replay, the designer's rewards shuffled.
    "negative-control-design-replay": {
        "train": {"shuffle_designer_rewards": True, "design_replay": 1.0},
        "regret": {"shuffle_memory_scores": True},
    },
    # The same replay of round 1's designs, which the starting model wrote: the format
    # without the trained model's own choices (loop.replayed_designs), and its control.
    "spade-first-round-replay": {
        "loop": {"replayed_designs": "first-round"},
        "train": {"design_replay": 1.0},
    },
    "negative-control-first-round-replay": {
        "loop": {"replayed_designs": "first-round"},
        "train": {"shuffle_designer_rewards": True, "design_replay": 1.0},
        "regret": {"shuffle_memory_scores": True},
    },
}
DEFAULT_ARMS = ("spade", "fixed-pool", "frozen-designer", "negative-control")
# What makes two invocations' runs comparable, so that one results file holds both.
SETTINGS = ("config", "config_sha256", "rounds", "eval_items", "eval_seed", "overrides")
BAND = (0.4, 0.6)
# The designer's reward as it trained on it, and as a fixed agent (the micro model) sees it.
REWARDS = (
    ("designer_reward", "designer reward"),
    ("designer_reward_fixed_agent", "with a fixed agent"),
)
LEVEL = re.compile(r"^\s*level\s*=\s*(\d+)\s*$", re.MULTILINE)
FAMILY = re.compile(r"^\s*class\s+\w+\s*\(\s*(\w+)Env\s*\)", re.MULTILINE)
FAMILIES = ("corridor", "code", "switch")
# What the agent answers in the micro world: a symbol (codes, switches) or a corridor's
# command. An answer with no code block that ends in one of these has an action where the
# closing fence belongs: the agent's steps wearing the designs down.
ACTIONS = {*SYMBOLS, *CorridorEnv.COMMANDS}


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def apply_overrides(cfg: dict, items: list[str]) -> None:
    """`TABLE.KEY=VALUE` (or `KEY=VALUE` at the top level), VALUE in TOML."""
    for item in items:
        key, sep, value = item.partition("=")
        table, dot, field = key.strip().rpartition(".")
        if not sep or not field:
            raise ValueError(f"--set {item!r}: expected TABLE.KEY=VALUE")
        try:
            parsed = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError as e:
            raise ValueError(
                f"--set {item!r}: {value.strip()!r} is not a TOML value ({e})"
            ) from None
        (cfg.setdefault(table, {}) if dot else cfg)[field] = parsed


def heldout_table(args) -> dict:
    """The loop's [eval] table: the held-out suite on each round's checkpoint, in the loop's
    warm interpreter, on the suite's seed, sampled as the agent plays."""
    return {
        "suites": ["micro"],
        "num_items": args.eval_items,
        "temperature": 1.0,
        "max_tokens": 4,
        "seed": args.eval_seed,
    }


def write_config(base: dict, arm: str, seed: int, args, runs_dir: Path) -> Path:
    cfg = json.loads(json.dumps(base))
    for table, values in ARMS[arm].items():
        cfg.setdefault(table, {}).update(values)
    apply_overrides(cfg, args.set)  # what --set names wins over the arm's own settings
    cfg["eval"] = heldout_table(args)
    cfg.update(name=f"{arm}-s{seed}", seed=seed, rounds=args.rounds, runs_dir=str(runs_dir))
    lines = [f"{k} = {toml_value(v)}" for k, v in cfg.items() if not isinstance(v, dict)]
    for table, values in cfg.items():
        if isinstance(values, dict):
            lines += ["", f"[{table}]"] + [f"{k} = {toml_value(v)}" for k, v in values.items()]
    path = runs_dir / f"{arm}-s{seed}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


# One thread per stage: a million-parameter model gains nothing from a second one, and on
# a shared 2-core machine two spinning thread pools slow each stage several times over.
# The stages import this checkout's spade_cli, whatever is installed.
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}


class RunFailed(Exception):
    pass


def run(cmd: list[str], log: Path) -> None:
    with log.open("ab") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=ENV)
    if proc.returncode:
        raise RunFailed(f"{' '.join(cmd[2:4])} failed (exit {proc.returncode}); see {log}")


def records(path: Path) -> list[dict]:
    return list(RecordReader([str(path)])) if path.exists() else []


def solve_rates(recs: list[dict]) -> dict:
    """spade-eval's records as solve rates: overall, per level and per family."""
    by: dict[str, list[float]] = {}
    for r in recs:
        ok = r["stats"]["pass@1"]
        for key in ("all", f"L{r['meta']['level']}", r["meta"]["family"]):
            by.setdefault(key, []).append(ok)
    return {k: round(statistics.fmean(v), 4) for k, v in sorted(by.items())}


def evaluate(model: str, out: Path, args, log: Path) -> dict:
    """The held-out solve rate of `model` (round 0's: the rounds' own come from the loop)."""
    if not out.exists():
        run(
            [
                sys.executable,
                "-m",
                "spade_cli",
                "eval",
                "--suite",
                "micro",
                "-n",
                str(args.eval_items),
                "--seed",
                str(args.eval_seed),
                "--engine",
                "hf",
                "--model",
                model,
                "--temperature",
                "1.0",
                "--max-tokens",
                "4",
                "-o",
                str(out),
            ],
            log,
        )
    return solve_rates(records(out))


def eval_tag(args) -> str:
    """Evaluations on another suite seed are other files (the held-out one keeps its name)."""
    return "" if args.eval_seed == 0 else f"-seed{args.eval_seed}"


def win_rate(c: dict) -> float | None:
    """A design's no-hint win rate as its reward saw it: over the window's plays (all the
    round's agent steps) where there is one, else over step 1's."""
    score = c.get("score") or {}
    window = ((score.get("window") or {}).get("nohint") or {}).get("success_rate")
    return window if window is not None else (score.get("nohint") or {}).get("success_rate")


def is_valid(c: dict) -> bool:
    return bool((c.get("validation") or {}).get("valid"))


def round_metrics(rdir: Path) -> dict:
    """What one round's designs and plays were (the window's scores when there is one)."""
    scored = records(rdir / "scored-window.jsonl.zst") or records(rdir / "scored.jsonl.zst")
    designed = [c for c in scored if c.get("origin") == "design"]
    valid = [c for c in scored if is_valid(c)]
    levels, cells = [], []  # cells: (family, level, window win rate or None) per design
    scores = []  # (family/Ln, score) per valid design with a reward
    for c in designed:
        code = ((c.get("env") or {}).get("code")) or (c.get("design") or {}).get("text") or ""
        m, fam = LEVEL.search(code), FAMILY.search(code)
        # a level outside the families' table is refused (an import crash): no choice of
        # difficulty to count
        if m and int(m[1]) in LEVELS:
            levels.append(int(m[1]))
            if fam:
                cells.append((fam[1].lower(), int(m[1]), win_rate(c) if is_valid(c) else None))
                if is_valid(c) and (c.get("score") or {}).get("reward") is not None:
                    scores.append((f"{fam[1].lower()}/L{m[1]}", c["score"]))
    wins = [w for w in map(win_rate, valid) if w is not None]
    malformed = [
        (c.get("design") or {}).get("text") or ""
        for c in designed
        if (c.get("validation") or {}).get("reason") == "no_code"
    ]
    rewards = [
        c["score"]["reward"] for c in designed if (c.get("score") or {}).get("reward") is not None
    ]
    return {
        "designs": len(designed),
        "valid_rate": round(sum(map(is_valid, designed)) / len(designed), 4) if designed else None,
        "designer_reward": round(statistics.fmean(rewards), 4) if rewards else None,
        "levels": {str(lv): levels.count(lv) for lv in LEVELS},
        "mean_level": round(statistics.fmean(levels), 3) if levels else None,
        "win_rate_nohint": round(statistics.fmean(wins), 4) if wins else None,
        "plateau_share": round(sum(BAND[0] <= w <= BAND[1] for w in wins) / len(wins), 4)
        if wins
        else None,
        "families": family_metrics(cells),
        "landscape": landscape(scores),
        "malformed": len(malformed),
        "malformed_action_end": sum(
            t.rstrip("\n").rsplit("\n", 1)[-1].strip() in ACTIONS for t in malformed
        ),
    }


def landscape(scores: list[tuple[str, dict]]) -> dict:
    """Per family and level, the valid designs' count and mean reward, no-hint win rate
    and regret: where each family's edge lies for this round's agent, and whether its
    hint pays there."""
    out = {}
    for cell in sorted({c for c, _ in scores}):
        mine = [s for c, s in scores if c == cell]
        out[cell] = {
            "designs": len(mine),
            "reward": round(statistics.fmean(s["reward"] for s in mine), 4),
            "win_rate": _round(_mean((s.get("components") or {}).get("win_rate") for s in mine)),
            "regret": _round(_mean(s.get("regret") for s in mine)),
        }
    return out


def family_metrics(cells: list[tuple[str, int, float | None]]) -> dict:
    """Per family: how many designs named a level, their mean level, and the no-hint win
    rate on the valid ones. The edge of each family moves at its own pace as the agent
    learns, and one shared model picks every family's level."""
    out = {}
    for fam in sorted({f for f, _, _ in cells}):
        mine = [(lv, w) for f, lv, w in cells if f == fam]
        wins = [w for _, w in mine if w is not None]
        out[fam] = {
            "designs": len(mine),
            "mean_level": round(statistics.fmean(lv for lv, _ in mine), 3),
            "win_rate_nohint": round(statistics.fmean(wins), 4) if wins else None,
        }
    return out


# The loop's rollout flags the fixed agent plays with: (flag, [rollout] key, default).
PLAY = (
    ("--episodes", "episodes", 8),
    ("--hint-source", "hint_source", "env"),
    ("--max-tokens", "max_tokens", 4),
    ("--max-turns", "max_turns", 8),
    ("--prompt", "prompt", "micro"),
    ("--temperature", "temperature", 1.0),
)


def fixed_agent_rewards(run_dir: Path, rounds: int, base: dict, log: Path) -> dict[int, float]:
    """The designer's reward with the agent held fixed, per round: every round's valid
    designs played by the micro model itself (round 0's agent) on the same seeds, and
    scored as the loop scores them. The reward the designer trains on measures an agent
    that changes every round, so it drifts even under a frozen designer; this one changes
    only with the designs. One rollout and one regret over all the rounds (a design's
    episode seeds depend on it alone; batched with other rounds' plays, its sampled
    actions can differ from a rollout of its round alone, within sampling noise)."""
    validated = [
        f
        for r in range(1, rounds + 1)
        for f in sorted((run_dir / f"round-{r:03d}").glob("validated*.jsonl.zst"))
    ]
    plays = run_dir / "fixed-agent-rollouts.jsonl.zst"
    scored = run_dir / "fixed-agent-scored.jsonl.zst"
    ro = base.get("rollout", {})
    spade = [sys.executable, "-m", "spade_cli"]
    if validated and not scored.exists():
        if not plays.exists():
            run(
                [
                    *spade,
                    "rollout",
                    *map(str, validated),
                    "--engine",
                    "hf",
                    "--model",
                    base["model"]["path"],
                    *(x for flag, key, default in PLAY for x in (flag, str(ro.get(key, default)))),
                    "--seed",
                    "0",
                    "-o",
                    str(plays),
                ],
                log,
            )
        run([*spade, "regret", str(plays), "--no-dedup", "-o", str(scored)], log)
    by_round: dict[int, list[float]] = {}
    for c in records(scored):
        if c.get("origin") == "design" and (c.get("score") or {}).get("reward") is not None:
            by_round.setdefault(int(c["round"]), []).append(c["score"]["reward"])
    return {r: round(statistics.fmean(v), 4) for r, v in sorted(by_round.items())}


def nohint_return(path: Path) -> dict[str, float]:
    """Each environment's mean no-hint return in one rollouts file."""
    out = {}
    for c in records(path):
        plays = (c.get("rollouts") or {}).get("nohint") or []
        if plays:
            out[c["id"]] = statistics.fmean(p["return"] for p in plays)
    return out


def step_gain(rdir: Path) -> float | None:
    """The training-side signal: on the environments the agent was just trained on, the
    no-hint return after its first step (the replay of step 2) minus before it (step 1)."""
    before, after = (
        nohint_return(rdir / "rollouts.jsonl.zst"),
        nohint_return(rdir / "rollouts-s2.jsonl.zst"),
    )
    both = [k for k in before if k in after]
    return round(statistics.fmean(after[k] - before[k] for k in both), 4) if both else None


def agent_groups(rdir: Path) -> dict:
    """The agent's GRPO groups over the round's steps: those with a reward spread (trained)
    and those without (every play won or every play lost: no signal)."""
    trained = flat = 0
    for rec in sorted(rdir.glob("checkpoint*.jsonl")):
        c = json.loads(rec.read_text().splitlines()[0])
        if c.get("role") == "designer":
            continue
        trained += (c.get("groups") or {}).get("agent", 0)
        flat += (c.get("skipped") or {}).get("flat_reward_group", 0)
    return {"trained": trained, "flat": flat}


def one_run(base: dict, arm: str, seed: int, args, out: Path, base_eval: dict) -> dict:
    cfg = write_config(base, arm, seed, args, out)
    run_dir = out / f"{arm}-s{seed}"
    log = out / f"{arm}-s{seed}.log"
    heldout = [run_dir / f"round-{r:03d}" / "eval.jsonl.zst" for r in range(1, args.rounds + 1)]
    designed = "baseline" not in ARMS[arm]
    finished_before = all(p.exists() for p in heldout) and (
        not designed or (run_dir / "fixed-agent-scored.jsonl.zst").exists()
    )
    t0 = time.time()
    run([sys.executable, "-m", "spade_cli", "loop", str(cfg), "-q"], log)
    loop_s = time.time() - t0
    fixed = fixed_agent_rewards(run_dir, args.rounds, base, log) if designed else {}
    rounds = [{"round": 0, "heldout": base_eval}]
    for r in range(1, args.rounds + 1):
        rdir = run_dir / f"round-{r:03d}"
        m = round_metrics(rdir)
        m["round"] = r
        m["step_gain"] = step_gain(rdir)
        m["agent_groups"] = agent_groups(rdir)
        m["designer_reward_fixed_agent"] = fixed.get(r) if m["designs"] else None
        m["heldout"] = solve_rates(records(heldout[r - 1]))
        rounds.append(m)
    # A run resumed by a later invocation counts the time of every invocation that worked
    # on it (a killed one's is lost): its figure is the run's, not the last invocation's.
    spent = out / f"{arm}-s{seed}.seconds.json"
    total = {"loop": loop_s, "wall": time.time() - t0, "invocations": 1}
    if spent.exists():
        before = json.loads(spent.read_text())
        total = before if finished_before else {k: total[k] + before[k] for k in total}
    spent.write_text(json.dumps(total) + "\n")
    return {
        "rounds": rounds,
        "finished_before": finished_before,
        "loop_seconds": round(total["loop"], 1),
        "wall_seconds": round(total["wall"], 1),
        "invocations": total["invocations"],
    }


def config_name(path: Path) -> str:
    """The configuration as the results name it: relative to the checkout when inside one,
    so that another clone (a worktree) with the same file resumes the same experiment."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def merged(results: dict, path: Path) -> dict:
    """Keep an earlier invocation's runs (other arms or seeds, same settings) in the same
    results file, so that an arm can be added to a finished experiment."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = None
    if old and all(old.get(k) == results[k] for k in SETTINGS):
        for arm, runs in old.get("runs", {}).items():
            for seed, res in runs.items():
                res.setdefault("commit", old.get("commit"))
                results["runs"].setdefault(arm, {})[seed] = res
        results["arms"] = list(dict.fromkeys([*old.get("arms", []), *results["arms"]]))
        results["seeds"] = sorted({*old.get("seeds", []), *results["seeds"]})
        results["invocations"] = old.get("invocations") or [
            {k: old.get(k) for k in ("commit", "arms", "seeds", "wall_seconds")}
        ]
    elif old:
        print(f"micro_experiment: {path} has other settings; starting a new one", file=sys.stderr)
    results.setdefault("invocations", [])
    return results


def keep(results: dict, arm: str, seed: int, res: dict) -> None:
    """Put a run's results in; a run an earlier invocation finished keeps that one's
    commit, since only its measurements can be new."""
    earlier = results["runs"].get(arm, {}).get(str(seed), {}).get("commit")
    ran_at = earlier if res.pop("finished_before") and earlier else results["commit"]
    results["runs"].setdefault(arm, {})[str(seed)] = {**res, "commit": ran_at}


def thirds(xs: list[float]) -> tuple[float, float]:
    k = max(1, len(xs) // 3)
    return statistics.fmean(xs[:k]), statistics.fmean(xs[-k:])


def verdicts(results: dict) -> list[str]:
    out = []
    for arm, runs in results["runs"].items():
        for seed, res in runs.items():
            rs = res["rounds"]
            gain = rs[-1]["heldout"]["all"] - rs[0]["heldout"]["all"]
            line = f"{arm:17s} seed {seed}: held-out {rs[0]['heldout']['all']:.3f} -> {rs[-1]['heldout']['all']:.3f} ({gain:+.3f})"
            for key, what in REWARDS:
                rew = [r[key] for r in rs[1:] if r.get(key) is not None]
                if len(rew) >= 3:
                    a, b = thirds(rew)
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


def _mean(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _f(x, fmt: str = ".3f") -> str:
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
        "third, per seed | the same with a fixed agent | valid designs | mean level, round 1 → "
        "last | agent groups trained / flat per round | wall per run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    per_round, plateau, spread = [], [], []
    for arm, runs in results["runs"].items():
        seeds = list(runs.values())
        held = [f"{r['rounds'][-1]['heldout']['all']:.3f}" for r in seeds]
        gains = [
            r["rounds"][-1]["heldout"]["all"] - r["rounds"][0]["heldout"]["all"] for r in seeds
        ]
        rewards = {key: [] for key, _ in REWARDS}
        for r in seeds:
            for key, cells in rewards.items():
                rew = [x[key] for x in r["rounds"][1:] if x.get(key) is not None]
                if len(rew) >= 3:
                    a, b = thirds(rew)
                    cells.append(f"{a:.2f} → {b:.2f}")
        reward_cells = " | ".join("; ".join(cells) or "–" for cells in rewards.values())
        later = [x for r in seeds for x in r["rounds"][1:]]
        groups = [x["agent_groups"] for x in later if x.get("agent_groups")]
        first = _mean(r["rounds"][1].get("mean_level") for r in seeds if len(r["rounds"]) > 1)
        last = _mean(r["rounds"][-1].get("mean_level") for r in seeds)
        rows.append(
            f"| {arm} | {seeds[0]['rounds'][0]['heldout']['all']:.3f} → {' / '.join(held)} "
            f"| {statistics.fmean(gains):+.3f} | {reward_cells} "
            f"| {_f(_mean(x.get('valid_rate') for x in later), '.0%')} "
            f"| {_f(first, '.2f')} → {_f(last, '.2f')} "
            f"| {_f(_mean(g['trained'] for g in groups), '.1f')} / "
            f"{_f(_mean(g['flat'] for g in groups), '.1f')} "
            f"| {statistics.fmean(r['wall_seconds'] for r in seeds) / 60:.1f} min |"
        )
        curve = by_round(runs, lambda x: x["heldout"]["all"])
        per_round.append(_row([arm, *(_f(_mean(v)) for v in curve)]))
        for table, get in ((plateau, lambda x: x.get("plateau_share")), (spread, level_entropy)):
            values = by_round(runs, get)[1:]
            if any(values):
                table.append(_row([arm, *(_f(_mean(v), ".2f") for v in values)]))
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
    out = [*rows, "", "Held-out solve rate per round (mean over seeds):", ""]
    out += [_row(["arm", *(f"round {i}" for i in range(n))]), "|---|" + "---|" * n, *per_round]
    out += sampling_error(results) + gain_table(results)
    for title, table in (
        ("Share of valid designs in the plateau band (mean over seeds):", plateau),
        ("Entropy of the chosen levels in bits (uniform: 2.58; mean over seeds):", spread),
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
    finals, gains = {}, {}
    for arm, runs in results["runs"].items():
        rs = [r["rounds"] for r in runs.values()]
        finals[arm] = [r[-1]["heldout"]["all"] for r in rs]
        gains[arm] = [r[-1]["heldout"]["all"] - r[0]["heldout"]["all"] for r in rs]
    if not any(len(g) > 1 for g in gains.values()):
        return []

    def se(xs: list[float]) -> float | None:
        return statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else None

    first = next(iter(finals))
    rows = []
    for arm in finals:
        err = se(gains[arm])
        diff = "–"
        if arm != first and err is not None and se(finals[first]) is not None:
            d = statistics.fmean(finals[first]) - statistics.fmean(finals[arm])
            diff = f"{d:+.3f} ± {math.hypot(se(finals[first]), se(finals[arm])):.3f}"
        rows.append(
            _row(
                [
                    arm,
                    str(len(gains[arm])),
                    f"{statistics.fmean(gains[arm]):+.3f}",
                    _f(err),
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
    rows = []
    for arm, runs in results["runs"].items():
        cells = []
        for key, _ in REWARDS:
            changes = []
            for r in runs.values():
                rew = [x[key] for x in r["rounds"][1:] if x.get(key) is not None]
                if len(rew) >= 3:
                    a, b = thirds(rew)
                    changes.append(b - a)
            if len(changes) > 1:
                err = statistics.stdev(changes) / math.sqrt(len(changes))
                each = " / ".join(f"{c:+.2f}" for c in changes)
                cells.append(f"{statistics.fmean(changes):+.3f} ± {err:.3f} ({each})")
            else:
                cells.append("–")
        if any(c != "–" for c in cells):
            rows.append(_row([arm, *cells]))
    if not rows:
        return []
    head = _row(["arm", *(f"{what}: mean ± standard error (per seed)" for _, what in REWARDS)])
    return [
        "",
        "The designer's reward, last third of the rounds minus the first third:",
        "",
        head,
        "|---|" + "---|" * len(REWARDS),
        *rows,
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
            held = [_mean(r["rounds"][i]["heldout"].get(fam) for r in seeds) for i in (0, -1)]
            cell = f"{_f(held[0], '.2f')} → {_f(held[1], '.2f')}"
            ends = [
                [(r["rounds"][i].get("families") or {}).get(fam) or {} for r in seeds]
                for i in (1, -1)
            ]
            if any(ends[0] + ends[1]):
                for key in ("mean_level", "win_rate_nohint"):
                    a, b = (_mean(x.get(key) for x in end) for end in ends)
                    cell += f" / {_f(a, '.2f')} → {_f(b, '.2f')}"
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
                    else f"{n}: {_f(_weighted(xs, 'reward'), '.2f')} / "
                    f"{_f(_weighted(xs, 'win_rate'), '.2f')} / {_f(_weighted(xs, 'regret'), '+.2f')}"
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


# The packages whose versions decide the figures: sampling and training run through them,
# and their pins in pyproject.toml are ranges.
PACKAGES = ("torch", "transformers", "trl", "accelerate", "numpy", "tokenizers")


def packages() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def reference_seconds() -> float:
    """Seconds this machine takes for a fixed pure-Python workload (ten million additions),
    recorded beside each invocation's wall time. A million-parameter model's stages spend
    much of their time in the interpreter and little in large matrix products, so the
    ratio of two machines' figures says roughly how their wall times compare, which
    "2 cores" does not."""
    t = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return round(time.perf_counter() - t, 2)


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--arms",
        default=",".join(DEFAULT_ARMS),
        help=f"comma-separated arms (default: {', '.join(DEFAULT_ARMS)}; also: "
        + ", ".join(a for a in ARMS if a not in DEFAULT_ARMS)
        + ")",
    )
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated loop seeds")
    ap.add_argument(
        "--rounds", type=int, default=None, help="rounds per run (default: examples/micro.toml's)"
    )
    ap.add_argument("--eval-items", type=int, default=216, help="held-out episodes per evaluation")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time (each stage is single-threaded; on 2 cores two at a time take "
        "as long in all, and each run twice as long)",
    )
    ap.add_argument(
        "--eval-seed",
        type=int,
        default=0,
        help="the evaluation suite's seed: 0 is the held-out suite the results report; choose "
        "settings on another (a validation split), never on 0",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TABLE.KEY=VALUE",
        help="override a field of the configuration (a TOML value), e.g. train.epochs=4; it "
        "wins over the arm's own settings (baseline.pool for the fixed pool)",
    )
    ap.add_argument("--config", default=str(ROOT / "examples" / "micro.toml"))
    ap.add_argument("--out", default=str(ROOT / "runs" / "micro-experiment"))
    ap.add_argument(
        "--report",
        action="store_true",
        help="run nothing: rewrite the summary table and plots from OUT/results.json",
    )
    args = ap.parse_args()
    if args.report:
        out = Path(args.out)
        try:
            results = json.loads((out / "results.json").read_text())
        except (OSError, ValueError) as e:
            sys.exit(f"micro_experiment: {out / 'results.json'}: {e}")
        report(results, out)
        return
    base = tomllib.loads(Path(args.config).read_text())
    try:
        apply_overrides(base, args.set)
    except ValueError as e:
        sys.exit(f"micro_experiment: {e}")
    args.rounds = args.rounds or int(base.get("rounds", 8))
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for a in arms:
        if a not in ARMS:
            sys.exit(f"micro_experiment: unknown arm {a!r} (have: {', '.join(ARMS)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "experiment.log"
    reference = reference_seconds()
    print(f"machine: the reference workload took {reference:.2f} s", file=sys.stderr)
    t0 = time.time()

    model = out / "micro-model"
    if not (model / "config.json").exists():
        run(
            [
                sys.executable,
                "-m",
                "spade_cli",
                "init-model",
                str(model),
                "--kind",
                "micro",
                "--force",
            ],
            log,
        )
    base["model"] = {**base.get("model", {}), "path": str(model)}
    try:
        base_eval = evaluate(
            str(model), out / f"heldout-round-000{eval_tag(args)}.jsonl.zst", args, log
        )
    except RunFailed as e:
        sys.exit(f"micro_experiment: {e}")
    print(
        f"round 0 (the micro model): suite seed {args.eval_seed}, solve rate {base_eval['all']:.3f}",
        file=sys.stderr,
    )

    results = {
        "commit": commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "config": config_name(Path(args.config)),
        "config_sha256": hashlib.sha256(Path(args.config).read_bytes()).hexdigest()[:16],
        "arms": arms,
        "seeds": seeds,
        "rounds": args.rounds,
        "eval_items": args.eval_items,
        "eval_seed": args.eval_seed,
        "overrides": args.set,
        "runs": {},
    }
    results = merged(results, out / "results.json")
    from concurrent.futures import ThreadPoolExecutor

    def job(arm: str, seed: int):
        try:
            res = one_run(base, arm, seed, args, out, base_eval)
        except RunFailed as e:  # that run's verdict; the others go on, a rerun resumes it
            print(f"{arm} seed {seed}: {e}", file=sys.stderr)
            return arm, seed, None
        print(
            f"{arm} seed {seed}: {res['wall_seconds']:.0f} s, held-out "
            f"{res['rounds'][-1]['heldout']['all']:.3f}",
            file=sys.stderr,
        )
        return arm, seed, res

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        done = list(pool.map(lambda p: job(*p), [(a, s) for a in arms for s in seeds]))
    for arm, seed, res in done:
        if res is not None:
            keep(results, arm, seed, res)
    results["failed"] = [f"{a}-s{s}" for a, s, res in done if res is None]
    results["wall_seconds"] = round(time.time() - t0, 1)
    results["invocations"].append(
        {
            "commit": results["commit"],
            # per invocation: a results file can gather runs made on other versions
            "packages": packages(),
            "jobs": args.jobs,
            "arms": arms,
            "seeds": seeds,
            "wall_seconds": results["wall_seconds"],
            "reference_seconds": reference,
        }
    )
    path = out / "results.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    report(results, out)
    print(f"results: {path} ({results['wall_seconds']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
