"""The app's pages under Streamlit's AppTest, opened the same way by every page test."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
LANDING = str(ROOT / "app.py")
ASK, COMPARE, LABEL, TRAIN = (
    str(ROOT / "pages" / name) for name in ("1_Ask.py", "2_Compare.py", "3_Label.py", "4_Train.py")
)
TIMEOUT = 90  # the first run loads spaCy and builds the BM25 index (slow on a busy 2-core CI machine)


def open_page(path: str, **query: str) -> AppTest:
    """A page after its first run, opened with ``query`` parameters as from a link; fails on an exception."""
    app = AppTest.from_file(path, default_timeout=TIMEOUT)
    for name, value in query.items():
        app.query_params[name] = value
    app.run()
    assert not app.exception, app.exception
    return app


def markdown(app: AppTest) -> str:
    """Every markdown element's text, one per line."""
    return "\n".join(element.value for element in app.markdown)
