"""Errors end to end: the worst questions of the demo test split listed in Chromium, and a click on
the worst one opens Ask ranked on that question. With RERANK_LAB_SCREENSHOTS=docs/screenshots it
refreshes docs/screenshots/errors.png and ask-contrast.png (the contrastive view it links to)."""

from __future__ import annotations

import re

from tests.conftest import BROWSER_TIMEOUT_MS, page_screenshots


def test_errors_page_links_the_worst_question_to_ask(running_app, page, screenshot_dir):
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Errors")
    expect(page.get_by_text("Worst questions")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    links = page.get_by_test_id("stPageLink-NavLink").filter(has_text=" · AP ")
    expect(links.first).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(links).to_have_count(10)  # the worst 10 of the demo's 28 test questions (LINKED), once all are drawn
    expect(page.locator(".js-plotly-plot .gtitle", has_text="mean AP by question class")).to_be_visible()
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "errors")

    worst = links.first.inner_text()
    qid, question = re.search(r"(\S+) · AP [\d.]+ · (.+)", worst).groups()
    links.first.click()
    expect(page).to_have_url(re.compile(rf"/Ask\?.*qid={re.escape(qid)}"), timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_text("Ranked candidates")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_text(f"question: {question}")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.locator(".rl-arcs", has_text="REL links").first).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    # The worst question has a wrong answer above a right one: the link opens the contrastive view.
    expect(page).to_have_url(re.compile(r"view=contrast"))
    expect(page.get_by_text(re.compile(r"a gap of \d\.\d{4}"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.locator(".rl-highlighted", has_text=re.compile(r"A \(#\d+\): .* toward the gap"))).to_be_visible()
    expect(page.get_by_text(re.compile(r"deleting A's top 20% words narrows the gap by"))).to_be_visible()
    assert "Traceback" not in page.content()
    page_screenshots(page, screenshot_dir, "ask-contrast")
