"""The spade-validate stage: candidates in, the same candidates with a verdict out.

`validate_records` is a map over candidate records (nothing is dropped, order is kept):
  1. the code: `env.code` when the candidate carries one (library, replay), else the one
     ```python block of `design.text` (`no_code` without one);
  2. `off_skill` (with `skill_families`, spade-validate --skill micro): a design that is
     not a subclass of its target skill's family (envs/skill_check.py);
  3. `duplicate`: the exact normalised code (spade_cli.dedup: comments, docstrings,
     layout and consistent renaming ignored) of an earlier candidate of this run -- or
     of the memory given with `memory=` -- makes a later copy a duplicate; near
     duplicates too when `near=` sets a Jaccard threshold. Only designs count: a
     replayed or library candidate is never a duplicate of memory. With --shard, each
     shard only sees its own batch. `copies="allow"` skips this check, as the published
     validity check has none;
  4. the checks of `checks.validate_code`, in one sandboxed worker per candidate (and a
     second one, of another identity, that replays each seed), `workers` candidates at
     a time.
Each record gets `validation` {valid, reason, detail, seconds, seeds, contract, checks,
multi_turn, feasibility?; seccomp: false where workers ran without a filter} and, when
valid, `env` {code, name, summary, max_turns, tools?, contract?, action_format?} (the last
two for the published contract). `feasibility` (valid records): `verified` (ours: the
solution was played and won), `reference` (published, with a solution() text nobody
checked) or `unverified` (published, no solution()).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

from ..records import rng_for
from ..sandbox.seccomp import host_filter
from . import extract_code, module_summary
from .checks import Rejected, Verdict, check_code_present, check_syntax, validate_code
from .contracts import resolve_contract
from .skill_check import check_on_skill


def candidate_code(rec: dict) -> str | None:
    env = rec.get("env") or {}
    if isinstance(env, dict) and isinstance(env.get("code"), str):
        return env["code"]
    design = rec.get("design") or {}
    return extract_code(design.get("text") if isinstance(design, dict) else None)


def seeds_for(rec: dict, n: int, seed: int) -> list[int]:
    """`n` distinct reset seeds of this record: reruns and shards agree, and designs do
    not get to know their test seeds in advance."""
    rng = rng_for(seed, "validate", str(rec.get("id", "")))
    return rng.sample(range(1 << 31), n)


def _env_field(rec: dict, code: str, meta: dict) -> dict:
    old = rec.get("env") if isinstance(rec.get("env"), dict) else {}
    env = {
        "code": code,
        "name": meta["name"],
        "summary": old.get("summary") or module_summary(code) or meta["name"],
        "max_turns": meta["max_turns"],
    }
    if meta.get("tools"):
        env["tools"] = meta["tools"]
    if meta.get("contract") == "published":
        env["contract"] = "published"
        env["action_format"] = meta["action_format"]
    return env


def _contract_of(rec: dict, contract: str) -> str:
    """--contract, or under auto the contract the record names (an import names it)."""
    env = rec.get("env") if isinstance(rec.get("env"), dict) else {}
    named = env.get("contract")
    return contract if contract != "auto" or named not in ("spade", "published") else named


def apply_verdict(rec: dict, verdict: Verdict, code: str | None) -> dict:
    out = dict(rec)
    out["validation"] = {
        "valid": verdict.valid,
        "reason": verdict.reason,
        "detail": verdict.detail,
        "seconds": verdict.seconds,
        "seeds": verdict.seeds,
        "contract": verdict.contract,
        "checks": verdict.checks,
        "multi_turn": verdict.multi_turn,
    }
    if host_filter()[0] is None:  # workers ran without a seccomp filter (--unsafe-no-seccomp)
        out["validation"]["seccomp"] = False
    if verdict.valid:
        out["validation"]["feasibility"] = (verdict.meta or {}).get("feasibility", "verified")
        out["env"] = _env_field(rec, code, verdict.meta)
    if verdict.trajectory is not None:  # for judge.judge_records, which removes it
        out["validation"]["trajectory"] = verdict.trajectory
    return out


def validate_records(
    records: Iterable[dict],
    open_session,
    *,
    seeds: int = 3,
    seed: int = 0,
    workers: int = 2,
    memory: list[dict] | None = None,
    near: float | None = None,
    copies: str = "reject",
    stats: Counter | None = None,
    candidate_timeout: float | None = 120.0,
    contract: str = "auto",
    reject_single_shot: bool = False,
    require_solution: bool = False,
    keep_trajectory: bool = False,
    skill_families: Mapping[str, str] | None = None,
) -> Iterator[dict]:
    """Yield every record of `records` with its verdict, in input order.
    `open_session(code)` is a context manager giving a session (EnvSession in production);
    `candidate_timeout` caps the wall time of one candidate's checks (verdict `timeout`);
    `stats` (if given) counts reasons as records come out; `require_solution` rejects a
    published class without solution(); `keep_trajectory` gives each valid record
    `validation.trajectory` (one episode, for the judge); `skill_families` (skill name ->
    family class name) rejects a design of another family than its skill's (`off_skill`)."""
    from .. import dedup
    from ..sandbox import imap_pool

    if copies not in ("reject", "allow"):
        raise ValueError(f"copies must be reject or allow, not {copies!r}")
    # Threshold above 1 makes the index exact-only.
    index = dedup.DedupIndex(threshold=near if near is not None else 1.01)
    memory_keys: set[str] = set()
    for e in memory or []:
        if isinstance(e.get("code"), str):
            index.add(str(e.get("id") or e.get("name")), e["code"])
            memory_keys.add(str(e.get("id") or e.get("name")))

    def check_not_a_copy(rec: dict, code: str) -> None:
        """`duplicate` for a copy of an earlier candidate or of memory; else index it."""
        from_design = rec.get("origin", "design") == "design"
        exclude = frozenset() if from_design else frozenset(memory_keys)
        match = index.find(code, exclude=exclude)
        index.add(str(rec.get("id")), code)
        if match is not None:
            what = "memory entry" if match.key in memory_keys else "candidate"
            how = "same code as" if match.how == "exact" else f"{match.similarity:.0%} similar to"
            raise Rejected("duplicate", f"{how} {what} {match.key}")

    def prepare(rec: dict) -> tuple[dict, str | None, list[int], Verdict | None]:
        """Host-side checks, in input order (duplicates depend on what came before)."""
        code = candidate_code(rec)
        rseeds = seeds_for(rec, seeds, seed)
        t0 = time.perf_counter()
        try:
            check_code_present(code)
            check_syntax(code)
            if skill_families is not None and rec.get("origin", "design") == "design":
                check_on_skill(code, rec.get("skill"), skill_families)
            if copies == "reject":
                check_not_a_copy(rec, code)
        except Rejected as r:
            return (
                rec,
                code,
                rseeds,
                Verdict(
                    False,
                    r.reason,
                    r.detail,
                    round(time.perf_counter() - t0, 4),
                    rseeds,
                    contract=resolve_contract(code or "", _contract_of(rec, contract)),
                ),
            )
        return rec, code, rseeds, None

    def run(item: tuple) -> dict:
        rec, code, rseeds, verdict = item
        if verdict is None:
            verdict = validate_code(
                code,
                rseeds,
                open_session,
                budget=candidate_timeout,
                contract=_contract_of(rec, contract),
                reject_single_shot=reject_single_shot,
                require_solution=require_solution,
                keep_trajectory=keep_trajectory,
            )
        return apply_verdict(rec, verdict, code)

    for out in imap_pool(run, (prepare(r) for r in records), workers):
        if stats is not None:
            stats[out["validation"]["reason"]] += 1
        yield out
