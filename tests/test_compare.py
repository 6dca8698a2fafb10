"""qa_core.services.compare on hand-computed examples: fixed-score rankers, so every AP is known by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from qa_core import significance
from qa_core.rankers.base import Ranker
from qa_core.services import compare, text_views
from qa_core.types import Candidate, InputError, Question

SCRIPT = "<script>alert(1)</script>"


class Fixed(Ranker):
    """Scores each candidate from a table by doc id: the rankings below are chosen by hand."""

    name = "fixed"

    def __init__(self, scores: dict[str, float]):
        super().__init__()
        self.scores = scores

    def score_pools(self, pools):
        return [np.array([self.scores[c.doc_id] for c in candidates], dtype=float) for _, candidates in pools]

    def explain(self, question, candidates, index):
        raise NotImplementedError


def question(qid: str, relevant: set[str], docs: str) -> Question:
    return Question(qid, f"question {qid}", [Candidate(d, f"text {d}", label=int(d in relevant)) for d in docs], split="test")


QUESTIONS = [
    question("q1", {"a"}, "abc"),
    question("q2", {"e"}, "def"),
    question("q3", {"g", "h"}, "ghi"),
    question("q4", {"j"}, "jkl"),
]
# AP by hand: q1 A=1 (a first), B=1/2 (a second); q2 A=1/2, B=1; q3 both 1 (g, h first);
# q4 A=1/3 (j third), B=1/2 (j second). Top-1: q1 a|b, q2 d|e, q3 g|g, q4 k|k.
REFERENCE = Fixed(dict(a=3, b=2, c=1, d=3, e=2, f=1, g=3, h=2, i=1, k=3, l=2, j=1))
OTHER = Fixed(dict(b=3, a=2, c=1, e=3, d=2, f=1, g=3, h=2, i=1, k=3, j=2, l=1))


@pytest.fixture(scope="module")
def split() -> compare.SplitComparison:
    return compare.compare_split({"ref": REFERENCE, "other": OTHER}, QUESTIONS, metric="map")


def test_per_question_values_and_deltas_match_hand_computed_ap(split):
    table = split.per_question
    assert list(table.index) == ["q1", "q2", "q3", "q4"]
    assert table["ref"].tolist() == pytest.approx([1.0, 0.5, 1.0, 1 / 3])
    assert table["other"].tolist() == pytest.approx([0.5, 1.0, 1.0, 0.5])
    assert table["Δ other"].tolist() == pytest.approx([-0.5, 0.5, 0.0, 1 / 6])
    assert table["same top-1"].tolist() == [False, False, True, True]
    assert table.loc["q1", "top-1 ref"] == "text a" and table.loc["q1", "top-1 other"] == "text b"
    assert split.means.loc["ref", "map"] == pytest.approx((1 + 0.5 + 1 + 1 / 3) / 4)


def test_win_tie_loss_and_mean_delta(split):
    (summary,) = split.summaries
    assert (summary.reference, summary.model, summary.questions) == ("ref", "other", 4)
    assert (summary.wins, summary.ties, summary.losses) == (2, 1, 1)
    assert summary.mean_delta == pytest.approx(1 / 24)
    row = compare.summary_table(split).iloc[0]
    assert (row["wins"], row["ties"], row["losses"]) == (2, 1, 1)


def test_win_tie_loss_counts_near_zero_as_tie():
    assert compare.win_tie_loss([0.2, 1e-12, -1e-12, 0.0, -0.3, 0.1]) == (2, 3, 1)
    assert compare.win_tie_loss([]) == (0, 0, 0)


def test_paired_tests_are_the_t_test_and_the_randomisation_test(split):
    # The Wilcoxon test is gone (issue 17): IR compares systems with the randomisation test.
    t_test, randomisation = split.summaries[0].tests
    expected_t = stats.ttest_rel(split.per_question["other"], split.per_question["ref"])
    assert t_test.name == "paired t-test" and t_test.p_value == pytest.approx(expected_t.pvalue)
    assert 0.0 < t_test.p_value <= 1.0  # one loss and two wins: far from significant
    assert t_test.p_value > 0.5
    # Randomisation, exact: deltas -1/2, +1/2, +1/6 (q3 ties); every one of the 2^3 sign flips has
    # |sum| >= 1/6, so p = 1. Two models: one pair, so Holm changes nothing.
    assert randomisation.name == "randomisation" and randomisation.p_value == pytest.approx(1.0)
    assert randomisation.holm_p == randomisation.p_value and t_test.holm_p == t_test.p_value
    assert split.summaries[0].mdd > abs(split.summaries[0].mean_delta)
    assert split.significance.ci_low.at["ref", "map"] <= split.means.loc["ref", "map"]

    eight_wins = ([0.9, 0.8, 0.95, 0.7, 0.85, 0.9, 0.8, 0.99], [0.1, 0.2, 0.15, 0.3, 0.1, 0.2, 0.25, 0.1])
    assert significance.t_test(*eight_wins).p_value < 0.01
    assert significance.randomisation_test(*eight_wins).p_value == pytest.approx(2 / 256)  # exact

    tied = significance.t_test([0.5, 1.0], [0.5, 1.0])
    assert tied.p_value is None and tied.note == "every question ties"
    assert significance.randomisation_test([0.5, 1.0], [0.5, 1.0]).p_value == 1.0
    single = [significance.t_test([1.0], [0.5]), significance.randomisation_test([1.0], [0.5])]
    assert all(test.p_value is None and "two or more" in test.note for test in single)
    constant = significance.t_test([1.0, 0.5, 0.7], [0.5, 0.0, 0.2])  # every difference +0.5
    assert constant.p_value is None and "variance" in constant.note


def test_disagreement_filter(split):
    assert list(compare.disagreements(split, threshold=1.0).index) == ["q1", "q2"]  # different top-1
    assert list(compare.disagreements(split, threshold=0.2, different_top1=False).index) == ["q1", "q2"]
    assert list(compare.disagreements(split, threshold=0.1, different_top1=False).index) == ["q1", "q2", "q4"]
    assert compare.disagreements(split, threshold=0.5, different_top1=False).empty


def test_three_models_compare_against_the_first():
    result = compare.compare_split({"ref": REFERENCE, "other": OTHER, "same": REFERENCE}, QUESTIONS, metric="p@1")
    assert [s.model for s in result.summaries] == ["other", "same"]
    assert result.per_question["Δ same"].tolist() == [0.0] * 4
    assert result.summaries[1].tests[0].note == "every question ties"
    assert result.per_question["Δ other"].tolist() == pytest.approx([-1.0, 1.0, 0.0, 0.0])


def test_bad_input_is_an_input_error():
    with pytest.raises(InputError, match="2 or 3"):
        compare.compare_split({"ref": REFERENCE}, QUESTIONS)
    with pytest.raises(InputError, match="2 or 3"):
        compare.check_models(["a", "b", "c", "d"])
    with pytest.raises(InputError, match="metric"):
        compare.compare_split({"ref": REFERENCE, "other": OTHER}, QUESTIONS, metric="bleu")
    unlabelled = [Question("q9", "q", [Candidate("a", "t")])]
    with pytest.raises(InputError, match=r"has labels \(under the label rule chosen\)"):
        compare.compare_split({"ref": REFERENCE, "other": OTHER}, unlabelled)
    with pytest.raises(InputError, match="empty"):
        compare.compare_question({"ref": REFERENCE, "other": OTHER}, "  ", QUESTIONS[0].candidates)


def test_one_question_side_by_side_and_bump_chart():
    pool = [Candidate("a", f"{SCRIPT} a", label=1), Candidate("b", "text b", label=0), Candidate("c", "text c", label=0)]
    result = compare.compare_question({"ref": REFERENCE, "other": OTHER}, "which one", pool)
    assert result.ranks.loc[["a", "b", "c"], "ref"].tolist() == [1, 2, 3]
    assert result.ranks.loc[["a", "b", "c"], "other"].tolist() == [2, 1, 3]
    lists = compare.aligned_lists(result, top=2)
    assert lists["rank"].tolist() == [1, 2]
    assert lists["ref"].tolist() == [f"✓ {SCRIPT} a", "text b"]
    assert lists["other"].tolist() == ["text b", f"✓ {SCRIPT} a"]

    # Lines for the reference's top 1 (a) and every right answer (a and c), not for b, which only
    # the other model puts first; each named at its right end, right answers green with stars.
    right = compare.compare_question({"ref": REFERENCE, "other": OTHER}, "which one",
                                     [*pool[:2], Candidate("c", "text c", label=1)])
    figure = compare.bump_figure(right, top=1)
    by_name = {trace.name: list(trace.customdata) for trace in figure.data}  # the ranks; y is their row
    assert by_name == {"✓ &lt;script&gt;alert(1)&lt;/script&gt; a": [1, 2], "✓ text c": [3, 3]}
    assert list(figure.layout.yaxis.ticktext) == ["1", "2", "3"] and [list(t.y) for t in figure.data] == [[0, 1], [2, 2]]
    assert [(a.text, a.x, a.y) for a in figure.layout.annotations] == [
        (name, "other", list(trace.y)[-1]) for name, trace in zip(by_name, figure.data)]
    assert {trace.marker.symbol for trace in figure.data} == {"star"} and not figure.layout.showlegend
    assert all("<script>" not in trace.name and "<script>" not in trace.hovertext for trace in figure.data)
    assert figure.layout.yaxis.autorange == "reversed"
    wrong_only = {trace.name for trace in compare.bump_figure(result, top=2).data}
    assert wrong_only == {"✓ &lt;script&gt;alert(1)&lt;/script&gt; a", "text b"}


def test_the_bump_chart_has_a_row_per_rank_shown_and_room_for_its_labels():
    """Ten lines at ranks 1-10 and a right answer at 77 (issue 45: a 2,000 px chart with the ten
    bunched at its top, a third of the column used): 11 rows, a dotted line over the ranks left out,
    the models across the plot and a right margin as wide as the longest label."""
    import pandas as pd

    texts = [f"candidate {i} " + "long words " * i for i in range(80)]
    ranks = pd.DataFrame({"text": texts, "gold_label": pd.array([int(i == 76) for i in range(80)], dtype="Int64"),
                          "ref": range(1, 81), "other": range(1, 81)}, index=[f"d{i}" for i in range(80)])
    figure = compare.bump_figure(compare.QuestionComparison("q", ["ref", "other"], {}, {}, ranks))
    assert list(figure.layout.yaxis.ticktext) == [*map(str, range(1, 11)), "77"]
    assert figure.layout.height == compare.ROW_PX * 11 + 170 < 500
    assert [shape.y0 for shape in figure.layout.shapes] == [9.5]  # ranks 11-76 left out, between rows 10 and 77
    assert list(figure.layout.xaxis.range) == [-0.15, 1.1]  # the last model at the plot's right edge
    longest = text_views.text_width("✓ " + texts[76][: compare.LABEL_CHARS - 1] + "…", compare.LABEL_PX)
    assert longest < figure.layout.margin.r <= longest + 40


def test_a_tie_caption_gives_a_range_only_where_the_ties_change_a_metric():
    from qa_core.evaluation import METRICS, TieReport

    same = dict.fromkeys(METRICS, 0.7558)
    unchanged = TieReport(4, 100, 2, 10, same, same, same).describe()
    assert "worst..best" not in unchanged and unchanged.endswith(
        "No order of the tied candidates changes a metric: MAP 0.7558, MRR 0.7558, P@1 0.7558, nDCG@10 0.7558.")
    mixed = TieReport(4, 100, 2, 10, {**same, "map": 0.75}, {**same, "map": 0.7}, {**same, "map": 0.8}).describe()
    assert mixed.endswith("Over all orders of the tied candidates (expected, worst..best): MAP 0.7500 (0.7000..0.8000); "
                          "they do not change MRR 0.7558, P@1 0.7558, nDCG@10 0.7558.")


# ---------------------------------------------------------------------- runs, seed groups, charts


def test_compare_runs_matches_compare_split_and_scores_missing_questions_zero(split):
    runs = split.runs
    again = compare.compare_runs(runs, QUESTIONS, metric="map")
    assert again.per_question.equals(split.per_question)
    partial = {"ref": runs["ref"], "other": {qid: docs for qid, docs in runs["other"].items() if qid != "q1"}}
    result = compare.compare_runs(partial, QUESTIONS, metric="map")
    assert result.per_question.loc["q1", "other"] == 0.0  # trec_eval -c
    assert result.per_question.loc["q1", "top-1 other"] == "" and not result.per_question.loc["q1", "same top-1"]


def test_seed_groups_average_per_question_before_comparing(split):
    ref, other = split.runs["ref"], split.runs["other"]
    result = compare.compare_seed_runs({"ref": [ref, ref], "other": [ref, other]}, QUESTIONS, metric="map")
    # other's seeds: one as ref, one as other -> per question the mean of both APs.
    expected = (split.per_question["ref"] + split.per_question["other"]) / 2
    assert result.per_question["other"].tolist() == pytest.approx(expected.tolist())
    assert "same top-1" not in result.per_question and result.runs == {}
    assert list(compare.disagreements(result, threshold=0.2).index) == ["q1", "q2"]  # no top-1 to compare
    with pytest.raises(InputError, match="no runs of other"):
        compare.compare_seed_runs({"ref": [ref], "other": []}, QUESTIONS)


def test_three_models_are_tested_pairwise_with_holm():
    result = compare.compare_split({"ref": REFERENCE, "other": OTHER, "same": REFERENCE}, QUESTIONS, metric="map")
    table = compare.summary_table(result)
    assert [(row.vs, row.model) for row in table.itertuples()] == [("ref", "other"), ("ref", "same"), ("other", "same")]
    assert (table["randomisation p (Holm)"] >= table["randomisation p"]).all()
    assert set(table["metric"]) == {"map"} and table["verdict"].str.contains("significant").all()


def test_means_and_pairs_read_as_a_paper_prints_them(split):
    means = compare.means_table(split)
    assert list(means.index) == ["ref", "other"] and list(means.columns) == ["MAP", "MRR", "P@1", "nDCG@10"]
    mean, low, high = (split.significance.means.at["ref", "map"], split.significance.ci_low.at["ref", "map"],
                       split.significance.ci_high.at["ref", "map"])
    assert means.at["ref", "MAP"] == f"{mean:.3f} [{low:.3f}, {high:.3f}]"
    pairs = compare.pairs_summary(split)
    assert list(pairs.index) == ["other vs ref"] and pairs.at["other vs ref", "W/T/L"] == "2/1/1"
    assert list(pairs.columns) == ["mean Δ", "W/T/L", "randomisation p (Holm)", "t-test p (Holm)", "MDD", "verdict"]
    one = compare.compare_split({"ref": REFERENCE, "other": OTHER}, QUESTIONS[:1], metric="map")
    assert "None" not in compare.pairs_summary(one).to_string() and compare.pairs_summary(one).at["other vs ref", "t-test p (Holm)"] == ""


def test_the_scatter_says_how_many_questions_share_a_point():
    questions = [Question(f"s{i}", "same", QUESTIONS[2].candidates, split="test") for i in range(3)] + QUESTIONS[:1]
    result = compare.compare_split({"ref": REFERENCE, "other": OTHER}, questions, metric="map")
    _, points = compare.scatter_figure(result, "other").data
    assert list(points.marker.size) == [8 + 4 * 2 ** 0.5] * 3 + [8]
    assert points.hovertext[0].endswith("(3 questions at this point)") and "questions at" not in points.hovertext[3]


def test_disagreements_keep_the_largest(split):
    assert list(compare.disagreements(split, threshold=0.1, different_top1=False, most=2).index) == ["q1", "q2"]


def test_delta_and_scatter_figures_carry_qids_sorted_and_escaped():
    questions = [*QUESTIONS[:3], Question("q4", SCRIPT, QUESTIONS[3].candidates, split="test")]
    result = compare.compare_split({"ref": REFERENCE, "other": OTHER}, questions, metric="map")
    (bars,) = compare.delta_figure(result, "other").data
    assert list(bars.y) == pytest.approx([0.5, 1 / 6, 0.0, -0.5])  # largest win first
    assert [point[0] for point in bars.customdata] == ["q2", "q4", "q3", "q1"]
    assert all("<script>" not in text for text in bars.hovertext) and any("&lt;script&gt;" in t for t in bars.hovertext)
    diagonal, points = compare.scatter_figure(result, "other").data
    assert list(points.x) == pytest.approx([1.0, 0.5, 1.0, 1 / 3]) and list(points.y) == pytest.approx([0.5, 1.0, 1.0, 0.5])
    assert [point[0] for point in points.customdata] == ["q1", "q2", "q3", "q4"]
    clicked = [{"curve_number": 0, "point_index": 1, "customdata": ["q4"]}, {"customdata": ["q4"]}, {"x": 3}]
    assert compare.selected_questions(clicked) == ["q4"]
