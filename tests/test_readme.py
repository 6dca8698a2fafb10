"""The README's model table is the registry's: a model added as one file appears there, or this fails
with the command that regenerates it. Its pages table lists every page, its roles table says what
``qa_core.access`` lets each role do and which pages it opens, and the CLI's first docstring line
names every command: each fails when code gains what the words lack. The server's file watching is
off, as the README says."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import qa_core.cli
from pages.common.navigation import page_files
from qa_core.access import ROLE_PERMISSIONS, Actor, Role
from qa_core.cli import build_parser, main
from qa_core.rankers import registry
from tests import ROOT

README = ROOT / "README.md"


def test_readme_model_table_comes_from_the_registry() -> None:
    match = registry.TABLE_MARKERS.search(README.read_text())
    assert match, "README.md lost its generated model table markers"
    assert match.group(2) == registry.models_table(), (
        "README.md's model table is stale: run `python -m qa_core models --table --write`"
    )
    assert all(f"| `{name}` |" in match.group(2) for name in registry.available())


def test_models_table_write_replaces_only_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = README.read_text()
    stale = registry.TABLE_MARKERS.sub(lambda m: m.group(1) + "| `gone` | an old model |" + m.group(3), readme)
    copy = tmp_path / "README.md"
    copy.write_text(stale)
    assert main(["models", "--table", "--write", str(copy)]) == 0
    assert copy.read_text() == readme
    copy.write_text("# no table here\n")
    assert main(["models", "--table", "--write", str(copy)]) == 2
    assert "has no model table markers" in capsys.readouterr().err
    assert copy.read_text() == "# no table here\n"


def _table(header: str) -> dict[str, str]:
    """The README table under ``header`` (its first line) as {first cell without bold: the rest of the row}."""
    text = README.read_text()
    assert header in text, f"README.md lost its table {header!r}"
    rows = text.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]  # below the |---| line
    return {row.split("|")[1].strip().strip("*"): row.split("|", 2)[2] for row in rows}


def test_readme_pages_table_lists_every_page() -> None:
    listed = _table("| page | what it is for |")
    assert list(listed) == [path.stem.split("_", 1)[1] for path in page_files()]


def test_readme_roles_table_says_what_each_role_may_do_and_open() -> None:
    """Each role's row names, in ``Permission``'s own words, what it adds to the role below, and the
    pages it opens that the role below cannot; no row names a right or a page the role lacks."""
    rows = _table("| role | may |")
    assert list(rows) == [role.value for role in Role]
    below: frozenset = frozenset()
    opened_below: set[str] = set()
    for role in Role:
        row, granted = rows[role.value], ROLE_PERMISSIONS[role]
        assert [p.value for p in granted - below if p.value not in row] == [], role
        assert [p.value for p in set(ROLE_PERMISSIONS[Role.ADMIN]) - granted if p.value in row] == [], role
        opens = {path.stem.split("_", 1)[1] for path in page_files(Actor("someone", role))}
        named = {page for page in _table("| page | what it is for |") if re.search(rf"\b{page}\b", row)}
        assert opens - opened_below <= named and not named - opens, (role, opens, named)
        below, opened_below = granted, opens


def test_the_clis_first_docstring_line_names_every_command() -> None:
    [commands] = [action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction)]
    first_line = qa_core.cli.__doc__.splitlines()[0]
    named = re.search(r"python -m qa_core ([\w|-]+)", first_line)
    assert named and sorted(named.group(1).split("|")) == sorted(commands.choices), first_line


def test_the_server_watches_no_files_so_the_data_folder_inside_the_tree_wakes_nothing():
    """`make run`'s Streamlit, configured from the project's .streamlit/config.toml (issue 32: the
    store and parse cache in ./data flooded the inotify watcher)."""
    import os
    import subprocess
    import sys

    env = {name: value for name, value in os.environ.items() if not name.startswith("STREAMLIT_")}
    shown = subprocess.run(
        [sys.executable, "-c", "from streamlit import config; config.get_config_options(); "
                               "print(config.get_option('server.fileWatcherType'))"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )
    assert shown.stdout.strip() == "none"
