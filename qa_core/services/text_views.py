"""Explanations drawn as text: word weights as highlighted text, REL links as arcs between words.

Both return HTML (``st.html`` draws it on the pages). Every token, label and tooltip that comes from
data goes through ``html.escape``; styles and geometry are ours.

Highlighted text is what Captum's ``visualize_text`` and LIT's salience maps do: the words themselves,
readable, on a background whose colour is the word's weight, wrapping like a paragraph, the value on
hover. Captum's helper is not used: it writes tokens into HTML unescaped and brings torch-side
dependencies to a page that only draws.

The arcs are our own SVG with displaCy's property that matters, measured word spacing: each word is
as wide as DejaVu Sans draws it (metrics from the font file matplotlib ships), and ``textLength``
makes any fallback font take exactly that width, so words never run into each other. displaCy's
renderer itself lays words out at a fixed distance (175 px) on one line, with arcs above whose height
grows with the distance they span: a question linked to an answer 60 words away drew arcs taller
than the page, so it is not used. Like displaCy's, the words keep their size (readable): a figure
wider than ``FIT_PX`` first keeps only the linked words in context, then wraps the answer's line
onto rows under the question's, each row with its own arcs, so that it fits the page's column at
1280 px; the SVG shrinks only in a column narrower than that.
"""

from __future__ import annotations

import functools
import html
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from qa_core.rankers.base import Explanation
from qa_core.text.links import Link

# ---------------------------------------------------------------------------------------------
# Word weights as highlighted text

POSITIVE_RGB, NEGATIVE_RGB = (33, 102, 172), (178, 24, 43)  # ColorBrewer RdBu's ends, as plotly's "RdBu"
DARK_TEXT_FROM = 0.55  # a background this strong takes white text
NO_SPACE_BEFORE = re.compile(r"^(?:[.,;:!?%)\]}]+|'s|'S|n't|'re|'ve|'ll|'d|'m)$")
LONGEST_WORD_CHARS = 40  # a longer token (a URL) is cut here; the hover has all of it


def word_colour(scaled: float) -> str:
    """The background of a word whose weight, divided by the text's largest absolute weight, is
    ``scaled`` (-1..1): blue for positive, red for negative, transparent at 0."""
    red, green, blue = POSITIVE_RGB if scaled >= 0 else NEGATIVE_RGB
    return f"rgba({red}, {green}, {blue}, {min(abs(scaled), 1.0):.3f})"


def _shown(token: str) -> str:
    token = token if token.strip() else "·"
    return token if len(token) <= LONGEST_WORD_CHARS else token[: LONGEST_WORD_CHARS - 1] + "…"


def _legend(kind: str, largest: float, signed: bool) -> str:
    """A colour bar from the scale's low end to its high end, the raw values at the ends."""
    low = f"−{largest:.3g}" if signed else "0"
    stops = (f"{word_colour(-1.0)}, {word_colour(0.0)}, {word_colour(1.0)}" if signed
             else f"{word_colour(0.0)}, {word_colour(1.0)}")
    return (
        '<div class="rl-legend" style="display:flex;align-items:center;gap:8px;font-size:13px;'
        'color:#555;margin-top:6px;flex-wrap:wrap">'
        f"<span>{html.escape(kind)}:</span><span>{low}</span>"
        f'<span style="display:inline-block;width:140px;height:12px;border:1px solid #ccc;'
        f'background:linear-gradient(to right, {stops})"></span>'
        f"<span>{largest:.3g}</span></div>"
    )


