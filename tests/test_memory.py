"""Environment memory: de-duplication, exemplars, listing, replay, atomic updates, spade-memory."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import tokenize
from pathlib import Path

import orjson
import pytest

from spade_cli import dedup, memory
from spade_cli.records import new_record

ENVS = Path(__file__).parent / "data" / "envs"
GUESS = (ENVS / "guess_number.py").read_text()
NIM = (ENVS / "nim.py").read_text()
BANK = (ENVS / "bank.py").read_text()


def rename_identifiers(code: str, mapping: dict[str, str]) -> str:
    """Rename NAME tokens only (strings and comments untouched), as a copy-paster would."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NAME and tok.string in mapping:
            tok = tok._replace(string=mapping[tok.string])
        elif tok.type == tokenize.STRING and tok.string[:1] in "fF":
            # Python 3.11 tokenises an f-string as one token: rename inside {...} only
            def fix(m: re.Match) -> str:
                return re.sub(r"\b\w+\b", lambda w: mapping.get(w.group(), w.group()), m.group())

            tok = tok._replace(string=re.sub(r"\{[^{}]*\}", fix, tok.string))
        out.append(tok)
    return tokenize.untokenize(out)


GUESS_RENAMED = rename_identifiers(
    GUESS,
    {
        "GuessNumber": "HiddenValueGame",
        "secret": "target",
        "turns": "n_moves",
        "rng": "gen",
        "solution": "plan",
        "guess": "value",
        "feedback": "direction",
        "lo": "low",
        "hi": "high",
        "mid": "middle",
        "hint": "tip",
        "action": "act",
    },
)

# Same program, different layout: comments, docstrings, quotes, wrapping, blank lines.
GUESS_REFORMATTED = textwrap.dedent("""
    # Guessing game, reformatted by someone else.
    import random
    import gymnasium as gym
    class GuessNumber( gym.Env ):
        'Totally different docstring.'
        metadata = {
            'name': 'guess-number',
            'max_turns': 10,
        }
        def reset(self, seed = None, options = None):
            super().reset(seed = seed)   # seeding
            rng = random.Random(seed)
            self.secret = rng.randint(1,
                                      100)
            self.turns = 0
            hint = f"The number is {'even' if self.secret % 2 == 0 else 'odd'}."
            lo, hi, solution = (1, 100, [])
            while True:
                mid = (lo+hi)//2
                solution.append(str(mid))
                if mid == self.secret:
                    break
                if mid < self.secret:
                    lo = mid + 1
                else:
                    hi = mid - 1
            return ('Guess a number between 1 and 100.', {'hint': hint, 'solution': solution})
        def step(self, action):
            self.turns += 1
            try:
                guess = int(action.strip())
            except ValueError:
                return ('Please answer with an integer.', 0.0, False, self.turns >= 10, {})
            if guess == self.secret:
                return ('Correct!', 1.0, True, False, {})
            feedback = 'higher' if guess < self.secret else 'lower'
            return (f'Try {feedback}.', 0.0, False, self.turns >= 10, {})
""")


def entry(
    name: str,
    code: str,
    regret: float = 0.0,
    p: float = 0.5,
    round_: int = 0,
    last_round: int | None = None,
) -> dict:
    rec = new_record(
        "env",
        f"env-{name}",
        [f"cand-{name}"],
        name=name,
        summary=f"{name} summary",
        code=code,
        max_turns=5,
        doc_id=f"doc-{name}",
        round=round_,
        scores={"regret": regret, "learnability": p * (1 - p), "nohint": {"success_rate": p}},
        replays=0,
        last_round=round_ if last_round is None else last_round,
        code_hash=dedup.code_hash(code),
    )
    return rec


