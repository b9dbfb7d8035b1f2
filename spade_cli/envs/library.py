"""The example environment library: hand-written environments shipped in the package
(spade_cli/envs/examples/; `examples/envs` in a checkout points there).

They are designer exemplars (shown in the design prompt), the first environment memory,
and test fixtures. Each file is one complete module following the environment contract;
its docstring's first line is the summary and a `Family: ...` line names the family.
Its `broken/` directory holds deliberately broken designs, one per reason code, named
after the code they must be rejected with.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from .. import pyparse
from ..records import make_id, new_record
from . import module_summary

FAMILIES = ("single-answer reasoning", "multi-step planning", "stateful tool use", "games")


def library_dir() -> Path:
    """The example library every command uses: $SPADE_ENV_LIBRARY when set, else the copy
    installed with the package (so an installed toolchain needs no source tree)."""
    env = os.environ.get("SPADE_ENV_LIBRARY")
    if env:
        return Path(env)
    return Path(__file__).resolve().with_name("examples")


def _literal_metadata(tree: ast.Module) -> dict:
    """The class-level `metadata = {...}` of the Env class, read without running the code.
    Names such as `TOOLS` defined at module level as literals are resolved too."""
    consts: dict = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                pass
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if (
                isinstance(item, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "metadata" for t in item.targets)
                and isinstance(item.value, ast.Dict)
            ):
                meta = {}
                for k, v in zip(item.value.keys, item.value.values, strict=True):
                    key = ast.literal_eval(k)
                    if isinstance(v, ast.Name) and v.id in consts:
                        meta[key] = consts[v.id]
                    else:
                        try:
                            meta[key] = ast.literal_eval(v)
                        except ValueError:
                            meta[key] = None
                return meta
    return {}


def _family(code: str) -> str:
    doc = ast.get_docstring(pyparse.parse(code)) or ""
    for line in doc.splitlines():
        if line.strip().lower().startswith("family:"):
            return line.split(":", 1)[1].strip()
    return ""


def load_library(dir: str | Path | None = None) -> list[dict]:
    """Memory-like entries {name, summary, code, max_turns, tools, family, path}, sorted by
    name. The metadata is read statically (nothing is executed); validate before trusting."""
    root = Path(dir) if dir is not None else library_dir()
    out = []
    for path in sorted(root.glob("*.py")):
        if path.name.startswith("_"):
            continue
        code = path.read_text()
        meta = _literal_metadata(pyparse.parse(code))
        out.append(
            {
                "name": meta.get("name") or path.stem,
                "summary": module_summary(code),
                "code": code,
                "max_turns": meta.get("max_turns"),
                "tools": meta.get("tools"),
                "family": _family(code),
                "path": str(path),
            }
        )
    out.sort(key=lambda e: e["name"])
    return out


def library_candidates(entries: list[dict] | None = None, round: int = 0) -> list[dict]:
    """`candidate` records (origin "library") carrying `env`, ready for spade-validate or,
    once validated, spade-rollout."""
    entries = load_library() if entries is None else entries
    recs = []
    for e in entries:
        rid = make_id("lib", e["name"], round)
        env = {k: e[k] for k in ("code", "name", "summary", "max_turns")}
        if e.get("tools"):
            env["tools"] = e["tools"]
        recs.append(
            new_record(
                "candidate",
                rid,
                [],
                origin="library",
                round=round,
                group=rid,
                doc=None,
                design=None,
                env=env,
                family=e.get("family", ""),
            )
        )
    return recs


def broken_designs(dir: str | Path | None = None) -> list[tuple[str, str]]:
    """(expected reason, designer answer text) for every file in the library's broken/:
    `.py` files are wrapped in a ```python block, `.md` files are used as they are."""
    root = (Path(dir) if dir is not None else library_dir()) / "broken"
    out = []
    for path in sorted(root.iterdir()):
        if path.suffix == ".py":
            out.append(
                (path.stem, f"Here is the environment.\n\n```python\n{path.read_text()}```\n")
            )
        elif path.suffix == ".md" and path.stem != "README":
            out.append((path.stem, path.read_text()))
    return out
