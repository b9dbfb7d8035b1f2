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
and, on request, oracle-pool (each round every family at every level plays, both
conditions, and the agent trains on the 8 with the highest designer reward under the
current agent, the skills in turn: what a designer that maximised its own reward over the
library would give it; its picks are reported as its designs), spade-invalid-penalty
(SPADE with regret.invalid = penalty: the designer is also trained on its invalid designs,
which the published recipe drops) with its own
negative control, negative-control-invalid-penalty (the valid designs' rewards shuffled,
the penalties kept), and spade-design-replay (SPADE whose agent steps rehearse the
round's valid designs, train.design_replay = 1; spade_cli/train/design_replay.py) with its
own negative control, negative-control-design-replay; spade-first-round-replay and
negative-control-first-round-replay rehearse round 1's designs instead, which the starting
model wrote (loop.replayed_designs = first-round).

Per round it records the valid rate, the designer's reward (as it trained on it, on its
valid designs alone where its invalid ones were trained on at the penalty, and as a fixed
agent, the micro model itself, sees the same designs, with that mean's standard error over
the round's designs), the levels the designs chose,
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
Writes OUT/results.json (with each invocation's commit, package versions and --jobs);
bench/micro_report.py reads it out into OUT/summary.md (the tables) and five PNG plots
beside it, and prints a verdict per run and the experiment's bars, each met or not
(bench/micro_criteria.py).

    python bench/micro_experiment.py                       # 4 arms x 3 seeds
    python bench/micro_experiment.py --arms spade --seeds 0 --rounds 2    # a smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import json
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
sys.path.insert(0, str(ROOT / "bench"))

from micro_figures import standard_error  # noqa: E402
from micro_report import mean_of, report, rounded  # noqa: E402

from spade_cli.micro import skill_families  # noqa: E402
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
    # Not one of the four: the choice a designer that maximised its own reward would make
    # from the library. Every family at every level plays each round and the agent trains
    # on the 8 with the highest designer reward, the skills in turn (baseline.pool_draw).
    "oracle-pool": {
        "baseline": {"mode": "fixed-pool", "pool": "micro", "pool_size": 8, "pool_draw": "reward"},
        "train": {"role": "agent"},
    },
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
    # Not the published validity check: a design must be of its target skill's family
    # (validate.skill), against the designer's drift to the family that pays best.
    "spade-on-skill": {"validate": {"skill": "micro"}},
    # Its negative control: the same check, the designer's rewards shuffled.
    "negative-control-on-skill": {
        "train": {"shuffle_designer_rewards": True},
        "regret": {"shuffle_memory_scores": True},
        "validate": {"skill": "micro"},
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
LEVEL = re.compile(r"^\s*level\s*=\s*(\d+)\s*$", re.MULTILINE)
FAMILY = re.compile(r"^\s*class\s+\w+\s*\(\s*(?:spade_micro\s*\.\s*)?(\w+)Env\s*\)", re.MULTILINE)
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
    cfg.setdefault("train", {}).setdefault("threads", train_threads(args.jobs))
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


# One thread per stage, but for training (train_threads): generating with a 1.8M model
# gains nothing from a second thread while the sandbox workers want the other core
# (`bench/bench_threads.py`: rollout 0.7-0.8x as fast on two), and on a shared 2-core
# machine two spinning thread pools slow each stage several times over. The stages import
# this checkout's spade_cli, whatever is installed.
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}


def train_threads(jobs: int) -> int:
    """The training stage's threads: the cores one run at a time may have (training alone
    runs 1.3 to 1.8 times as fast on two cores as on one, `bench/bench_threads.py`)."""
    return max(1, (os.cpu_count() or 1) // jobs)


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
    """What one round's designs and plays were (the window's scores when there is one).
    The oracle pool's picks (picked.jsonl.zst) count as its designs: the levels it chose."""
    picked = records(rdir / "picked.jsonl.zst")
    scored = (
        picked or records(rdir / "scored-window.jsonl.zst") or records(rdir / "scored.jsonl.zst")
    )
    designed = picked or [c for c in scored if c.get("origin") == "design"]
    valid = [c for c in scored if is_valid(c)]
    levels, cells = [], []  # cells: (family, level, window win rate or None) per design
    on_skill = []  # per design naming a family: is it its target skill's?
    own_family = skill_families()
    scores = []  # (family/Ln, score) per valid design with a reward
    for c in designed:
        code = ((c.get("env") or {}).get("code")) or (c.get("design") or {}).get("text") or ""
        m, fam = LEVEL.search(code), FAMILY.search(code)
        # a level outside the families' table is refused (an import crash): no choice of
        # difficulty to count
        if m and int(m[1]) in LEVELS:
            levels.append(int(m[1]))
            if fam:
                if c.get("skill") in own_family:
                    on_skill.append(own_family[c["skill"]] == f"{fam[1]}Env")
                cells.append((fam[1].lower(), int(m[1]), win_rate(c) if is_valid(c) else None))
                if is_valid(c) and (c.get("score") or {}).get("reward") is not None:
                    scores.append((f"{fam[1].lower()}/L{m[1]}", c["score"]))
    wins = [w for w in map(win_rate, valid) if w is not None]
    malformed = [
        (c.get("design") or {}).get("text") or ""
        for c in designed
        if (c.get("validation") or {}).get("reason") == "no_code"
    ]
    rewarded = [c for c in designed if (c.get("score") or {}).get("reward") is not None]
    rewards = [c["score"]["reward"] for c in rewarded]
    # Where invalid designs are trained on at a penalty, the valid ones' reward alone
    # compares with the published recipe's, which drops the invalid ones (there the same).
    valid_rewards = [c["score"]["reward"] for c in rewarded if is_valid(c)]
    return {
        "designs": len(designed),
        "valid_rate": round(sum(map(is_valid, designed)) / len(designed), 4) if designed else None,
        "designer_reward": round(statistics.fmean(rewards), 4) if rewards else None,
        "designer_reward_valid": round(statistics.fmean(valid_rewards), 4)
        if valid_rewards
        else None,
        "levels": {str(lv): levels.count(lv) for lv in LEVELS},
        "mean_level": round(statistics.fmean(levels), 3) if levels else None,
        "win_rate_nohint": round(statistics.fmean(wins), 4) if wins else None,
        "plateau_share": round(sum(BAND[0] <= w <= BAND[1] for w in wins) / len(wins), 4)
        if wins
        else None,
        "families": family_metrics(cells),
        # A designer can earn more by writing the family that pays best than its own.
        "on_skill_share": round(sum(on_skill) / len(on_skill), 4) if on_skill else None,
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
            "win_rate": rounded(mean_of((s.get("components") or {}).get("win_rate") for s in mine)),
            "regret": rounded(mean_of(s.get("regret") for s in mine)),
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


def fixed_agent_rewards(
    run_dir: Path, rounds: int, base: dict, log: Path
) -> dict[int, list[float]]:
    """The designer's reward with the agent held fixed, per round the reward of each of its
    valid designs: every round's valid designs played by the micro model itself (round 0's
    agent) on the same seeds, and scored as the loop scores them. The reward the designer
    trains on measures an agent that changes every round, so it drifts even under a frozen
    designer; this one changes only with the designs. One rollout and one regret over all
    the rounds (a design's episode seeds depend on it alone; batched with other rounds'
    plays, its sampled actions can differ from a rollout of its round alone, within
    sampling noise)."""
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
    return dict(sorted(by_round.items()))


def mean_and_error(xs: list[float] | None) -> tuple[float | None, float | None]:
    """A round's mean over its designs, and its standard error from their spread: how far
    the draw of the round's designs alone moves the mean (None where it cannot be told)."""
    if not xs:
        return None, None
    err = standard_error(xs)
    return round(statistics.fmean(xs), 4), None if err is None else round(err, 4)


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
        mean, err = mean_and_error(fixed.get(r) if m["designs"] else None)
        m["designer_reward_fixed_agent"], m["designer_reward_fixed_agent_se"] = mean, err
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
        help="runs at a time (each stage runs on one thread but training, which takes the "
        "cores / JOBS; on 2 cores two runs at a time take about as long in all, and each "
        "run twice as long)",
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
