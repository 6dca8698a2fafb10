"""Shared pytest fixtures, one section per part of the project."""

from __future__ import annotations

import contextlib
import functools
import glob
import itertools
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from xdist.scheduler import LoadFileScheduling

from db.store import Store
from qa_core import config
from qa_core.checkpoints import new_checkpoint_path
from qa_core.data.demo import load_demo
from qa_core.types import Dataset
from tests import ROOT

# Ray, before anything imports it: Ray 2.60 starts local clusters with token authentication, and a
# process joining one by address (a test, `batch-score --address`, a worker) must ask for it too.
# The run has a token of its own, in the environment every worker and every process they start
# inherit: Ray would read ~/.ray/auth_token, which `ray.init` writes but `ray start` only reads, so
# on a machine that never ran Ray the test cluster failed to start whenever `ray start` came first.
# Usage statistics stay off (offline).
os.environ.setdefault("RAY_AUTH_MODE", "token")
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))  # as Ray's own tokens: 256 random bits
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# ============================================================================ parallel runs
# `make test` runs the suite on 3 pytest-xdist workers (scripts/test.sh). Whole test files go to a
# worker, so module-scoped fixtures (e.g. test_every_model's trained store) are built once, and two
# groups of files each go to one worker, since they share a costly first step:
# - the browser tests (`test_e2e_*`) share the slowest setups of the suite, the `make run` app
#   (which trains the demo model) and Chromium;
# - the files that run ranx (fusion, ranx's t-test and `compare`) share its numba compilation: in a
#   new .venv, ranx's functions compile on first use (about a minute of CPU) before numba caches
#   them on disk, and workers that reach them at once each compiled them all (these files on 3
#   workers from an empty cache: 253 s of CPU; in one process: 142 s). A file missing from this
#   list is only slower.
# (xdist's own `--dist loadgroup` marks cannot do this under pytest 9.2, whose node ids no longer
# take its group suffix.)
# Each worker, and every process a test starts (jobs, workers, the CLI, `make run`), runs torch on
# one thread: the workers already fill the 2-core CI machine, and oversubscribed OpenMP threads make
# small models many times slower (see `single_thread`). Measured: `train --model smcnn --data demo`
# at load 6 took 166 s on torch's default two threads and 10 s on one.

BROWSER_TESTS = "test_e2e_"
RANX_TESTS = {
    "test_cli_compare.py", "test_compare.py", "test_evaluation_rule.py", "test_every_model.py", "test_fusion.py",
    "test_fusion_ranker.py", "test_pages_compare_label.py", "test_pages_compare_split.py", "test_rankers.py",
    "test_significance.py", "test_stored_runs.py",
}


class SharedSetupScheduling(LoadFileScheduling):
    def _split_scope(self, nodeid: str) -> str:
        test_file = super()._split_scope(nodeid)
        name = Path(test_file).name
        if name.startswith(BROWSER_TESTS):
            return "browser tests"
        return "ranx tests" if name in RANX_TESTS else test_file


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's
def pytest_xdist_make_scheduler(config: pytest.Config, log) -> SharedSetupScheduling:
    return SharedSetupScheduling(config, log)


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread_per_worker() -> Iterator[None]:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    previous, saved = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"  # inherited by the processes the tests start
    yield
    torch.set_num_threads(previous)
    if saved is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = saved


# ============================================================================ isolation
# Tests never read or write the developer's ./data folder (its store may hold trained classifiers
# that "auto" question analysis would pick up): every session gets an empty data folder. The spaCy
# parse cache is one file for the whole run, both xdist workers and every process they start:
# tests make many data folders (a store, a CLI run, a job, an app each), and each would otherwise
# parse the demo corpus again (about 5 s of CPU every time).


@pytest.fixture(scope="session", autouse=True)
def isolated_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("rerank_lab_data")
    run_folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_folder = run_folder.parent  # the folder the run's workers share
    saved = {key: os.environ.get(key) for key in ("RERANK_LAB_DATA", "RERANK_LAB_DB", "RERANK_LAB_PARSE_CACHE")}
    os.environ["RERANK_LAB_DATA"] = str(folder)
    os.environ["RERANK_LAB_PARSE_CACHE"] = str(run_folder / "parse_cache.sqlite")
    os.environ.pop("RERANK_LAB_DB", None)
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def model_file(name: str) -> str:
    """A checkpoint path in the current data folder's models folder, the only place the store
    registers a checkpoint from (``config.inside_checkpoint_dir``); the file need not exist."""
    return str(config.checkpoint_dir() / name)