def highlighted_text(tokens: Sequence[str], weights: Sequence[float], kind: str, read: int | None = None,
                     title: str = "") -> str:
    """``tokens`` as a paragraph, each word on a background coloured by its weight divided by the
    largest absolute weight among the words read (so every text uses the whole scale), the raw value
    on hover, and a legend. Words from ``read`` on were not read by the model: grey, struck through."""
    read = len(tokens) if read is None else min(read, len(tokens))
    values = [float(w) for w in weights]
    largest = max((abs(w) for w in values[:read]), default=0.0)
    signed = any(w < 0 for w in values[:read])
    words = []
    for i, (token, weight) in enumerate(zip(tokens, values)):
        space = "" if i == 0 or NO_SPACE_BEFORE.match(token) else " "
        if i >= read:
            words.append(f'{space}<span title="not read by the model" style="color:#8a8a8a;'
                         f'text-decoration:line-through">{html.escape(_shown(token))}</span>')
            continue
        scaled = weight / largest if largest > 0 else 0.0
        colour = "#fff" if abs(scaled) >= DARK_TEXT_FROM else "inherit"
        hover = html.escape(f"{token}: {kind} {weight:.4g} ({scaled:+.2f} of this text's largest)", quote=True)
        words.append(
            f'{space}<span title="{hover}" style="background:{word_colour(scaled)};color:{colour};'
            f'padding:1px 3px;border-radius:3px">{html.escape(_shown(token))}</span>'
        )
    cut = "" if read == len(tokens) else f" The model reads the first {read} tokens; struck-through words were not read."
    heading = f'<div style="font-size:14px;color:#555;margin-bottom:4px">{html.escape(title + cut)}</div>' if title or cut else ""
    return (
        f'<div class="rl-highlighted">{heading}'
        f'<div style="line-height:1.9;font-size:16px;overflow-wrap:anywhere">{"".join(words)}</div>'
        f"{_legend(kind, largest, signed)}</div>"
    )


def explanation_texts(explanation: Explanation) -> list[str]:
    """The question's highlighted words (where the model weighs them) and the answer's."""
    kind = explanation.weight_kind
    shown = []
    if explanation.question_weights is not None:
        shown.append(highlighted_text(explanation.question_tokens, explanation.question_weights, kind,
                                      title=f"Question, {kind} per word"))
    shown.append(highlighted_text(explanation.answer_tokens, explanation.answer_weights, kind,
                                  read=explanation.answer_tokens_read, title=f"Answer, {kind} per word"))
    return shown


# ---------------------------------------------------------------------------------------------
# REL links as arcs

FONT_FAMILY = "DejaVu Sans"
FONT_PX = 14
LABEL_PX = 12
WORD_GAP_PX = 10
MARGIN_PX = 8
BAND_PX = 96  # height the arcs cross between the question's line and the answer's
FIT_PX = 760  # the widest figure (the column at 1280 px is 820): a wider line keeps only linked words in context, then wraps
ROW_GAP_PX = 14  # between the rows of a wrapped figure
LINKS_SHOWN = 10  # more links than this: each question span's strongest link, then the strongest others
LEXICAL_COLOUR = "#1f77b4"
FOCUS_COLOURS = {"HUM": "#d62728", "LOC": "#2ca02c", "NUM": "#ff7f0e", "ENTY": "#9467bd", "DESC": "#8c564b",
                 "ABBR": "#e377c2"}


