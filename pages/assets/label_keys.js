// Keyboard for the Label page: every key the page lists works, and focus never stays stuck in a
// widget. Installed once per browser tab; the page sets window.rerankLabKeys on every change:
// {letter: [css selectors tried in turn, "click" | "focus"]}, its buttons with a shortcut included.
// The page's keys are pressed here rather than by Streamlit's own shortcuts, which work only once
// their binding ran after the button was drawn: a key whose element this run drew but the tab has
// not shown yet (the first button of a tab comes a beat after the rest) is pressed once it shows.
(function () {
  if (window.rerankLabKeysInstalled) {  // a later run: its keys are set; a key that waited for them goes now
    if (window.rerankLabKeysArrived) window.rerankLabKeysArrived();
    return;
  }
  const doc = window.document;
  const WAIT_MS = 3000;  // a key waits this long for its element; the next key cancels it
  const RUN_WAIT_MS = 15000;  // a key waits this long for a rerun's keys (a rerun under load takes seconds)
  let releasing = null;  // the text box Enter just committed, until the blur below has left it
  const release = () => {
    releasing = null;
    const active = doc.activeElement;
    if (active && active !== doc.body && typeof active.blur === "function") active.blur();
  };
  const later = () => setTimeout(release, 0);
  const typing = (el) =>
    el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  const find = (selectors) => selectors.map((selector) => doc.querySelector(selector)).find((found) => found);
  const press = (element, action) => { if (action === "focus") element.focus(); else element.click(); };
  window.rerankLabKeysInstalled = true;

  let waiting = null;  // {observer, timer} of a key whose element is not shown yet
  let unmapped = null;  // {key, timer} of a key the next run's keys may map (see below)
  let committedAt = -Infinity;  // when Enter last committed a text box (a rerun is on its way)
  const stopWaiting = () => {
    if (unmapped) { clearTimeout(unmapped.timer); unmapped = null; }
    if (!waiting) return;
    waiting.observer.disconnect();
    clearTimeout(waiting.timer);
    waiting = null;
  };
  const pressWhenShown = (selectors, action) => {
    const observer = new MutationObserver(() => {
      const element = find(selectors);
      if (!element) return;
      stopWaiting();
      press(element, action);
    });
    observer.observe(doc.body, { childList: true, subtree: true });
    waiting = { observer, timer: setTimeout(stopWaiting, WAIT_MS) };
  };

  // Choosing an option of a select box (mouse, or Enter on the open list) hands the keys back.
  doc.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest('[role="option"]')) later();
  }, true);
  // A radio button or check box changed (arrows, space, click): the same.
  doc.addEventListener("change", (event) => {
    const type = event.target && event.target.type;
    if (type === "radio" || type === "checkbox") later();
  }, true);
  // A key this run's keys do not map while a rerun is on its way (the app is running, or Enter has
  // just committed a text box): the run that draws the buttons has not set its keys yet. A fresh
  // tab's first digit after typing a new name came before the run that maps the digits and was lost
  // (issue 32); it now waits for that run's keys (RUN_WAIT_MS at most; the next key cancels it).
  const rerunning = () =>
    performance.now() - committedAt < RUN_WAIT_MS ||
    doc.querySelector('[data-test-script-state="running"]') !== null;
  window.rerankLabKeysArrived = () => {
    if (!unmapped) return;
    const key = unmapped.key;
    clearTimeout(unmapped.timer);
    unmapped = null;
    const entry = (window.rerankLabKeys || {})[key];
    if (!entry) return;
    const [selectors, action] = entry;
    const element = find(selectors);
    if (element) press(element, action); else pressWhenShown(selectors, action);
  };

  doc.addEventListener("keydown", (event) => {
    const target = event.target;
    stopWaiting();  // a new key: the one before it no longer waits
    if (event.key === "Escape") { later(); return; }  // Escape always leaves the widget
    if (event.key === "Enter" && target.tagName === "INPUT") {
      // Enter commits a text box (the next key belongs to the page) or picks the option of an open
      // select box; on a closed select box it opens the list, which keeps the focus.
      const combobox = target.getAttribute("role") === "combobox";
      if (!combobox || target.getAttribute("aria-expanded") === "true") later();
      if (!combobox) { committedAt = performance.now(); releasing = target; }
      return;
    }
    // A key right after Enter belongs to the page even while the box still has the focus (the blur
    // is a task away, and a busy tab runs input events first): it is not typed into the box.
    if ((typing(target) && target !== releasing) || event.ctrlKey || event.metaKey || event.altKey || event.key.length !== 1) return;
    const key = event.key.toLowerCase();
    const entry = (window.rerankLabKeys || {})[key];
    if (!entry) {
      if (!rerunning()) return;
      if (target === releasing) event.preventDefault();
      unmapped = { key, timer: setTimeout(() => { unmapped = null; }, RUN_WAIT_MS) };
      return;
    }
    const [selectors, action] = entry;
    event.preventDefault();
    event.stopPropagation();  // Streamlit's shortcut listener on the document does not see it: one press
    const element = find(selectors);
    if (element) press(element, action); else pressWhenShown(selectors, action);
  }, true);
})();
