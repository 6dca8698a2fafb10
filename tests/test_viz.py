"""Plotly figures built from explanations and links: geometry, legend, escaping (no browser)."""

from __future__ import annotations

import pandas as pd

from qa_core.rankers.base import Explanation
from qa_core.services import viz
from qa_core.text.links import Link

QUESTION = ["who", "wrote", "<b>Hamlet</b>", "?"]
ANSWER = ["Shakespeare", "wrote", "<b>Hamlet</b>", "in", "1600", "."]
LINKS = [Link(1, 2, 1, 2, "REL", "write"), Link(2, 3, 2, 3, "REL", "hamlet"), Link(0, 1, 0, 1, "REL-FOCUS-HUM", "PERSON")]


def test_arcs_join_the_linked_words_one_trace_per_kind():
    figure = viz.arcs_figure(QUESTION, ANSWER, LINKS)
    question_words, answer_words = figure.data[0], figure.data[1]
    assert list(question_words.text) == ["who", "wrote", "&lt;b&gt;Hamlet&lt;/b&gt;", "?"]
    arcs = {trace.name: trace for trace in figure.data[2:]}
    assert list(arcs) == ["REL (shared lemma)", "REL-FOCUS-HUM (focus → entity)"]  # lexical first
    assert arcs["REL (shared lemma)"].line.color != arcs["REL-FOCUS-HUM (focus → entity)"].line.color
    lexical = arcs["REL (shared lemma)"]
    first = [i for i, x in enumerate(lexical.x) if x is None][0]
    # "wrote" -> "wrote": starts under the question word, ends above the answer word.
    assert lexical.x[0] == question_words.x[1] and lexical.x[first - 1] == answer_words.x[1]
    assert lexical.y[0] > lexical.y[first - 1]
    assert lexical.x.count(None) == 2  # two lexical links, each ended by a gap


def test_arcs_escape_words_and_hover_text():
    figure = viz.arcs_figure(QUESTION, ANSWER, LINKS)
    texts = [text for trace in figure.data for text in (trace.text or []) if text]
    assert "&lt;b&gt;Hamlet&lt;/b&gt;" in texts
    assert not any("<b>" in text for text in texts)


def test_arcs_without_links_still_show_both_sentences():
    figure = viz.arcs_figure(QUESTION, ANSWER, [])
    assert len(figure.data) == 2 and figure.layout.title.text == "No REL links for this pair"


def test_slice_bars_follow_the_table_order():
    slices = pd.DataFrame({"question class": ["HUM", "<i>"], "questions": [3, 1], "AP": [0.5, 0.25]})
    bar = viz.slice_bar_figure(slices, "question class").data[0]
    assert list(bar.x) == ["HUM", "&lt;i&gt;"] and list(bar.y) == [0.5, 0.25]


# ---------------------------------------------------------------------------------- long answers


LONG = [f"w{i}" for i in range(150)]


def long_explanation(read: int | None = None) -> Explanation:
    weights = [float(i % 7) for i in range(len(LONG))]
    matrix = [[float(q == a) for a in range(len(LONG))] for q in range(len(QUESTION))]
    return Explanation(0.5, QUESTION, LONG, weights, "saliency", matrices={"similarity": matrix},
                       answer_tokens_read=read)


def test_a_150_word_answer_wraps_its_weights_and_marks_the_cut():
    figure = viz.token_weights_figure(long_explanation(read=100))
    heat = figure.data[0]
    assert len(heat.z) == 150 // viz.WRAP_WORDS + 1 and all(len(row) == viz.WRAP_WORDS for row in heat.z)
    words = [word for row in heat.text for word in row if word]
    assert words == LONG  # every word is drawn, in order, on its own cell
    flat = [value for row in heat.z for value in row]
    assert flat[99] is not None and flat[100] is None  # grey past the 100 tokens the model read
    assert max(v for v in flat if v is not None) == 1.0  # scaled over the words read
    assert "reads the first 100 tokens" in figure.layout.title.text
    assert figure.layout.height >= viz.LINE_PX * len(heat.z)


def test_a_150_word_answer_goes_down_the_rows_of_a_matrix():
    figure = viz.heatmap_figure(long_explanation(), "similarity")
    assert list(figure.layout.yaxis.ticktext) == LONG and len(figure.layout.xaxis.ticktext) == len(QUESTION)
    assert figure.layout.height >= viz.CELL_PX * 150  # one readable row per answer word
    assert figure.data[0].z[2][2] == 1.0 and figure.data[0].z[2][1] == 0.0  # transposed: answer word 2 is row 2
    short = viz.heatmap_figure(Explanation(0.5, QUESTION, ANSWER, [0.0] * 6, matrices={"m": [[0.0] * 6] * 4}), "m")
    assert list(short.layout.xaxis.ticktext) == ["Shakespeare", "wrote", "&lt;b&gt;Hamlet&lt;/b&gt;", "in", "1600", "."]


def test_a_150_word_answer_keeps_its_linked_words_in_context_in_the_arcs():
    links = [Link(1, 2, 75, 76, "REL", "x"), Link(2, 3, 140, 141, "REL", "y")]
    figure = viz.arcs_figure(QUESTION, LONG, links)
    answer_words = list(figure.data[1].text)
    assert answer_words == ["…(73)", *LONG[73:78], "…(60)", *LONG[138:143], "…(7)"]
    lexical = figure.data[2]
    ends = [lexical.x[i - 1] for i, x in enumerate(lexical.x) if x is None]
    assert ends == [figure.data[1].x[3], figure.data[1].x[9]]  # each arc lands on its word (w75, w140)
