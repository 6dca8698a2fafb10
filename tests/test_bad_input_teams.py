"""Security checks of team mode in the bad-input suite's style (tests/test_bad_input.py): a forged
annotator name in a request, a role change by a non-admin, a session after sign-out and an expired
token, each through the pages (Streamlit AppTest in team mode: an ``[auth]`` secrets section and the
identity token's claims as ``st.user``) and through the store. Every case asserts a clear message,
no traceback, and nothing written: every row of the store's tables is as it was."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import create_engine, text
from streamlit.testing.v1 import AppTest

from db.store import Store
from qa_core.access import AccessDenied
from tests.pages import ASK, AUTH, LABEL, LANDING, TIMEOUT
from tests.teams import AUDIT, claims, shown, team_page

TABLES = ("datasets", "candidates", "labels", "label_retractions", "adjudications", "model_versions",
          "model_promotions", "training_jobs", "users", "audit_events", "store_info")


def snapshot(url: str) -> dict[str, list[tuple]]:
    """Every row of the store's tables, but a user's last sign-in time: opening a page signs the user
    in again, the one write a refused page makes (the refusal itself writes nothing)."""
    engine = create_engine(url)
    columns = {"users": "id, subject, email, display_name, role, created_at, signed_out_at"}
    try:
        with engine.connect() as connection:
            return {
                t: sorted(map(tuple, connection.execute(text(f"SELECT {columns.get(t, '*')} FROM {t}"))), key=repr)
                for t in TABLES
            }
    finally:
        engine.dispose()


@pytest.fixture
def team(store_url: str):
    """The app's store (demo imported by the first page run) with ada signed in first (admin) and
    anna after her (annotator)."""
    team_page(LANDING, claims("ada"))
    team_page(LANDING, claims("anna"))
    store = Store(store_url, team=True)
    yield store, store_url
    store.close()


def test_a_forged_annotator_name_is_refused(team) -> None:
    store, url = team
    anna = store.users.sign_in("sub-anna", "anna@example.org", "Anna", **_times())
    candidate = store.datasets.find_candidate_id("demo", "demo-01", "demo-01-0")
    before = snapshot(url)
    with pytest.raises(AccessDenied, match="anna@example.org cannot record a judgement as annotator 'ada@example.org'"):
        store.labels.add_label(candidate, "ada@example.org", 4, actor=anna)
    with pytest.raises(AccessDenied, match="may not adjudicate"):
        store.labels.adjudicate(candidate, 4, "ada@example.org", actor=anna)
    assert snapshot(url) == before
    # A request whose session state names another annotator: the page labels as the signed-in user.
    page = team_page(LABEL, claims("anna"), annotator="ada@example.org", new_annotator="ada@example.org")
    assert [t.value for t in page.text_input] == ["anna@example.org"]  # no name to type or choose
    page.button(key="grade-3").click().run()
    assert not page.exception, page.exception
    labels = store.labels.current_label_records("demo")
    assert [label.annotator for label in labels] == ["anna@example.org"]


def test_a_role_change_by_a_non_admin_is_refused(team) -> None:
    store, url = team
    anna = store.users.sign_in("sub-anna", "anna@example.org", "Anna", **_times())
    before = snapshot(url)
    with pytest.raises(AccessDenied, match=r"anna@example.org \(annotator\) may not change roles; ask an admin"):
        store.users.grant_role("anna@example.org", "admin", actor=anna)
    page = team_page(AUDIT, claims("anna"))
    assert "anna@example.org (annotator) may not read the audit trail here" in shown(page)
    assert [b.key for b in page.button] == ["sign_out"] and not page.selectbox and not page.dataframe
    assert snapshot(url) == before


def test_a_session_after_sign_out_is_refused(team) -> None:
    store, url = team
    token = claims("anna", issued=time.time() - 5)
    page = team_page(LABEL, token)
    page.sidebar.button(key="sign_out").click().run()
    assert not page.exception, page.exception
    assert store.users.users()[1]["signed_out_at"] is not None
    before = snapshot(url)
    replayed = team_page(LABEL, token)  # the same identity token (a copied cookie) after the sign-out
    assert "anna@example.org signed out at" in shown(replayed) and "sign in again" in shown(replayed)
    assert [b.label for b in replayed.button] == ["Sign in"] and not replayed.radio
    with pytest.raises(AccessDenied, match="signed out"):
        store.users.sign_in("sub-anna", "anna@example.org", "Anna", **_times(token))
    assert snapshot(url) == before


def test_an_expired_token_is_refused(team) -> None:
    store, url = team
    before = snapshot(url)
    expired = claims("anna", issued=time.time() - 7200, lasts=3600)
    page = team_page(LABEL, expired)
    assert "the sign-in of anna@example.org expired at" in shown(page) and "sign in again" in shown(page)
    assert [b.label for b in page.button] == ["Sign in"] and not page.radio
    with pytest.raises(AccessDenied, match="expired"):
        store.users.sign_in("sub-anna", "anna@example.org", "Anna", **_times(expired))
    assert snapshot(url) == before


def _times(token: dict | None = None) -> dict:
    from datetime import UTC, datetime

    token = token or claims("x")
    return {"issued_at": datetime.fromtimestamp(token["iat"], UTC), "expires_at": datetime.fromtimestamp(token["exp"], UTC)}


def test_ask_judges_as_the_signed_in_user_whatever_the_session_names(team) -> None:
    """Judging in place on Ask (issue 37): a session state naming another annotator changes nothing,
    the label is the signed-in user's."""
    store, _ = team
    app = AppTest.from_file(ASK, default_timeout=TIMEOUT)
    app.secrets["auth"] = AUTH
    app.user = claims("anna")
    app.session_state["annotator"] = "ada@example.org"
    for name, value in {"dataset": "demo", "qid": "demo-01", "model": "overlap"}.items():
        app.query_params[name] = value
    app.run()
    app.button(key="judge-grade-2").click().run()
    assert not app.exception, app.exception
    assert list(store.labels.current_labels("demo").values()) == [{"anna@example.org": 2}]


