"""Hidden characters in imported text, in Chromium (issue 32): a right-to-left override made "evil"
display as "live" on the Label page, and a zero-width space glued two words. What the page shows is
the neutralised text; the store keeps the original."""

from __future__ import annotations

import uuid

from db.store import Store
from qa_core.types import Candidate, Dataset, Question
from tests.conftest import BROWSER_TIMEOUT_MS, choose, enter_text, settled

DATASET = "zz-hidden-text"  # last in the dataset box: the other browser tests open on the demo
OVERRIDE, ZERO_WIDTH_SPACE = "\u202e", "\u200b"


def test_the_label_page_shows_imported_text_without_its_direction_override(running_app, page):
    from playwright.sync_api import expect

    store = Store(running_app.database_url)
    try:
        store.datasets.import_dataset(Dataset(DATASET, [Question("q1", f"who{ZERO_WIDTH_SPACE}discovered penicillin", [
            Candidate("a", f"{OVERRIDE}live\u202c bacteria were found", label=0)], split="train")]))
    finally:
        store.close()

    page.goto(f"{running_app.url}/Label")
    name = page.get_by_role("textbox", name="Your name")
    expect(name).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    choose(page, "Dataset", DATASET)
    enter_text(page, name, f"e2e-hidden-{uuid.uuid4().hex[:8]}",
               ready=page.get_by_role("button", name="2 · partly answers"))  # the name took: its pair is drawn
    shown = page.get_by_test_id("stMarkdownContainer").filter(has_text="bacteria were found")
    expect(shown.first).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    settled(page)
    text = page.get_by_test_id("stMain").inner_text()
    assert "live bacteria were found" in text and OVERRIDE not in text  # read as typed, never reversed
    assert "who discovered penicillin" in text.replace("\n", " ")  # two words, not one
    assert "Traceback" not in page.content()
