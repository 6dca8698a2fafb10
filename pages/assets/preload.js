// Imports the code of Streamlit element types before a page first draws them (see
// pages/__init__.py preload_elements): window.rerankLabPreload lists module file names of
// Streamlit's bundle; a module is fetched once per browser tab. The fetch starts once the page has
// been drawn and nothing on it changed for QUIET_MS (the page's own elements come first: fetched
// at once, plotly's 4.7 MB held up the first widget by half a second), or after MAX_WAIT_MS.
(function () {
  const QUIET_MS = 300, MAX_WAIT_MS = 5000;
  const entry = document.querySelector('script[type="module"][src*="static/js/index."]');
  if (!entry) return;  // not Streamlit's page as we know it: nothing to do, nothing breaks
  const started = (window.rerankLabPreloadStarted = window.rerankLabPreloadStarted || new Set());
  const files = (window.rerankLabPreload || []).filter((file) => !started.has(file));
  if (files.length === 0) return;
  files.forEach((file) => started.add(file));
  let quiet, latest;
  const fetchAll = () => {
    observer.disconnect();
    clearTimeout(quiet);
    clearTimeout(latest);
    files.forEach((file) => import(new URL(file, entry.src).href).catch(() => started.delete(file)));
  };
  const observer = new MutationObserver(() => { clearTimeout(quiet); quiet = setTimeout(fetchAll, QUIET_MS); });
  observer.observe(document.body, { childList: true, subtree: true, attributes: true });
  quiet = setTimeout(fetchAll, QUIET_MS);
  latest = setTimeout(fetchAll, MAX_WAIT_MS);
})();
