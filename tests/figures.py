"""Made-up explanations and comparisons of any length, and a page drawing every figure type through
the pages' own functions (``tests/fixtures/figures_app.py``; the layout test and the unit tests)."""

from __future__ import annotations

import itertools

import pandas as pd

from qa_core.rankers.base import Explanation
from qa_core.services import viz
from qa_core.text.links import Link

FIGURE_LENGTHS = (5, 20, 60, 150)

# An SVG figure as drawn: wider than its column (its right part behind a scroll bar, issue 45: the
# 4,999-character answer's arcs, 1,015 px in an 820 px column), or shrunk below the minimum text size
# (an SVG scaled to its column keeps its computed font size: layout_check.js cannot see that).
SVG_FITS = """(minimumPx) => [...document.querySelectorAll(".rl-arcs svg")].flatMap((svg, index) => {
  const drawn = svg.getBoundingClientRect(), column = svg.closest(".rl-arcs").getBoundingClientRect();
  if (drawn.width === 0) return [];  // an inactive tab
  const shown = parseFloat(svg.getAttribute("font-size")) * drawn.width / svg.viewBox.baseVal.width;
  return [...(drawn.right > column.right + 1 ? [`arcs ${index}: ${drawn.width} px wide in a ${column.width} px column`] : []),
          ...(shown < minimumPx ? [`arcs ${index}: words drawn at ${shown.toFixed(1)} px`] : [])];
})"""

QUESTION = ["who", "discovered", "penicillin", "first", "in", "<b>London</b>", "?"]
WORDS = ("Alexander Fleming discovered penicillin in 1928 at St Mary 's Hospital in London , after noticing "
         "that a mould called Penicillium notatum killed the <b>bacteria</b> ; its internationalisation and "
         "mass-production came with Florey and Chain https://en.wikipedia.org/wiki/Penicillin .").split()


def answer(words: int) -> list[str]:
    return list(itertools.islice(itertools.cycle(WORDS), words))


def explanation(words: int, matrix: bool = True) -> Explanation:
    """A signed-weight explanation of a ``words``-word answer: question weights, a similarity
    matrix, lexical links for every repeated lemma and a focus link to the first name."""
    tokens = answer(words)
    weights = [((i * 37) % 19 - 6) / 7 for i in range(words)]
    links = [Link(q, q + 1, a, a + 1, "REL", QUESTION[q]) for q in range(len(QUESTION)) for a in range(words)
             if tokens[a].lower() == QUESTION[q].lower()]
    links.append(Link(0, 1, 0, min(2, words), "REL-FOCUS-HUM", "PERSON"))
    matrices = {"similarity": [[((q + 1) * (a + 3) % 11) / 10 for a in range(words)] for q in range(len(QUESTION))]}
    return Explanation(0.5, QUESTION, tokens, weights, "saliency", question_weights=[0.2, 0.9, 0.7, -0.3, 0.1, 0.5, 0.0],
                       matrices=matrices if matrix else {}, links=links,
                       answer_tokens_read=words - 10 if words > 100 else None)


LONG_QUESTION = "which river flows through the long valley".split()
AT_LIMIT = ("The valley is long and the river is wide. " * 120)[:5_000].strip()  # 4,999 characters, the import limit


def at_limit_explanation() -> Explanation:
    """A 4,999-character answer (tests/test_e2e_long_texts.py's) with a link from every question
    word to each of its 120 repeats: ten linked words and their "…(n)" runs overflowed one line."""
    tokens = AT_LIMIT.replace(".", " .").split()
    links = [Link(q, q + 1, a, a + 1, "REL", word) for q, word in enumerate(LONG_QUESTION) for a, token in enumerate(tokens)
             if token.lower() == word]
    weights = [((i * 37) % 19 - 6) / 7 for i in range(len(tokens))]
    return Explanation(0.5, LONG_QUESTION, tokens, weights, "idf", links=links)