def variants(n: int) -> list[str]:
    """n genuinely different small environments (different logic, not just constants)."""
    ops = [
        "a + b",
        "a * b",
        "a - b",
        "max(a, b)",
        "min(a, b) * 2",
        "abs(a - b) + 1",
        "a % (b + 1)",
        "(a + b) // 2",
        "a ** 2 - b",
        "len(str(a * b))",
        "sum(range(a)) - b",
        "a * a + b * b",
    ]
    out = []
    for i in range(n):
        out.append(
            textwrap.dedent(f"""
            import gymnasium as gym
            class E{i}(gym.Env):
                metadata = {{"name": "op-{i}", "max_turns": {i + 1}}}
                def reset(self, seed=None, options=None):
                    a, b = (seed or 0) % {7 + i}, {i + 3}
                    self.answer = str({ops[i % len(ops)]})
                    return "Compute {ops[i % len(ops)]} for a=%d b=%d" % (a, b), {{"hint": "op {i}", "solution": [self.answer]}}
                def step(self, action):
                    ok = action.strip() == self.answer
                    return "done", float(ok), True, False, {{}}
        """)
        )
    return out


# --------------------------------------------------------------------------- dedup


def test_exact_dedup_catches_reformatted_copy():
    assert dedup.code_hash(GUESS_REFORMATTED) == dedup.code_hash(GUESS)


def test_exact_dedup_catches_renamed_copy():
    assert GUESS_RENAMED != GUESS and "HiddenValueGame" in GUESS_RENAMED
    assert dedup.code_hash(GUESS_RENAMED) == dedup.code_hash(GUESS)


def test_exact_dedup_keeps_different_constants_apart():
    changed = GUESS.replace("randint(1, 100)", "randint(1, 1000)")
    assert dedup.code_hash(changed) != dedup.code_hash(GUESS)


def test_near_duplicate_caught_and_different_envs_not_flagged():
    idx = dedup.DedupIndex()
    idx.add("guess", GUESS)
    idx.add("nim", NIM)
    # a renamed copy with a small edit is no longer exact but still near
    edited = GUESS_RENAMED.replace("between 1 and 100", "from 1 to 100").replace("Correct!", "Yes!")
    assert dedup.code_hash(edited) != dedup.code_hash(GUESS)
    m = idx.find(edited)
    assert m is not None and m.key == "guess" and m.how == "near" and m.similarity >= 0.8
    assert idx.find(GUESS_REFORMATTED).how == "exact"
    assert idx.find(BANK) is None
    assert idx.find(NIM).key == "nim"
    for code in variants(6):
        assert idx.find(code) is None


def test_variants_are_not_duplicates_of_each_other():
    idx = dedup.DedupIndex()
    for i, code in enumerate(variants(12)):
        assert idx.find(code) is None, i
        idx.add(str(i), code)
    assert len(idx) == 12


def test_exclude_and_unparsable_code():
    idx = dedup.DedupIndex()
    idx.add("a", GUESS)
    assert idx.find(GUESS, exclude={"a"}) is None
    broken = "def f(:\n    return 1  # oops\n"
    assert dedup.code_hash(broken) == dedup.code_hash("def f(:\n        return 1\n")
    idx.add("b", broken)
    assert idx.find(broken).key == "b"


# --------------------------------------------------------------------------- file


def test_load_missing_is_empty(tmp_path):
    assert memory.load_memory(str(tmp_path / "nope.jsonl")) == []
    assert memory.load_memory(None) == []


def test_save_load_roundtrip_compressed(tmp_path):
    path = str(tmp_path / "mem.jsonl.zst")
    entries = [entry("guess", GUESS), entry("nim", NIM)]
    memory.save_memory(path, entries)
    assert open(path, "rb").read(4) == b"\x28\xb5\x2f\xfd"
    assert memory.load_memory(path) == entries


def test_load_rejects_wrong_kind(tmp_path):
    path = tmp_path / "mem.jsonl"
    path.write_bytes(
        orjson.dumps(entry("nim", NIM)) + b"\n" + orjson.dumps({"kind": "doc", "id": "d"}) + b"\n"
    )
    with pytest.raises(Exception, match=r"mem.jsonl:2: expected a 'env' record"):
        memory.load_memory(str(path))


