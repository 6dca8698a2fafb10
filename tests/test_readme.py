"""The README's model table is the registry's: a model added as one file appears there, or this fails
with the command that regenerates it. The server's file watching is off, as the README says."""

from __future__ import annotations

from pathlib import Path

import pytest

from qa_core.cli import main
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
