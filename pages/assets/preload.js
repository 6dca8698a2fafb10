// Imports the code of Streamlit element types before a page first draws them (see
// pages/__init__.py preload_elements): window.rerankLabPreload lists module file names of
// Streamlit's bundle; a module is fetched once per browser tab.
(function () {
  const entry = document.querySelector('script[type="module"][src*="static/js/index."]');
  if (!entry) return;  // not Streamlit's page as we know it: nothing to do, nothing breaks
  const started = (window.rerankLabPreloadStarted = window.rerankLabPreloadStarted || new Set());
  for (const file of window.rerankLabPreload || []) {
    if (started.has(file)) continue;
    started.add(file);
    import(new URL(file, entry.src).href).catch(() => started.delete(file));
  }
})();
