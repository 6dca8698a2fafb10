"""Plotly figures built from explanations and links: geometry, legend, escaping (no browser)."""

from __future__ import annotations

import pandas as pd

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
