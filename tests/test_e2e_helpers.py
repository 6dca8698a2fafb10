"""The browser tests' helpers (tests/conftest.py) return only after the app has run with what they
entered: the browser says "not running" until the server's run has begun, so helpers that checked
only that and the value the browser had set itself returned before the run, and the test's next
step raced it. What the server draws from the value is there the moment a helper returns."""

from __future__ import annotations

import re

from tests.conftest import BROWSER_TIMEOUT_MS, choose, choose_radio


def test_a_helper_returns_once_the_app_has_drawn_what_its_value_changes(running_app, page):
    from playwright.sync_api import expect

    page.goto(f"{running_app.url}/Ask")
    question = page.get_by_role("textbox", name="Your question")
    expect(question).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.get_by_role("combobox", name="Model", exact=True)).not_to_have_value("overlap")

    choose(page, "Model", "overlap")
    assert page.get_by_text(re.compile(r"^overlap: nothing to train")).is_visible()  # the version in use, said under the box
    choose_radio(page, "Pick a dataset question")
    assert page.get_by_role("combobox", name="Dataset question", exact=True).is_visible()
    assert not question.is_visible()
