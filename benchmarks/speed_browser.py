"""The parts of ``benchmarks/speed.py`` timed in headless Chromium against the running app: page
render (``app``) and the Label page's key press to next pair (``label``); the server's memory over a
walk through every page is ``benchmarks/server_memory.py``'s, on these helpers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import ROOT, load_note, percentile

APP_RUNS = 5
LABEL_JUDGEMENTS, LABEL_WARMUP = 50, 5  # issue 21: p95 <= 250 ms over 50 warm judgements
LABEL_TARGET_MS = 250




@contextlib.contextmanager
def app_server(folder: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """The app as tests/conftest.py's running_app starts it (``make run PORT=...``, own data folder
    and store in ``folder``): its URL and process (a session leader), stopped afterwards."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    folder.mkdir(parents=True, exist_ok=True)
    env = {**app_environment(folder), "STREAMLIT_SERVER_HEADLESS": "true", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    log = (folder / "make-run.log").open("w")
    server = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 900
        while True:
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the app did not start; see {folder / 'make-run.log'}")
            time.sleep(0.5)
        yield url, server
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()


def app_environment(folder: Path) -> dict[str, str]:
    return {**os.environ, "RERANK_LAB_DATA": str(folder / "data"), "RERANK_LAB_DB": f"sqlite:///{folder / 'store.sqlite'}"}


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                             args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


def run_app(runs: int = APP_RUNS) -> dict[str, Any]:
    """Timed in headless Chromium against ``app_server``: navigation to the Ask page's first widget,
    and Rank click to the ranked list, each tab a fresh session; then a candidate opened, and Rank
    clicked again in the same tab (its browser has loaded the code of the table and the plotly
    charts, which Streamlit fetches and compiles in each new tab when first drawn). The first run is
    cold (spaCy load, BM25 index)."""
    from playwright.sync_api import expect

    first_widget, ranked, opened, ranked_again = [], [], [], []
    with app_server(Path(os.environ["RERANK_LAB_DATA"]).parent / "app") as (url, _), chromium() as browser:
        for _ in range(runs):
            page = browser.new_context(viewport={"width": 1400, "height": 1800}).new_page()
            started = time.perf_counter()
            page.goto(f"{url}/Ask")
            question = page.get_by_role("textbox", name="Your question")
            expect(question).to_be_visible(timeout=300_000)
            first_widget.append((time.perf_counter() - started) * 1000)
            page.get_by_test_id("stSelectbox").nth(1).click()
            page.get_by_role("option", name="smcnn", exact=True).click()
            question.fill("who discovered penicillin")
            question.press("Enter")
            button = page.get_by_role("button", name="Rank")
            expect(button).to_be_enabled(timeout=300_000)
            page.wait_for_timeout(500)  # let the Enter rerun settle before the click
            started = time.perf_counter()
            button.click()
            expect(page.get_by_test_id("stDataFrame").first).to_be_visible(timeout=300_000)
            ranked.append((time.perf_counter() - started) * 1000)
            expect(page.get_by_text(re.compile(r"^#1 · score"))).to_be_visible(timeout=300_000)
            page.wait_for_timeout(500)
            page.get_by_test_id("stSelectbox").filter(has_text="Explain candidate").click()
            started = time.perf_counter()
            page.get_by_role("option").filter(has_text=re.compile(r"^#2 · ")).click()
            expect(page.get_by_text(re.compile(r"^#2 · score"))).to_be_visible(timeout=300_000)
            expect(page.locator(".rl-arcs", has_text="REL links").first).to_be_visible(timeout=300_000)
            opened.append((time.perf_counter() - started) * 1000)
            page.wait_for_timeout(500)
            started = time.perf_counter()  # the same question again: the tab has loaded the table's and plotly's code
            page.get_by_role("button", name="Rank", exact=True).click()
            expect(page.locator(".st-key-r2-table").get_by_test_id("stDataFrame")).to_be_visible(timeout=300_000)
            ranked_again.append((time.perf_counter() - started) * 1000)
            page.context.close()
    return {"model": "smcnn", "runs": runs, "first_widget_ms": first_widget, "rank_to_list_ms": ranked,
            "open_explanation_ms": opened, "rank_again_ms": ranked_again}


def resident_mb(leader: int, field: str = "VmRSS") -> float:
    """Resident memory (``field`` of /proc/PID/status: VmRSS, or its private part RssAnon) of every
    process in ``leader``'s session (make, the Streamlit server and anything it started), in MB."""
    total_kb = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        with contextlib.suppress(OSError, ValueError):
            if os.getsid(int(status.parent.name)) != leader:
                continue
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            total_kb += int(fields.get(field, "0 kB").split()[0])
    return total_kb / 1024


# The "qid · doc_id" caption of the pair on screen.
PAIR_CAPTION_JS = r"""[...document.querySelectorAll('[data-testid=stCaptionContainer]')]
    .map(e => e.innerText).find(t => /^demo-\d+ · demo-\d+-\d+$/.test(t))"""


def run_label(judgements: int = LABEL_JUDGEMENTS, warmup: int = LABEL_WARMUP) -> dict[str, Any]:
    """Issue 21's target: from a grade key pressed on the Label page to the next pair shown, over
    ``judgements`` keyboard-only judgements after ``warmup`` ones, in headless Chromium (random
    order, demo corpus)."""
    with app_server(Path(os.environ["RERANK_LAB_DATA"]).parent / "app") as (url, _):
        return time_label_page(url, judgements, warmup)


def time_label_page(url: str, judgements: int, warmup: int) -> dict[str, Any]:
    """``run_label`` on an app already running at ``url``; the clock stops when the caption names
    another pair (polled every 5 ms)."""
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1400, "height": 1800}).new_page()
        page.goto(f"{url}/Label")
        expect(page.get_by_role("textbox", name="Your name")).to_be_visible(timeout=300_000)
        page.wait_for_function("window.rerankLabKeysInstalled === true", timeout=300_000)
        page.keyboard.press("n")
        page.keyboard.type(f"speed-{os.getpid()}-{time.time_ns()}")
        page.keyboard.press("Enter")
        page.wait_for_function(PAIR_CAPTION_JS, timeout=300_000)
        idle = page.get_by_test_id("stApp")
        times = []
        for i in range(warmup + judgements):
            expect(idle).to_have_attribute("data-test-script-state", "notRunning", timeout=300_000)
            shown = page.evaluate(PAIR_CAPTION_JS)
            started = time.perf_counter()
            page.keyboard.press(str(i % 5))
            page.wait_for_function(f"(() => {{ const t = {PAIR_CAPTION_JS}; return t && t !== {json.dumps(shown)}; }})()",
                                   timeout=300_000, polling=5)
            if i >= warmup:
                times.append((time.perf_counter() - started) * 1000)
    return {"judgements": judgements, "warmup": warmup, "key_to_next_pair_ms": times,
            "median_ms": statistics.median(times), "p95_ms": percentile(times, 95)}


