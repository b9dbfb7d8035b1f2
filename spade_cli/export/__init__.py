"""Validated environments out to the ecosystem: OpenEnv servers, a verifiers module and
Harbor tasks (`spade-export`), and back (`spade-cat --from`).

    from spade_cli.export import export_pool, read_pool, Selection
    written = export_pool(records, "openenv", Path("out"), Selection(skills=["games"]))
    records = read_pool(Path("out"))        # the candidates again, env code included

One module per format (`openenv.py`, `verifiers_env.py`, `harbor.py`); what every exported
environment carries and the sandboxed episode they all drive are `spec.py`; which records
export and what is measured on them first, `build.py`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from .build import Selection, build_spec, exportable
from .spec import Episode, ExportedEnv, find_specs, load_spec, play

FORMATS = ("openenv", "verifiers", "harbor")

__all__ = [
    "FORMATS",
    "Episode",
    "ExportedEnv",
    "Selection",
    "export_pool",
    "load_spec",
    "play",
    "read_pool",
]


def slug(spec: ExportedEnv) -> str:
    """A directory (and Python identifier) name: the env name, then its id for uniqueness."""
    name = re.sub(r"[^a-z0-9]+", "_", spec.name.lower()).strip("_")[:40] or "env"
    rid = re.sub(r"[^a-z0-9]+", "_", spec.id.lower()).strip("_")
    return f"{name}_{rid}"


def export_pool(
    records: Iterable[dict],
    fmt: str,
    out: Path,
    selection: Selection,
    n_seeds: int | None = None,
    cfg=None,
    log=None,
) -> list[Path]:
    """Write every selected valid environment of `records` under `out` in format `fmt`;
    returns the directories written (one per environment)."""
    from .spec import sandbox_config

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    cfg = cfg or sandbox_config()
    out.mkdir(parents=True, exist_ok=True)
    specs = [build_spec(rec, n_seeds, cfg) for rec in exportable(records, selection)]
    if log is not None:
        for s in specs:
            missing = [k for k, v in s.solutions.items() if not v]
            if missing:
                log.warning(
                    "%s: seed %s has no solution actions (its oracle plays nothing)",
                    s.id,
                    ", ".join(missing),
                )
    if fmt == "verifiers":
        from . import verifiers_env

        return verifiers_env.write(specs, out, {s.id: slug(s) for s in specs})
    written = []
    for s in specs:
        d = out / slug(s)
        d.mkdir(exist_ok=True)
        if fmt == "openenv":
            from . import openenv

            written.append(openenv.write(s, d))
        else:
            from . import harbor

            written.append(harbor.write(s, d))
    return written


def read_pool(root: Path) -> list[dict]:
    """The candidate records exported under `root` (any format), code from each env.py."""
    from ..errors import DataError

    out = []
    for d in find_specs(root):
        spec = load_spec(d)
        if spec.fmt == "harbor-environment":
            continue  # a Harbor task's in-container copy (no solutions): its tests/ has the full one
        rec = dict(spec.record)
        if isinstance(rec.get("env"), dict):
            rec["env"] = {**rec["env"], "code": spec.code}
        else:
            rec["code"] = spec.code
        out.append(rec)
    if not out:
        raise DataError("no exported environments (spade.json) under this directory", str(root))
    return out