KILLER = """
import os, signal, sys
import orjson
from spade_cli import memory, recordio
path, mode = sys.argv[1], sys.argv[2]
entries = memory.load_memory(path)
new = [dict(entries[0], id=f"env-new-{i}", code=entries[0]["code"] + "\\n" * i) for i in range(int(sys.argv[3]))]
if mode == "before-rename":
    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)
    recordio.os.replace = die
print("ready", flush=True)
memory.update_memory(path, lambda old: old + new)
print("done", flush=True)
"""


def test_update_killed_between_write_and_rename_keeps_old_memory(tmp_path):
    path = tmp_path / "mem.jsonl.zst"
    memory.save_memory(str(path), [entry("guess", GUESS), entry("nim", NIM)])
    before = path.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, str(path), "before-rename", "50"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert path.read_bytes() == before
    assert [e["id"] for e in memory.load_memory(str(path))] == ["env-guess", "env-nim"]
    # the next update works and cleans nothing it should not
    memory.update_memory(str(path), lambda old: old + [entry("bank", BANK)])
    assert [e["id"] for e in memory.load_memory(str(path))] == ["env-guess", "env-nim", "env-bank"]


def test_update_killed_mid_write_keeps_old_or_new(tmp_path):
    path = tmp_path / "mem.jsonl"
    memory.save_memory(str(path), [entry("guess", GUESS)])
    before = path.read_bytes()
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLER, str(path), "slow", "40000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().strip() == b"ready"
    # the write of 40000 records takes a while: kill it part-way through
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(
        p.name.startswith(".mem.jsonl.partial") for p in tmp_path.iterdir()
    ):
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    data = path.read_bytes()
    assert data == before or len(memory.load_memory(str(path))) == 40001
    assert memory.load_memory(str(path))  # parses


# --------------------------------------------------------------------------- exemplars, listing


def test_exemplars_policy_and_determinism():
    codes = variants(12)
    entries = [entry(f"e{i}", c, regret=i / 20) for i, c in enumerate(codes)]
    a = memory.select_exemplars(entries, 6, seed=1)
    b = memory.select_exemplars(list(reversed(entries)), 6, seed=1)
    assert [e["id"] for e in a] == [e["id"] for e in b]
    assert len({e["id"] for e in a}) == 6
    # ceil(6/3) = 2 highest-regret entries come first
    assert [e["name"] for e in a[:2]] == ["e11", "e10"]
    others = [memory.select_exemplars(entries, 6, seed=s) for s in range(2, 8)]
    assert any([e["id"] for e in o] != [e["id"] for e in a] for o in others)
    assert memory.select_exemplars(entries, 0, seed=1) == []
    assert len(memory.select_exemplars(entries[:3], 5, seed=1)) == 3


def test_exemplars_diverse_slot_avoids_near_copies():
    base = [
        entry("guess", GUESS, regret=0.9),
        entry("guess2", GUESS_RENAMED.replace("100", "99"), regret=0.8),
        entry("guess3", GUESS.replace("10", "12"), regret=0.7),
        entry("nim", NIM, regret=0.1),
        entry("bank", BANK, regret=0.05),
    ]
    # k=2: one top slot (guess), no random slot, one diverse slot: must not be a guess copy
    picked = memory.select_exemplars(base, 2, seed=0)
    assert picked[0]["name"] == "guess"
    assert picked[1]["name"] in {"nim", "bank"}


def test_listing():
    entries = [entry("b", NIM, round_=1), entry("a", GUESS, round_=2)] + [
        entry(f"v{i}", c) for i, c in enumerate(variants(5))
    ]
    text = memory.listing(entries, limit=3)
    lines = text.splitlines()
    assert lines[0] == "- a: a summary" and lines[1] == "- b: b summary"
    assert lines[-1] == "- … and 4 more" and len(lines) == 4
    assert memory.listing([]) == ""


# --------------------------------------------------------------------------- replay