def render_app(app: dict[str, Any]) -> list[str]:
    """The Ask page's steps: the first (cold) run, the warm median and the warm runs."""
    steps = (("navigation -> first widget", "first_widget_ms"), ("Rank click -> ranked list", "rank_to_list_ms"),
             ("open candidate #2 -> its heatmap and arcs", "open_explanation_ms"),
             ("Rank click again in the same tab -> ranked list", "rank_again_ms"))
    lines = ["### Ask page in Chromium", "",
             f"The app started with `make run` (as the end-to-end tests do), headless Chromium, {app['runs']} "
             f"fresh tabs, model {app['model']} on the demo corpus (50 BM25 candidates). Median of the warm runs "
             "(2nd onwards); the first (cold: spaCy load, BM25 index, model load) apart. The ranked list "
             "comes with the first candidate's explanation (computed when opened; earlier runs explained the "
             "top 5 up front); opening another candidate computes its own (a fragment: only the Why section "
             "reruns). Streamlit fetches and compiles an element type's code in each new tab when it first "
             "draws one (for the table and plotly about 1 s of the renderer's time on this machine); the Ask "
             "page asks for both once it has been drawn and stood still for 0.3 s (`pages/assets/preload.js`), "
             "so a first Rank click finds them loaded, where it took 1.5 s (warm median) before. The last row "
             "clicks Rank again in the same tab. Targets (issue 16): < 500 ms each, warm."
             f"{load_note(app)}", "",
             "| step | first run (ms) | warm median (ms) | warm runs (ms) |", "|---|---|---|---|"]
    for name, key in (step for step in steps if step[1] in app):
        values = app[key]
        warm = values[1:] or values
        lines.append(f"| {name} | {values[0]:.0f} | {statistics.median(warm):.0f} | "
                     f"{', '.join(f'{v:.0f}' for v in warm)} |")
    lines.append("")
    return lines


def render_label(label: dict[str, Any]) -> list[str]:
    """Key press to next pair against issue 21's target."""
    verdict = "meets" if label["p95_ms"] <= LABEL_TARGET_MS else "misses"
    return ["### Label page: key press to the next pair", "",
            f"Issue 21's target: from a grade key pressed on the Label page to the next pair shown, p95 <= "
            f"{LABEL_TARGET_MS} ms over {label['judgements']} keyboard-only judgements after {label['warmup']} "
            "warm-up ones (headless Chromium, the app started with `make run`, random order over the demo "
            f"corpus). Median {label['median_ms']:.0f} ms, p95 {label['p95_ms']:.0f} ms: {verdict} the target "
            f"on this machine.{load_note(label)}", ""]
