"""No candidate can fail a stage: a batch with one hostile candidate of every kind that
once ended spade-validate or spade-rollout with exit 1 and no records still writes every
record, each bad one with its own verdict or stop, and every good record exactly as a run
without the bad ones writes it."""

from __future__ import annotations

import textwrap

import orjson
import pytest

from .helpers import run_cli

pytestmark = pytest.mark.requires_bwrap

GOOD = textwrap.dedent('''
    """Say the word."""
    import gymnasium as gym
    class Word(gym.Env):
        metadata = {"name": "NAME", "max_turns": 2}
        def reset(self, seed=None, options=None):
            self.word = "w%d" % (seed % 97)
            return "say the word", {"hint": "it starts with w", "solution": [self.word]}
        def step(self, action):
            ok = action == self.word
            return ("yes" if ok else "no"), float(ok), True, False, {}
''')


def env(
    name: str, *, reset: str | None = None, step: str | None = None, head: str = "", tools: str = ""
) -> str:
    """GOOD with its reset or step body replaced (the body sees self, seed, action)."""
    code = GOOD.replace("NAME", name)
    if tools:
        code = code.replace('"max_turns": 2}', '"max_turns": 2, "tools": ' + tools + "}")
    if reset is not None:
        old = (
            '        self.word = "w%d" % (seed % 97)\n'
            '        return "say the word", {"hint": "it starts with w", "solution": [self.word]}'
        )
        assert old in code
        code = code.replace(old, textwrap.indent(textwrap.dedent(reset), " " * 8).rstrip())
    if step is not None:
        old = (
            "        ok = action == self.word\n"
            '        return ("yes" if ok else "no"), float(ok), True, False, {}'
        )
        assert old in code
        code = code.replace(old, textwrap.indent(textwrap.dedent(step), " " * 8).rstrip())
    return head + code


DEEP = "def deep(n):\n    x = []\n    for _ in range(n):\n        x = [x]\n    return x\n"
RAW_DEEP = (
    "import os, sys\n"
    "def raw():\n"
    '    os.write(sys.modules["__main__"].PROTO, b\'{"id": 1, "ok": true, "result": \''
    ' + b"[" * 200000 + b"]" * 200000 + b"}\\n")\n'
)
TOOL = (
    '[{"name": "say", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}]'
)

# Each of these once failed the whole validation stage.
BAD_DESIGNS = {
    "deep-protocol": env("deep-protocol", head=RAW_DEEP, reset="raw()\nreturn 'x', {}"),
    "huge-reward": env("huge-reward", step="return 'x', 10 ** 4000, True, False, {}"),
    "surrogate-error": env("surrogate-error", step="raise ValueError('bad \\ud800 char')"),
    "huge-int-tools": env(
        "huge-int-tools", tools='[{"name": "say", "parameters": {"maximum": ' + "9" * 400 + "}}]"
    ),
    "superscript-obs": env(
        "superscript-obs",
        tools=TOOL,
        reset='self.word = "w"\nreturn "x² and 3", {"hint": "h", "solution": ["w"]}',
    ),
    "deep-info": env(
        "deep-info", head=DEEP, step="return 'x', 0.0, True, False, {'a': deep(1000)}"
    ),
    "surrogate-obs": env("surrogate-obs", step="return '\\udcff', 0.0, True, False, {}"),
}
# A lone surrogate in the docstring: valid, and its record must still be writable.
SURROGATE_DOC = env("surrogate-doc").replace('"""Say the word."""', '"""Say the \\ud800 word."""')

# Valid in validation, hostile in rollout (fed to spade-rollout as validated).
BAD_ROLLOUTS = {
    "deep-obs": env("deep-obs", head=DEEP, step="return deep(1000), 1.0, True, False, {}"),
    "surrogate-obs": env("surrogate-obs", step="return 'ok \\ud800', 1.0, True, False, {}"),
    "int-solution": env("int-solution", reset="return 'x', {'hint': 'h', 'solution': 12345}"),
    "big-return": env("big-return", step="return 'x', 7.5, True, False, {}"),
    "deep-reset": env(
        "deep-reset", head=DEEP, reset="return 'x', {'hint': deep(100000), 'solution': ['a']}"
    ),
}


