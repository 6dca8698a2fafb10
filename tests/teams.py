"""Team mode under Streamlit AppTest: the ``[auth]`` secrets section that switches it on, and the
identity token's claims that ``st.user`` holds after a sign-in (no provider is reached: AppTest
never redirects)."""

from __future__ import annotations

import time

from streamlit.testing.v1 import AppTest

from tests.pages import ROOT, TIMEOUT

AUDIT = str(ROOT / "pages" / "6_Audit.py")
AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "a-long-random-cookie-secret-for-the-tests-only",
    "client_id": "rerank-lab",
    "client_secret": "test-only",
    "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",  # never reached: no login here
}

def claims(who: str, issued: float | None = None, lasts: float = 3600) -> dict:
    """What ``st.user`` holds after ``who`` signed in: the identity token's claims."""
    issued = int(issued if issued is not None else time.time())
    return {"is_logged_in": True, "sub": f"sub-{who}", "email": f"{who}@example.org", "name": who.title(),
            "iat": issued, "exp": int(issued + lasts)}


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