def question_comparison(models: int = 3, candidates: int = 20):
    """A pool ranked by ``models`` made-up models: long and HTML-looking texts, right answers deep."""
    from qa_core.services.compare import QuestionComparison

    names = ["bm25", "overlap", "fusion:rrf(bm25+overlap)"][:models]
    texts = [" ".join(answer(5 + (i * 7) % 30)[i % 9:]) for i in range(candidates)]
    ranks = pd.DataFrame({"text": texts, "gold_label": pd.array([int(i in (3, 17)) for i in range(candidates)], dtype="Int64")},
                         index=pd.Index([f"d{i}" for i in range(candidates)], name="doc_id"))
    for shift, name in enumerate(names):
        ranks[name] = [(i * (1, 3, 7)[shift] + shift) % candidates + 1 for i in range(candidates)]  # a permutation
    return QuestionComparison("who discovered penicillin", names, {}, {}, ranks.sort_values(names[0]))


def split_comparison(questions: int = 40):
    """Three made-up runs compared on ``questions`` questions (significance tests included)."""
    import random

    from qa_core.services import compare
    from qa_core.types import Candidate, Question

    rng = random.Random(0)
    pool = [Question(f"q{i}", f"question {i}: <b>{' '.join(answer(i % 12 + 3))}</b>",
                     [Candidate(f"d{j}", f"text {j}", label=int(j == 0)) for j in range(5)], "test")
            for i in range(questions)]
    runs = {name: {q.qid: {c.doc_id: rng.random() + boost * c.label for c in q.candidates} for q in pool}
            for name, boost in (("bm25", 0.3), ("overlap", 0.5), ("fusion:rrf(bm25+overlap)", 0.2))}
    return compare.compare_runs(runs, pool)


def error_table(questions: int = 40) -> pd.DataFrame:
    classes = ["HUM", "LOC", "NUM", "ENTY", "<DESC>"]
    return pd.DataFrame({"class": [classes[i % 5] for i in range(questions)],
                         **{metric: [((i * 13) % 10) / 10 for i in range(questions)] for metric in ("AP", "RR", "P@1", "nDCG@10")}})


def versions_table() -> pd.DataFrame:
    return pd.DataFrame({
        "version": [5, 4, 3, 2, 1], "in use for": ["", "wikiqa", "", "demo", ""],
        "dataset": ["wikiqa", "wikiqa", "trecqa", "demo", "demo"], "train labels": [900, 300, 5000, 80, 40],
        viz.VERSION_DEV_MAP: [0.61, 0.55, 0.7, 0.8, 0.7], viz.VERSION_TEST_MAP: [0.6, 0.52, 0.68, 0.78, 0.69],
    })


def figure_gallery(lengths) -> None:
    """Every figure type, as the pages draw them: explanations alone (Ask) and in tabs of two and
    three models (Compare), then the comparison charts and tables, the slices and the version curve."""
    import streamlit as st

    from pages.render.explanation import show_arcs, show_explanation
    from qa_core.services import compare, errors, viz

    for words in lengths:
        st.subheader(f"An answer of {words} words")
        show_explanation(explanation(words), f"single-{words}")
        show_arcs(explanation(words), f"single-{words}")
    st.subheader(f"An answer of {len(AT_LIMIT):,} characters")
    show_arcs(at_limit_explanation(), "at-limit")
    for models in (2, 3):
        st.subheader(f"{models} models")
        for tab, model in zip(st.tabs([f"model {m}" for m in range(models)]), range(models)):
            with tab:
                show_explanation(explanation(20 * (model + 1)), f"tabs-{models}-{model}")
                show_arcs(explanation(20 * (model + 1)), f"tabs-{models}-{model}")
        st.plotly_chart(compare.bump_figure(question_comparison(models)), key=f"bump-{models}")
    split = split_comparison()
    st.table(compare.means_table(split))
    st.table(compare.pairs_summary(split))
    left, right = st.columns(2)
    left.plotly_chart(compare.delta_figure(split, split.models[2]), key="delta")
    right.plotly_chart(compare.scatter_figure(split, split.models[2]), key="scatter")
    table = error_table()
    st.plotly_chart(viz.slice_bar_figure(errors.slice_table(table, "question class"), "question class", table, "class"),
                    key="slices")
    st.plotly_chart(viz.version_curve_figure(versions_table(), "smcnn"), key="versions")
