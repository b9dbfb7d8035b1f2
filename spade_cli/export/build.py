"""From records to exportable environments: which ones, and what each carries.

`exportable(records, selection)` keeps the valid environments of a stream of candidate
records (or memory `env` records) that pass the selection; `build_spec(record, n_seeds,
cfg)` plays each chosen seed in the sandbox once, to record what a format needs up front
(the solution, the hint, and the return spade's replay of that solution earns).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ..errors import UsageError
from .spec import KEPT_FIELDS, ExportedEnv


@dataclass
class Selection:
    skills: list[str] | None = None
    min_regret: float | None = None
    max_regret: float | None = None
    win_rate: tuple[float, float] | None = None
    """The no-hint success rate band [lo, hi] (score.nohint, else the rollouts' summary)."""

    @staticmethod
    def parse_band(text: str | None) -> tuple[float, float] | None:
        if not text:
            return None
        try:
            lo, hi = (float(x) for x in text.split(":"))
        except ValueError:
            raise UsageError(
                f"--win-rate must look like LO:HI (for example 0.2:0.8), got {text!r}"
            ) from None
        if not 0 <= lo <= hi <= 1:
            raise UsageError(f"--win-rate {text}: need 0 <= LO <= HI <= 1")
        return lo, hi

    def keeps(self, rec: dict) -> bool:
        if self.skills and rec.get("skill") not in self.skills:
            return False
        score = rec.get("score") or rec.get("scores") or {}
        regret = score.get("regret")
        if self.min_regret is not None and not (
            isinstance(regret, (int, float)) and regret >= self.min_regret
        ):
            return False
        if self.max_regret is not None and not (
            isinstance(regret, (int, float)) and regret <= self.max_regret
        ):
            return False
        if self.win_rate is not None:
            rate = win_rate(rec)
            if rate is None or not self.win_rate[0] <= rate <= self.win_rate[1]:
                return False
        return True


def win_rate(rec: dict) -> float | None:
    score = rec.get("score") or rec.get("scores") or {}
    rate = (score.get("nohint") or {}).get("success_rate")
    if rate is None:
        rate = (((rec.get("rollouts") or {}).get("summary") or {}).get("nohint") or {}).get(
            "success_rate"
        )
    return float(rate) if isinstance(rate, (int, float)) else None


def env_of(rec: dict) -> dict | None:
    """The environment fields of a candidate (its `env`) or of a memory env record."""
    env = rec.get("env") if rec.get("kind") == "candidate" else rec
    return env if isinstance(env, dict) and isinstance(env.get("code"), str) else None


def exportable(records: Iterable[dict], selection: Selection) -> Iterator[dict]:
    for rec in records:
        if env_of(rec) is None or not (rec.get("validation") or {}).get("valid", True):
            continue
        if rec.get("kind") == "candidate" and "validation" not in rec:
            continue  # never validated: nothing says it holds the contract
        if selection.keeps(rec):
            yield rec


def kept(rec: dict) -> dict:
    """The record as an export keeps it: its kept fields, the code left out (env.py has it)."""
    out = {k: rec[k] for k in KEPT_FIELDS if k in rec}
    if isinstance(out.get("env"), dict):
        out["env"] = {k: v for k, v in out["env"].items() if k != "code"}
    else:
        out.pop("code", None)
    return out


def seeds_of(rec: dict, n: int | None) -> list[int]:
    seeds = [int(s) for s in (rec.get("validation") or {}).get("seeds") or [] if isinstance(s, int)]
    seeds = seeds or [0]
    return seeds[:n] if n else seeds


def build_spec(rec: dict, n_seeds: int | None, cfg) -> ExportedEnv:
    """Plays each seed's own solution once, sandboxed, as validation replays it."""
    from ..envs.actions import turn_limit
    from ..envs.contracts import resolve_contract, solution_actions
    from ..envs.shared_checks import check_reset_reply, run_episode
    from ..rollout.returns import final_return
    from ..sandbox import EnvSession

    env = env_of(rec)
    code = env["code"]
    contract = resolve_contract(code, "auto")
    returns = "final" if contract == "published" else "sum"
    spec = ExportedEnv(
        record=kept(rec),
        code=code,
        contract=contract,
        returns=returns,
        max_turns=turn_limit(env.get("max_turns")),
        seeds=seeds_of(rec, n_seeds),
    )
    own_hint = rec.get("hint") if isinstance(rec.get("hint"), dict) else {}
    own_hint = own_hint.get("text") if own_hint.get("ok", True) else None
    found: dict = {}

    def reset_check(out):
        obs, info = check_reset_reply(out)
        found["info"] = info
        sol = info.get("solution")
        actions = (
            [str(a) for a in sol]
            if isinstance(sol, list)
            else solution_actions(info.get("solution_text"))
        )
        return obs, str(info.get("hint") or ""), actions

    with EnvSession(code, cfg) as session:
        spec.max_turns = turn_limit(
            (session.metadata or {}).get("max_turns") or env.get("max_turns")
        )
        for seed in spec.seeds:
            session.renew()
            # An empty action list plays nothing: the reset alone tells the solution.
            ep = run_episode(session, seed, [], 0, "solution", reset_check=reset_check)
            info = found["info"]
            key = str(seed)
            spec.solutions[key] = ep.solution
            spec.observations[key] = ep.observation
            if isinstance(info.get("solution_text"), str):
                spec.solution_texts[key] = info["solution_text"]
            spec.hints[key] = (
                own_hint if isinstance(own_hint, str) and own_hint.strip() else ep.hint
            )
            session.renew()
            ep = run_episode(
                session, seed, ep.solution, spec.max_turns, "solution", reset_check=reset_check
            )
            if returns == "sum":
                spec.replay_returns[key] = float(ep.ret)
            else:
                stop = (
                    "terminated" if ep.terminated else "truncated" if ep.truncated else "max_turns"
                )
                spec.replay_returns[key] = final_return([s[2] for s in ep.steps], stop)
    return spec