def test_replay_priorities_follow_plr():
    e = [
        entry("hi", GUESS, p=0.5, round_=3),
        entry("mid", NIM, p=0.9, round_=3),
        entry("lo", BANK, p=1.0, round_=0),
    ]
    pr = memory.replay_priorities(e, round_=4, beta=1.0, rho=0.5)
    # ranks by learnability: hi (0.25) 1, mid (0.09) 2, lo (0) 3 -> h = 1, 1/2, 1/3
    s = 1 + 1 / 2 + 1 / 3
    stale = {"hi": 1, "mid": 1, "lo": 4}
    want = {
        k: 0.5 * (1 / r) / s + 0.5 * stale[k] / 6 for k, r in (("hi", 1), ("mid", 2), ("lo", 3))
    }
    assert pr == pytest.approx({f"env-{k}": v for k, v in want.items()})
    assert sum(pr.values()) == pytest.approx(1.0)


def test_select_replay_deterministic_and_prioritised():
    entries = [entry(f"e{i}", c, p=i / 12, round_=i % 3) for i, c in enumerate(variants(12))]
    a = memory.select_replay(entries, 4, round_=5, seed=3)
    b = memory.select_replay(list(reversed(entries)), 4, round_=5, seed=3)
    assert [e["id"] for e in a] == [e["id"] for e in b] and len({e["id"] for e in a}) == 4
    # the seed matters: other seeds draw other sets (any two may coincide, ten cannot all)
    draws = {
        tuple(sorted(e["id"] for e in memory.select_replay(entries, 4, round_=5, seed=s)))
        for s in range(10)
    }
    assert len(draws) > 1
    # over many seeds, the most learnable entry (p = 6/12) is replayed far more often than p = 0
    counts: dict[str, int] = {}
    for s in range(200):
        for e in memory.select_replay(entries, 2, round_=5, seed=s):
            counts[e["name"]] = counts.get(e["name"], 0) + 1
    assert counts.get("e6", 0) > 5 * counts.get("e0", 0)
    assert len(memory.select_replay(entries, 50, round_=5)) == 12


def test_replay_candidates_are_valid_candidates():
    entries = [entry("bank", BANK, p=0.5), entry("nim", NIM, p=0.2)]
    entries[0]["tools"] = [{"type": "function", "function": {"name": "balance"}}]
    cands = memory.replay_candidates(entries, 2, round_=3, seed=0)
    assert {c["replay"]["env_id"] for c in cands} == {"env-bank", "env-nim"}
    for c in cands:
        assert c["kind"] == "candidate" and c["origin"] == "replay" and c["round"] == 3
        assert c["validation"]["valid"] is True and c["validation"]["reason"] == "ok"
        assert c["env"]["code"] in (BANK, NIM) and c["parents"] == [c["replay"]["env_id"]]
    bank = next(c for c in cands if c["replay"]["env_id"] == "env-bank")
    assert bank["env"]["tools"][0]["function"]["name"] == "balance"
    assert memory.replay_candidates(entries, 2, round_=3, seed=0) == cands


def test_entries_from_library_and_unplayed_first_in_replay():
    lib = [
        {
            "name": "guess",
            "summary": "Guess a number.",
            "code": GUESS,
            "max_turns": 10,
            "tools": None,
            "family": "games",
            "path": "x/guess.py",
        },
        {
            "name": "bank",
            "summary": "",
            "code": BANK,
            "max_turns": 6,
            "tools": [{"type": "function"}],
            "family": "stateful tool use",
            "path": "x/bank.py",
        },
        {"name": "guess-copy", "summary": "", "code": GUESS_REFORMATTED, "max_turns": 10},
    ]
    entries = memory.entries_from_library(lib)
    assert [e["name"] for e in entries] == ["guess", "bank"]  # the reformatted copy has the same id
    assert (
        entries[0]["kind"] == "env"
        and entries[0]["origin"] == "library"
        and entries[0]["round"] == 0
    )
    assert entries[1]["summary"].startswith("Tool use: move money") and entries[1]["tools"] == [
        {"type": "function"}
    ]
    assert entries[0]["code_hash"] == dedup.code_hash(GUESS)
    played = entry("nim", NIM, p=0.5)
    ranked = memory.replay_priorities([played] + entries, round_=0, beta=0.1)
    # unplayed entries tie with the best learnability (0.25): ties broken by id
    assert max(ranked, key=ranked.get) == min(e["id"] for e in [played] + entries)


