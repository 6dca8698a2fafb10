"""Explanations drawn as highlighted text, REL arcs and matrices, and the slice chart: geometry, legend,
escaping (no browser; tests/test_e2e_figures.py reads them in Chromium)."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest

from qa_core import significance
from qa_core.rankers.base import Explanation
from qa_core.services import text_views, viz
from qa_core.text.links import Link

QUESTION = ["who", "wrote", "<b>Hamlet</b>", "?"]
ANSWER = ["Shakespeare", "wrote", "<b>Hamlet</b>", "in", "1600", "."]
LINKS = [Link(1, 2, 1, 2, "REL", "write"), Link(2, 3, 2, 3, "REL", "hamlet"), Link(0, 1, 0, 1, "REL-FOCUS-HUM", "PERSON")]


def arc_words(html_text: str) -> list[str]:
    """The words drawn in an arcs figure, in document order (question line, then answer line)."""
    return [html.unescape(word) for word in re.findall(r"</title>([^<]*)</text>", html_text)]


def test_arcs_join_the_linked_words_one_colour_per_kind():
    drawn = text_views.arcs_html(QUESTION, ANSWER, LINKS)
    assert arc_words(drawn) == ["question", "answer", *QUESTION, *ANSWER]
    paths = re.findall(r'<path d="M([\d.]+),[\d.]+ C[^"]* ([\d.]+),[\d.]+" fill="none" stroke="(#\w+)"', drawn)
    centres = [(word, float(x) + float(width) / 2) for x, width, word in
          re.findall(r'<text x="([\d.]+)" y="[\d.]+" font-size="14" textLength="([\d.]+)"[^>]*><title>[^<]*</title>([^<]*)<', drawn)]
    assert len(paths) == 3
    lexical = [p for p in paths if p[2] == text_views.LEXICAL_COLOUR]
    assert len(lexical) == 2 and {p[2] for p in paths} == {text_views.LEXICAL_COLOUR, text_views.FOCUS_COLOURS["HUM"]}
    # "wrote" -> "wrote": starts under the question word's centre, ends over the answer word's.
    question_wrote, answer_wrote = [x for word, x in centres if word == "wrote"]
    assert abs(float(lexical[0][0]) - question_wrote) < 0.1 and abs(float(lexical[0][1]) - answer_wrote) < 0.1
    assert "REL (shared lemma)" in drawn and "REL-FOCUS-HUM (focus → entity)" in drawn


def test_arc_words_are_spaced_by_their_measured_widths():
    drawn = text_views.arcs_html(QUESTION, ["internationalisation", "i", "WWWWWW", "."], [])
    boxes = [(float(x), float(w)) for x, w in re.findall(r'<text x="([\d.]+)" y="[\d.]+" font-size="14" textLength="([\d.]+)"', drawn)]
    answer = boxes[len(QUESTION):]
    assert [round(w, 1) for _, w in answer] == [round(text_views.text_width(t), 1) for t in ["internationalisation", "i", "WWWWWW", "."]]
    assert all(left + width + text_views.WORD_GAP_PX <= next_left + 0.2
               for (left, width), (next_left, _) in zip(answer, answer[1:]))  # never closer than the gap
    assert text_views.text_width("WWWWWW") > 3 * text_views.text_width("iiiiii")  # measured, not counted


def test_arcs_escape_words_and_hover_text():
    drawn = text_views.arcs_html(QUESTION, ANSWER, LINKS)
    assert "&lt;b&gt;Hamlet&lt;/b&gt;" in drawn and "<b>" not in drawn


def test_arcs_stay_one_html_block_whatever_the_tokens():
    drawn = text_views.arcs_html(["who", "\n\n", "*x*"], ["*x*", "\n\n", "_y_"], [Link(2, 3, 0, 1, "REL", "x")])
    assert "\n" not in drawn and arc_words(drawn)[2:] == ["who", "·", "*x*", "*x*", "·", "_y_"]


def test_arcs_without_links_still_show_both_sentences():
    drawn = text_views.arcs_html(QUESTION, ANSWER, [])
    assert "No REL links for this pair" in drawn and arc_words(drawn)[2:] == [*QUESTION, *ANSWER]


def test_many_links_show_each_question_words_strongest_unless_all_are_asked_for():
    answer = ["valley"] * 60 + ["river", "Danube"]
    weights = [0.1] * 60 + [0.5, 0.9]
    weights[30] = 0.8  # the strongest "valley"
    links = [Link(2, 3, a, a + 1, "REL", "valley") for a in range(60)] + [Link(1, 2, 60, 61, "REL", "river"),
                                                                          Link(0, 1, 61, 62, "REL-FOCUS-LOC", "GPE")]
    question = ["where", "river", "valley"]
    chosen = text_views.strongest_links(links, weights, limit=5)
    assert len(chosen) == 5 and {(link.q_start, link.a_start) for link in chosen} >= {(2, 30), (1, 60), (0, 61)}
    default = text_views.arcs_html(question, answer, links, weights)
    assert default.count("<path ") == text_views.LINKS_SHOWN and "62 REL links" in default and "strongest shown" in default
    assert text_views.arcs_html(question, answer, links, weights, show_all=True).count("<path ") == 62


def test_slice_bars_follow_the_table_order_with_intervals_and_the_overall_mean():
    per_question = pd.DataFrame({"class": ["HUM", "HUM", "HUM", "<i>"], "AP": [1.0, 0.5, 0.0, 0.25]})
    slices = pd.DataFrame({"question class": ["HUM", "<i>"], "questions": [3, 1], "AP": [0.5, 0.25]})
    figure = viz.slice_bar_figure(slices, "question class", per_question, "class")
    bar = figure.data[0]
    assert list(bar.x) == ["HUM", "&lt;i&gt;"] and list(bar.y) == [0.5, 0.25]
    low, high = significance.bootstrap_interval([1.0, 0.5, 0.0])
    assert bar.error_y.array[0] == pytest.approx(high - 0.5) and bar.error_y.arrayminus[0] == pytest.approx(0.5 - low)
    assert bar.error_y.array[1] == 0.0 and bar.customdata[1][1] == "no interval (one question)"  # one question
    (line,) = figure.layout.shapes
    assert line.y0 == line.y1 == pytest.approx(0.4375) and "all questions<br>0.438" in figure.layout.annotations[0].text


# ---------------------------------------------------------------------------------- long answers


LONG = [f"w{i}" for i in range(150)]


def long_explanation(read: int | None = None) -> Explanation:
    weights = [float(i % 7) for i in range(len(LONG))]
    matrix = [[float(q == a) for a in range(len(LONG))] for q in range(len(QUESTION))]
    return Explanation(0.5, QUESTION, LONG, weights, "saliency", matrices={"similarity": matrix},
                       answer_tokens_read=read)


def highlighted_words(html_text: str) -> list[tuple[str, str]]:
    """(hover, word) of every word span of a highlighted text."""
    return [(html.unescape(hover), html.unescape(word))
            for hover, word in re.findall(r'<span title="([^"]*)" style="[^"]*">([^<]*)</span>', html_text)]


def test_highlighted_text_is_the_words_with_their_values_on_hover_escaped():
    shown = text_views.highlighted_text(ANSWER, [0.5, -1.0, 0.25, 0.0, 2.0, 0.0], "saliency")
    words = highlighted_words(shown)
    assert [word for _, word in words] == ANSWER
    assert words[1][0] == "wrote: saliency -1 (-0.50 of this text's largest)"
    assert "<b>Hamlet" not in shown and "&lt;b&gt;Hamlet&lt;/b&gt;" in shown
    assert "rgba(178, 24, 43, 0.500)" in shown and "rgba(33, 102, 172, 1.000)" in shown  # red -0.5, blue +1
    assert re.search(r"−2</span>.*linear-gradient.*2</span>", shown)  # the legend's ends: the raw extremes
    assert "</span> <span" in shown and "1600</span><span" in shown  # a space between words, none before "."


def test_a_150_word_answer_marks_the_words_the_model_did_not_read():
    shown = text_views.highlighted_text(LONG, [float(i % 7) for i in range(150)], "saliency", read=100)
    words = highlighted_words(shown)
    assert [word for _, word in words] == LONG
    assert all(hover == "not read by the model" for hover, _ in words[100:])
    assert "(+1.00 of this text's largest)" in words[6][0]  # scaled over the words read
    assert "reads the first 100 tokens" in shown


def test_an_explanation_shows_the_question_only_where_the_model_weighs_it():
    assert len(text_views.explanation_texts(long_explanation())) == 1
    both = Explanation(0.5, QUESTION, ANSWER, [0.0] * 6, question_weights=[1.0, 0.0, 0.0, 0.0])
    assert [highlighted_words(text)[0][1] for text in text_views.explanation_texts(both)] == ["who", "Shakespeare"]


def test_a_150_word_answer_goes_down_the_rows_of_a_matrix():
    figure = viz.heatmap_figure(long_explanation(), "similarity")
    assert list(figure.layout.yaxis.ticktext) == LONG and len(figure.layout.xaxis.ticktext) == len(QUESTION)
    assert figure.layout.xaxis.tickangle == -90 and figure.layout.yaxis.tickfont.size >= 10
    assert figure.layout.height >= viz.CELL_PX * 150  # one readable row per answer word
    assert figure.data[0].z[2][2] == 1.0 and figure.data[0].z[2][1] == 0.0  # transposed: answer word 2 is row 2
    short = viz.heatmap_figure(Explanation(0.5, QUESTION, ANSWER, [0.0] * 6, matrices={"m": [[0.0] * 6] * 4}), "m")
    assert list(short.layout.xaxis.ticktext) == ["Shakespeare", "wrote", "&lt;b&gt;Hamlet&lt;/…", "in", "1600", "."]
    assert short.data[0].text[0][2] == "who × &lt;b&gt;Hamlet&lt;/b&gt;"  # abbreviated on the axis, whole on hover


def test_a_long_answers_arcs_keep_their_linked_words_in_context():
    links = [Link(1, 2, 75, 76, "REL", "x"), Link(2, 3, 140, 141, "REL", "y")]
    words = arc_words(text_views.arcs_html(QUESTION, LONG, links))[2 + len(QUESTION):]
    assert words == ["…(73)", *LONG[73:78], "…(60)", *LONG[138:143], "…(7)"]


def test_more_than_150_answer_words_are_grouped_in_the_matrix():
    words = [f"w{i}" for i in range(400)]
    matrix = [[float(a == 7) - float(a == 9) * 2 for a in range(400)] for _ in QUESTION]
    figure = viz.heatmap_figure(Explanation(0.5, QUESTION, words, [0.0] * 400, matrices={"m": matrix}), "m")
    heat = figure.data[0]
    assert len(heat.y) == 100 and [row[0] for row in heat.z[1:4]] == [1.0, -2.0, 0.0]  # groups of 4: largest magnitude
    assert figure.layout.yaxis.ticktext[1] == "5: w4" and "words 5–8: w4 w5 w6 w7" in heat.text[1][0]
    assert "groups of 4" in figure.layout.title.text


def test_the_version_curve_draws_one_line_per_dataset_and_rings_the_versions_in_use():
    versions = pd.DataFrame({
        "version": [4, 3, 2, 1, 0], "in use for": ["", "wikiqa", "", "demo", ""],
        "dataset": ["wikiqa", "wikiqa", "demo", "demo", "demo"], "train labels": [900, 300, 60, 40, 60],
        viz.VERSION_DEV_MAP: [0.61, 0.55, 0.8, 0.7, 0.5], "test MAP (gold)": [0.6, None, None, 0.69, 0.4],
    })
    figure = viz.version_curve_figure(versions, "<b>m</b>")
    lines = {trace.name: (list(trace.x), list(trace.y)) for trace in figure.data if trace.mode == "lines"}
    assert lines == {f"demo: {viz.VERSION_DEV_MAP}": ([40, 60], [0.7, 0.65]), "demo: test MAP (gold)": ([40, 60], [0.69, 0.4]),
                     f"wikiqa: {viz.VERSION_DEV_MAP}": ([300, 900], [0.55, 0.61]),
                     "wikiqa: test MAP (gold)": ([900], [0.6])}  # a version without the metric is left out
    points = [list(trace.customdata) for trace in figure.data if trace.mode == "markers" and trace.showlegend is False]
    assert points[0] == [1, 0, 2]  # demo's dev MAP: every version a point, two of them at 60 labels
    (in_use,) = [trace for trace in figure.data if trace.name == "in use (promoted)"]
    assert (list(in_use.x), list(in_use.y)) == ([300, 40], [0.55, 0.7])
    assert figure.layout.xaxis.type == "log" and list(figure.layout.xaxis.tickvals) == [40, 60, 300, 900]
    close = viz.version_curve_figure(versions.assign(**{"train labels": [900, 300, 50, 40, 50]}), "m")
    assert close.layout.xaxis.tickvals is None  # 40 and 50 would write their numbers over each other
    assert "&lt;b&gt;m&lt;/b&gt;" in figure.layout.title.text
    assert viz.version_curve_figure(versions.assign(**{"train labels": None}), "m") is None


def arcs_page() -> None:
    """The arcs of a 150-word answer with many links, as the pages draw them."""
    from pages.render.explanation import show_arcs
    from tests.figures import explanation

    show_arcs(explanation(150), "long")


def test_the_page_draws_the_strongest_links_until_all_are_asked_for():
    from streamlit.testing.v1 import AppTest

    from tests.figures import explanation

    links = len(explanation(150).links)
    app = AppTest.from_function(arcs_page).run()
    (drawn,) = [element.value for element in app.markdown if 'class="rl-arcs"' in element.value]
    assert links > text_views.LINKS_SHOWN and drawn.count("<path ") == text_views.LINKS_SHOWN
    app.toggle(key="long-all-links").set_value(True).run()
    (drawn,) = [element.value for element in app.markdown if 'class="rl-arcs"' in element.value]
    assert app.toggle(key="long-all-links").label == f"Show all {links} links" and drawn.count("<path ") == links
