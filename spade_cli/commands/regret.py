"""spade-regret: score every candidate (regret, designer reward) and update the memory."""

from __future__ import annotations

from typing import Annotated

import orjson
import typer

from .. import memory
from ..cli import (
    Inputs,
    Limit,
    Output,
    Shard,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    select,
    stage_command,
)
from ..errors import UsageError
from ..recordio import RecordReader, atomic_write_bytes
from ..regret import (
    ROLLOUT_REFUSALS,
    ScoreConfig,
    Scorer,
    lp_plays,
    refused_in_window,
    skill_of,
    summarize,
    summary_lines,
    update_lp_state,
    window_score,
)
from ..stage_settings import RegretSettings

app = make_app(
    "Score candidates: regret of the agent on each valid environment (hinted minus unhinted "
    "return, or another --estimator) and the designer's reward (clipped regret; a penalty "
    "for invalid designs and duplicates). Every candidate leaves with a `score`. With "
    "--memory, accepted environments (valid, not duplicates of memory or of the batch) are "
    "added to the memory file atomically, and replayed environments get fresh scores.\n\n"
    "Example: spade-rollout valid.zst --model M | spade-regret --memory memory.jsonl.zst -o scored.zst"
)


def parse_clip(text: str) -> tuple[float, float] | None:
    if text.strip().lower() in ("none", "off", ""):
        return None
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--clip must be LO,HI (for example 0,1) or none, got {text!r}") from None
    if lo > hi:
        raise UsageError(f"--clip {text}: LO must not exceed HI")
    return lo, hi


def read_state(path: str | None) -> dict:
    """The learning-potential trackers by skill; a missing file is an empty state."""
    from pathlib import Path

    from ..errors import DataError

    if not path or not Path(path).exists():
        return {}
    try:
        data = orjson.loads(Path(path).read_bytes())
    except orjson.JSONDecodeError as e:
        raise DataError(f"{path}: not a JSON state file ({e})") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, dict) and {"fast", "slow", "n"} <= v.keys() for v in data.values()
    ):
        raise DataError(f"{path}: expected an object of {{fast, slow, n}} per skill")
    return data


@stage_command(app, settings=RegretSettings)
def regret(
    inputs: Inputs = None,
    output: Output = "-",
    memory_path: Annotated[
        str | None,
        typer.Option(
            "--memory",
            help="Memory file to de-duplicate against and add accepted environments to "
            "(created if missing; updated atomically under a lock).",
        ),
    ] = None,
    round_: Annotated[
        int | None,
        typer.Option(
            "--round",
            min=0,
            help="Round number for memory entries [default: each candidate's round].",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Score and report, but leave the memory file unchanged."),
    ] = False,
    summary_json: Annotated[
        str | None,
        typer.Option("--summary-json", help="Also write the batch summary as JSON to this file."),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="learning-potential: JSON file of each skill's "
            "tracker (fast and slow means of its win rate), updated with this "
            "input's plays before scoring and written (atomically) after.",
        ),
    ] = None,
    state_from: Annotated[
        str | None,
        typer.Option(
            "--state-from",
            help="Read the EMAs from this file instead of --state "
            "(the previous round's), so a rerun starts from the same state.",
        ),
    ] = None,
    window: Annotated[
        list[str] | None,
        typer.Option(
            "--window",
            help="Rescore spade-regret's output after more agent "
            "steps: a rollouts file of the same environments' later no-hint "
            "plays (repeatable). The win rate (and the rewards built on it) "
            "then covers all no-hint plays; the regret stays from the input.",
        ),
    ] = None,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    *,
    settings: RegretSettings,
) -> None:
    cfg = ScoreConfig(
        estimator=settings.estimator,
        invalid_penalty=settings.invalid_penalty,
        duplicate_penalty=settings.duplicate_penalty,
        clip=parse_clip(settings.clip),
        dedup=settings.dedup,
        threshold=settings.dedup_threshold,
        min_regret=settings.min_regret,
        round=round_,
        invalid=settings.invalid,
        shape=settings.shape,
    )
    if settings.shape.plateau_lo > settings.shape.plateau_hi:
        raise UsageError("--plateau-lo must not exceed --plateau-hi")
    if settings.estimator == "learning-potential":
        if settings.shape.gamma_fast == settings.shape.gamma_slow:
            raise UsageError("--gamma-fast and --gamma-slow must differ")
        cfg.lp_state = read_state(state_from or state)
    if window:
        if memory_path:
            raise UsageError("--window rescores scored candidates: it takes no --memory")
        if (state or state_from) and cfg.lp_state is None:
            raise UsageError("--state and --state-from are for --estimator learning-potential")
        _rescore_window(inputs, window, output, zstd, shard, limit, cfg, settings.estimator)
        _write_state(state, cfg, dry_run)
        return
    entries = memory.load_memory(memory_path)
    scorer = Scorer(cfg, entries)
    reader = RecordReader(inputs or ["-"], kind="candidate", required=("id",))
    cands = select(reader, shard, limit)
    if cfg.lp_state is not None:
        # The skills' trackers take this window's plays before any reward is computed.
        cands = list(cands)
        update_lp_state(cfg.lp_state, _plays_by_skill((c, None) for c in cands), cfg.shape)
    with open_output(output, zstd) as out:
        for cand in cands:
            out.write(scorer.score(cand, where=reader))

    # Memory is written after the scored output is safely in place: if we die in between,
    # a rerun recomputes the same scores and adds the same entries (ids are code hashes).
    if memory_path and not dry_run:
        seen = {e["id"] for e in entries}
        accepted = scorer.accepted
        if settings.shuffle_memory_scores:
            accepted = memory.shuffle_scores(accepted, seed=f"round:{round_}")
        new = memory.update_memory(
            memory_path,
            lambda old: memory.evict(
                memory.merge_into_memory(
                    old,
                    accepted,
                    scorer.replayed,
                    seen,
                    settings.dedup_threshold if settings.dedup else None,
                ),
                settings.memory_capacity,
            ),
        )
        log.info("memory %s: %d environments (%+d)", memory_path, len(new), len(new) - len(entries))
    _write_state(state, cfg, dry_run)
    summary = summarize(scorer.scored)
    if summary_json:
        atomic_write_bytes(summary_json, orjson.dumps(summary, option=orjson.OPT_INDENT_2) + b"\n")
    for line in summary_lines(summary, settings.estimator):
        log.info("%s", line)