def test_spade_memory_pool_from_memory_file(tmp_path, cli):
    path = tmp_path / "m.jsonl"
    memory.save_memory(str(path), [entry(f"v{i}", c) for i, c in enumerate(variants(6))])
    r = cli("memory", "pool", path, "-n", "4", "--round", "3", "--seed", "1")
    assert r.returncode == 0, r.stderr
    cands = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(cands) == 4 and len({c["id"] for c in cands}) == 4
    assert all(
        c["origin"] == "library" and c["round"] == 3 and "validation" not in c for c in cands
    )
    assert cli("memory", "pool", path, "-n", "4", "--round", "3", "--seed", "1").stdout == r.stdout
    assert cli("memory", "pool", path, "-n", "4", "--round", "4", "--seed", "1").stdout != r.stdout
    assert len(cli("memory", "pool", path, "-n", "0").stdout.splitlines()) == 6


def scored_record(rid: str, reward, valid: bool = True) -> dict:
    """A candidate as spade-regret leaves it: validated, played, scored."""
    return {
        "kind": "candidate",
        "v": 1,
        "id": rid,
        "parents": [],
        "origin": "library",
        "round": 1,
        "group": rid,
        "env": {"code": f"# {rid}"},
        "validation": {"valid": valid, "reason": "ok" if valid else "import_error"},
        "rollouts": {"nohint": [{"return": 1.0}], "hint": []},
        "score": {"valid": valid, "reward": reward if valid else None},
    }


def test_spade_memory_pool_by_reward_keeps_the_best_scored_records_whole(tmp_path, cli):
    rewards = {"a": 0.2, "b": 0.9, "c": 0.5, "d": 0.5, "e": 0.5, "f": 0.1}
    recs = [scored_record(k, v) for k, v in rewards.items()]
    recs.append(scored_record("broken", None, valid=False))
    recs.append({**scored_record("unscored", 0.0), "score": None})
    path = tmp_path / "scored.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))

    def pick(n: str, seed: str, round_: str = "2") -> list[dict]:
        r = cli(
            "memory", "pool", path, "-n", n, "--by", "reward", "--round", round_, "--seed", seed
        )
        assert r.returncode == 0, r.stderr
        return [orjson.loads(x) for x in r.stdout.splitlines()]

    best = pick("3", "0")
    assert [c["id"] for c in best][0] == "b"
    assert {c["id"] for c in best[1:]} < {"c", "d", "e"}  # two of the three tied at 0.5
    # kept whole: the plays and the score train the agent; the round is the pick's
    assert all(c["rollouts"] and c["score"]["reward"] is not None and c["round"] == 2 for c in best)
    assert pick("3", "0") == best  # reproducible
    ties = {tuple(c["id"] for c in pick("3", str(s))[1:]) for s in range(12)}
    assert len(ties) > 1  # ties fall at random with the seed
    # all: every valid scored record, best first; the invalid and the unscored never
    every = [c["id"] for c in pick("0", "0")]
    assert len(every) == 6 and every[0] == "b" and every[-1] == "f"


def test_spade_memory_pool_by_reward_takes_the_skills_in_turn(tmp_path, cli):
    """As the designer's prompts take the skills in turn: the best of each skill, then the
    second best of each, even where one skill holds every high reward."""
    rewards = {"a1": 0.9, "a2": 0.8, "a3": 0.7, "a4": 0.6, "b1": 0.3, "b2": 0.2, "c1": 0.1}
    recs = [{**scored_record(k, v), "family": k[0]} for k, v in rewards.items()]
    path = tmp_path / "scored.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    r = cli("memory", "pool", path, "-n", "5", "--by", "reward", "--seed", "3")
    assert r.returncode == 0, r.stderr
    ids = [orjson.loads(x)["id"] for x in r.stdout.splitlines()]
    assert set(ids[:3]) == {"a1", "b1", "c1"} and set(ids[3:]) == {"a2", "b2"}


