"""qa_core.services.compare on hand-computed examples: fixed-score rankers, so every AP is known by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from qa_core.rankers.base import Ranker
from qa_core.services import compare
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


def test_paired_tests_are_scipys_and_report_undefined_cases(split):
    t_test, wilcoxon = split.summaries[0].tests
    expected_t = stats.ttest_rel(split.per_question["other"], split.per_question["ref"])
    assert t_test.name == "paired t-test" and t_test.p_value == pytest.approx(expected_t.pvalue)
    assert wilcoxon.name == "Wilcoxon signed-rank"
    assert wilcoxon.p_value == pytest.approx(stats.wilcoxon(split.per_question["other"], split.per_question["ref"]).pvalue)
    assert 0.0 < t_test.p_value <= 1.0  # one loss and two wins: far from significant
    assert t_test.p_value > 0.5

    better = compare.paired_tests([0.9, 0.8, 0.95, 0.7, 0.85, 0.9, 0.8, 0.99], [0.1, 0.2, 0.15, 0.3, 0.1, 0.2, 0.25, 0.1])
    assert all(test.p_value < 0.01 for test in better)

    tied = compare.paired_tests([0.5, 1.0], [0.5, 1.0])
    assert all(test.p_value is None and test.note == "every question ties" for test in tied)
    single = compare.paired_tests([1.0], [0.5])
    assert all(test.p_value is None and "two or more" in test.note for test in single)
    constant = compare.paired_tests([1.0, 0.5, 0.7], [0.5, 0.0, 0.2])  # every difference +0.5
    assert constant[0].p_value is None and "variance" in constant[0].note


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
    with pytest.raises(InputError, match="gold labels"):
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

    figure = compare.bump_figure(result, top=1)  # a and b are in some model's top 1; c in none
    assert len(figure.data) == 2
    by_name = {trace.name: list(trace.y) for trace in figure.data}
    assert by_name["✓ &lt;script&gt;alert(1)&lt;/script&gt; a"] == [1, 2]
    assert by_name["text b"] == [2, 1]
    assert all("<script>" not in trace.name and "<script>" not in trace.hovertext for trace in figure.data)
    assert figure.layout.yaxis.autorange == "reversed"
