"""Team mode in tests: a two-question dataset, sign-ins and table snapshots for the store tests, and
pages under Streamlit AppTest opened as a given user (``AUTH`` and ``claims`` live in
``tests.pages``, whose ``open_page`` signs in the ``both_modes`` user)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import create_engine, text
from streamlit.testing.v1 import AppTest

from db.store import Store
from qa_core.access import Actor
from qa_core.types import Candidate, Dataset, Question
from tests.pages import AUTH, ROOT, TIMEOUT, claims

AUDIT = str(ROOT / "pages" / "6_Audit.py")
__all__ = ["AUDIT", "claims", "shown", "sign_in", "small", "table_rows", "team_page"]


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
    """The messages and markdown on the page, as a reader sees them (without ``as_markdown``'s
    invisible word joiners)."""
    return "\n".join(e.value for kind in ("error", "warning", "info", "success", "markdown")
                     for e in getattr(app, kind)).replace("\u2060", "")


def small() -> Dataset:
    """Dataset "d": one TRAIN and one DEV question, a right and a wrong candidate each."""
    return Dataset("d", [
        Question("q1", "who wrote hamlet", [Candidate("a", "Shakespeare wrote Hamlet.", label=1),
                                             Candidate("b", "Hamlet is a play.", label=0)], split="train"),
        Question("q2", "who painted the mona lisa", [Candidate("a", "Leonardo painted it.", label=1),
                                                      Candidate("b", "It hangs in Paris.", label=0)], split="dev"),
    ])


def sign_in(store: Store, who: str, *, at: datetime | None = None, lasts: timedelta = timedelta(hours=1)) -> Actor:
    """``who`` signs in with a token issued ``at`` (now) that lasts ``lasts``."""
    at = (at or datetime.now(UTC)).replace(microsecond=0)
    return store.users.sign_in(f"sub-{who}", f"{who}@example.org", who.title(), issued_at=at, expires_at=at + lasts)


def table_rows(url: str, tables: Sequence[str]) -> dict[str, list[tuple]]:
    """Every row of ``tables``, in a stable order: a refused write must leave them equal."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {t: sorted(map(tuple, connection.execute(text(f"SELECT * FROM {t}"))), key=repr) for t in tables}
    finally:
        engine.dispose()
