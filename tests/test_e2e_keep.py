"""Keeping a typed question end to end (issue 37), in one Chromium page: a question typed and
ranked on Ask, kept (in ``explore``, the default), then found among the dataset's questions,
ranked as one, and one of its candidates judged."""

from __future__ import annotations

import re

from db.keep import kept_qid
from db.store import Store
from tests.conftest import BROWSER_TIMEOUT_MS, choose, page_screenshots, settled
from tests.test_e2e_ask import judge_by_key

KEPT_QUESTION = "where did fleming discover penicillin"


def test_a_typed_question_is_kept_listed_and_judged(running_app, page, screenshot_dir):
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Ask")
    question = page.get_by_role("textbox", name="Your question")
    expect(question).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    choose(page, "Model", "overlap")
    question.fill(KEPT_QUESTION)
    question.press("Enter")
    page.get_by_role("button", name="Rank").click()
    expect(page.get_by_text("Ranked candidates")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_role("combobox", name="Keep in split", exact=True)).to_have_value("explore")
    page.get_by_role("button", name="Keep this question").click()
    qid = kept_qid(KEPT_QUESTION)
    expect(page.get_by_text(re.compile(rf"^Kept as question {qid} of demo, split explore, \d+ candidates"))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
    page_screenshots(page, screenshot_dir, "ask-keep")

    page.get_by_text("Pick a dataset question", exact=True).click()
    settled(page)
    listed = f"{qid} [explore] {KEPT_QUESTION}"
    box = page.get_by_role("combobox", name="Dataset question", exact=True)
    box.click()
    page.keyboard.type(qid)  # the list draws only the options in view: filter it to the kept question
    page.get_by_role("option", name=listed, exact=True).click()
    settled(page)
    expect(box).to_have_value(listed)
    page.get_by_role("button", name="Rank", exact=True).click()
    expect(page.get_by_text(f"question {qid}'s own candidates", exact=False)).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    judge_by_key(page, "kim", qid, 2, "partly answers")
    store = Store(running_app.database_url)
    try:
        labelled = store.labels.qrels("demo", source="labels")
        assert list(labelled[qid].values()) == [2]
        assert store.labels.current_labels("demo", "kim") and len(store.labels.current_labels("demo", "kim")) == 1
    finally:
        store.close()
    assert "Traceback" not in page.content()
