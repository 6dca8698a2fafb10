"""The element types the pages ask Streamlit's bundle for exist in the installed Streamlit, one
module each: a renamed module would make the preload fetch nothing (the pages keep working, only
slower), so an upgrade that renames one fails here."""

from __future__ import annotations

import ast

import pytest

from pages.common.navigation import PAGES_DIR
from pages.common.scripts import streamlit_modules


def preloaded_elements() -> set[str]:
    """Every element type name passed to ``preload_elements`` by a page."""
    names = set()
    for path in PAGES_DIR.glob("[0-9]*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "preload_elements":
                names |= {arg.value for arg in node.args if isinstance(arg, ast.Constant)}
    return names


def test_the_pages_preload_something():
    assert {"Button", "DataFrame", "PlotlyChart"} <= preloaded_elements()


@pytest.mark.parametrize("element", sorted(preloaded_elements()))
def test_each_preloaded_element_is_one_module_of_the_installed_streamlit(element):
    modules = streamlit_modules([element])
    assert len(modules) == 1 and modules[0].startswith(f"{element}.") and modules[0].endswith(".js")
