"""A round of several agent steps (`loop.agent_steps`): the stages it adds, the designer's
window win rate, no-hint-only re-plays, and a 2-round demo that resumes after a kill
between two steps."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import orjson
import pytest

from spade_cli import regret
from spade_cli.errors import UsageError
from spade_cli.loop.config import load_config
from spade_cli.loop.layout import Shell
from spade_cli.loop.recipe import round_stages

from .helpers import assert_same, run_cli
from .test_loop import config_text, corpus, loop_cmd, records  # noqa: F401 - corpus is a fixture
from .test_regret import cand, jsonl, parse

HEAD = ["sample-docs", "design", "validate", "hint", "rollout", "regret"]
WINDOW = ["train-s1", "rollout-s2", "train-s2", "regret-window", "train"]


def cfg_of(**tables):
    base = {"model": {"path": "/m"}, "corpus": {"paths": ["/c.jsonl"]}, "design": {"attempts": 1}}
    return load_config(None, {**base, **tables})


def names(cfg, r: int) -> list[str]:
    return [s.name for s in round_stages(cfg, r)]


def test_two_agent_steps_add_replays_and_a_designer_step_at_the_end():
    one, two = cfg_of(), cfg_of(loop={"agent_steps": 2})
    assert names(one, 2) == ["replay", *HEAD, "train"]
    assert names(two, 2) == ["replay", *HEAD, *WINDOW]
    assert names(two, 1) == ["memory-init", "replay", *HEAD, *WINDOW]
    stages = {s.name: s for s in round_stages(two, 2)}
    d = "runs/demo/round-002/"
    s1, replays, s2 = stages["train-s1"], stages["rollout-s2"], stages["train-s2"]
    assert s1.inputs == [d + "scored.jsonl.zst"] and "agent" == s1.args[s1.args.index("--role") + 1]
    # Step 2 re-plays step 1's environments without hints, on step 1's checkpoint.
    assert replays.inputs == stages["rollout"].inputs
    assert replays.args[replays.args.index("--conditions") + 1] == "nohint"
    model = replays.args[replays.args.index("--model") + 1]
    assert isinstance(model, Shell) and "checkpoint-s1.jsonl" in model
    assert (
        replays.args[replays.args.index("--seed") + 1]
        != stages["rollout"].args[stages["rollout"].args.index("--seed") + 1]
    )
    assert s2.inputs == [d + "rollouts-s2.jsonl.zst"] and str(s2.output).endswith(
        "checkpoint-s2.jsonl"
    )
    window = stages["regret-window"]
    assert window.inputs == [d + "scored.jsonl.zst"] and "--memory" not in window.args
    assert window.args[window.args.index("--window") + 1] == d + "rollouts-s2.jsonl.zst"
    final = stages["train"]
    assert final.inputs == [d + "scored-window.jsonl.zst"]
    assert final.args[final.args.index("--role") + 1] == "designer"
    assert "checkpoint-s2.jsonl" in final.args[final.args.index("--model") + 1]
    assert str(final.output).endswith("round-002/checkpoint.jsonl")


def test_without_designer_training_the_last_agent_step_is_the_rounds_checkpoint():
    cfg = cfg_of(loop={"agent_steps": 3}, train={"role": "agent"})
    assert names(cfg, 2)[-5:] == ["train-s1", "rollout-s2", "train-s2", "rollout-s3", "train"]
    assert str(round_stages(cfg, 2)[-1].output).endswith("round-002/checkpoint.jsonl")


def test_the_designer_step_has_its_own_learning_rate_and_epochs_where_set():
    def flag(stage, name):  # a flag at its default is left off the command line
        return stage.args[stage.args.index(name) + 1] if name in stage.args else "default"

    train = {"learning_rate": 2e-4, "epochs": 2}
    shared = {s.name: s for s in round_stages(cfg_of(loop={"agent_steps": 2}, train=train), 2)}
    assert flag(shared["train"], "--lr") == flag(shared["train-s1"], "--lr") == "0.0002"
    own = cfg_of(
        loop={"agent_steps": 2},
        train={**train, "designer_learning_rate": 5e-5, "designer_epochs": 1},
    )
    stages = {s.name: s for s in round_stages(own, 2)}
    assert (flag(stages["train"], "--lr"), flag(stages["train"], "--epochs")) == (
        "5e-05",
        "default",
    )
    for agent in ("train-s1", "train-s2"):
        assert (flag(stages[agent], "--lr"), flag(stages[agent], "--epochs")) == ("0.0002", "2")
    # With one step the roles share an optimizer: a designer-only rate cannot apply.
    with pytest.raises(UsageError, match="designer_learning_rate"):
        cfg_of(train={"designer_learning_rate": 5e-5})


def test_the_designers_anchor_is_the_loops_starting_model_and_the_agents_steps_have_none():
    stages = {
        s.name: s
        for s in round_stages(cfg_of(loop={"agent_steps": 2}, train={"designer_beta": 0.5}), 2)
    }
    final = stages["train"].args
    assert final[final.index("--beta") + 1] == "0.5"
    assert final[final.index("--ref-model") + 1] == "/m"  # not the step's own checkpoint
    for agent in ("train-s1", "train-s2"):
        assert "--beta" not in stages[agent].args and "--ref-model" not in stages[agent].args
    # Zero turns the anchor off even where the agent's steps have one.
    off = cfg_of(loop={"agent_steps": 2}, train={"beta": 0.1, "designer_beta": 0.0})
    final = {s.name: s for s in round_stages(off, 2)}["train"].args
    assert "--ref-model" not in final and "--beta" not in final  # 0, the stage's default
    with pytest.raises(UsageError, match="designer_beta"):
        cfg_of(train={"designer_beta": 0.5})
    # A LoRA model's reference is itself with the adapter off, never the starting model.
    with pytest.raises(UsageError, match="LoRA"):
        cfg_of(loop={"agent_steps": 2}, train={"designer_beta": 0.5, "lora_r": 8})


def test_a_loop_refuses_sgd_with_weight_decay_or_carried_moments_before_it_starts():
    cfg_of(train={"optimizer": "sgd", "weight_decay": 0.0})
    for train in ({"weight_decay": 0.1}, {"weight_decay": 0.0, "optimizer_state": "carry"}):
        with pytest.raises(UsageError, match="takes no weight_decay"):
            cfg_of(train={"optimizer": "sgd", **train})


def test_the_balance_scales_interval_follows_the_agent_steps_unless_set():
    def interval(cfg, name):
        stage = {s.name: s for s in round_stages(cfg, 2)}[name]
        return stage.args[stage.args.index("--designer-interval") + 1]

    assert cfg_of().train.designer_interval == 1
    four = cfg_of(loop={"agent_steps": 4})
    assert four.train.designer_interval == 4
    assert interval(four, "train") == interval(four, "train-s1") == "4"
    own = cfg_of(loop={"agent_steps": 4}, train={"designer_interval": 2})
    assert interval(own, "train") == "2"


def test_agent_steps_need_agent_training():
    with pytest.raises(UsageError, match="agent_steps"):
        cfg_of(loop={"agent_steps": 2}, train={"enabled": False})
    with pytest.raises(UsageError, match="agent_steps"):
        cfg_of(loop={"agent_steps": 0})


def test_window_win_rate_recomputes_blend_and_keeps_the_regret():
    # Step 1: no-hint 1, 0.6 and hinted 1, 1: regret 0.2, win rate 0.8.
    c = cand("c", "code", [1.0, 0.6], [1.0, 1.0])
    cfg = regret.ScoreConfig()
    first = regret.valid_score(c, cfg)
    assert first["regret"] == pytest.approx(0.2)
    # plateau(0.8) = 1 - 0.2 / 0.25 = 0.2; scaled regret min(1, 0.2 / 0.15) = 1
    assert first["reward"] == pytest.approx(0.6 * 0.2 + 0.4)
    # Two more steps' no-hint plays: 0, 0.4, 0, 0 -> win rate over all six = 2 / 6
    later = [{"return": x, "success": False} for x in (0.0, 0.4, 0.0, 0.0)]
    sc = regret.window_score(first, c["rollouts"]["nohint"] + later, 3, cfg)
    w = 2.0 / 6
    assert sc["components"]["win_rate"] == pytest.approx(w)
    assert sc["components"]["win_rate_first"] == pytest.approx(0.8)
    assert (
        sc["regret"] == first["regret"]
        and sc["components"]["regret"] == first["components"]["regret"]
    )
    assert sc["reward"] == pytest.approx(0.6 * (1 - (0.4 - w) / 0.25) + 0.4)
    assert sc["window"]["steps"] == 3 and sc["window"]["nohint"]["n"] == 6
    # Nothing measured: left alone.
    bad = regret.invalid_score(cand("x", None, valid=False, reason="timeout"), cfg)
    assert regret.window_score(bad, later, 3, cfg) is bad


def test_regret_window_option_reads_the_later_plays_by_candidate_id(tmp_path):
    c = cand("c", "code", [1.0, 0.6], [1.0, 1.0])
    r = run_cli("regret", input=jsonl([c]))
    assert r.returncode == 0, r.stderr.decode()
    scored = tmp_path / "scored.jsonl"
    scored.write_bytes(r.stdout)
    replay = {**c, "rollouts": {"nohint": [{"return": 0.0, "success": False}] * 2, "hint": []}}
    other = {**cand("d", "other", [1.0], [1.0])}
    plays = tmp_path / "rollouts-s2.jsonl"
    plays.write_bytes(jsonl([other, replay]))
    r = run_cli("regret", str(scored), "--window", str(plays))
    assert r.returncode == 0, r.stderr.decode()
    (out,) = parse(r.stdout)
    assert out["score"]["components"]["win_rate"] == pytest.approx(1.6 / 4)
    assert out["score"]["reward"] == pytest.approx(1.0)  # on the plateau, full scaled regret
    bad = run_cli(
        "regret", str(scored), "--window", str(plays), "--memory", str(tmp_path / "m.jsonl")
    )
    assert bad.returncode == 2 and b"--window" in bad.stderr


def test_a_replay_that_catches_a_candidate_refuses_its_window_score(tmp_path):
    # Valid at step 1; a later step's replays find it nondeterministic: its window's plays
    # earn the designer nothing (the published `drop`: no sample), as rollout's refusal does.
    c = cand("c", "code", [1.0, 0.6], [1.0, 1.0])
    r = run_cli("regret", input=jsonl([c]))
    scored = tmp_path / "scored.jsonl"
    scored.write_bytes(r.stdout)
    caught = {
        **c,
        "rollouts": {
            "nohint": [{"return": 0.5, "success": False}] * 2,
            "hint": [],
            "nondeterministic": "on replay, observation 1 differs",
        },
    }
    plays = tmp_path / "rollouts-s2.jsonl"
    plays.write_bytes(jsonl([caught]))
    r = run_cli("regret", str(scored), "--window", str(plays))
    assert r.returncode == 0, r.stderr.decode()
    (out,) = parse(r.stdout)
    assert out["score"]["valid"] is False and out["score"]["reason"] == "nondeterministic"
    assert out["score"]["reward"] is None and out["score"]["sample"] is False
    assert out["score"]["window"]["refused"] == {
        "nondeterministic": caught["rollouts"]["nondeterministic"]
    }
    assert out["rollouts"]["nondeterministic"] == caught["rollouts"]["nondeterministic"]


# --------------------------------------------------------------------------- the demo


def schedule_config(tiny_model, corpus_path: str, tmp_path, steps: int, rounds: int):  # noqa: F811
    path = tmp_path / f"steps-{steps}.toml"
    path.write_text(
        f"rounds = {rounds}\n"
        + config_text(str(tiny_model), corpus_path).replace(
            "[design]\n", "[design]\nattempts = 1\n"
        )
        + f"[loop]\nagent_steps = {steps}\n"
    )
    return path


@pytest.fixture(scope="module")
def two_step_run(tiny_model, corpus, tmp_path_factory):  # noqa: F811
    tmp = tmp_path_factory.mktemp("schedule")
    config = schedule_config(tiny_model, corpus, tmp, steps=2, rounds=2)
    runs = tmp / "runs-a"
    r = subprocess.run(loop_cmd(config, runs), capture_output=True, timeout=1800)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert b"step 2 agent" in r.stderr and b"step 2 designer" in r.stderr
    return config, runs / "t"


@pytest.mark.slow
def test_two_rounds_of_two_agent_steps_run_and_show_both_steps(two_step_run):
    _, run = two_step_run
    metrics = [orjson.loads(x) for x in (run / "metrics.jsonl").read_bytes().splitlines()]
    assert [m["round"] for m in metrics] == [1, 2]
    for m in metrics:
        steps = m["steps"]
        assert [(s["step"], s["role"]) for s in steps] == [
            (1, "agent"),
            (2, "agent"),
            (2, "designer"),
        ]
        assert all(s["episodes"] > 0 and s["win_rate"] is not None for s in steps[:2])
        # The tiny model earns no reward spread: each step records an unchanged checkpoint.
        assert all(
            isinstance(s["train_steps"], int) and s["checkpoint_format"] and "train_loss_last" in s
            for s in steps
        )
    d1 = run / "round-001"
    stages = orjson.loads((d1 / "manifest.json").read_bytes())["stages"]
    assert list(stages)[-5:] == WINDOW
    replays = records(d1 / "rollouts-s2.jsonl.zst", run)
    played = [c for c in replays if c.get("rollouts")]
    assert played and all(
        c["rollouts"]["hint"] == []
        and c["rollouts"]["nohint"]
        and c["rollouts"]["conditions"] == ["nohint"]
        for c in played
    )
    # Round 2 starts from the designer step's checkpoint, which started from step 2's.
    ckpt = orjson.loads((d1 / "checkpoint.jsonl").read_bytes().splitlines()[0])
    manifest2 = orjson.loads((run / "round-002" / "manifest.json").read_bytes())
    assert manifest2["model"] == ckpt["path"]
    window = records(d1 / "scored-window.jsonl.zst", run)
    assert any((c.get("score") or {}).get("window", {}).get("steps") == 2 for c in window)


@pytest.mark.slow
def test_run_killed_between_two_steps_resumes_to_the_same_records(two_step_run, tmp_path):
    config, run_a = two_step_run
    runs_b = tmp_path / "runs-b"
    proc = subprocess.Popen(
        loop_cmd(config, runs_b), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    manifest = runs_b / "t" / "round-001" / "manifest.json"
    deadline = time.time() + 1200
    while time.time() < deadline:  # kill once step 1 has trained
        if manifest.exists() and b'"train-s1"' in manifest.read_bytes():
            break
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stages = orjson.loads(manifest.read_bytes())["stages"]
    assert "train-s1" in stages and "train-s2" not in stages

    r = subprocess.run(loop_cmd(config, runs_b), capture_output=True, timeout=1800)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert b"spade-design" not in r.stderr.split(b"round 1 done")[0]  # step 1 is not redone
    run_b = runs_b / "t"
    for rnd in ("round-001", "round-002"):
        for name in (
            "scored.jsonl.zst",
            "rollouts-s2.jsonl.zst",
            "scored-window.jsonl.zst",
            "memory.jsonl.zst",
        ):
            # logprobs up to float rounding (tests.helpers.mismatch), all else exact
            assert_same(
                records(run_b / rnd / name, run_b),
                records(run_a / rnd / name, run_a),
                f"{rnd}/{name}",
            )


def test_fixed_pool_steps_train_only_the_agent():
    cfg = cfg_of(loop={"agent_steps": 2}, baseline={"mode": "fixed-pool"})
    assert names(cfg, 2)[-3:] == ["train-s1", "rollout-s2", "train"]


def test_a_run_from_before_agent_steps_resumes_with_the_default(tmp_path):
    from spade_cli.loop.config import to_dict
    from spade_cli.loop.runner import Loop

    cfg = cfg_of(runs_dir=str(tmp_path))
    old = {k: v for k, v in to_dict(cfg).items() if k != "loop"}
    (cfg.run_dir).mkdir(parents=True)
    (cfg.run_dir / "config.json").write_bytes(orjson.dumps(old))
    Loop(cfg).check_config()  # the same run: one agent step a round
    with pytest.raises(UsageError, match="different config"):
        Loop(cfg_of(runs_dir=str(tmp_path), loop={"agent_steps": 2})).check_config()


def test_a_run_from_before_a_new_field_resumes_while_the_field_holds_its_default(tmp_path):
    """A version that adds an option (here train.design_replay_from, loop.replayed_designs)
    resumes the runs an older one started; a value other than the default is another run."""
    from spade_cli.loop.config import to_dict
    from spade_cli.loop.runner import Loop

    cfg = cfg_of(runs_dir=str(tmp_path))
    old = to_dict(cfg)
    del old["train"]["design_replay_from"], old["loop"]["replayed_designs"]
    cfg.run_dir.mkdir(parents=True)
    (cfg.run_dir / "config.json").write_bytes(orjson.dumps(old))
    Loop(cfg).check_config()
    assert "design_replay_from" in orjson.loads((cfg.run_dir / "config.json").read_bytes())["train"]
    (cfg.run_dir / "config.json").write_bytes(orjson.dumps(old))
    other = cfg_of(runs_dir=str(tmp_path), train={"design_replay_from": ["first.jsonl"]})
    with pytest.raises(UsageError, match="different config"):
        Loop(other).check_config()
