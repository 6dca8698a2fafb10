// Layout problems of the figures on the page, as a person would see them (tests/test_e2e_figures.py):
// in every figure (a plotly chart, highlighted text, REL arcs, a table), every drawn text label is
// checked: no two labels' boxes overlap, no label is cut off by an element that clips it (a scrolling
// container does not cut: its content can be scrolled to), no label is smaller than the minimum size.
// Hidden elements (an inactive tab) are skipped. Returns a list of sentences, empty when all is well.
(minimumPx) => {
  const FIGURES = ".js-plotly-plot, .rl-highlighted, .rl-arcs, [data-testid=stTable]";
  const TOLERANCE = 1; // px of rounding
  const problems = [];

  const visible = (element) => {
    const style = getComputedStyle(element);
    return style.visibility !== "hidden" && style.display !== "none" && Number(style.opacity) > 0
      && element.getClientRects().length > 0;
  };

  const labelsOf = (figure) => {
    const labels = [];
    // SVG text: each <text> element (its <tspan>s are lines of the same label); <title> is a tooltip.
    for (const text of figure.querySelectorAll("text")) {
      const words = [...text.childNodes].filter((n) => n.nodeName !== "title").map((n) => n.textContent).join("").trim();
      if (!words || !visible(text)) continue;
      const fill = getComputedStyle(text).fillOpacity;
      if (fill !== "" && Number(fill) === 0) continue;
      labels.push({ text: words, element: text, rects: [text.getBoundingClientRect()] });
    }
    // HTML text: every non-blank text node outside SVG, one box per line it takes.
    const walker = document.createTreeWalker(figure, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      if (!node.textContent.trim() || parent.closest("svg") || !visible(parent)) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
      if (rects.length) labels.push({ text: node.textContent.trim(), element: parent, rects });
    }
    return labels;
  };

  // Up to the page's scrolling main area, which clips sideways only (it scrolls down the page).
  const clipper = (element, label) => {
    let rect = { left: label.left, right: label.right, top: label.top, bottom: label.bottom };
    for (let box = element.parentElement; box && box !== document.body; box = box.parentElement) {
      const style = getComputedStyle(box);
      const main = box.dataset.testid === "stMain";
      const clipsX = style.overflowX !== "visible", clipsY = style.overflowY !== "visible" && !main;
      if (!clipsX && !clipsY) continue;
      const outer = box.getBoundingClientRect();
      const scrollsX = ["auto", "scroll"].includes(style.overflowX), scrollsY = ["auto", "scroll"].includes(style.overflowY);
      const left = outer.left - (scrollsX ? box.scrollLeft : 0), top = outer.top - (scrollsY ? box.scrollTop : 0);
      const right = scrollsX ? left + box.scrollWidth : outer.right, bottom = scrollsY ? top + box.scrollHeight : outer.bottom;
      if ((clipsX && (rect.left < left - TOLERANCE || rect.right > right + TOLERANCE))
          || (clipsY && (rect.top < top - TOLERANCE || rect.bottom > bottom + TOLERANCE))) return box;
      if (main) break;
      // Beyond a scrolling box, only what shows through it counts (the rest is scrolled to).
      if (scrollsX) rect = { ...rect, left: Math.max(rect.left, outer.left), right: Math.min(rect.right, outer.right) };
      if (scrollsY) rect = { ...rect, top: Math.max(rect.top, outer.top), bottom: Math.min(rect.bottom, outer.bottom) };
    }
    return null;
  };

  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > TOLERANCE
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > TOLERANCE;

  document.querySelectorAll(FIGURES).forEach((figure, index) => {
    if (!visible(figure)) return;
    const where = `figure ${index} (${figure.className.baseVal ?? figure.className})`;
    const labels = labelsOf(figure);
    for (const label of labels) {
      const size = parseFloat(getComputedStyle(label.element).fontSize);
      if (size < minimumPx) problems.push(`${where}: "${label.text}" is ${size} px`);
      for (const rect of label.rects) {
        const box = clipper(label.element, rect);
        if (box) {
          problems.push(`${where}: "${label.text}" is cut off by its container ${box.tagName}.${box.className.baseVal ?? box.className}`);
          break;
        }
      }
    }
    for (let i = 0; i < labels.length; i++) {
      for (let j = i + 1; j < labels.length; j++) {
        if (labels[i].rects.some((a) => labels[j].rects.some((b) => overlap(a, b)))) {
          problems.push(`${where}: "${labels[i].text}" and "${labels[j].text}" overlap`);
        }
      }
    }
  });
  return problems;
}
