#!/usr/bin/env python3
"""Can the micro model read its world? Per family and kind of move, how often its greedy
action is the flawless expert's.

A GRPO step sharpens what the model already does now and then; it does not teach it to
read a fact it never acts on. This measures, before any training, which facts the model
acts on. Episodes of every family and level are played from seeds of `--seed`, with and
without the hint, by a mix of the expert's and random moves (so that later observations
state what a wrong move revealed); at each observation the model is asked for its action,
greedily, in the micro agent prompt, and scored against the expert's (transcripts.py's
`Expert`: the best play on what the agent sees). Moves are grouped by family, whether the
hint was given, and whether it is the first move or a later one; the switches also by
their rule (first or last). A first move without the hint is a guess for the expert too,
so it scores chance there; every other kind of move has one right answer.

    python bench/micro_reading.py                          # the micro model, ~20 s
    python bench/micro_reading.py --model runs/micro/round-005/checkpoint --json
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spade_cli.micro.site.spade_micro import FAMILIES, LEVELS  # noqa: E402
from spade_cli.micro.transcripts import Expert, env_class  # noqa: E402

EXPERT_SHARE = 0.6  # of the moves played between the asked ones; the rest are random


def cases(episodes: int, seed: int) -> list[tuple[str, list[dict], str]]:
    """(group, messages up to an observation, the expert's action there)."""
    from spade_cli.rollout.agents import AgentPrompt

    prompt, rng, out = AgentPrompt("micro"), random.Random(seed), []
    for family in FAMILIES:
        for level in LEVELS:
            for hinted in (False, True):
                for _ in range(episodes):
                    cls = env_class(family, level)
                    env, turns = cls(), cls.metadata["max_turns"]
                    obs, info = env.reset(seed=rng.randrange(1 << 30))
                    expert = Expert(env, info["hint"] if hinted else None, rng)
                    system = prompt.system(cls.metadata["name"], turns, False, "plain")
                    messages = [{"role": "system", "content": system}]
                    for turn in range(turns):
                        hint = prompt.hint_text(info["hint"]) if hinted and turn == 0 else ""
                        messages.append({"role": "user", "content": obs + hint})
                        want = expert.act(obs)
                        rule = f"/{env.secret}" if family == "switch" else ""
                        move = "first" if turn == 0 else "later"
                        group = f"{family}{rule}/{'hint' if hinted else 'no hint'}/{move}"
                        out.append((group, list(messages), want))
                        played = want if rng.random() < EXPERT_SHARE else expert.random_action(obs)
                        messages.append({"role": "assistant", "content": played})
                        obs, _, term, trunc, _ = env.step(played)
                        if term or trunc:
                            break
    return out


def greedy_actions(model_dir: str, conversations: list[list[dict]], batch: int = 64) -> list[str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    out = []
    for i in range(0, len(conversations), batch):
        texts = [
            tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
            for m in conversations[i : i + batch]
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            ids = model.generate(
                **enc, max_new_tokens=4, do_sample=False, pad_token_id=tok.pad_token_id
            )
        new = ids[:, enc["input_ids"].shape[1] :]
        out += [tok.decode(x, skip_special_tokens=True).strip().lower() for x in new]
    return out


def reading(model_dir: str, episodes: int = 10, seed: int = 0) -> dict[str, dict]:
    """{group: {"right": share of moves equal to the expert's, "moves": n}}, sorted."""
    todo = cases(episodes, seed)
    got = greedy_actions(model_dir, [m for _, m, _ in todo])
    hits = collections.defaultdict(list)
    for (group, _, want), action in zip(todo, got, strict=True):
        hits[group].append(action == want)
    return {
        g: {"right": round(sum(h) / len(h), 3), "moves": len(h)} for g, h in sorted(hits.items())
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(ROOT / "data" / "micro-model"))
    ap.add_argument("--episodes", type=int, default=20, help="per family, level and condition")
    ap.add_argument("--seed", type=int, default=0, help="seeds the episodes and the random moves")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = ap.parse_args()
    if not Path(args.model, "config.json").is_file():
        sys.exit(f"micro_reading: no model at {args.model} (run `just micro-model`)")
    table = reading(args.model, args.episodes, args.seed)
    if args.json:
        print(json.dumps({"model": args.model, "seed": args.seed, "groups": table}))
        return
    print("| family | hint | move | right | moves |\n|---|---|---|---|---|")
    for group, row in table.items():
        family, hint, move = group.rsplit("/", 2)
        print(f"| {family} | {hint} | {move} | {row['right']:.2f} | {row['moves']} |")


if __name__ == "__main__":
    main()