@functools.cache
def _font():
    """DejaVu Sans from matplotlib's own data (the same file everywhere), for text widths."""
    import matplotlib
    from matplotlib import ft2font

    return ft2font.FT2Font(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"))


_FONT_LOCK = threading.Lock()  # one FreeType face, set then read: the server's sessions run in threads


@functools.lru_cache(maxsize=20_000)
def text_width(text: str, size: int = FONT_PX) -> float:
    """The width in CSS px of ``text`` in DejaVu Sans at ``size`` px."""
    with _FONT_LOCK:
        font = _font()
        font.set_size(size, 72)  # 72 dpi: one point is one px
        font.set_text(text, 0.0)
        return font.get_width_height()[0] / 64


def link_kind_name(kind: str) -> str:
    """Legend name of a link kind: lexical REL or REL-FOCUS-<class>."""
    return "REL (shared lemma)" if kind == "REL" else f"{kind} (focus → entity)"


def link_colour(kind: str) -> str:
    if kind.startswith("REL-FOCUS-"):
        return FOCUS_COLOURS.get(kind.removeprefix("REL-FOCUS-"), "#7f7f7f")
    return LEXICAL_COLOUR


def _span(start: int, end: int) -> range:
    return range(start, max(end, start + 1))


def link_strength(link: Link, answer_weights: Sequence[float]) -> float:
    """How much the model weighs the linked answer words: their largest absolute weight."""
    return max((abs(float(answer_weights[i])) for i in _span(link.a_start, link.a_end) if i < len(answer_weights)),
               default=0.0)


def strongest_links(links: Sequence[Link], answer_weights: Sequence[float], limit: int = LINKS_SHOWN) -> list[Link]:
    """At most ``limit`` links: first the strongest link of every question span (focus links before
    lexical ones at equal strength), then the strongest of the rest; in their original order."""
    ranked = sorted(range(len(links)),
                    key=lambda i: (-link_strength(links[i], answer_weights), links[i].kind == "REL", i))
    chosen: list[int] = []
    seen_spans: set[tuple[int, int]] = set()
    for i in ranked:
        span = (links[i].q_start, links[i].q_end)
        if span not in seen_spans and len(chosen) < limit:
            seen_spans.add(span)
            chosen.append(i)
    for i in ranked:
        if len(chosen) >= limit:
            break
        if i not in chosen:
            chosen.append(i)
    return [links[i] for i in sorted(chosen)]


@dataclass(frozen=True)
class _Word:
    text: str  # as drawn (escaped later)
    hover: str
    x: float  # left edge
    width: float
    owner: int | None  # token index; None for a "…(n)" marker


def _layout(tokens: Sequence[str], linked: set[int], left: float, budget: float) -> list[_Word]:
    """The words of one line, left to right from ``left``. A line wider than ``budget`` keeps its
    linked words with the most neighbours (2, 1 or 0 each side) that still fit, every other run
    shown as "…(n)"."""
    shown = [_shown(token) for token in tokens]
    words = _place(tokens, shown, set(range(len(tokens))), left)
    for context in (2, 1, 0) if linked and _right(words, left) - left > budget else ():
        keep = {j for i in linked for j in range(i - context, i + context + 1) if 0 <= j < len(tokens)}
        words = _place(tokens, shown, keep, left)
        if _right(words, left) - left <= budget:
            break
    return words


def _rows(words: Sequence[_Word], left: float, budget: float) -> list[list[_Word]]:
    """``words`` (one line from ``left``) cut into rows no wider than ``budget``, each from ``left``."""
    rows: list[list[_Word]] = []
    start = left
    for word in words:
        if not rows or (rows[-1] and word.x + word.width - start > budget):
            rows.append([])
            start = word.x
        rows[-1].append(replace(word, x=left + word.x - start))
    return rows or [[]]


def _right(words: Sequence[_Word], left: float) -> float:
    return words[-1].x + words[-1].width if words else left


def _place(tokens: Sequence[str], shown: Sequence[str], keep: set[int], left: float) -> list[_Word]:
    """The kept tokens one gap apart from ``left``, each run of the others as one "…(n)" marker."""
    words: list[_Word] = []
    x, hidden = left, 0
    for i, token in enumerate([*tokens, None]):
        if token is not None and i not in keep:
            hidden += 1
            continue
        if hidden:
            marker = f"…({hidden})"
            words.append(_Word(marker, f"{hidden} words without links", x, text_width(marker), None))
            x += words[-1].width + WORD_GAP_PX
            hidden = 0
        if token is not None:
            words.append(_Word(shown[i], token, x, text_width(shown[i]), i))
            x += words[-1].width + WORD_GAP_PX
    return words


def _centre(words: Sequence[_Word], start: int, end: int) -> float:
    inside = [w.x + w.width / 2 for w in words if w.owner is not None and w.owner in _span(start, end)]
    return sum(inside) / len(inside) if inside else 0.0


def _escaped_line(text: str) -> str:
    """``text`` escaped, on one line: the arcs go through markdown (``st.html`` drops SVG), where a
    blank line inside a token (a whitespace token) would end the HTML block."""
    return html.escape(" ".join(text.split()))


def _text(word: _Word, y: float, colour: str = "#262730", size: int = FONT_PX) -> str:
    return (
        f'<text x="{word.x:.1f}" y="{y:.1f}" font-size="{size}" textLength="{word.width:.1f}" '
        f'lengthAdjust="spacingAndGlyphs" fill="{colour}"><title>{_escaped_line(word.hover)}</title>'
        f"{html.escape(word.text)}</text>"
    )


def arcs_html(question_tokens: Sequence[str], answer_tokens: Sequence[str], links: Sequence[Link],
              answer_weights: Sequence[float] = (), show_all: bool = False) -> str:
    """Question words on the upper line, answer words on the lower, one curve per REL link between
    the linked spans, one colour per link kind (legend under it), the words and kind on hover. More
    than ``LINKS_SHOWN`` links show only ``strongest_links`` unless ``show_all``. An answer line
    wider than the figure (``FIT_PX``), even with only its linked words in context, wraps onto rows,
    the question's line over each, every link drawn in the row of its first answer word."""
    drawn = list(links) if show_all or len(links) <= LINKS_SHOWN else strongest_links(links, answer_weights)
    labels = [_Word(name, name, MARGIN_PX, text_width(name, LABEL_PX), None) for name in ("question", "answer")]
    left = MARGIN_PX + max(label.width for label in labels) + 2 * WORD_GAP_PX
    budget = FIT_PX - left - MARGIN_PX  # the words' width on one line
    q_words = _layout(question_tokens, {i for link in drawn for i in _span(link.q_start, link.q_end)}, left, budget)
    rows = _rows(_layout(answer_tokens, {i for link in drawn for i in _span(link.a_start, link.a_end)}, left, budget),
                 left, budget)
    q_baseline = FONT_PX + 6
    top, bottom = q_baseline + 6, q_baseline + 6 + BAND_PX
    a_baseline = bottom + FONT_PX + 2
    row_height = a_baseline + 8
    height = len(rows) * row_height + (len(rows) - 1) * ROW_GAP_PX
    width = max([MARGIN_PX + left, *(w.x + w.width + MARGIN_PX for w in [*q_words, *(w for row in rows for w in row)])])
    parts = []
    for number, a_words in enumerate(rows):
        y = number * (row_height + ROW_GAP_PX)
        parts += [_text(labels[0], y + q_baseline, "#808495", LABEL_PX), _text(labels[1], y + a_baseline, "#808495", LABEL_PX)]
        parts += [_text(word, y + q_baseline) for word in q_words] + [_text(word, y + a_baseline) for word in a_words]
        owners = {word.owner for word in a_words}
        middle = y + (top + bottom) / 2
        for link in (link for link in drawn if link.a_start in owners):
            x_from, x_to = _centre(q_words, link.q_start, link.q_end), _centre(a_words, link.a_start, link.a_end)
            words = f"{' '.join(question_tokens[link.q_start:link.q_end])} → {' '.join(answer_tokens[link.a_start:link.a_end])}"
            hover = _escaped_line(f"{words} · {link.kind}" + (f" · {link.label}" if link.label else ""))
            parts.append(
                f'<path d="M{x_from:.1f},{y + top} C{x_from:.1f},{middle:.1f} {x_to:.1f},{middle:.1f} {x_to:.1f},{y + bottom}" '
                f'fill="none" stroke="{link_colour(link.kind)}" stroke-width="2" stroke-opacity="0.85">'
                f"<title>{hover}</title></path>"
            )
    svg = (  # as wide as its words, narrower only in a column narrower than that
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" style="max-width:100%;height:auto" '
        f'font-family="{FONT_FAMILY}, Verdana, sans-serif" font-size="{FONT_PX}" role="img">{"".join(parts)}</svg>'
    )
    kinds = sorted({link.kind for link in links}, key=lambda kind: (kind != "REL", kind))
    legend = "".join(
        f'<span style="display:inline-flex;align-items:center;gap:4px;margin-right:14px">'
        f'<span style="display:inline-block;width:18px;height:3px;background:{link_colour(kind)}"></span>'
        f"{html.escape(link_kind_name(kind))}</span>" for kind in kinds
    )
    count = (f"{len(links)} REL links between question and answer words" if links
             else "No REL links for this pair")
    if len(drawn) < len(links):
        count += f"; the {len(drawn)} strongest shown (each question word's strongest first)"
    return (
        f'<div class="rl-arcs" style="margin-bottom:1rem"><div style="font-size:14px;color:#555;margin-bottom:4px">{html.escape(count)}</div>'
        f"<div>{svg}</div>"
        f'<div style="font-size:13px;color:#555;margin-top:4px">{legend}</div></div>'
    )
