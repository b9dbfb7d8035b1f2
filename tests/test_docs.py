"""The manual follows the code: every command and option has its page entry, the generated
option tables are current, the references to pages resolve, and the site builds strictly.

The commands are pyproject's `[project.scripts]`, their options what their Typer apps
declare, so a new command or option without documentation fails here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs"))
import gen_options  # noqa: E402  (docs/ is not a package)

README = ROOT / "README.md"
SCRIPTS = gen_options.commands()
# Where the code, its examples and its scripts may point at the manual.
REFERRING = [
    "spade_cli",
    "bench",
    "examples",
    "tests",
    "bin",
    "Justfile",
    ".ci/run",
    "pyproject.toml",
    "CONTRIBUTING.md",
]
# What benchmarks and runs create; the manual may name these before they exist.
GENERATED = ("bench/data/", "bench/out/")


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def headings(path: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M)


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in headings(path)}


def page_text(name: str) -> str:
    path = gen_options.page_path(name)
    assert path.exists(), f"{name} has no page: write {path.relative_to(ROOT)}"
    return path.read_text()


def generated(text: str) -> str:
    return text.partition("<!-- options:begin -->")[2].partition("<!-- options:end -->")[0]


# --------------------------------------------------------------------------- README


def test_readme_is_a_front_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    for quickstart in (
        "pip install rust-just && just install demo",
        "pip install rust-just && just setup test",
    ):
        assert quickstart in text
    assert "## Evidence" in text and "docs/evidence.md" in text


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_every_command_has_a_page_and_table_rows(name):
    page_text(name)
    nav = (ROOT / "mkdocs.yml").read_text()
    assert f"commands/{name}.md" in nav, f"{name}: add its page to mkdocs.yml's nav"
    for table in (README, ROOT / "docs" / "index.md"):
        rows = [line for line in table.read_text().splitlines() if line.startswith("| ")]
        assert any(f"{name}]" in row or f"`{name}`" in row for row in rows), (
            f"{name}: no row in the command table of {table.relative_to(ROOT)}"
        )


# --------------------------------------------------------------------------- options


def _commands():
    for name, entry_point in sorted(SCRIPTS.items()):
        cmd = gen_options.click_command(entry_point)
        subs = cmd.commands.items() if hasattr(cmd, "commands") else [(None, cmd)]
        for sub, c in subs:
            yield name, sub, c


COMMANDS = list(_commands())


@pytest.mark.parametrize(
    "name,sub,command", COMMANDS, ids=[f"{n} {s}" if s else n for n, s, _ in COMMANDS]
)
def test_every_option_is_on_its_page_with_its_default(name, sub, command):
    block = generated(page_text(name))
    if sub is not None:
        block = block.partition(f"### `{name} {sub}`")[2].partition("### ")[0]
        assert block, f"{name} {sub}: no section on the page"
    rows = {
        line.split(" | ")[0].strip("| `"): line
        for line in block.splitlines()
        if line.startswith("| `")
    }
    for p in command.params:
        if p.param_type_name == "argument" or "--help" in p.opts:
            continue
        flags = ", ".join(p.opts) + "".join(f" / {o}" for o in p.secondary_opts)
        assert flags in rows, f"{name} {sub or ''}: {flags} is not on the page"
        default = gen_options.format_default(p.default)
        assert not default or f"| {default} |" in rows[flags], (
            f"{name} {sub or ''}: {flags}'s default {p.default!r} is not on the page"
        )


def test_every_loop_config_key_is_on_the_loop_page():
    from spade_cli.loop.config import describe_fields

    text = page_text("spade-loop")
    for key, _, _ in describe_fields():
        assert f"| `{key}` |" in text, f"spade-loop: config key {key} is not on the page"


def test_generated_tables_are_current():
    assert gen_options.stale_pages() == []


def test_a_stale_table_is_caught():
    # A page whose table says another default than the code is rewritten by the generator,
    # which is what --check and the site build report.
    name = "spade-validate"
    text = page_text(name)
    row = next(line for line in text.splitlines() if line.startswith("| `--seeds` |"))
    stale = text.replace(row, row.replace("| `3` |", "| `4` |"))
    assert stale != text
    assert gen_options.render(name, SCRIPTS[name], stale) == text
    assert gen_options.render(name, SCRIPTS[name], text) == text


# --------------------------------------------------------------------------- references


def _files(where: list[str]):
    for entry in where:
        path = ROOT / entry
        if path.is_file():
            yield path
        else:
            yield from (
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix in (".py", ".md", ".toml", ".sh", ".sbatch", ".yaml", "")
            )


def test_references_to_the_manual_resolve():
    """`docs/PAGE.md#anchor` in code, messages and scripts names a page and a heading that
    exist, and a `README "Section"` reference names a section the README still has."""
    readme = {h.strip("`") for h in headings(README)}
    broken = []
    for path in _files(REFERRING):
        if path == Path(__file__):
            continue
        text = path.read_text(errors="replace")
        where = path.relative_to(ROOT)
        for page, anchor in re.findall(r"\bdocs/([\w/.-]+?\.md)(?:#([\w-]+))?", text):
            target = ROOT / "docs" / page
            if "NAME" in page:  # a placeholder: docs/commands/spade-NAME.md
                continue
            if not target.exists():
                broken.append(f"{where}: docs/{page} does not exist")
            elif anchor and anchor not in anchors(target):
                broken.append(f"{where}: docs/{page} has no section #{anchor}")
        for section in re.findall(r'README(?:\'s)?,?\s+"([^"]+)"', text):
            if section not in readme:
                broken.append(f'{where}: README has no section "{section}"')
    assert not broken, "\n".join(broken)


def test_links_and_paths_in_the_manual_exist():
    """Relative links in the README and CONTRIBUTING resolve (the site build checks the
    pages' own links), and every repository path the manual names in a code span exists."""
    broken = []
    for doc in (README, ROOT / "CONTRIBUTING.md"):
        for target, anchor in re.findall(
            r"\]\((?!https?:)([^)#\s]+)(?:#([\w-]+))?\)", doc.read_text()
        ):
            path = (doc.parent / target).resolve()
            if not path.exists():
                broken.append(f"{doc.name}: link to {target} does not exist")
            elif anchor and anchor not in anchors(path):
                broken.append(f"{doc.name}: {target} has no section #{anchor}")
    pages = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for doc in pages:
        for span in re.findall(
            r"`((?:examples|bench|spade_cli|bin|tests)/[^`\s]*)`", doc.read_text()
        ):
            path = span.split(" ")[0].rstrip(".,:;")
            if any(c in path for c in "*{}<>$") or "NNN" in path or path.startswith(GENERATED):
                continue
            if not (ROOT / path).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {path} does not exist")
    assert not broken, "\n".join(broken)


def test_the_module_map_names_modules_that_exist():
    """The map of where things live (paths under spade_cli/) follows the code's layout."""
    text = (ROOT / "docs" / "concepts" / "conventions.md").read_text()
    section = text.partition("## Where things live")[2]
    assert section
    spans = re.findall(r"`([\w/]+(?:\.py|\.md|/))`", section)
    missing = [
        s for s in spans if not (ROOT / "spade_cli" / s).exists() and not (ROOT / s).exists()
    ]
    assert spans and not missing, f"docs/concepts/conventions.md names missing modules: {missing}"


# --------------------------------------------------------------------------- the site


def test_the_site_builds_strictly(tmp_path):
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("mkdocs is not importable: `just setup` installs it (the dev extra)")
        pytest.skip("mkdocs is not installed: pip install -e '.[dev]'")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "commands" / "spade-loop" / "index.html").exists()


def test_pyproject_names_the_docs_tools():
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "dev"
    ]
    assert any(req.startswith("mkdocs") for req in dev)
