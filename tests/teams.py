"""Team mode pages under Streamlit AppTest, opened as a given user (``AUTH`` and ``claims`` live in
``tests.pages``, whose ``open_page`` signs in the ``both_modes`` user)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.pages import AUTH, ROOT, TIMEOUT, claims

AUDIT = str(ROOT / "pages" / "6_Audit.py")
__all__ = ["AUDIT", "claims", "shown", "team_page"]


def team_page(path: str, user: dict, **state) -> AppTest:
    app = AppTest.from_file(path, default_timeout=TIMEOUT)
    app.secrets["auth"] = AUTH
    app.user = user
    for key, value in state.items():
        app.session_state[key] = value
    app.run()
    assert not app.exception, app.exception
    return app


def shown(app: AppTest) -> str:
    return "\n".join(e.value for kind in ("error", "warning", "info", "success", "markdown") for e in getattr(app, kind))
