// Keyboard help for the Label page: focus never stays stuck in a widget, so the page's keys keep
// working. Installed once per browser tab; the page sets window.rerankLabKeys on every change:
// {letter: [css selectors tried in turn, "click" | "focus", handled by Streamlit's own shortcut (lower case)]}.
(function () {
  const doc = window.document;
  const release = () => {
    const active = doc.activeElement;
    if (active && active !== doc.body && typeof active.blur === "function") active.blur();
  };
  const later = () => setTimeout(release, 0);
  const typing = (el) =>
    el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  if (window.rerankLabKeysInstalled) return;
  window.rerankLabKeysInstalled = true;

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
    const [selectors, action, streamlitHandlesLowerCase] = entry;
    if (streamlitHandlesLowerCase && !event.shiftKey) return;  // Streamlit's shortcut does it
    const element = selectors.map((selector) => doc.querySelector(selector)).find((found) => found);
    if (!element) return;
    event.preventDefault();
    event.stopPropagation();
    if (action === "focus") element.focus(); else element.click();
  }, true);
})();
