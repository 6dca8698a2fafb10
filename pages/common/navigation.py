"""The pages a role may open, in sidebar order, with the first sentence of each page's docstring (the
landing page's links: adding a page means adding its file)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from qa_core.access import LOCAL, Actor, Permission

PAGES_DIR = Path(__file__).resolve().parent.parent  # pages/
# What a role needs to open a page (the others need Permission.VIEW); the landing page lists only these.
PAGE_PERMISSIONS = {"4_Train.py": Permission.TRAIN, "6_Audit.py": Permission.VIEW_AUDIT}


def page_files(actor: Actor = LOCAL) -> list[Path]:
    """The pages ``actor`` may open, in sidebar order."""
    return [
        path for path in sorted(PAGES_DIR.glob("[0-9]*.py"))
        if actor.may(PAGE_PERMISSIONS.get(path.name, Permission.VIEW))
    ]


def page_summaries(actor: Actor = LOCAL) -> list[tuple[str, str]]:
    """(path, first sentence of its docstring) of every page ``actor`` may open, in sidebar order:
    the landing page's links, so that adding a page means adding its file."""
    return [(f"pages/{path.name}", _summary(path, path.stat().st_mtime_ns)) for path in page_files(actor)]


@functools.cache
def _summary(path: Path, modified_ns: int) -> str:
    """The first sentence of a page's docstring, parsed once per version of the file: the entry point
    asks on every rerun, and parsing every page took ~70 ms of each click on the 2-core machine."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or path.stem
    first = " ".join(doc.split("\n\n")[0].split())
    return first.split(". ")[0].rstrip(".")