def test_the_systems_page_shows_its_forms_only_to_a_role_that_may_add_or_remove(team) -> None:
    """An annotator sees the systems and no add or remove form (the store refused the write, the
    page offered it); an admin sees the three."""
    _, url = team
    systems_page = str(AUDIT).replace("6_Audit.py", "7_Systems.py")
    before = snapshot(url)
    anna = team_page(systems_page, claims("anna"))
    assert not anna.tabs and not anna.text_input and [b.key for b in anna.button] == ["sign_out"]
    assert any("adding and removing systems is for admins" in c.value for c in anna.caption)
    ada = team_page(systems_page, claims("ada"))
    assert [tab.label for tab in ada.tabs] == ["Add a run", "Add a service", "Remove"]
    assert {b.key for b in ada.button} == {"sign_out", "systems_add_run", "systems_add_service", "systems_remove"}
    assert snapshot(url) == before


def test_a_job_queued_by_an_admin_demoted_before_it_runs_registers_and_promotes_nothing(team) -> None:
    """Issue 45: it registered and promoted, authorised as the worker's operator, not as its creator."""
    from qa_core.access import operator
    from qa_core.services.worker import serve

    store, url = team
    ada = store.users.sign_in("sub-ada", "ada@example.org", "Ada", **_times())
    anna = store.users.sign_in("sub-anna", "anna@example.org", "Anna", **_times())
    store.users.grant_role("anna@example.org", "admin", actor=ada)
    job_id = store.jobs.create_job("smcnn", "demo", {"promote": True, "seed": 1}, runner="worker", actor=anna)
    store.users.grant_role("anna@example.org", "annotator", actor=ada)
    before = {t: rows for t, rows in snapshot(url).items() if t in ("model_versions", "model_promotions")}
    (served,) = serve(store, until_idle=True, report=lambda record: None, actor=operator("worker"))
    assert served["status"] == "failed" and served["error"] == (
        f"anna@example.org (annotator), who queued training job {job_id}, may no longer train models; nothing was saved")
    assert store.jobs.job(job_id)["error"] == served["error"]
    assert {t: rows for t, rows in snapshot(url).items() if t in before} == before
