"""The tree-kernel reranker, the links API, similarity features and attention pruning (real spaCy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qa_core import config
from qa_core.data.demo import load_demo
from qa_core.rankers import registry
from qa_core.rankers.base import Explanation
from qa_core.rankers.tree_kernel import FEATURE_NAMES, TreeKernelConfig, TreeKernelRanker
from qa_core.services.experiments import evaluate_ranker, train_ranker
from qa_core.structure.pruning import explain_weights, prune_pair, prune_tree, scaled, token_weights
from qa_core.structure.rel import analyze, rel_tag
from qa_core.structure.trees import Tree
from qa_core.text.features import IdfTable
from qa_core.text.links import Link, lexical_links
from qa_core.text.nlp import parse_many
from qa_core.text.similarity import SIMILARITY_NAMES, lcs_length, similarity_features
from qa_core.types import InputError, NotTrainedError

TWAIN_Q = "Who wrote Tom Sawyer?"
TWAIN_A = "Mark Twain wrote Tom Sawyer in 1876."

# ---------------------------------------------------------------------------------------- ranker


@pytest.fixture(scope="module")
def demo_outcome(tmp_path_factory):
    """The reranker trained through the one training path (experiments.train_ranker)."""
    return train_ranker("tree_kernel", load_demo(), progress=False, checkpoint=tmp_path_factory.mktemp("tk") / "m.pt")


def test_tree_kernel_beats_word_overlap_on_the_demo_corpus(demo_outcome):
    demo = load_demo()
    overlap = registry.create("overlap")
    overlap.fit(demo.split("train"), demo.split("dev"))
    baseline = evaluate_ranker(overlap, demo.split("test")).aggregate["map"]
    ours = evaluate_ranker(demo_outcome.ranker, demo.split("test")).aggregate["map"]
    assert ours > baseline + 0.1  # measured on the 195-question demo: 0.78 vs 0.60
    report = demo_outcome.report
    assert report["best_dev_map"] == max(point["dev_map"] for point in report["grid"])
    assert report["analyzer"] == "heuristic"  # "auto" with no classifiers registered in the (empty) store
    assert len(report["grid"]) == 6 * 4  # C x feature weight, one (lambda, mu)


def test_checkpoint_round_trip_gives_the_same_scores(demo_outcome):
    question = load_demo().split("test")[0]
    loaded = registry.load(demo_outcome.checkpoint)
    assert isinstance(loaded, TreeKernelRanker)
    np.testing.assert_allclose(
        loaded.score(question.text, question.candidates), demo_outcome.ranker.score(question.text, question.candidates)
    )
    pools = [(q.text, q.candidates) for q in load_demo().split("test")[:3]]
    batched = demo_outcome.ranker.score_pools(pools)
    for (text, candidates), scores in zip(pools, batched, strict=True):
        np.testing.assert_allclose(scores, demo_outcome.ranker.score(text, candidates))


def test_explain_gives_links_tagged_trees_and_linked_tokens(demo_outcome):
    explanation = demo_outcome.ranker.explain(TWAIN_Q, [TWAIN_A], 0)
    assert explanation.weight_kind == "rel"
    assert explanation.score == pytest.approx(demo_outcome.ranker.score(TWAIN_Q, [TWAIN_A])[0])
    # Mark(0) Twain(1) wrote(2) Tom(3) Sawyer(4) in(5) 1876(6) .(7): "wrote", "Tom", "Sawyer" share
    # a lemma with the question, and the focus link ("Who" -> PERSON) covers both person names.
    assert explanation.answer_weights == [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert explanation.question_weights == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert explanation.trees["answer"].startswith("(S (REL-FOCUS-HUM (NNP mark) (NNP twain)) (REL-VP (REL-VBD write))")
    assert Link(1, 2, 2, 3, "REL", "write") in explanation.links


def test_untrained_ranker_refuses_to_score():
    ranker = registry.create("tree_kernel")
    assert ranker.capabilities.trainable
    with pytest.raises(NotTrainedError):
        ranker.score(TWAIN_Q, [TWAIN_A])
    with pytest.raises(InputError, match="trees, features or both"):
        TreeKernelRanker(TreeKernelConfig(use_trees=False, use_features=False)).fit(
            load_demo().split("train"), load_demo().split("dev"), progress=False
        )


def test_features_only_variant_trains_without_trees():
    demo = load_demo()
    ranker = TreeKernelRanker(TreeKernelConfig(use_trees=False, cs=(1.0,), feature_weights=(1.0,)))
    report = ranker.fit(demo.split("train"), demo.split("dev"), progress=False)
    assert len(report["grid"]) == 1
    assert ranker.score(TWAIN_Q, [TWAIN_A, "Paris is in France."]).shape == (2,)


# ----------------------------------------------------------------------------------------- links


def test_rel_tagging_spans_trees_and_injected_analysis():
    q, a = parse_many([TWAIN_Q, TWAIN_A])
    assert list(a.tokens) == ["Mark", "Twain", "wrote", "Tom", "Sawyer", "in", "1876", "."]
    assert analyze(q) == (0, "HUM")  # the wh-word rules by default
    result = rel_tag(q, a, *analyze(q))
    spans = {(link.q_start, link.q_end, link.a_start, link.a_end, link.kind) for link in result.links}
    assert spans == {
        (1, 2, 2, 3, "REL"), (2, 3, 3, 4, "REL"), (3, 4, 4, 5, "REL"),
        (0, 1, 0, 2, "REL-FOCUS-HUM"), (0, 1, 3, 5, "REL-FOCUS-HUM"),
    }  # fmt: skip
    tree = result.question.to_bracket()
    assert tree == Tree.from_bracket(tree).to_bracket()
    # The focus/class source is a parameter: a learned analyzer plugs in the same way.
    located = rel_tag(q, a, *analyze(q, lambda parsed: (3, "LOC")))
    assert [link.kind for link in located.links] == ["REL"] * 3  # no LOC entity in the answer
    assert [link.kind for link in rel_tag(q, a, *analyze(q, lambda parsed: (None, None))).links] == ["REL"] * 3
    lexical_only = rel_tag(q, a)
    assert "FOCUS" not in lexical_only.question.to_bracket() + lexical_only.answer.to_bracket()


def test_one_lexical_rule_for_baselines_and_trees():
    q, a = parse_many([TWAIN_Q, TWAIN_A])
    assert rel_tag(q, a).links == lexical_links(q, a)
    assert registry.create("overlap").explain(TWAIN_Q, [TWAIN_A], 0).links == lexical_links(q, a)


TRECQA = config.shared_data_dir()


@pytest.mark.skipif(
    TRECQA is None or not (TRECQA / "trecqa" / "TEST.xml").exists(),
    reason="TrecQA is not in ../shared/data (the hand-written Wicca pair in test_structure.py always runs)",
)
def test_rel_tags_of_the_wicca_question_read_from_trecqa():
    from qa_core.data.importers import load_trecqa

    assert TRECQA is not None
    dataset = load_trecqa(Path(TRECQA) / "trecqa" / "TEST.xml")
    question = next(q for q in dataset.questions if "Wicca" in q.text)
    answer = next(c for c in question.candidates if c.label == 1 and c.text.startswith("An estimated 50,000"))
    q, a = parse_many([question.text, answer.text])
    tagged = rel_tag(q, a)
    assert [link.label for link in tagged.links] == ["wicca", "worship"]
    assert "(REL-NP (REL-NNP wicca) (REL-NN worship))" in tagged.question.to_bracket()
    assert "(REL-NP (JJ polytheistic) (NN nature) (REL-NN worship))" in tagged.answer.to_bracket()


# ----------------------------------------------------------------------------- similarity features


def test_similarity_features_of_a_known_pair():
    q, a = parse_many([TWAIN_Q, TWAIN_A])
    features = dict(zip(SIMILARITY_NAMES, similarity_features(q, a, IdfTable()), strict=True))
    # Content lemmas: Q = write tom sawyer; A = mark twain write tom sawyer 1876.
    assert features["containment_1"] == pytest.approx(1.0)
    assert features["jaccard_1"] == pytest.approx(3 / 6)
    assert features["jaccard_2"] == pytest.approx(2 / 5)  # {write tom, tom sawyer} of 5 bigrams
    assert features["lcs"] == pytest.approx(1.0) and features["longest_substring"] == pytest.approx(1.0)
    assert all(0.0 <= value <= 1.0 for value in features.values())
    assert len(FEATURE_NAMES) == len(SIMILARITY_NAMES) + 2
    unrelated = similarity_features(q, parse_many(["Paris is lovely in spring."])[0], IdfTable())
    assert unrelated[SIMILARITY_NAMES.index("jaccard_1")] == 0.0


def test_lcs_length():
    assert lcs_length("abcbdab", "bdcaba") == 4
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["a", "b"], ["b", "a"]) == 1


# ---------------------------------------------------------------------------------------- pruning

TAGGED = Tree.from_bracket("(S (NP (DT the) (NN cat)) (REL-VP (REL-VBZ sleep)) (NP (NN mat)) (O (. .)))")


def test_pruning_follows_algorithm_1():
    # Leaves: the, cat, sleep, mat, . with weights below.
    weights = [0.1, 0.9, 0.0, 0.2, 0.05]
    assert prune_tree(TAGGED, weights, 0.0) == TAGGED  # h = 0 keeps everything
    pruned = prune_tree(TAGGED, weights, 0.5)
    # "sleep" stays though its weight is 0 (its POS node is REL); NP over "mat" and O go childless.
    assert pruned.to_bracket() == "(S (NP (NN cat)) (REL-VP (REL-VBZ sleep)))"
    assert prune_tree(TAGGED, [0.0] * 5, 1.0).to_bracket() == "(S (REL-VP (REL-VBZ sleep)))"
    bare = Tree.from_bracket("(S (NP (NN cat)))")
    assert prune_tree(bare, [0.0], 0.5) == Tree("S")  # the root always stays
    with pytest.raises(ValueError):
        prune_tree(TAGGED, [1.0], 0.5)


def test_pruning_a_pair_with_weights_from_an_explanation():
    def saliency(question: str, candidate: str) -> Explanation:
        """A stand-in explainer: weight 2 on 'Twain', 1 elsewhere in the answer, no question weights."""
        q, a = parse_many([question, candidate])
        return Explanation(0.0, list(q.tokens), list(a.tokens), [2.0 if t == "Twain" else 1.0 for t in a.tokens])

    assert scaled([2.0, -1.0, 0.0]) == [1.0, 0.5, 0.0] and scaled([0.0]) == [0.0]
    q, a = parse_many([TWAIN_Q, TWAIN_A])
    weights = explain_weights(saliency)(TWAIN_Q, TWAIN_A)
    assert token_weights(a, weights[1]) == [0.5, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    pruned = prune_pair(rel_tag(q, a), q, a, weights, threshold=0.75)
    # Question weights are missing (all 1): nothing pruned there. In the answer only "Twain" and
    # the REL-tagged words (write, Tom, Sawyer) survive.
    assert pruned.question == rel_tag(q, a).question
    assert pruned.answer.to_bracket() == (
        "(S (NP (NNP twain)) (REL-VP (REL-VBD write)) (REL-NP (REL-NNP tom) (REL-NNP sawyer)))"
    )
