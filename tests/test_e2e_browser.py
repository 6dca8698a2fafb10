"""End to end in a real browser: `streamlit run app.py` as the README starts it, Chromium drives it.

With RERANK_LAB_SCREENSHOTS=docs/screenshots it also refreshes the screenshots the README shows;
otherwise they go to the test's temporary folder (a test run never changes tracked files).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DEMO_QUESTION, DEMO_ANSWER = "who discovered penicillin", "Alexander Fleming"
START_TIMEOUT_S = 120
RESULT_TIMEOUT_MS = 180_000  # first ranking loads spaCy and builds the BM25 index


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"browser test required on CI but {reason}", pytrace=False)
    pytest.skip(f"browser test skipped: {reason}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(base_url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"streamlit exited with {server.returncode}:\n{log.read_text()}", pytrace=False)
        try:
            with urllib.request.urlopen(f"{base_url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    pytest.fail(f"streamlit not healthy after {START_TIMEOUT_S}s:\n{log.read_text()}", pytrace=False)


@pytest.fixture
def app_url(tmp_path: Path) -> Iterator[str]:
    """A running app on a free port with its own data folder and store; always stopped after."""
    _require_chromium()
    port = _free_port()
    venv_python = ROOT / ".venv" / "bin" / "python"
    python = str(venv_python) if venv_python.exists() else sys.executable
    env = {
        **os.environ,
        "RERANK_LAB_DATA": str(tmp_path / "data"),
        "RERANK_LAB_DB": f"sqlite:///{tmp_path / 'store.sqlite'}",
    }
    command = [python, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
               "--server.port", str(port), "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    log = tmp_path / "streamlit.log"
    with log.open("w") as log_file:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base_url, server, log)
        yield base_url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=20)


def _screenshot_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("RERANK_LAB_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_ask_page_ranks_a_typed_question(app_url, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            # Streamlit scrolls inside its own container, so the viewport is the screenshot's size.
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(f"{app_url}/Ask")
            question = page.get_by_role("textbox", name="Your question")
            expect(question).to_be_visible(timeout=RESULT_TIMEOUT_MS)
            question.fill(DEMO_QUESTION)
            question.press("Enter")  # commits the value (a rerun) before the click
            page.get_by_role("button", name="Rank").click()
            expect(page.get_by_text("Ranked candidates")).to_be_visible(timeout=RESULT_TIMEOUT_MS)
            # The grid draws on a canvas; the top candidate's text is in its expanded explanation.
            expect(page.get_by_text(DEMO_ANSWER).first).to_be_visible(timeout=RESULT_TIMEOUT_MS)
            expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=RESULT_TIMEOUT_MS)
            assert "Traceback" not in page.content()
            page.screenshot(path=str(_screenshot_dir(tmp_path) / "ask.png"))
        finally:
            browser.close()