def test_spade_memory_pool_by_reward_refuses_what_it_cannot_rank(tmp_path, cli):
    d = tmp_path / "envs"
    d.mkdir()
    (d / "nim.py").write_text((ENVS / "nim.py").read_text())
    r = cli("memory", "pool", d, "--by", "reward")
    assert r.returncode == 2 and b"scored file" in r.stderr
    r = cli("memory", "pool", d, "--by", "best")
    assert r.returncode == 2 and b"--by must be one of uniform, reward" in r.stderr
    unscored = tmp_path / "validated.jsonl"
    unscored.write_bytes(orjson.dumps({**scored_record("x", 0.0), "score": None}) + b"\n")
    r = cli("memory", "pool", unscored, "--by", "reward")
    assert r.returncode == 3
    assert b"no valid scored record" in r.stderr and b"validated.jsonl" in r.stderr


def test_spade_memory_pool_from_library_dir(tmp_path, cli):
    d = tmp_path / "envs"
    d.mkdir()
    for f in ("guess_number.py", "nim.py", "bank.py"):
        (d / f).write_text((ENVS / f).read_text())
    r = cli("memory", "pool", d, "-n", "2", "--seed", "0")
    assert r.returncode == 0, r.stderr
    cands = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(cands) == 2 and all(c["origin"] == "library" and c["env"]["code"] for c in cands)


def test_example_library_has_no_false_duplicates():
    from spade_cli.envs import library

    lib = library.load_library()
    assert len(lib) >= 10
    idx = dedup.DedupIndex()
    for e in lib:
        assert idx.find(e["code"]) is None, e["name"]
        idx.add(e["name"], e["code"])
    sets = [dedup.shingles(e["code"]) for e in lib]
    worst = max(dedup.jaccard(a, b) for i, a in enumerate(sets) for b in sets[i + 1 :])
    assert worst < 0.5  # far below the 0.8 threshold
    assert len(memory.entries_from_library(lib)) == len(lib)


# --------------------------------------------------------------------------- published policy


def test_capacity_evicts_the_oldest_first():
    from spade_cli.memory import evict

    es = [entry(f"e{i}", f"x = {i}", round_=r) for i, r in enumerate([0, 0, 1, 2, 1, 3])]
    kept = evict(es, 3)
    assert [e["name"] for e in kept] == ["e3", "e4", "e5"]  # rounds 2, 1, 3 stay, in file order
    assert evict(es, 0) == es and evict(es, 10) == es
    # Ties within a round: the later line (the newer addition) stays.
    assert [e["name"] for e in evict(es, 5)] == ["e1", "e2", "e3", "e4", "e5"]


def test_capacity_applies_when_regret_updates_memory(tmp_path, cli):
    from spade_cli.memory import load_memory, save_memory

    mem = tmp_path / "m.jsonl"
    save_memory(str(mem), [entry(f"old{i}", f"y = {i}", round_=0) for i in range(3)])
    r = cli("regret", "--memory", mem, "--memory-capacity", "2", input=b"")
    assert r.returncode == 0, r.stderr.decode()
    assert [e["name"] for e in load_memory(str(mem))] == ["old1", "old2"]


