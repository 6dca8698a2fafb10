"""Long texts end to end (issue 22): a 200 KB candidate is refused at import with its file and line
and nothing imported; a candidate at the 5,000-character limit imports, ranks and is explained on
Ask in Chromium (its highlighted words wrap like a paragraph and are its only copy on the page; the
arcs summarise the unlinked words and wrap onto rows that fit the column at 1280 and 1920 px)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from db.store import Store
from tests import ROOT
from tests.conftest import BROWSER_TIMEOUT_MS, PLOTS_FIT, SCREENSHOT_WIDTHS, choose, enter_text
from tests.figures import AT_LIMIT, SVG_FITS

QUESTION = "which river flows through the long valley"
ANSWER = "The Long River flows through the long valley."


def import_file(running_app, path: Path, name: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RERANK_LAB_DB": running_app.database_url, "RERANK_LAB_DATA": str(running_app.data_dir)}
    return subprocess.run([sys.executable, "-m", "qa_core", "data", "import", str(path), "--name", name],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def pairs(candidates: list[tuple[str, int]]) -> str:
    return "".join(json.dumps({"qid": "long-1", "question": QUESTION, "candidate": text, "label": label,
                               "split": "test"}) + "\n" for text, label in candidates)


def test_a_200_kb_candidate_is_refused_and_one_at_the_limit_is_explained(running_app, page, tmp_path):
    from playwright.sync_api import expect

    huge = tmp_path / "huge.jsonl"
    huge.write_text(pairs([(ANSWER, 1), ("valley " * 29_000, 0)]))
    refused = import_file(running_app, huge, "huge")
    assert refused.returncode == 2 and refused.stderr.startswith(f"error: {huge}, line 2: the candidate is too long")
    store = Store(running_app.database_url)
    assert "huge" not in store.datasets.dataset_names()

    fine = tmp_path / "fine.jsonl"
    fine.write_text(pairs([(ANSWER, 1), (AT_LIMIT, 0), ("Mountains rise above the plain.", 0)]))
    assert import_file(running_app, fine, "longtexts").returncode == 0
    assert "longtexts" in store.datasets.dataset_names()
    store.close()

    page.goto(f"{running_app.url}/Ask")
    question = page.get_by_role("textbox", name="Your question")
    expect(question).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    choose(page, "Dataset", "longtexts")
    choose(page, "Model", "overlap")  # the Model box is redrawn for the chosen dataset
    enter_text(page, question, QUESTION)
    page.get_by_role("button", name="Rank").click()
    expect(page.get_by_text("Ranked candidates")).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    # BM25 retrieves the two candidates that share the question's words.
    expect(page.get_by_text(re.compile(r"^overlap on longtexts · 2 candidates"))).to_be_visible()
    choose(page, "Explain candidate", re.compile("The valley is long"))  # the candidate at the limit
    expect(page.get_by_text(re.compile(r"^#\d · score \d\.\d{4}"))).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.locator(".rl-highlighted", has_text="Answer, ").first).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    expect(page.locator(".rl-arcs", has_text="REL links").first).to_be_visible(timeout=BROWSER_TIMEOUT_MS)
    assert "Traceback" not in page.content()
    # Issue 45: the text was printed twice (a paragraph, then the heatmap), and its arcs drew 1,015 px
    # in an 820 px column at 1280 px, their last words behind a scroll bar.
    expect(page.locator("[data-testid=stMarkdownContainer] p", has_text=AT_LIMIT[:80])).to_have_count(0)
    for width in SCREENSHOT_WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_function(PLOTS_FIT, timeout=BROWSER_TIMEOUT_MS)
        assert page.evaluate(SVG_FITS, 10) == [], f"at {width} px"
