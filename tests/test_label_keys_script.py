"""``pages/assets/label_keys.js`` on its own in Chromium (no app): a listed key presses its element
exactly once, also when the element is drawn after the key (the first pair's grade buttons come a
beat after the pair, issue 21), and never after the next key or after its wait. A listener on the
document in the bubble phase stands for Streamlit's own shortcut binding."""

from __future__ import annotations

import pytest

from tests import ROOT

SCRIPT = (ROOT / "pages" / "assets" / "label_keys.js").read_text(encoding="utf-8")
PAGE = """<html><body><main id="main"></main><input id="box"></body></html>"""
COUNTERS = """() => {
  window.clicks = {}; window.shortcutSaw = [];
  document.addEventListener("keydown", (event) => window.shortcutSaw.push(event.key));  // bubble, like Streamlit's
}"""
ADD_BUTTON = """(id) => {
  const button = document.createElement("button");
  button.id = id;
  button.addEventListener("click", () => { window.clicks[id] = (window.clicks[id] || 0) + 1; });
  document.getElementById("main").appendChild(button);
}"""


@pytest.fixture
def keys_page(chromium):
    context = chromium.new_context()
    page = context.new_page()
    try:
        page.set_content(PAGE)
        page.evaluate(COUNTERS)
        page.evaluate("""() => { window.rerankLabKeys = {"2": [["#grade-2"], "click"], "s": [["#skip"], "click"],
                                                         "n": [["#box"], "focus"]}; }""")
        page.add_script_tag(content=SCRIPT)
        yield page
    finally:
        context.close()


def clicks(page) -> dict[str, int]:
    return page.evaluate("window.clicks")


def test_a_key_clicks_its_button_once_and_streamlits_listener_never_sees_it(keys_page):
    keys_page.evaluate(ADD_BUTTON, "grade-2")
    keys_page.keyboard.press("2")
    keys_page.keyboard.press("Shift+S")  # capital letters work as small ones; #skip is not drawn: nothing yet
    assert clicks(keys_page) == {"grade-2": 1}
    assert keys_page.evaluate("window.shortcutSaw") == ["Shift"]  # no second press through Streamlit's shortcut
    keys_page.keyboard.press("7")  # not listed: left to the page
    assert keys_page.evaluate("window.shortcutSaw") == ["Shift", "7"]


def test_a_key_pressed_before_its_button_is_drawn_presses_it_when_drawn(keys_page):
    keys_page.keyboard.press("2")
    assert clicks(keys_page) == {}
    keys_page.evaluate(ADD_BUTTON, "grade-2")
    keys_page.wait_for_function("window.clicks['grade-2'] === 1")
    keys_page.evaluate(ADD_BUTTON, "grade-2")  # drawn again (the next pair): the old key is spent
    keys_page.wait_for_timeout(200)
    assert clicks(keys_page) == {"grade-2": 1}


def test_the_next_key_cancels_a_waiting_one(keys_page):
    keys_page.keyboard.press("2")  # e.g. on a screen whose buttons never come
    keys_page.keyboard.press("Escape")
    keys_page.evaluate(ADD_BUTTON, "grade-2")
    keys_page.wait_for_timeout(200)
    assert clicks(keys_page) == {}


def test_a_waiting_key_gives_up_after_its_wait(keys_page):
    wait_ms = int(SCRIPT.split("const WAIT_MS = ", 1)[1].split(";", 1)[0])
    keys_page.keyboard.press("2")
    keys_page.wait_for_timeout(wait_ms + 300)
    keys_page.evaluate(ADD_BUTTON, "grade-2")
    keys_page.wait_for_timeout(200)
    assert clicks(keys_page) == {}


def test_keys_typed_into_a_box_stay_there(keys_page):
    keys_page.keyboard.press("n")  # N focuses the box; what follows is typed into it
    keys_page.keyboard.type("s2")
    assert keys_page.evaluate("document.getElementById('box').value") == "s2"
    keys_page.keyboard.press("Enter")  # Enter commits and hands the keys back to the page
    keys_page.wait_for_function("document.activeElement === document.body")
    keys_page.evaluate(ADD_BUTTON, "skip")
    keys_page.keyboard.press("s")
    assert clicks(keys_page) == {"skip": 1}


def test_the_script_installs_once_per_tab(keys_page):
    keys_page.add_script_tag(content=SCRIPT)  # the page's next run sets the keys again
    keys_page.evaluate(ADD_BUTTON, "grade-2")
    keys_page.keyboard.press("2")
    assert clicks(keys_page) == {"grade-2": 1}  # one listener, one press



def test_a_key_the_next_run_maps_waits_for_that_run_after_a_name_is_committed(keys_page):
    """Issue 32: a new name typed and Enter (a rerun on its way), then a digit at once, before the
    run that draws the first pair and maps the digits: the digit waits for that run's keys."""
    keys_page.keyboard.press("n")
    keys_page.keyboard.type("ann")
    keys_page.keyboard.press("Enter")
    keys_page.keyboard.press("4")  # not mapped yet
    assert clicks(keys_page) == {}
    keys_page.evaluate("""() => { window.rerankLabKeys = {...window.rerankLabKeys, "4": [["#grade-4"], "click"]}; }""")
    keys_page.add_script_tag(content=SCRIPT)  # the next run: its keys, then the script again
    keys_page.evaluate(ADD_BUTTON, "grade-4")
    keys_page.wait_for_function("window.clicks['grade-4'] === 1")
    keys_page.keyboard.press("7")  # no rerun on its way: an unmapped key is left to the page
    keys_page.add_script_tag(content=SCRIPT)
    keys_page.wait_for_timeout(200)
    assert clicks(keys_page) == {"grade-4": 1}
