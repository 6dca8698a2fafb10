// Keyboard for the Label page: every key the page lists works, and focus never stays stuck in a
// widget. Installed once per browser tab; the page sets window.rerankLabKeys on every change:
// {letter: [css selectors tried in turn, "click" | "focus"]}, its buttons with a shortcut included.
// The page's keys are pressed here rather than by Streamlit's own shortcuts, which work only once
// their binding ran after the button was drawn: a key whose element this run drew but the tab has
// not shown yet (the first button of a tab comes a beat after the rest) is pressed once it shows.
(function () {
  const doc = window.document;
  const WAIT_MS = 3000;  // a key waits this long for its element; the next key cancels it
  const release = () => {
    const active = doc.activeElement;
    if (active && active !== doc.body && typeof active.blur === "function") active.blur();
  };
  const later = () => setTimeout(release, 0);
  const typing = (el) =>
    el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  const find = (selectors) => selectors.map((selector) => doc.querySelector(selector)).find((found) => found);
  const press = (element, action) => { if (action === "focus") element.focus(); else element.click(); };
  if (window.rerankLabKeysInstalled) return;
  window.rerankLabKeysInstalled = true;

  let waiting = null;  // {observer, timer} of a key whose element is not shown yet
  const stopWaiting = () => {
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
  doc.addEventListener("keydown", (event) => {
    const target = event.target;
    stopWaiting();  // a new key: the one before it no longer waits
    if (event.key === "Escape") { later(); return; }  // Escape always leaves the widget
    if (event.key === "Enter" && target.tagName === "INPUT") {
      // Enter commits a text box (the next key belongs to the page) or picks the option of an open
      // select box; on a closed select box it opens the list, which keeps the focus.
      const combobox = target.getAttribute("role") === "combobox";
      if (!combobox || target.getAttribute("aria-expanded") === "true") later();
      return;
    }
    if (typing(target) || event.ctrlKey || event.metaKey || event.altKey || event.key.length !== 1) return;
    const entry = (window.rerankLabKeys || {})[event.key.toLowerCase()];
    if (!entry) return;
    const [selectors, action] = entry;
    event.preventDefault();
    event.stopPropagation();  // Streamlit's shortcut listener on the document does not see it: one press
    const element = find(selectors);
    if (element) press(element, action); else pressWhenShown(selectors, action);
  }, true);
})();