def test_published_exemplars_band_skill_top_and_determinism():
    from spade_cli.memory import select_published

    es = [
        dict(entry(f"s{i}", f"z = {i}", regret=i / 100, p=0.5), skill="Optimization")
        for i in range(30)
    ]
    es += [
        dict(entry("easy", "q = 1", regret=5.0, p=0.95), skill="Optimization"),
        dict(entry("hard", "q = 2", regret=5.0, p=0.05), skill="Optimization"),
        dict(entry("other", "q = 3", regret=9.0, p=0.5), skill="Logical Deduction"),
    ]
    picks = {
        tuple(e["name"] for e in select_published(es, "Optimization", 2, seed=s)) for s in range(40)
    }
    names = {n for p in picks for n in p}
    # Only the top max(3n, 10) = 10 by regret inside the band, of the skill.
    assert names <= {f"s{i}" for i in range(20, 30)} and len(names) > 5
    assert all(len(p) == 2 for p in picks)
    assert select_published(es, "Optimization", 2, seed=3) == select_published(
        list(reversed(es)), "Optimization", 2, seed=3
    )
    assert [e["name"] for e in select_published(es, "Logical Deduction", 2)] == ["other"]
    # Band edges are inclusive; unplayed entries never qualify.
    edge = [
        dict(entry("lo", "a = 1", p=0.15), skill="X"),
        dict(entry("hi", "a = 2", p=0.85), skill="X"),
        dict(entry("out", "a = 3", p=0.86), skill="X"),
        dict(entry("new", "a = 4"), skill="X", scores={}),
    ]
    assert {e["name"] for e in select_published(edge, "X", 4)} == {"lo", "hi"}


def test_avoid_line_names_a_too_easy_or_too_hard_environment():
    from spade_cli.memory import avoid_entry, avoid_line

    es = [
        dict(entry("fine", "a = 1", p=0.5), skill="X"),
        dict(entry("easy", "a = 2", p=0.95), skill="X"),
        dict(entry("hard", "a = 3", p=0.0), skill="X"),
        dict(entry("edge", "a = 4", p=0.9), skill="X"),
    ]
    seen = {avoid_entry(es, "X", seed=s)[0]["name"] for s in range(30)}
    assert seen == {"easy", "hard"}
    e, why = avoid_entry(es, "X", seed=1)
    line = avoid_line((e, why))
    assert e["name"] in line and why in line and ("95%" in line or "0%" in line)
    assert avoid_entry(es[:1], "X") is None and avoid_line(None) == ""
    assert avoid_entry(es, "X", seed=7) == avoid_entry(list(reversed(es)), "X", seed=7)


def test_cut_code_ends_at_a_line_and_is_marked():
    from spade_cli.memory import cut_code

    code = "\n".join(f"line_{i} = {i}" for i in range(500))
    cut = cut_code(code, 2000)
    assert len(cut) <= 2000 + len("\n# ... (cut)") and cut.endswith("# ... (cut)")
    assert code.startswith(cut[: -len("\n# ... (cut)")]) and cut_code("short", 2000) == "short"


def test_memory_entry_keeps_skill_and_difficulty():
    from spade_cli.memory import entry_from_candidate, win_rate

    cand = {
        "id": "cand-1",
        "skill": "Optimization",
        "difficulty": "hard",
        "env": {"code": "x = 1", "name": "n"},
    }
    e = entry_from_candidate(cand, {"regret": 0.3, "nohint": {"success_rate": 0.25}}, 2)
    assert (e["skill"], e["difficulty"], win_rate(e)) == ("Optimization", "hard", 0.25)


def test_published_exemplars_count_a_win_above_zero_and_never_borrow_a_skill():
    """As the release's memory: a play with return above 0 is won, and a skill with no
    entry yet gets no exemplar (no other skill's) and no avoid line."""
    from spade_cli import regret
    from spade_cli.memory.exemplars import avoid_entry, select_published, win_rate

    def entry(i: int, skill: str, returns: list[float]) -> dict:
        nohint = regret.condition_stats([{"return": r} for r in returns])
        return {
            "id": f"e{i}",
            "skill": skill,
            "code": f"x = {i}",
            "scores": {"regret": 0.3, "nohint": nohint},
        }

    partial = entry(1, "Optimization", [0.5, 0.5, 0.0, 0.0])  # never solved, won half the plays
    assert win_rate(partial) == 0.5 and partial["scores"]["nohint"]["success_rate"] == 0.0
    assert select_published([partial], "Optimization") == [partial]
    assert select_published([partial], "Causal Inference") == []
    assert avoid_entry([entry(2, "Optimization", [0.0] * 4)], "Causal Inference") is None
    assert select_published([partial], None) == [partial]  # no target skill: every entry
