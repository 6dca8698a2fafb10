"""The README's model table is the registry's: a model added as one file appears there, or this fails
with the command that regenerates it."""

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
