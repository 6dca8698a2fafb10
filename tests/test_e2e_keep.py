"""Keeping a typed question end to end (issue 37), in one Chromium page: a question typed and
ranked on Ask, kept (in ``explore``, the default), then found among the dataset's questions,
ranked as one, and one of its candidates judged."""

from __future__ import annotations

import re

from db.keep import kept_qid
from db.store import Store
from tests.conftest import BROWSER_TIMEOUT_MS, choose, choose_radio, enter_text, page_screenshots
from tests.test_e2e_ask import judge_by_key

KEPT_QUESTION = "where did fleming discover penicillin"


def test_a_typed_question_is_kept_listed_and_judged(running_app, page, screenshot_dir):
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Ask")
    question = page.get_by_role("textbox", name="Your question")
    expect(question).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    choose(page, "Model", "overlap")
    enter_text(page, question, KEPT_QUESTION)
    page.get_by_role("button", name="Rank").click()
    expect(page.get_by_text("Ranked candidates")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_role("combobox", name="Keep in split", exact=True)).to_have_value("explore")
    page.get_by_role("button", name="Keep this question").click()
    qid = kept_qid(KEPT_QUESTION)
    expect(page.get_by_text(re.compile(rf"^Kept as question {qid} of demo, split explore, \d+ candidates"))).to_be_visible(
        timeout=BROWSER_TIMEOUT_MS)
    page_screenshots(page, screenshot_dir, "ask-keep")

    choose_radio(page, "Pick a dataset question")
    choose(page, "Dataset question", f"{qid} [explore] {KEPT_QUESTION}", typed=qid)  # filtered to the kept question
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
