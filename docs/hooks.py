"""MkDocs hooks: the repository's CONTRIBUTING.md and CHANGELOG.md as site pages, and a
failed strict build when a command page's generated option table is stale.

The two files stay at the repository's root, where people look for them; the site gets a
copy of each with its links rewritten from the root's point of view to the pages'.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.plugins import get_plugin_logger
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
ROOT_PAGES = {"contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}
log = get_plugin_logger("spade")


def _from_root(text: str) -> str:
    # From the root a page is `docs/x.md`, from the site's pages `x.md`; the two files link
    # to nothing else (code paths are code spans), so these rewrites are all they need.
    text = text.replace("](docs/", "](")
    for page, source in ROOT_PAGES.items():
        text = text.replace(f"]({source})", f"]({page})")
    return text


def on_files(files, config):
    for page, source in ROOT_PAGES.items():
        text = _from_root((ROOT / source).read_text())
        files.append(File.generated(config, page, content=text))
    return files


def on_pre_build(config):
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "docs"))
    import gen_options

    for line in gen_options.stale_pages():
        log.warning("%s (run: just docs)", line)
