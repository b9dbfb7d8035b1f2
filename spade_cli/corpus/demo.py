"""The demo corpus: real documentation every Python installation already carries.

Nothing can be downloaded where spade runs, so the CPU demo and the tests ground the
designer on the standard library's own documentation: one document per public module
(its docstring and the signature and docstring of each public class and function) and
one per documented public class (its docstring and its methods'). Output is a JSONL.zst
file of `{"id", "title", "module", "text"}` lines, sorted, with memory addresses and
machine paths removed so the same Python version gives byte-identical output.

    python -m spade_cli.corpus.demo data/demo-corpus.jsonl.zst
    spade-sample-docs --build-demo-corpus data/demo-corpus.jsonl.zst
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import os
import re
import sys
import warnings
from typing import Any

# Modules whose import has side effects (a browser, printing, a GUI) or that are
# test-only or platform-specific; everything else public in sys.stdlib_module_names.
SKIP = {
    "antigravity",
    "this",
    "idlelib",
    "tkinter",
    "turtle",
    "turtledemo",
    "test",
    "ensurepip",
    "pydoc_data",
    "lib2to3",
    "msvcrt",
    "winreg",
    "winsound",
    "nt",
    "xxlimited",
    "xxsubtype",
    "xxlimited_35",
    "__future__",
    "sre_compile",
    "sre_constants",
    "sre_parse",
}
MIN_CLASS_DOC = 300  # a class gets its own document only if it says this much
MAX_MEMBER_DOC = 1500  # keep one long docstring from swamping a module document

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _clean(text: str) -> str:
    # The interpreter's path out too: `python` and `python3` build the same corpus.
    text = _ADDRESS.sub("", text).replace(sys.executable, "<python>")
    return text.replace(sys.prefix, "<prefix>").replace(sys.base_prefix, "<prefix>")


class _Shown:
    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _signature(obj: Any) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    # A default's repr can be machine state (cgi.FieldStorage(environ=os.environ) would
    # print this process's environment) or just huge: show such defaults as `...`.
    params = []
    for p in sig.parameters.values():
        if isinstance(p.default, str) and p.default == sys.executable:
            p = p.replace(default=_Shown("<python>"))  # python and python3 alike
        elif p.default is not p.empty:
            r = repr(p.default)
            if len(r) > 60 or isinstance(p.default, os._Environ) or "environ" in r:
                p = p.replace(default=_Shown("..."))
        params.append(p)
    return str(sig.replace(parameters=params))


def _doc(obj: Any, limit: int | None = None) -> str:
    doc = inspect.getdoc(obj) or ""
    if limit is not None and len(doc) > limit:
        cut = doc.rfind("\n\n", 0, limit)
        doc = doc[: cut if cut > limit // 3 else limit].rstrip() + "\n[...]"
    return doc


def _public(module: Any) -> list[tuple[str, Any]]:
    names = getattr(module, "__all__", None)
    if not isinstance(names, (list, tuple)):
        names = [n for n in dir(module) if not n.startswith("_")]
    out = []
    for name in sorted(set(names)):
        obj = getattr(module, name, None)
        if obj is None or not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue
        # Only what the module defines itself (or its C accelerator `_name` does),
        # not what it imported from elsewhere.
        owner = getattr(obj, "__module__", None) or module.__name__
        if owner.lstrip("_").split(".")[0] != module.__name__:
            continue
        out.append((name, obj))
    return out


def _module_doc(modname: str, module: Any, members: list[tuple[str, Any]]) -> str:
    parts = [f"Module {modname}", ""]
    if doc := _doc(module):
        parts += [doc, ""]
    for name, obj in members:
        kind = "class" if inspect.isclass(obj) else "function"
        parts.append(f"{kind} {name}{_signature(obj)}")
        if doc := _doc(obj, MAX_MEMBER_DOC):
            parts.append("    " + doc.replace("\n", "\n    "))
        parts.append("")
    return "\n".join(parts).strip() + "\n"


def _class_doc(modname: str, name: str, cls: type) -> str:
    parts = [f"class {modname}.{name}{_signature(cls)}", "", _doc(cls), ""]
    for mname, meth in sorted(vars(cls).items()):
        if mname.startswith("_") or not inspect.isroutine(meth):
            continue
        doc = _doc(meth, MAX_MEMBER_DOC)
        if doc:
            parts += [
                f"    {mname}{_signature(meth)}",
                "        " + doc.replace("\n", "\n        "),
                "",
            ]
    return "\n".join(parts).strip() + "\n"


def demo_documents() -> list[dict]:
    """The documents, sorted by id; deterministic for one Python version."""
    docs: dict[str, dict] = {}
    names = sorted(n for n in sys.stdlib_module_names if not n.startswith("_") and n not in SKIP)
    sink = io.StringIO()
    for modname in names:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            warnings.simplefilter("ignore")
            try:
                module = importlib.import_module(modname)
            except Exception:  # noqa: BLE001 - platform modules that do not import here
                continue
        members = _public(module)
        text = _clean(_module_doc(modname, module, members))
        if len(text) > 200:
            docs[modname] = {
                "id": modname,
                "title": f"module {modname}",
                "module": modname,
                "text": text,
            }
        for name, obj in members:
            if inspect.isclass(obj) and len(_doc(obj)) >= MIN_CLASS_DOC:
                key = f"{modname}.{name}"
                docs[key] = {
                    "id": key,
                    "title": f"class {key}",
                    "module": modname,
                    "text": _clean(_class_doc(modname, name, obj)),
                }
    return [docs[k] for k in sorted(docs)]


def write_demo_corpus(path: str) -> int:
    """Write the documents of this interpreter to `path`; returns the count."""
    from ..recordio import write_records

    return write_records(path, demo_documents())


def build_demo_corpus(path: str) -> int:
    """Write the demo corpus to `path` (`.zst` compressed by name); returns the count.

    Built in a fresh interpreter: what a caller imported or patched (a CLI's
    sys.excepthook, pytest's pdb hooks) would otherwise show up in the documentation."""
    import subprocess

    from ..errors import DataError

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    r = subprocess.run(
        [sys.executable, "-m", "spade_cli.corpus.demo", path],
        env=env,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise DataError(
            f"building the demo corpus failed: {r.stderr.strip().splitlines()[-1:]}", path
        )
    return int(r.stderr.split()[1])


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        sys.stderr.write("usage: python -m spade_cli.corpus.demo OUT.jsonl.zst\n")
        sys.exit(2)
    n = write_demo_corpus(args[0])
    sys.stderr.write(f"wrote {n} documents to {args[0]}\n")


if __name__ == "__main__":
    main()
