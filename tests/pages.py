"""The app's pages under Streamlit's AppTest, opened the same way by every page test."""

from __future__ import annotations

import json
import time

from streamlit.testing.v1 import AppTest

from tests import ROOT

LANDING = str(ROOT / "app.py")
ASK, COMPARE, LABEL, TRAIN = (
    str(ROOT / "pages" / name) for name in ("1_Ask.py", "2_Compare.py", "3_Label.py", "4_Train.py")
)
TIMEOUT = 90  # the first run loads spaCy and builds the BM25 index (slow on a busy 2-core CI machine)

# Team mode under AppTest: the ``[auth]`` secrets section that switches it on, and the identity
# token's claims that ``st.user`` holds after a sign-in (no provider is reached: AppTest never redirects).
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


SIGNED_IN: dict | None = None
"""Who ``open_page`` signs in, in team mode; None: local mode. The ``both_modes`` fixture (conftest)
sets it, so that a page test module runs once in each mode."""


def open_page(path: str, **query: str) -> AppTest:
    """A page after its first run, opened with ``query`` parameters as from a link, in local mode or
    (``SIGNED_IN``) in team mode; fails on an exception."""
    app = AppTest.from_file(path, default_timeout=TIMEOUT)
    if SIGNED_IN is not None:
        app.secrets["auth"] = AUTH
        app.user = SIGNED_IN
    for name, value in query.items():
        app.query_params[name] = value
    app.run()
    assert not app.exception, app.exception
    return app


def markdown(app: AppTest) -> str:
    """Every markdown element's text, one per line."""
    return "\n".join(element.value for element in app.markdown)


def select_points(app: AppTest, key: str, points: list[dict]) -> AppTest:
    """Run ``app`` again as after a user selected ``points`` (plotly's point dicts, ``customdata``
    and all) in its ``st.plotly_chart`` with ``key``. AppTest has no interaction for a chart's
    selection, so this sends the widget state the browser sends: the selection as JSON (Streamlit's
    ``PlotlyChartSelectionSerde``), beside every other widget's state."""
    (chart,) = [chart for chart in app.get("plotly_chart") if chart.proto.id.endswith(f"-{key}")]
    states = app._tree.get_widget_states()
    states.widgets.add(id=chart.proto.id, string_value=json.dumps(
        {"selection": {"points": points, "point_indices": list(range(len(points))), "box": [], "lasso": []}}))
    app._run(states)
    assert not app.exception, app.exception
    return app
