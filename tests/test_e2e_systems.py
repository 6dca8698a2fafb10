"""External systems end to end (issue 36): the app started with `make run`, driven in Chromium. A run
file is uploaded on the Systems page, then compared on a whole split on the Compare page beside a
built-in model, as a model would be; then removed. With RERANK_LAB_SCREENSHOTS=docs/screenshots it
refreshes docs/screenshots/systems.png."""

from __future__ import annotations

import re
from pathlib import Path

from qa_core.data.demo import load_demo
from tests.conftest import BROWSER_TIMEOUT_MS, add_choice, page_screenshots, settled


def shown(text: str) -> re.Pattern[str]:
    """``text`` as the page shows it: escaped markdown puts a word joiner after a "word:" that
    Streamlit would take for an emoji or icon code."""
    return re.compile(re.escape(text).replace(":", ":\u2060?"))


def test_a_run_added_on_the_systems_page_is_compared_like_a_model(running_app, page, screenshot_dir, tmp_path: Path):
    from playwright.sync_api import expect

    run = tmp_path / "lengths.test.run"
    run.write_text("".join(f"{q.qid} Q0 {c.doc_id} 1 {len(c.text)} lengths\n"
                           for q in load_demo().split("test")[:20] for c in q.candidates))
    page.goto(f"{running_app.url}/Systems")
    expect(page.get_by_text("Add the run")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    page.locator("input[type=file]").set_input_files(str(run))
    page.get_by_label("Name").first.fill("lengths")
    page.get_by_label("Name").first.press("Enter")
    settled(page)
    page.get_by_role("button", name="Add the run").click()
    expect(page.get_by_text(shown("Added system:lengths: ranks 20 questions; lacks 8 of test"))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_test_id("stDataFrame")).to_be_visible()
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "systems")

    page.goto(f"{running_app.url}/Compare")
    expect(page.get_by_text("Whole split")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    page.get_by_text("Whole split").click()
    add_choice(page, "Models (the first is the reference)", "system:lengths")
    expect(page.get_by_text(shown("system:lengths: a stored run of demo"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    page.get_by_role("button", name="Compare on the split").click()
    expect(page.get_by_text("Every pair on map")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    means = page.get_by_test_id("stTable").first  # the means with their intervals, one row per model
    expect(means).to_contain_text("system:lengths", timeout=BROWSER_TIMEOUT_MS)
    expect(means).to_contain_text("smcnn")
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "systems-compare")

    page.goto(f"{running_app.url}/Systems")
    page.get_by_role("tab", name="Remove").click()
    page.get_by_role("button", name="Remove (labels stay)").click()
    expect(page.get_by_text(shown("Removed system:lengths; no label was touched."))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