def _write_state(state: str | None, cfg: ScoreConfig, dry_run: bool) -> None:
    if state and cfg.lp_state is not None and not dry_run:
        atomic_write_bytes(state, orjson.dumps(cfg.lp_state, option=orjson.OPT_SORT_KEYS) + b"\n")


def _plays_by_skill(items) -> dict[str, list[float]]:
    """(candidate, its no-hint plays or None for its own) -> each skill's returns."""
    out: dict[str, list[float]] = {}
    for cand, nohint in items:
        out.setdefault(skill_of(cand), []).extend(lp_plays(cand, nohint))
    return out


def window_plays(paths: list[str]) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The no-hint episodes of each candidate id over the window's rollouts files (only
    what the win rate needs: return and success), and the marks a re-play's checks left
    on a candidate (contract_broken, nondeterministic)."""
    plays: dict[str, list[dict]] = {}
    marks: dict[str, dict] = {}
    reader = RecordReader(paths, kind="candidate", required=("id",))
    for rec in reader:
        ro = rec.get("rollouts")
        if not isinstance(ro, dict):
            continue
        episodes = ro.get("nohint") or []
        if not isinstance(episodes, list) or not all(isinstance(e, dict) for e in episodes):
            raise reader.error("rollouts.nohint must be a list of episodes")
        rid = str(rec["id"])
        plays.setdefault(rid, []).extend(
            {"return": e.get("return"), "success": e.get("success")} for e in episodes
        )
        for mark in ROLLOUT_REFUSALS:
            if ro.get(mark):
                marks.setdefault(rid, {}).setdefault(mark, ro[mark])
    return plays, marks


def _rescore_window(
    inputs,
    window: list[str],
    output: str,
    zstd: bool,
    shard,
    limit,
    cfg: ScoreConfig,
    estimator: str,
) -> None:
    plays, marks = window_plays(window)
    scores = []
    reader = RecordReader(inputs or ["-"], kind="candidate", required=("id",))

    def all_plays(cand: dict) -> list[dict]:
        ro = cand.get("rollouts")
        first = (ro.get("nohint") or []) if isinstance(ro, dict) else []
        return [*first, *plays.get(str(cand["id"]), [])]

    cands = select(reader, shard, limit)
    if cfg.lp_state is not None:  # the window's plays update the skills' trackers first
        cands = list(cands)
        kept = ((c, all_plays(c)) for c in cands if str(c["id"]) not in marks)
        update_lp_state(cfg.lp_state, _plays_by_skill(kept), cfg.shape)
    with open_output(output, zstd) as out:
        for cand in cands:
            sc = cand.get("score")
            if not isinstance(sc, dict):
                raise reader.error(
                    "candidate has no score: --window rescores spade-regret's output"
                )
            refused = marks.get(str(cand["id"]))
            if refused and sc.get("valid"):  # a re-play caught what the first plays did not
                cand, sc = refused_in_window(cand, refused, cfg)
            else:
                sc = window_score(sc, all_plays(cand), 1 + len(window), cfg, skill_of(cand))
            scores.append(sc)
            out.write({**cand, "score": sc})
    for line in summary_lines(summarize(scores), estimator):
        log.info("%s", line)


main = entry(app, "spade-regret")
