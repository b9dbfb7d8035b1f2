"""The shape of the package: no import circles, and modules that each do one job.

The import graph is read from the source with `ast`, nothing is imported: every
`import a.b` and `from x import y` anywhere in a module (top level, inside functions and
under `if TYPE_CHECKING:`, relative or absolute) is an edge to the spade_cli module it
names. `from pkg import name` is an edge to `pkg.name` when that is a module, else to
`pkg` (its `__init__`). Importing a submodule also runs its package's `__init__`, but
that implicit edge is left out: it would make every package that imports its own
submodules a circle. A circle is a strongly connected component of two or more modules
(Tarjan's algorithm); there must be none.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .helpers import ROOT

MAX_LINES = 400

# Modules over MAX_LINES lines, each with the one job it does. A module that grows past
# the limit fails the test until it is split or listed here with its job.
LONG_MODULES = {
    "spade_cli/recordio.py": "reading and writing record streams (compression, atomic output)",
    "spade_cli/corpus/sampler.py": "uniform sampling of documents from a corpus",
    "spade_cli/sandbox/session.py": "EnvSession, the parent's handle on one sandboxed worker",
    "spade_cli/rollout/runner.py": "the rollout stage: all episodes in flight, turn by turn",
    # Its privilege drop, rlimits and seccomp are jail.py's; what is left is one job.
    "spade_cli/sandbox/worker.py": "the worker inside the sandbox: protocol, loader, zygote",
    "spade_cli/sandbox/config.py": "the sandbox's limits and the bwrap command line they give",
    "spade_cli/design.py": "the spade-design stage: designer prompts and candidate records",
    "spade_cli/engines/hf.py": "the transformers engine: batched generation with logprobs",
    "spade_cli/envs/checks.py": "our contract's checks and the verdict on one design",
    "spade_cli/evals/bfcl.py": "the BFCL-v4 multi-turn suite",
    "spade_cli/loop/recipe.py": "the round's stages as the commands they run",
    "spade_cli/loop/report.py": "per-round metrics, metrics.jsonl, plots and the stderr table",
    "spade_cli/stage_settings.py": "the option declarations, one settings class per stage",
    "spade_cli/train/samples.py": "training samples and their advantages, from candidate records",
}

# Names that define distinct jobs: no module may define two names of one group.
JOBS = [
    ("mean_gap", "Scorer", "merge_into_memory", "summary_lines"),  # estimators, scoring, ...
    ("update_memory", "select_exemplars", "select_replay"),  # store, exemplars, replay
    ("SpadeGRPOTrainer", "build_trainer"),  # the TRL subclass beside the run
    ("validate_code", "run_published_checks"),  # our contract beside the published one
    ("Round", "round_stages", "round_summary", "Loop"),  # layout, recipe, report, runner
]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path) -> dict[str, Path]:
    pkg = root / "spade_cli"
    # Designer exemplars and deliberately broken designs: environment modules, not ours.
    skip = pkg / "envs" / "examples"
    return {module_name(p, root): p for p in sorted(pkg.rglob("*.py")) if skip not in p.parents}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `name` (at `path`) imports, anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target:
                    out.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(
                    parts[: len(parts) - node.level + 1] + ([node.module] if node.module else [])
                )
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    out.add(f"{base}.{alias.name}")
                elif base in modules:
                    out.add(base)
    out.discard(name)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = package_modules(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_circle_finder_finds_a_circle_and_reads_every_kind_of_import(tmp_path):
    pkg = tmp_path / "spade_cli"
    (pkg / "loop").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "loop" / "__init__.py").write_text("from .runner import Loop\n")
    (pkg / "loop" / "runner.py").write_text("from .report import summary\n")
    (pkg / "loop" / "report.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .runner import Round\n"
    )
    (pkg / "loop" / "recipe.py").write_text("def f():\n    import spade_cli.loop.report\n")
    graph = import_graph(tmp_path)
    assert graph["spade_cli.loop.recipe"] == {"spade_cli.loop.report"}
    assert circles(graph) == [["spade_cli.loop.report", "spade_cli.loop.runner"]]


def test_no_import_circles():
    graph = import_graph(ROOT)
    assert len(graph) > 90 and "spade_cli.loop.layout" in graph["spade_cli.loop.report"]
    assert circles(graph) == []


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_modules_over_the_line_limit_are_listed_with_their_one_job():
    long = {
        str(p.relative_to(ROOT))
        for p in package_modules(ROOT).values()
        if line_count(p) > MAX_LINES
    }
    unlisted = sorted(long - set(LONG_MODULES))
    assert not unlisted, f"over {MAX_LINES} lines: split them, or list each with its one job"


def test_no_module_defines_two_jobs():
    where: dict[str, list[str]] = {}
    for name, path in package_modules(ROOT).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                where.setdefault(node.name, []).append(name)
    for group in JOBS:
        homes = {job: where.get(job, []) for job in group}
        assert all(len(h) == 1 for h in homes.values()), homes
        assert len({h[0] for h in homes.values()}) == len(group), homes