def design(rid: str, code: str) -> dict:
    return {
        "kind": "candidate",
        "v": 1,
        "id": rid,
        "parents": [],
        "origin": "design",
        "design": {"text": f"```python\n{code}```\n"},
    }


def validated(rid: str, code: str) -> dict:
    name = rid
    return {
        "kind": "candidate",
        "v": 1,
        "id": rid,
        "parents": [],
        "origin": "design",
        "validation": {"valid": True, "reason": "ok", "detail": "", "seconds": 0.0, "seeds": [1]},
        "env": {"code": code, "name": name, "summary": name, "max_turns": 2},
    }


def jsonl(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def records(out: bytes) -> list[dict]:
    return [orjson.loads(line) for line in out.splitlines()]


def timeless(lines: bytes) -> dict[str, bytes]:
    """Each record's line by id, with the one timing field (validation.seconds) zeroed."""
    out = {}
    for rec in records(lines):
        if "validation" in rec:
            rec["validation"]["seconds"] = 0.0
        out[rec["id"]] = orjson.dumps(rec)
    return out


def interleave(good: list[dict], bad: list[dict]) -> list[dict]:
    mixed = []
    for i in range(max(len(good), len(bad))):
        mixed += good[i : i + 1] + bad[i : i + 1]
    return mixed


def survives(args: tuple, good: list[dict], bad: list[dict]) -> bytes:
    """The stage's output for the good and bad records interleaved, after checking that
    every record is there and every good one is byte-identical to a run without the bad."""
    clean = run_cli(*args, input=jsonl(good))
    mixed = run_cli(*args, input=jsonl(interleave(good, bad)))
    assert clean.returncode == 0, clean.stderr.decode()[-2000:]
    assert mixed.returncode == 0, mixed.stderr.decode()[-2000:]
    ours, theirs = timeless(clean.stdout), timeless(mixed.stdout)
    assert set(theirs) == {r["id"] for r in good + bad}
    for rid, line in ours.items():
        assert theirs[rid] == line, rid
    return mixed.stdout


def test_spade_validate_survives_every_hostile_candidate(tmp_path):
    good = [design(f"good-{i}", env(f"good-{i}")) for i in range(3)]
    good.append(design("surrogate-doc", SURROGATE_DOC))
    bad = [design(name, code) for name, code in BAD_DESIGNS.items()]
    mixed = survives(
        ("validate", "-", "--seeds", "2", "--call-timeout", "10", "-j", "2"), good, bad
    )
    verdicts = {r["id"]: r["validation"] for r in records(mixed)}
    assert verdicts["surrogate-doc"]["valid"], verdicts["surrogate-doc"]
    # The validator's random tool policy once called int("²") on this one; it is fine.
    assert verdicts["superscript-obs"]["valid"], verdicts["superscript-obs"]
    for name in set(BAD_DESIGNS) - {"superscript-obs"}:
        assert not verdicts[name]["valid"], (name, verdicts[name])
    assert verdicts["deep-protocol"]["reason"] == "protocol"
    assert verdicts["huge-reward"]["reason"] == "bad_step"
    assert verdicts["deep-info"]["reason"] == "bad_step"
    assert verdicts["surrogate-obs"]["reason"] == "bad_step"
    assert verdicts["huge-int-tools"]["reason"] == "no_env_class"
    assert "\ud800" not in verdicts["surrogate-error"]["detail"]


def test_spade_rollout_survives_every_hostile_environment(tmp_path):
    good = [validated(f"good-{i}", env(f"good-{i}")) for i in range(3)]
    bad = [validated(name, code) for name, code in BAD_ROLLOUTS.items()]
    mixed = survives(
        ("rollout", "-", "--agent", "replay", "-k", "2", "--call-timeout", "10"), good, bad
    )
    played = {r["id"]: r["rollouts"] for r in records(mixed)}
    for name in BAD_ROLLOUTS:
        ro = played[name]
        assert ro.get("contract_broken"), (name, ro)
        for ep in ro["nohint"] + ro["hint"]:
            assert ep["stop"] == "env_error" and ep["contract_broken"], (name, ep)
    # spade-regret scores the broken ones invalid
    scored = run_cli("regret", "-", input=mixed)
    assert scored.returncode == 0, scored.stderr.decode()[-2000:]
    scores = {r["id"]: r["score"] for r in records(scored.stdout)}
    for name in BAD_ROLLOUTS:
        assert not scores[name]["valid"] and scores[name]["reason"] == "contract_broken", scores[
            name
        ]
    for rec in good:
        assert scores[rec["id"]]["valid"], scores[rec["id"]]


# Behave alone, not later: an episode that depends on more than its seed and the actions.
DRIFTING = {
    "clock": env(
        "clock",
        head="import time\n",
        step="return 'at %d' % time.time_ns(), float(action == self.word), True, False, {}",
    ),
    "urandom": env(
        "urandom",
        head="import os\n",
        step="return os.urandom(8).hex(), float(action == self.word), True, False, {}",
    ),
}


def test_returns_count_only_when_a_replay_reproduces_them():
    good = [validated("good-0", env("good-0"))]
    bad = [validated(name, code) for name, code in DRIFTING.items()]
    args = ("rollout", "-", "--agent", "replay", "-k", "4", "--call-timeout", "10")
    out = run_cli(*args, input=jsonl(good + bad))
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    played = {r["id"]: r["rollouts"] for r in records(out.stdout)}
    assert played["good-0"]["verified"] == 8 and "nondeterministic" not in played["good-0"]
    for name in DRIFTING:
        assert "differ" in played[name]["nondeterministic"], played[name]
    scored = run_cli("regret", "-", input=out.stdout)
    scores = {r["id"]: r["score"] for r in records(scored.stdout)}
    assert scores["good-0"]["valid"]
    for name in DRIFTING:
        assert scores[name]["reason"] == "nondeterministic", scores[name]
    unchecked = run_cli(*args, "--verify", "0", input=jsonl(bad))
    assert all("nondeterministic" not in r["rollouts"] for r in records(unchecked.stdout))


# Validated once, different by the time of rollout: pays any answer, or no longer pays
# its own solution (a time bomb that went off).
TURNED = {
    "any-answer": env("any-answer", step="return 'yes', 1.0, True, False, {}"),
    "defused": env("defused", step="return 'no', 0.0, True, False, {}"),
}


def test_rollout_probes_catch_environments_that_changed_since_validation():
    from spade_cli.rollout import ReplayAgent, run_rollouts
    from spade_cli.sandbox import SandboxConfig

    cands = [validated("good-0", env("good-0"))] + [validated(n, c) for n, c in TURNED.items()]
    out = {
        r["id"]: r["rollouts"]
        for r in run_rollouts(
            cands, ReplayAgent(), k=1, sandbox_cfg=SandboxConfig(call_timeout=10.0)
        )
    }
    assert "contract_broken" not in out["good-0"], out["good-0"]
    assert "nonsense policy solves" in out["any-answer"]["contract_broken"]
    assert "info['solution'] returns 0" in out["defused"]["contract_broken"]


def test_a_slow_candidate_runs_out_of_its_time_budget():
    from spade_cli.envs.validation import validate_records
    from spade_cli.sandbox import EnvSession, SandboxConfig

    slow = env(
        "slow",
        head="import time\n",
        step="time.sleep(0.2)\nok = action == self.word\n"
        "return ('yes' if ok else 'no'), float(ok), True, False, {}",
    )
    cfg = SandboxConfig(call_timeout=10.0)
    (out,) = validate_records(
        [design("slow", slow)], lambda code: EnvSession(code, cfg), seeds=3, candidate_timeout=1.0
    )
    assert out["validation"]["reason"] == "timeout", out["validation"]
    assert "budget of 1s" in out["validation"]["detail"]
    assert 1.0 <= out["validation"]["seconds"] < 11.0  # the budget, and at most one call more


# A candidate's replays and probe play in one worker, its module executed again before
# each play (rollout/verify.py): what lives in the module starts over, what lives outside
# it carries over to the next play.
def counting(name: str, where: str) -> str:
    """GOOD whose first observation says how many resets its worker has seen, counted in
    its own class (`module`) or in the builtins module (`outside`)."""
    count = {
        "module": "type(self).n = getattr(type(self), 'n', 0) + 1\nn = type(self).n",
        "outside": "import builtins\n"
        "n = builtins.__dict__['_resets'] = builtins.__dict__.get('_resets', 0) + 1",
    }[where]
    return env(
        name,
        reset=count + '\nself.word = "w%d" % (seed % 97)\n'
        'return "reset %d: say the word" % n, {"hint": "w", "solution": [self.word]}',
    )


def replayed(cands: list[dict], **limits) -> tuple[dict, object]:
    from spade_cli.rollout import ReplayAgent, RolloutStats, run_rollouts
    from spade_cli.sandbox import SandboxConfig

    stats = RolloutStats()
    cfg = SandboxConfig(call_timeout=10.0, **limits)
    out = run_rollouts(cands, ReplayAgent(), k=2, sandbox_cfg=cfg, stats=stats)
    return {r["id"]: r["rollouts"] for r in out}, stats


def test_state_inside_the_module_starts_over_on_every_replay():
    played, stats = replayed([validated("module", counting("module", "module"))])
    ro = played["module"]
    assert "nondeterministic" not in ro and "contract_broken" not in ro, ro
    assert ro["verified"] == 4
    assert stats.replays == 4 + 1  # the four episodes and the candidate's probe


def test_state_outside_the_module_carries_to_the_next_replay_and_shows():
    # Each rollout episode had a worker of its own and saw "reset 1"; replayed in one
    # worker, the second episode sees "reset 2".
    played, _ = replayed([validated("outside", counting("outside", "outside"))])
    assert "observation 0 differs" in played["outside"]["nondeterministic"], played["outside"]


def test_a_worker_near_its_lifetime_bound_is_replaced_not_flooded():
    # 0.7 MiB of replies an episode: two episodes fit a worker of 2 MiB, four do not.
    big = env("big", reset='self.word = "w"\nreturn "x" * 700_000, {"solution": ["w"]}')
    played, _ = replayed([validated("big", big)], episode_mb=1, session_mb=2)
    ro = played["big"]
    assert "contract_broken" not in ro and "nondeterministic" not in ro, ro
    assert ro["verified"] == 4


def test_the_probe_plays_in_fresh_workers_where_reuse_cannot_be_told():
    # Pays any answer in a fresh worker, as every rollout episode's is, and holds to its
    # contract in a reused one: a probe that shared a worker would let it pass.
    head = (
        "import builtins\n"
        "REUSED = builtins.__dict__.get('_loaded', False)\n"
        "builtins.__dict__['_loaded'] = True\n"
    )
    step = (
        "ok = REUSED is False or action == self.word\n"
        "return ('yes' if ok else 'no'), float(ok), True, False, {}"
    )
    played, _ = replayed([validated("two-faced", env("two-faced", head=head, step=step))])
    assert "nonsense policy solves" in played["two-faced"]["contract_broken"], played


def test_a_replay_that_fails_in_a_reused_worker_leaves_the_rest_to_fresh_ones():
    # Dies in a reused worker only: the second replay fails unverified, and from then on
    # each replay gets a fresh worker, where it cannot tell, so three of four verify.
    head = (
        "import builtins, os\n"
        "REUSED = builtins.__dict__.get('_loaded', False)\n"
        "builtins.__dict__['_loaded'] = True\n"
    )
    reset = (
        "if REUSED:\n    os._exit(3)\n"
        'self.word = "w%d" % (seed % 97)\n'
        'return "say the word", {"hint": "w", "solution": [self.word]}'
    )
    played, _ = replayed([validated("dies", env("dies", head=head, reset=reset))])
    ro = played["dies"]
    assert "nondeterministic" not in ro and "contract_broken" not in ro, ro
    assert ro["verified"] == 3, ro