def copy_to_models(checkpoint: Path) -> str:
    """A copy of ``checkpoint`` (trained once into a module's folder) under a new name in the data
    folder's models folder, ready to register: the store refuses files elsewhere, and stamps the
    version id into the file it registers, so each registration gets its own copy."""
    return shutil.copy(checkpoint, new_checkpoint_path(checkpoint.stem))


@pytest.fixture
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own data folder (as ``store_url`` and ``cli_env`` make it) and its models folder,
    where the checkpoints a test registers must lie."""
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    return config.checkpoint_dir()


@pytest.fixture
def cli_env(tmp_path, monkeypatch):
    """A fresh data folder and SQLite store for the command line run in this process (``tests.cli``)."""
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RERANK_LAB_DB", f"sqlite:///{tmp_path / 'store.sqlite'}")
    return tmp_path


# ============================================================================ pages under AppTest
# Every AppTest scans the metadata of every installed package for Streamlit components before its
# first run (0.15 s, and the suite opens pages hundreds of times); the installed packages do not
# change during a run, so each worker scans once. The scan is a Streamlit internal: should it move,
# setattr fails and says so.


@pytest.fixture(scope="session", autouse=True)
def components_scanned_once() -> Iterator[None]:
    from streamlit.components.v2 import manifest_scanner

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests",
                      functools.cache(manifest_scanner.scan_component_manifests))  # fmt: skip
        yield


# ============================================================================ both modes
# Page test modules that `pytestmark = pytest.mark.usefixtures("both_modes")` run every test twice:
# in local mode and in team mode, signed in as the store's first user (its admin, who may do what
# the local user may). What a page does must not depend on the mode beyond the sign-in.


@pytest.fixture(params=["local", "team"])
def both_modes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    import tests.pages

    monkeypatch.setattr(tests.pages, "SIGNED_IN", tests.pages.claims("ada") if request.param == "team" else None)
    return request.param


# ============================================================================ store / databases
# `database_url` runs each test twice: on a SQLite file and on a fresh database of a real
# PostgreSQL server started once per session from the Debian binaries. Without the binaries the
# PostgreSQL cases are skipped, unless CI=true or RERANK_LAB_REQUIRE_PG=1 makes that a failure.

PG_SUPERUSER = "postgres"


def head_revision() -> str:
    """The newest migration, as Alembic's script directory names it."""
    from alembic.script import ScriptDirectory

    from db.session import alembic_config

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh data folder and SQLite store for the app, through the environment as in production
    (a training job's process inherits both)."""
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RERANK_LAB_DB", url)
    return url


@pytest.fixture(scope="module")
def single_thread() -> Iterator[None]:
    """Tiny convolutions and recurrent batches gain nothing from a second thread, and on busy shared
    cores OpenMP's waiting threads make them up to 15x slower (measured); one thread keeps the
    training tests' time honest."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def demo() -> Dataset:
    """The shipped demo corpus (test_zoo_cnn overrides this with its split triple)."""
    return load_demo()


def _pg_required() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("RERANK_LAB_REQUIRE_PG") == "1"


def _pg_unavailable(reason: str) -> None:
    if _pg_required():
        pytest.fail(f"PostgreSQL is required (CI / RERANK_LAB_REQUIRE_PG) but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def _pg_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has initdb and pg_ctl."""
    candidates = [Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")]
    usable = [d for d in candidates if (d / "pg_ctl").exists()]
    return max(usable, key=lambda d: int(d.parent.name), default=None)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Start a throwaway PostgreSQL cluster on loopback; yield the URL of its maintenance database.

    initdb refuses to run as root, so as root the cluster belongs to the ``postgres`` user.
    """
    bin_dir = _pg_bin_dir()
    if bin_dir is None:
        _pg_unavailable("no /usr/lib/postgresql/*/bin/initdb found (apt-get install postgresql)")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="rerank_lab_pg_"))
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            _pg_unavailable("running as root and runuser is missing")
        as_user = ["runuser", "-u", PG_SUPERUSER, "--"]
        shutil.chown(root, user=PG_SUPERUSER)
    data_dir, log_file = root / "data", root / "server.log"
    port = _free_port()

    def run(*args: str) -> None:
        result = subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = log_file.read_text() if log_file.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}{result.stderr}{log}")

    try:
        run(str(bin_dir / "initdb"), "-D", str(data_dir), "-U", PG_SUPERUSER, "--auth=trust", "-E", "UTF8")
        # Durability is irrelevant for a throwaway cluster; skipping fsync keeps the tests fast.
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off"
        run(str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-l", str(log_file), "-o", options, "-w", "start")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        shutil.rmtree(root, ignore_errors=True)
        _pg_unavailable(f"the server did not start: {error}")
    try:
        yield f"postgresql+psycopg://{PG_SUPERUSER}@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data_dir), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


_database_numbers = itertools.count(1)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database: a SQLite file, or a new database on the session's PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite'}"
        return
    server_url = make_url(request.getfixturevalue("postgres_server"))
    name = f"test_{os.getpid()}_{next(_database_numbers)}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            # CREATE/DROP DATABASE have no SQLAlchemy construct; the name is generated here.
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield server_url.set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    """A migrated ``Store`` on the parametrised back end."""
    instance = Store(database_url)
    yield instance
    instance.close()


# ============================================================================ browser (end to end)
# One app per test session, started with the README's command (`make run PORT=...`) on its own data
# folder and SQLite store, driven by Debian's Chromium through Playwright. Without Chromium the
# browser tests are skipped, unless CI=true makes that a failure.

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
APP_START_TIMEOUT_S = 600  # `make run` installs nothing when .venv is current, but trains the demo SM-CNN
BROWSER_TIMEOUT_MS = 180_000  # the first ranking loads spaCy and builds the BM25 index


def settled(page) -> None:
    """The app in ``page`` has finished its script run: a widget it redraws (a select box whose
    options depend on another's choice) is stable, and a key pressed now is not lost to a rerun."""
    from playwright.sync_api import expect

    expect(page.get_by_test_id("stApp")).to_have_attribute("data-test-script-state", "notRunning",
                                                           timeout=BROWSER_TIMEOUT_MS)


PICK_TIMEOUT_MS = 10_000  # an open list shows its options at once; longer means a rerun closed it
RUN_START_TIMEOUT_MS = 2_000  # a value the browser sent has started the app's run well before this (0.0-0.3 s seen)

# How many script runs the page has seen end, counted on stApp by a MutationObserver that the first
# call installs: a short run can start and end between two polls of a Playwright wait, while the
# observer is told of every change of the state attribute (a new page starts again at 0). A run
# whose start and end the browser draws in one frame (a short run on a busy machine) changes nothing.
RUNS_ENDED = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    if (app.rerankLabRunsEnded === undefined) {
        app.rerankLabRunsEnded = 0;
        new MutationObserver((changes) => {
            app.rerankLabRunsEnded += changes.filter((change) => change.oldValue === 'running').length;
        }).observe(app, {attributeFilter: ['data-test-script-state'], attributeOldValue: true});
    }
    return app.rerankLabRunsEnded;
}"""
# A run began after ``ended`` runs had ended: it runs now, or it has ended too.
RUN_BEGUN = """(ended) => document.querySelector('[data-testid=stApp]').rerankLabRunsEnded > ended
    || document.querySelector('[data-testid=stApp]').getAttribute('data-test-script-state') === 'running'"""


def until_taken(page, act: Callable[[], None], taken: Callable[[], None], attempts: int = 3,
                recover: Callable[[], None] | None = None, shown: Callable[[], bool] | None = None) -> None:
    """Do ``act`` once the app is idle, wait for the run it starts to end, and check ``taken`` (an
    ``expect`` on what the action shows: a value, a button it enables); do it again when it did not
    take. The browser marks a run as running only once the server has started it, so right after an
    action it still says "not running": ``settled`` alone would pass before the app has run with the
    value, and so would a ``taken`` that reads what the browser set itself the moment it acted. So
    the run comes first: Streamlit reruns on every widget change, and after the action the page
    waits for a run to begin (``RUNS_ENDED``), then to end. The wait for it to begin is bounded for
    the run the page cannot see, one drawn in a single frame: by the bound it has ended. A rerun
    already on its way when the action came can redraw a box under the keys or close a list under
    the click; ``taken``, read after the run, tells. ``recover`` tidies up after a try that failed
    (a list left open would take the next click). ``shown`` says at once whether the idle app
    already shows the value: then there is nothing to do (the action would start no run and wait
    out the bound)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    for attempt in range(1, attempts + 1):
        settled(page)
        if shown is not None and shown():
            return
        runs_ended = page.evaluate(RUNS_ENDED)
        try:
            act()
            with contextlib.suppress(PlaywrightTimeoutError):  # no run seen: ``taken`` says whether that is right
                page.wait_for_function(RUN_BEGUN, arg=runs_ended, timeout=RUN_START_TIMEOUT_MS)
            settled(page)
            taken()
            return
        except (PlaywrightTimeoutError, AssertionError):
            if attempt == attempts:
                raise
            if recover is not None:
                recover()


def choose(page, box: str, option: str | re.Pattern[str], typed: str | None = None, attempts: int = 3) -> None:
    """Pick ``option`` (its exact name, or a pattern of it) in the select box labelled ``box`` and
    wait until the app has run with it; ``typed`` first filters the list (it draws only the options
    in view). A rerun that redraws the box (its options depend on another box's choice) closes the
    list under the click, so a pick that did not take is retried (``until_taken``)."""
    from playwright.sync_api import expect

    select_box = page.get_by_role("combobox", name=box, exact=True)  # its value: the chosen option's name

    def pick() -> None:
        select_box.click()
        if typed is not None:
            select_box.fill(typed)
        page.get_by_role("option", name=option, exact=True).click(timeout=PICK_TIMEOUT_MS)

    def shown() -> bool:  # as ``to_have_value`` reads ``option``: a pattern is searched for, a name is the value
        value = select_box.input_value()
        return re.search(option, value) is not None if isinstance(option, re.Pattern) else value == option

    until_taken(page, pick, lambda: expect(select_box).to_have_value(option, timeout=PICK_TIMEOUT_MS), attempts,
                recover=lambda: page.keyboard.press("Escape"), shown=shown)


def choose_radio(page, option: str, attempts: int = 3) -> None:
    """Click the radio button ``option`` (a view, a question source) and wait until it is checked
    after the app has run: a rerun under way can draw the radio group again and lose the click."""
    from playwright.sync_api import expect

    radio = page.get_by_role("radio", name=option, exact=True)
    until_taken(page, lambda: page.get_by_text(option, exact=True).click(),
                lambda: expect(radio).to_be_checked(timeout=PICK_TIMEOUT_MS), attempts, shown=radio.is_checked)


def enter_text(page, field, value: str, ready=None, attempts: int = 3) -> None:
    """Type ``value`` into the text (or number) box ``field``, commit it (Enter) and wait until the
    app has run with it: the box no longer holds a value it has not sent, and ``ready`` (the button
    the value enables) is enabled, or else the box still shows the value after the run. A rerun
    already under way when the keys arrive (an upload's, a choice's, the page's first) can draw the
    box again after them and leave the app without the value, so a value that did not take is typed
    again."""
    from playwright.sync_api import expect

    def typed() -> None:
        field.fill(value)
        field.press("Enter")

    def taken() -> None:
        # Streamlit asks to "Press Enter to apply" under the focused box (one at a time, wider than
        # 180 px) while it holds a value it has not sent; Enter sends it and the words go.
        expect(page.get_by_test_id("InputInstructions").filter(has_text="Press Enter to")).to_have_count(
            0, timeout=PICK_TIMEOUT_MS)
        if ready is None:
            expect(field).to_have_value(value, timeout=PICK_TIMEOUT_MS)
        else:
            expect(ready).to_be_enabled(timeout=PICK_TIMEOUT_MS)

    until_taken(page, typed, taken, attempts)


def add_choice(page, box: str, option: str, attempts: int = 3) -> None:
    """Add ``option`` to the multiselect whose label holds ``box`` and wait until the app has run
    with it; a pick that a late rerun swallowed (the list closed under the click) is made again, as
    in ``choose``."""
    from playwright.sync_api import expect

    chosen = page.get_by_test_id("stMultiSelect").filter(has_text=box)

    def pick() -> None:
        chosen.locator("input").click()
        chosen.locator("input").fill(option)  # the list draws only its first options: filter it down to this one
        page.get_by_role("option", name=option, exact=True).click(timeout=PICK_TIMEOUT_MS)
        page.keyboard.press("Escape")

    chip = chosen.get_by_text(option, exact=True)
    until_taken(page, pick, lambda: expect(chip).to_have_count(1, timeout=PICK_TIMEOUT_MS), attempts,
                recover=lambda: page.keyboard.press("Escape"), shown=lambda: chip.count() == 1)


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test required on CI but {reason}", pytrace=False)
    pytest.skip(f"browser test skipped: {reason}")


def _wait_healthy(base_url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + APP_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"`make run` exited with {server.returncode}:\n{log.read_text()}", pytrace=False)
        try:
            with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"app not healthy after {APP_START_TIMEOUT_S}s:\n{log.read_text()}", pytrace=False)


@dataclass(frozen=True)
class RunningApp:
    url: str
    database_url: str
    data_dir: Path


@pytest.fixture(scope="session")
def running_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningApp]:
    """The app as a newcomer starts it, on a free port, stopped (with its process group) after."""
    _require_chromium()
    folder = tmp_path_factory.mktemp("app")
    app = RunningApp(f"http://127.0.0.1:{_free_port()}", f"sqlite:///{folder / 'store.sqlite'}", folder / "data")
    env = {
        **os.environ,
        "RERANK_LAB_DATA": str(app.data_dir),
        "RERANK_LAB_DB": app.database_url,
        "STREAMLIT_SERVER_HEADLESS": "true",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
    }
    log = folder / "make-run.log"
    port = app.url.rsplit(":", 1)[1]
    with log.open("w") as log_file:
        server = subprocess.Popen(
            ["make", "run", f"PORT={port}"], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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


@pytest.fixture(scope="session")
def chromium():
    """One Chromium for the whole test session: Playwright's sync API runs one instance per thread,
    so every browser test (this app's and the team-mode app's) shares it."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def browser(running_app: RunningApp, chromium):
    """Chromium, once the app runs."""
    return chromium


@pytest.fixture
def page(browser):
    """A fresh browser tab (own session state); Streamlit scrolls inside its own container, so the
    viewport is the screenshot's size."""
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    try:
        yield context.new_page()
    finally:
        context.close()


SCREENSHOT_WIDTHS = (1280, 1920)
# Every visible plotly chart drawn at its container's width (after a resize or a tab opened).
PLOTS_FIT = """() => [...document.querySelectorAll('.js-plotly-plot')].filter((plot) => plot.offsetParent)
    .every((plot) => { const svg = plot.querySelector('.main-svg');
        return svg && Math.abs(svg.getBoundingClientRect().width - plot.getBoundingClientRect().width) <= 1; })"""


def page_screenshots(page, folder: Path, name: str) -> None:
    """The whole page at each of ``SCREENSHOT_WIDTHS``: ``<name>.png`` at 1280 px, ``<name>-1920.png``.
    Streamlit scrolls inside its own container, so a full-page screenshot stops at the viewport: the
    viewport grows to the page's height instead (then returns to its size)."""
    size = page.viewport_size
    for width in SCREENSHOT_WIDTHS:
        page.set_viewport_size({"width": width, "height": size["height"]})
        height = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
        page.set_viewport_size({"width": width, "height": min(height, 8000)})
        page.wait_for_function(PLOTS_FIT, timeout=BROWSER_TIMEOUT_MS)
        page.screenshot(path=str(folder / (f"{name}.png" if width == SCREENSHOT_WIDTHS[0] else f"{name}-{width}.png")))
    page.set_viewport_size(size)
    page.wait_for_function(PLOTS_FIT, timeout=BROWSER_TIMEOUT_MS)


@pytest.fixture
def screenshot_dir(tmp_path: Path) -> Path:
    """docs/screenshots when RERANK_LAB_SCREENSHOTS says so; the test's folder otherwise (a test run
    never changes tracked files)."""
    folder = Path(os.environ.get("RERANK_LAB_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ============================================================================ Ray
# A real Ray cluster of 2 CPUs, started with `ray start --head --block` on a free port and its own
# temporary folder, once per test session (Ray takes seconds to start and its actors more: tests
# share it); stopped by killing that process group (never `ray stop`, which would end every Ray
# cluster on the machine, other sessions' included).

RAY_START_TIMEOUT_S = 180


@dataclass(frozen=True)
class RayCluster:
    address: str
    temp_dir: Path
    process: subprocess.Popen


def ray_processes(marker: str) -> list[int]:
    """Pids of the processes whose command line mentions ``marker`` (a cluster's temporary folder)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                pids.append(int(cmdline.parent.name))
        except OSError:  # ended meanwhile
            continue
    return pids


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    import ray

    # Short: Ray's socket paths live under it and must stay below the 107-byte limit.
    temp_dir = Path(tempfile.mkdtemp(prefix="rl_ray_", dir="/tmp"))
    port, agent_port = _free_port(), _free_port()  # the others Ray picks itself (0: any free port)
    log = tmp_path_factory.mktemp("ray") / "ray-start.log"
    command = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={port}",
               "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
               "--disable-usage-stats", f"--temp-dir={temp_dir}", f"--dashboard-agent-listen-port={agent_port}"]
    with log.open("w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + RAY_START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"`ray start` exited with {process.returncode}:\n{log.read_text()}", pytrace=False)
            if "Ray runtime started" in log.read_text():
                break
            if time.monotonic() > deadline:
                pytest.fail(f"Ray did not start in {RAY_START_TIMEOUT_S} s:\n{log.read_text()}", pytrace=False)
            time.sleep(0.2)
        yield RayCluster(address, temp_dir, process)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        # A throwaway cluster needs no graceful stop (SIGTERM makes `ray start` stop each process in
        # turn, 30 s on a busy machine): its processes all belong to the group.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        for pid in ray_processes(str(temp_dir)):  # any that left the group
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
