"""Harbor (`harbor`): each environment, on its first exported seed, as one task directory.

    <slug>/task.toml                 [metadata]: spade id, name, skill, contract, seed, scores
    <slug>/instruction.md            how to play, and the episode's first observation
    <slug>/environment/Dockerfile    python + bubblewrap + spade-cli; the environment's code
    <slug>/environment/spade/        env.py + spade.json without solutions and hints
    <slug>/solution/solve.sh         the oracle: plays the episode's own solution (ours:
                                     info["solution"]; published: the actions solution()
                                     spells out), with the hint and solution text beside it
    <slug>/tests/test.sh             replays the agent's actions on a pristine copy of the
                                     environment (tests/spade/) and writes the return to
                                     /logs/verifier/reward.txt
    <slug>/tests/spade/              env.py + the full spade.json

An agent plays in the container with `python3 -m spade_cli.export.harbor act ACTION` (and
`show`); each call replays the episode so far from its log in a fresh sandboxed worker,
which the contract's determinism (same seed, same actions, same episode) makes exact. The
reward never comes from the agent's container state: test.sh replays the logged actions on
the copy under /tests, which the agent never saw. What this does not hide: the agent can
read the environment's code in its container (it has to run there).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from .spec import ExportedEnv, load_spec, play, write_spec, write_text

ENV_DIR = "/opt/spade-env"
EPISODE = "/app/.spade-episode.json"

DOCKERFILE = """FROM python:3.11-slim
# The environment's code runs in spade's bubblewrap sandbox inside this container (the
# container needs the privileges bwrap needs: user namespaces, or root with CAP_SYS_ADMIN).
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap \\
    && rm -rf /var/lib/apt/lists/*
ARG SPADE_CLI=spade-cli
RUN pip install --no-cache-dir "$SPADE_CLI"
COPY spade {env_dir}
WORKDIR /app
"""

INSTRUCTION = """# {name}

{summary}

This is an interactive, multi-turn environment (at most {max_turns} actions). Act with

    python3 -m spade_cli.export.harbor act '<your action>'

which prints the environment's reply, the reward and whether the episode is over;
`python3 -m spade_cli.export.harbor show` prints the episode so far. {action_rule}
Your score is the episode's return in [0, 1] (1 = solved).

The first observation:

```
{observation}
```
"""

SOLVE = """#!/bin/bash
# Oracle of spade environment {id}, seed {seed}: plays the episode's own solution.
# Hint: {hint}
set -euo pipefail
for action in {actions}; do
    python3 -m spade_cli.export.harbor act -- "$action"
done
"""

TEST = """#!/bin/bash
# Replays the agent's logged actions on the pristine copy of the environment beside this
# script and writes the episode's return (spade's, in the sandbox) as the reward.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${SPADE_REWARD_FILE:-/logs/verifier/reward.txt}"
mkdir -p "$(dirname "$out")"
python3 -m spade_cli.export.harbor score --env "$here/spade" --out "$out"
"""


def _toml_value(v) -> str:
    return (
        json.dumps(v)
        if isinstance(v, str)
        else ("true" if v is True else "false" if v is False else repr(v))
    )


def task_toml(spec: ExportedEnv, seed: int) -> str:
    rec = spec.record
    score = rec.get("score") or rec.get("scores") or {}
    meta = {
        "author_name": "spade",
        "spade_id": spec.id,
        "name": spec.name,
        "skill": rec.get("skill"),
        "contract": spec.contract,
        "seed": seed,
        "regret": score.get("regret"),
        "designer_reward": score.get("reward"),
        "success_nohint": (score.get("nohint") or {}).get("success_rate"),
        "success_hint": (score.get("hint") or {}).get("success_rate"),
    }
    lines = ['schema_version = "1.4"', "", "[metadata]"]
    lines += [
        f"{k} = {_toml_value(v)}"
        for k, v in meta.items()
        if isinstance(v, (str, int, float, bool)) and v is not None
    ]
    lines += [
        "",
        "[verifier]",
        "timeout_sec = 300.0",
        "",
        "[agent]",
        "timeout_sec = 1800.0",
        "",
        "[environment]",
        "build_timeout_sec = 1200.0",
        "cpus = 1",
        "memory_mb = 2048",
        "",
    ]
    return "\n".join(lines)


def write(spec: ExportedEnv, directory: Path) -> Path:
    seed = spec.seeds[0]
    key = str(seed)
    write_spec(spec, directory / "tests" / "spade", "harbor")
    hidden = replace(
        spec, solutions={}, hints={}, solution_texts={}, replay_returns={}, observations={}
    )
    write_spec(hidden, directory / "environment" / "spade", "harbor-environment")
    write_text(directory / "environment" / "Dockerfile", DOCKERFILE.format(env_dir=ENV_DIR))
    env = spec.record.get("env") or spec.record
    rule = (
        'Each action is one tool call as JSON: {"name": ..., "arguments": {...}}.'
        if spec.tools
        else "Each action is one reply, as the observation asks for it."
    )
    write_text(
        directory / "instruction.md",
        INSTRUCTION.format(
            name=spec.name,
            summary=env.get("summary") or "",
            max_turns=spec.max_turns,
            action_rule=rule,
            observation=spec.observations[key].replace("```", "'''"),
        ),
    )
    (directory / "solution").mkdir(exist_ok=True)
    hint = " ".join((spec.hints.get(key) or "(none)").split())
    # No actions (a published solution() that only describes the goal): the loop plays none.
    actions = " ".join(shlex.quote(a) for a in spec.solutions.get(key) or [])
    solve = SOLVE.format(id=spec.id, seed=seed, hint=hint, actions=actions)
    write_text(directory / "solution" / "solve.sh", solve, mode=0o755)
    if spec.solution_texts.get(key):
        write_text(directory / "solution" / "solution.md", spec.solution_texts[key] + "\n")
    write_text(directory / "tests" / "test.sh", TEST, mode=0o755)
    write_text(directory / "task.toml", task_toml(spec, seed))
    return directory


# -- inside the container -------------------------------------------------------------


def _log_path() -> Path:
    return Path(os.environ.get("SPADE_EPISODE", EPISODE))


def _actions() -> list[str]:
    try:
        return list(json.loads(_log_path().read_text(encoding="utf-8"))["actions"])
    except FileNotFoundError:
        return []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m spade_cli.export.harbor",
        description="Play (act, show) or score (score) this task's episode.",
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    act = sub.add_parser("act", help="take one action; prints the reply, reward and done")
    act.add_argument("action")
    sub.add_parser("show", help="print the episode so far")
    score = sub.add_parser("score", help="replay the logged actions and write the return")
    score.add_argument("--env", default=None, help="the exported environment to replay on")
    score.add_argument("--out", default="-", help="where the reward goes (- for stdout)")
    args = ap.parse_args(argv)
    env_dir = getattr(args, "env", None) or os.environ.get("SPADE_ENV_DIR", ENV_DIR)
    spec = load_spec(env_dir)
    seed = spec.seeds[0]
    actions = _actions()
    if args.cmd == "score":
        ret, _seen, _done = play(spec, seed, actions)
        text = f"{ret:g}\n"
        sys.stdout.write(text) if args.out == "-" else Path(args.out).write_text(text)
        return 0
    ret, seen, done = play(spec, seed, actions)
    if args.cmd == "show":
        print(seen[0])
        for a, o in zip(actions, seen[1:], strict=False):
            print(f"\n> {a}\n{o}")
        print(f"\n[return {ret:g}, {'over' if done else 'going on'}]")
        return 0
    if done:
        print(f"The episode is over (return {ret:g}).")
        return 1
    actions.append(args.action)
    new_ret, seen, over = play(spec, seed, actions)
    path = _log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps({"seed": seed, "actions": actions}) + "\n")
    print(seen[-1])
    print(f"[reward {new_ret - ret:g}, return {new_ret:g}, {'over' if over else 'going on'}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
