"""The GRPO wiring moves the micro model the right way, for both roles.

Fixed micro environments are played by the micro model through spade-rollout (no hint,
K episodes each) and fixed designs (one micro design prompt per skill, every level as a
completion, the plateau's favourite level paid) are added; spade-train then takes a few
real GRPO steps. Measured with the model's own log-probabilities on the training samples:
the advantage-weighted change of the samples' model tokens must be positive (the update
climbed the reward), and with every reward flipped it must be negative. A flipped
advantage sign in either role fails it; a mask shifted off the agent's actions fails the
mask test below (spade-train's own test checks that masked tokens get no gradient).
"""

from __future__ import annotations

import orjson
import pytest

from spade_cli.micro import LIBRARY
from tests.helpers import run_cli

pytestmark = pytest.mark.requires_bwrap

ENVS = ("corridor_l1", "code_l1", "switch_l2", "corridor_l2")
TRAIN = [
    "--role",
    "both",
    "--lr",
    "1e-3",
    "--epochs",
    "2",
    "--per-device-batch-size",
    "8",
    "--max-grad-norm",
    "10",
    "--seed",
    "3",
]


@pytest.fixture(scope="module")
def micro_model(tmp_path_factory):
    from spade_cli.micro.model import build_micro_model

    return build_micro_model(
        tmp_path_factory.mktemp("micro") / "model"
    )  # the cache after `just setup`


def _jsonl(path, recs):
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return path


def _designs(model) -> list[dict]:
    """Per skill, one real micro design prompt and the six levels as completions; the
    reward is the plateau's: level 3 pays 1, its neighbours 0.5, the rest 0."""
    from transformers import AutoTokenizer

    from spade_cli.design import Template, render
    from spade_cli.micro.site.spade_micro import SKILLS
    from spade_cli.micro.transcripts import design_answer
    from spade_cli.skills import MICRO

    tok = AutoTokenizer.from_pretrained(model)
    template = Template.load("micro")
    recs = []
    for skill in MICRO:
        values = {"skill": skill.prompt_text(), "difficulty": "medium"}
        messages = [
            {"role": "system", "content": render(template.system, values).strip()},
            {"role": "user", "content": render(template.user, values).strip()},
        ]
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True)
        prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
        family = SKILLS[skill.name].family
        for level in range(1, 7):
            text = design_answer(family, "FixedDesign", level)
            ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            recs.append(
                {
                    "kind": "candidate",
                    "v": 1,
                    "id": f"d-{family}-{level}",
                    "parents": [],
                    "round": 1,
                    "group": f"g-{family}",
                    "origin": "design",
                    "skill": skill.name,
                    "design": {"prompt_ids": prompt, "completion_ids": ids},
                    "score": {"valid": True, "reward": {3: 1.0, 2: 0.5, 4: 0.5}.get(level, 0.0)},
                }
            )
    return recs


