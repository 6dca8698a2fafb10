"""Our own scripts run in a page (``pages/assets``), and the preloading of Streamlit's element code."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from pages.common.navigation import PAGES_DIR

STREAMLIT_JS = Path(st.__file__).resolve().parent / "static" / "static" / "js"  # its bundle
ASSETS = PAGES_DIR / "assets"  # our own scripts, run in the page


def streamlit_modules(elements: Sequence[str]) -> list[str]:
    """The file names of the code of Streamlit's ``elements`` in the installed Streamlit's bundle
    (named by element type and a content hash, so looked up, never written down)."""
    return [path.name for element in elements for path in sorted(STREAMLIT_JS.glob(f"{element}.*.js"))]


def preload_elements(*elements: str) -> None:
    """Fetch the code of Streamlit's ``elements`` (its element type names: "Button", "DataFrame",
    ...) that the page draws next, so that they are drawn at once when they come.

    Streamlit fetches each element type's code the first time one is drawn in a browser tab (React's
    lazy loading): a fresh tab's first ranked table waited 1.5 s for the table's and plotly's code
    (issue 16), and the first pair's grade buttons came after the pair (issue 21; a key pressed
    meanwhile waits for its button, ``assets/label_keys.js``). Streamlit has no setting for it, so ``assets/preload.js`` imports
    those very modules, resolved beside Streamlit's own entry script, and the first element drawn
    finds its code loaded. The fetch starts once the page has been drawn and stood still, so it never
    holds up the page's own elements. Drawn in the sidebar, where it takes no room."""
    run_script(st.sidebar, "preload.js", "rerankLabPreload", streamlit_modules(elements))


def run_script(container, script: str, setting: str, value: Any) -> None:
    """Our own script ``assets/<script>`` run in the page, after ``window.<setting>`` is set to
    ``value`` (JSON: what this run tells the script; no data text goes into a script)."""
    container.html(
        f"<script>window.{setting} = {json.dumps(value)};</script>"
        f"<script>{(ASSETS / script).read_text(encoding='utf-8')}</script>",
        unsafe_allow_javascript=True,
    )
