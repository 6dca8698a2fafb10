"""The README's model table is the registry's: a model added as one file appears there, or this fails
with the command that regenerates it. The server's file watching is off, as the README says."""

from __future__ import annotations

import re

from qa_core.rankers import registry
from tests import ROOT

README = ROOT / "README.md"


def test_readme_model_table_comes_from_the_registry() -> None:
    match = re.search(r"<!-- models:[^\n]*-->\n(.*?)\n<!-- /models -->", README.read_text(), re.S)
    assert match, "README.md lost its generated model table markers"
    assert match.group(1) == registry.models_table(), (
        "README.md's model table is stale: paste the output of `python -m qa_core models --table`"
    )
    assert all(f"| `{name}` |" in match.group(1) for name in registry.available())


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