@pytest.fixture(scope="module")
def samples(micro_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("micro-learning")
    from spade_cli.envs.library import library_candidates, load_library

    lib = [e for e in load_library(LIBRARY) if e["name"] in ENVS]
    cands = _jsonl(d / "cands.jsonl", library_candidates(lib, round=1))
    r = run_cli("validate", cands, "-o", d / "validated.jsonl")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    r = run_cli(
        "rollout",
        d / "validated.jsonl",
        "--engine",
        "hf",
        "--model",
        micro_model,
        "-k",
        "8",
        "--conditions",
        "nohint",
        "--hint-source",
        "env",
        "--prompt",
        "micro",
        "--max-tokens",
        "4",
        "--seed",
        "5",
        "-o",
        d / "rollouts.jsonl",
    )
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    played = [orjson.loads(x) for x in (d / "rollouts.jsonl").read_bytes().splitlines()]
    spread = [c for c in played if len({ep["return"] for ep in c["rollouts"]["nohint"]}) > 1]
    assert len(spread) >= 2, [[ep["return"] for ep in c["rollouts"]["nohint"]] for c in played]
    return d, played + _designs(micro_model)


def _flipped(recs: list[dict]) -> list[dict]:
    out = []
    for c in orjson.loads(orjson.dumps(recs)):
        if c.get("rollouts"):
            for ep in c["rollouts"]["nohint"]:
                ep["return"] = 1.0 - ep["return"]
                ep["success"] = ep["return"] >= 1.0
        if c.get("score"):
            c["score"]["reward"] = -c["score"]["reward"]
        out.append(c)
    return out


def _movement(before, after, path) -> dict[str, float]:
    """Sum over samples of advantage x the change of their model tokens' log-probability,
    per role."""
    import torch

    from spade_cli.train.samples import read_groups

    groups, _ = read_groups([str(path)], role="both")
    out = {"designer": 0.0, "agent": 0.0}
    for g in groups:
        rewards = [s.reward for s in g]
        mean = sum(rewards) / len(rewards)
        std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
        for s in g:
            # The agent's advantage is TRL's group z-score; the designer's is stored.
            advantage = s.advantage if s.advantage is not None else (s.reward - mean) / (std + 1e-4)
            ids = torch.tensor([s.prompt_ids + s.completion_ids])
            with torch.no_grad():
                lp = [
                    torch.log_softmax(
                        m(ids).logits[0, len(s.prompt_ids) - 1 : -1].float(), -1
                    ).gather(1, torch.tensor(s.completion_ids)[:, None])[:, 0]
                    for m in (before, after)
                ]
            delta = lp[1] - lp[0]
            mask = torch.tensor(s.env_mask, dtype=torch.bool)
            out[s.role] += advantage * float(delta[mask].sum())
    return out


@pytest.mark.slow  # two real GRPO runs of the micro model (~1 min)
def test_grpo_climbs_the_reward_for_both_roles_and_descends_when_it_is_flipped(
    micro_model, samples
):
    from transformers import AutoModelForCausalLM

    d, recs = samples
    before = AutoModelForCausalLM.from_pretrained(micro_model)
    result = {}
    for name, data in (("plain", recs), ("flipped", _flipped(recs))):
        path = _jsonl(d / f"{name}.jsonl", data)
        r = run_cli(
            "train", path, "--model", micro_model, "--output-dir", d / f"ckpt-{name}", *TRAIN
        )
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        result[name] = _movement(
            before, AutoModelForCausalLM.from_pretrained(d / f"ckpt-{name}"), path
        )
    plain, flipped = result["plain"], result["flipped"]
    # Each run is judged against its own rewards: both must climb them.
    assert plain["designer"] > 0 and plain["agent"] > 0, result
    assert flipped["designer"] > 0 and flipped["agent"] > 0, result
    # ... so against the true rewards the flipped run descends.
    true = _movement(
        before, AutoModelForCausalLM.from_pretrained(d / "ckpt-flipped"), d / "plain.jsonl"
    )
    assert true["designer"] < 0 and true["agent"] < 0, true


def test_the_env_mask_marks_exactly_the_models_actions(micro_model, samples):
    """What the loss sees of an episode (env_mask 1) is the actions the agent played, each
    with its end of turn, and nothing of the observations between them."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(micro_model)
    _, recs = samples
    episodes = [ep for c in recs if c.get("rollouts") for ep in c["rollouts"]["nohint"]]
    assert len(episodes) >= 16
    for ep in episodes:
        ids, mask = ep["completion_ids"], ep["env_mask"]
        assert len(ids) == len(mask)
        spans, cur = [], []
        for i, m in zip(ids, mask, strict=True):
            if m:
                cur.append(i)
            elif cur:
                spans.append(cur)
                cur = []
        spans += [cur] if cur else []
        texts = [tok.decode(x, skip_special_tokens=True).strip() for x in spans]
        assert texts == [t["action"] for t in ep["turns"]], (texts, ep["turns"])
