"""Team mode end to end: a real OpenID Connect provider (oidc-provider-mock; two instances on loopback
ports: "team" with one-hour tokens, "short" with tokens that expire within seconds) and the app
started with an ``[auth]`` section naming both, driven by Chromium. An admin, a reviewer and an
annotator sign in; the annotator labels (the label carries their identity) but cannot reach
adjudication, training or promotion, neither on the pages nor through the store; signing out ends
the session (the cookie copied before is refused afterwards); an expired token is refused."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from db.store import Store
from qa_core.access import AccessDenied, Actor, Role
from tests import ROOT
from tests.conftest import BROWSER_TIMEOUT_MS, _free_port, _require_chromium, _wait_healthy

SHORT_TOKEN_SECONDS = 20  # long enough to sign in and see the first page on a busy machine
PEOPLE = {"ada": "Ada Admin", "rita": "Rita Reviewer", "anna": "Anna Annotator", "eve": "Eve Early"}


@dataclass(frozen=True)
class TeamApp:
    url: str
    database_url: str

    def store(self) -> Store:
        return Store(self.database_url, team=True)


@contextmanager
def provider(token_seconds: int) -> Iterator[str]:
    """An OpenID Connect provider on a free loopback port, with one predefined user per person
    (their subject is their first name), in a thread of this process; yields its URL."""
    import oidc_provider_mock
    from werkzeug.serving import make_server

    users = [
        oidc_provider_mock.User(sub=who, claims={"email": f"{who}@example.org", "name": name})
        for who, name in PEOPLE.items()
    ]
    app = oidc_provider_mock.app(user_claims=users, access_token_max_age=timedelta(seconds=token_seconds))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


@pytest.fixture(scope="module")
def team_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamApp]:
    """The app in team mode on a free port with its own store and secrets file, stopped after."""
    _require_chromium()
    folder = tmp_path_factory.mktemp("team_app")
    port = _free_port()
    app = TeamApp(f"http://127.0.0.1:{port}", f"sqlite:///{folder / 'store.sqlite'}")
    stack = ExitStack()
    team_url, short_url = (stack.enter_context(provider(seconds)) for seconds in (3600, SHORT_TOKEN_SECONDS))
    secrets = folder / "secrets.toml"
    secrets.write_text(
        "[auth]\n"
        f'redirect_uri = "{app.url}/oauth2callback"\n'
        'cookie_secret = "a-long-random-cookie-secret-for-the-tests-only"\n'
        + "".join(
            f'\n[auth.{name}]\nclient_id = "rerank-lab"\nclient_secret = "test-only"\n'
            f'server_metadata_url = "{url}/.well-known/openid-configuration"\n'
            for name, url in (("team", team_url), ("short", short_url))
        )
    )
    env = {
        **os.environ,
        "RERANK_LAB_DATA": str(folder / "data"),
        "RERANK_LAB_DB": app.database_url,
        "STREAMLIT_SERVER_HEADLESS": "true",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
    }
    log = folder / "streamlit.log"
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--secrets.files", str(secrets)]
    with stack, log.open("w") as log_file:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        yield from _serving(app, server, log)


def _serving(app: TeamApp, server: subprocess.Popen, log: Path) -> Iterator[TeamApp]:
    """``app`` once healthy; its process group stopped after."""
    try:
        _wait_healthy(app.url, server, log)
        yield app
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=20)


def signed_in_page(chromium, app: TeamApp, who: str, provider: str = "team"):
    """A new browser (its own cookies) in which ``who`` signed in through ``provider``."""
    from playwright.sync_api import expect

    context = chromium.new_context(viewport={"width": 1400, "height": 1600})
    page = context.new_page()
    page.goto(app.url)
    page.get_by_role("button", name=f"Sign in with {provider}").click(timeout=BROWSER_TIMEOUT_MS)
    page.get_by_role("button", name=who, exact=True).click(timeout=BROWSER_TIMEOUT_MS)  # the provider's page
    expect(page.get_by_text(f"Signed in as {PEOPLE[who]}")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    return page


def cli(app: TeamApp, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qa_core", "--db", app.database_url, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def labels_of(app: TeamApp, email: str) -> list[tuple]:
    engine = create_engine(app.database_url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(
                text("SELECT l.annotator, u.subject FROM labels l LEFT JOIN users u ON u.id = l.user_id "
                     "WHERE l.annotator = :email OR u.email = :email"), {"email": email})]
    finally:
        engine.dispose()


def test_admin_reviewer_and_annotator_see_what_their_role_may_do(team_app: TeamApp, chromium, screenshot_dir):
    from playwright.sync_api import expect

    admin = signed_in_page(chromium, team_app, "ada")  # the first sign-in on this store: admin
    expect(admin.get_by_text(re.compile("ada@\u2060example.org\\) · admin"))).to_be_visible()
    main = admin.get_by_test_id("stMain")  # the landing page's links: the pages the role may open
    expect(main.get_by_role("link", name=re.compile("^Audit"))).to_be_visible()
    reviewer, annotator = signed_in_page(chromium, team_app, "rita"), signed_in_page(chromium, team_app, "anna")
    expect(annotator.get_by_text(re.compile("anna@\u2060example.org\\) · annotator"))).to_be_visible()
    main = annotator.get_by_test_id("stMain")
    expect(main.get_by_role("link", name=re.compile("^Label"))).to_be_visible()
    expect(main.get_by_role("link", name=re.compile("^(Train|Audit)"))).to_have_count(0)
    sidebar = annotator.get_by_test_id("stSidebarNav")  # the sidebar lists the same pages
    expect(sidebar.get_by_role("link", name="Label")).to_be_visible()
    expect(sidebar.get_by_role("link", name=re.compile("^(Train|Audit)$"))).to_have_count(0)
    expect(admin.get_by_test_id("stSidebarNav").get_by_role("link", name="Audit")).to_be_visible()
    result = cli(team_app, "users", "grant", "rita@example.org", "reviewer")
    assert result.returncode == 0, result.stderr

    # The annotator labels as themselves, and sees no review, no agreement, no training, no promotion.
    annotator.goto(f"{team_app.url}/Label")
    expect(annotator.get_by_role("button", name="2 · partly answers")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(annotator.get_by_text("Review conflicts")).to_have_count(0)
    expect(annotator.get_by_text("Agreement")).to_have_count(0)
    annotator.get_by_role("button", name="2 · partly answers").click()
    expect(annotator.get_by_text(re.compile("Labelled .* as 2"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    assert labels_of(team_app, "anna@example.org") == [("anna@example.org", "anna")]
    annotator.screenshot(path=str(screenshot_dir / "team-annotator-label.png"), full_page=True)
    for hidden in ("Train", "Audit"):  # typed as an address: not one of this user's pages, the landing page runs
        annotator.goto(f"{team_app.url}/{hidden}")
        expect(annotator.get_by_text("Page not found")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
        expect(annotator.get_by_test_id("stMain").get_by_role("link", name=re.compile("^Label"))).to_be_visible()
        expect(annotator.get_by_role("button", name=re.compile("Promote|Retrain|Roll back"))).to_have_count(0)
        expect(annotator.get_by_text("Who did what")).to_have_count(0)

    # Not through the library either: the store checks the role an annotator's page would pass.
    store = team_app.store()
    try:
        anna = next(u for u in store.users.users() if u["email"] == "anna@example.org")
        now = datetime.now(UTC)
        actor = Actor(anna["email"], Role.ADMIN, user_id=anna["id"], subject=anna["subject"],  # a page bug's claim
                      signed_in_at=now, expires_at=now + timedelta(hours=1))
        with pytest.raises(AccessDenied, match="annotator\\) may not promote models"):
            store.models.promote("smcnn", 1, "demo", actor=actor)
        with pytest.raises(AccessDenied, match="may not adjudicate"):
            store.labels.adjudicate(store.datasets.find_candidate_id("demo", "demo-01", "demo-01-0"), 3, None, actor=actor)
        with pytest.raises(AccessDenied, match="may not train"):
            store.jobs.create_job("smcnn", "demo", {"seed": 1}, actor=actor)
        assert store.labels.adjudications("demo") == {} and store.jobs.jobs() == []
    finally:
        store.close()

    # The reviewer (granted meanwhile: the next run knows) reviews; the admin trains and reads the audit.
    reviewer.goto(f"{team_app.url}/Label")
    expect(reviewer.get_by_text("Review conflicts")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(reviewer.get_by_test_id("stSidebarNav").get_by_role("link", name="Train")).to_have_count(0)
    reviewer.goto(f"{team_app.url}/Train")
    expect(reviewer.get_by_text("Page not found")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(reviewer.get_by_role("button", name="Retrain")).to_have_count(0)
    admin.goto(f"{team_app.url}/Train")
    expect(admin.get_by_role("button", name="Retrain")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    admin.goto(f"{team_app.url}/Audit")
    expect(admin.get_by_text("Users and roles")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    with admin.expect_download() as download:
        admin.get_by_role("button", name="Download the audit trail (CSV)").click()
    csv = Path(download.value.path()).read_text().splitlines()
    assert csv[0] == "at,actor,action,what,target,detail"
    assert any(",role_change,role changed,rita@example.org," in line and ",cli:" in line for line in csv)
    assert any(line.split(",")[1:3] == ["system", "user_created"] and ",ada@example.org," in line for line in csv)
    admin.screenshot(path=str(screenshot_dir / "team-admin-audit.png"), full_page=True)
    for page in (admin, reviewer, annotator):
        assert "Traceback" not in page.content()
        page.context.close()


def test_signing_out_ends_the_session_and_a_copied_cookie_is_refused(team_app: TeamApp, chromium):
    from playwright.sync_api import expect

    page = signed_in_page(chromium, team_app, "anna")
    copied = page.context.cookies()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="End session").click(timeout=BROWSER_TIMEOUT_MS)  # the provider's logout
    expect(page.get_by_text("Sign in to use Rerank Lab")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    page.goto(f"{team_app.url}/Label")
    expect(page.get_by_role("button", name="Sign in with team")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_role("button", name=re.compile("partly answers"))).to_have_count(0)
    page.context.close()

    before = labels_of(team_app, "anna@example.org")
    replay = chromium.new_context()
    replay.add_cookies(copied)  # the identity cookie taken before the sign-out
    stale = replay.new_page()
    stale.goto(f"{team_app.url}/Label")
    expect(stale.get_by_text(re.compile("anna@\u2060example.org signed out at .* sign in again"))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS
    )
    expect(stale.get_by_role("button", name=re.compile("partly answers"))).to_have_count(0)
    assert labels_of(team_app, "anna@example.org") == before
    replay.close()


def test_an_expired_token_is_refused(team_app: TeamApp, chromium):
    from playwright.sync_api import expect

    page = signed_in_page(chromium, team_app, "eve", provider="short")
    store = team_app.store()
    try:
        eve = next(u for u in store.users.users() if u["email"] == "eve@example.org")
    finally:
        store.close()
    time.sleep(SHORT_TOKEN_SECONDS + 1)  # the token's exp passes; the browser's cookie stays
    page.goto(f"{team_app.url}/Label")
    expect(page.get_by_text(re.compile("the sign-in of eve@\u2060example.org expired at .* sign in again"))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS
    )
    expect(page.get_by_role("button", name=re.compile("partly answers"))).to_have_count(0)
    assert eve["role"] == "annotator" and labels_of(team_app, "eve@example.org") == []
    page.context.close()


def test_the_same_subject_and_email_from_another_provider_is_another_person(team_app: TeamApp, chromium):
    """Issue 33: a user is the provider's (issuer, subject). "ada" of the short provider brings the admin's
    subject and email, yet signs in as a new annotator recorded under another name."""
    from playwright.sync_api import expect

    page = signed_in_page(chromium, team_app, "ada", provider="short")
    expect(page.get_by_text(re.compile("ada@\u2060example\\.org #\\d+\\) · annotator"))).to_be_visible()
    store = team_app.store()
    try:
        adas = [user for user in store.users.users() if user["email"] == "ada@example.org"]
    finally:
        store.close()
    assert sorted(user["role"] for user in adas) == ["admin", "annotator"]
    assert len({user["issuer"] for user in adas}) == 2 and {user["subject"] for user in adas} == {"ada"}
    page.context.close()
