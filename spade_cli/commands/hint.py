"""spade-hint: the model writes each validated environment's hint from its source."""

from __future__ import annotations

from collections import Counter

from ..cli import (
    Inputs,
    Limit,
    Output,
    Seed,
    Shard,
    Zstd,
    entry,
    log,
    make_app,
    open_output,
    peek_until,
    select,
    stage_command,
)
from ..engines.settings import EngineSettings
from ..errors import UsageError
from ..recordio import RecordReader
from ..sandbox.settings import SandboxSettings
from ..stage_settings import HintSettings

app = make_app(
    "Write a hint for every valid candidate: the model reads the environment's source under "
    "the hint prompt (1-3 sentences: the key insight and the answer format, never the answer) "
    "and the candidate gets a `hint` (text, prompt and completion token ids, engine, model, "
    "attempts). A hint containing the environment's solution (checked on the solutions of the "
    "validation seeds, in the sandbox) is regenerated up to --attempts times, then kept with "
    "ok false. Other candidates pass through untouched, in input order. Hints are never "
    "training samples.\n\n"
    "Example: spade-hint validated.zst --model M -o hinted.zst"
)


@stage_command(app, settings=HintSettings, engine=EngineSettings, sandbox=SandboxSettings)
def hint(
    inputs: Inputs = None,
    output: Output = "-",
    seed: Seed = 0,
    shard: Shard = None,
    limit: Limit = None,
    zstd: Zstd = False,
    *,
    settings: HintSettings,
    engine: EngineSettings,
    sandbox: SandboxSettings,
) -> None:
    from ..hint import add_hints, is_target, load_template, sandbox_solutions
    from ..sandbox import check_sandbox

    template = load_template(settings.prompt)
    reader = RecordReader(inputs or ["-"], kind="candidate")
    records, found = peek_until(select(reader, shard, limit), is_target)
    stats: Counter = Counter()
    with open_output(output, zstd) as out:
        if not found:
            out.write_all(records)  # nothing to hint: no model needed
            log.info("no valid candidates: nothing to hint")
            return
        if not engine.path:
            raise UsageError("--model is required (the model that writes the hints)")
        if not sandbox.unsafe_no_sandbox:
            check_sandbox()
        eng = engine.load(seed=seed)
        try:
            for rec in add_hints(
                records,
                eng,
                settings.sampling,
                sandbox_solutions(sandbox.config()),
                template=template,
                attempts=settings.attempts,
                max_code_chars=settings.max_code_chars,
                seed=seed,
                batch=settings.batch,
            ):
                if "hint" in rec and is_target(rec):
                    h = rec["hint"]
                    stats["hinted"] += 1
                    stats["ok" if h["ok"] else f"failed_{h['reason']}"] += 1
                    stats["generations"] += h["attempts"]
                out.write(rec)
        finally:
            eng.close()
    log.info("hints: %s", ", ".join(f"{k} {v}" for k, v in sorted(stats.items())) or "none")


main = entry(app, "spade-hint")
