"""Made-up explanations and comparisons of any length, and a page drawing every figure type through
the pages' own functions (``tests/fixtures/figures_app.py``; the layout test and the unit tests)."""

from __future__ import annotations

import itertools

import pandas as pd

from qa_core.rankers.base import Explanation
from qa_core.text.links import Link

FIGURE_LENGTHS = (5, 20, 60, 150)
QUESTION = ["who", "discovered", "penicillin", "<b>first</b>", "?"]
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
    return Explanation(0.5, QUESTION, tokens, weights, "saliency", question_weights=[0.2, 0.9, 0.7, -0.3, 0.0],
                       matrices=matrices if matrix else {}, links=links,
                       answer_tokens_read=words - 10 if words > 100 else None)


def figure_gallery(lengths) -> None:
    """Every figure type, as the pages draw them: explanations alone (Ask) and in tabs of two and
    three models (Compare), then the comparison charts and tables."""
    import streamlit as st

    from pages import show_arcs, show_explanation

    for words in lengths:
        st.subheader(f"An answer of {words} words")
        show_explanation(explanation(words), f"single-{words}")
        show_arcs(explanation(words), f"single-{words}")
    for models in (2, 3):
        st.subheader(f"{models} models")
        for tab, model in zip(st.tabs([f"model {m}" for m in range(models)]), range(models)):
            with tab:
                show_explanation(explanation(20 * (model + 1)), f"tabs-{models}-{model}")
                show_arcs(explanation(20 * (model + 1)), f"tabs-{models}-{model}")


def per_question_table(questions: int = 60) -> pd.DataFrame:
    return pd.DataFrame({"q": range(questions)})
