"""Team mode's gate in a browser (issue 45): before sign-in, on the sign-in screen and on the
plain-HTTP refusal screen, the sidebar lists no page (a run that stopped before ``st.navigation``
got Streamlit's own navigation: every file of ``pages/``); and ``streamlit run app.py`` without an
address listens on 127.0.0.1 only (``.streamlit/config.toml``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests import ROOT
from tests.conftest import BROWSER_TIMEOUT_MS, _free_port, _require_chromium, _wait_healthy, settled


@contextmanager
def team_app(folder: Path, redirect_uri: str, *options: str) -> Iterator[str]:
    """``streamlit run app.py`` in team mode (``redirect_uri`` in its ``[auth]`` section) with the
    command-line ``options``, on a free port of its own store and data folder; yields its loopback URL."""
    _require_chromium()
    port = _free_port()
    secrets = folder / "secrets.toml"
    secrets.write_text(  # the provider is never asked: no one signs in here
        f'[auth]\nredirect_uri = "{redirect_uri}"\ncookie_secret = "a-long-random-cookie-secret-for-the-tests-only"\n'
        'client_id = "rerank-lab"\nclient_secret = "test-only"\n'
        'server_metadata_url = "http://127.0.0.1:9/.well-known/openid-configuration"\n'
    )
    env = {**os.environ, "RERANK_LAB_DATA": str(folder / "data"), "RERANK_LAB_DB": f"sqlite:///{folder / 'store.sqlite'}",
           "STREAMLIT_SERVER_HEADLESS": "true"}
    log = folder / "streamlit.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--secrets.files",
             str(secrets), *options],
            cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            _wait_healthy(f"http://127.0.0.1:{port}", server, log)
            yield f"http://127.0.0.1:{port}"
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


@pytest.mark.parametrize(("address", "redirect", "screen"), [
    ("127.0.0.1", "http://127.0.0.1:8501/oauth2callback", "Sign in to use Rerank Lab"),
    ("0.0.0.0", "http://rerank.example.org:8501/oauth2callback", "team mode refuses to serve sign-ins on address 0.0.0.0"),
])
def test_the_gate_lists_no_page_before_sign_in(tmp_path, chromium, screenshot_dir, address, redirect, screen) -> None:
    from playwright.sync_api import expect

    with team_app(tmp_path, redirect, "--server.address", address) as url:
        page = chromium.new_page(viewport={"width": 1280, "height": 800})
        try:
            for path in ("", "/Train"):  # a page's address typed before sign-in: the same screen, no "page not found"
                page.goto(url + path)
                expect(page.get_by_text(screen)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
                settled(page)
                expect(page.get_by_test_id("stSidebarNav")).to_have_count(0)
                expect(page.get_by_role("link", name="Train")).to_have_count(0)
                expect(page.get_by_text("Page not found")).to_have_count(0)
            page.screenshot(path=str(screenshot_dir / f"gate-{'refusal' if address == '0.0.0.0' else 'sign-in'}.png"))
        finally:
            page.close()


def _listening(port: int) -> set[str]:
    """The local addresses (hexadecimal, as /proc/net/tcp and tcp6 write them) listening on ``port``."""
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, _, state = line.split()[1:4]
            address, _, hex_port = local.partition(":")
            if int(hex_port, 16) == port and state == "0A":  # 0A: LISTEN
                addresses.add(address)
    return addresses


def test_streamlit_run_without_an_address_listens_on_loopback_only(tmp_path) -> None:
    """The README's and docs/scaling.md's developer command, ``streamlit run app.py``, bound every
    interface (Streamlit's default); only ``make run`` passed 127.0.0.1."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads the listening sockets from Linux's /proc/net/tcp")
    port = _free_port()
    env = {**os.environ, "RERANK_LAB_DATA": str(tmp_path / "data"), "RERANK_LAB_DB": f"sqlite:///{tmp_path / 's.sqlite'}",
           "STREAMLIT_SERVER_HEADLESS": "true"}
    env.pop("STREAMLIT_SERVER_ADDRESS", None)
    log = tmp_path / "streamlit.log"
    with log.open("w") as log_file:
        server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
                                  cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_healthy(f"http://127.0.0.1:{port}", server, log)
            assert _listening(port) == {"0100007F"}  # 127.0.0.1 (little-endian), nothing on 0.0.0.0 or ::
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
