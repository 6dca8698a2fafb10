"""Shallow trees, REL tagging (real spaCy pipeline) and the STK/PTK tree kernels.

Kernel values are computed by hand in the comments, and cross-checked against a brute-force
implementation written straight from the definitions (thesis eqs. 2.13-2.16).
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from qa_core.structure.kernels import gram_matrix, ptk, stk, tree_kernel
from qa_core.structure.rel import heuristic_focus_and_class, rel_tag
from qa_core.structure.trees import Tree, build_shallow_tree

T_AB = Tree.from_bracket("(S (A a) (B b))")
T_BA = Tree.from_bracket("(S (B b) (A a))")
T_ACB = Tree.from_bracket("(S (A a) (C c) (B b))")

# ---------------------------------------------------------------------------------------------
# Trees


def test_bracket_round_trip_and_compact_form():
    text = "(S (NP (DT the) (NN cat)) (VP (VBZ sleep)) (O (. .)))"
    tree = Tree.from_bracket(text)
    assert tree.to_bracket() == text
    assert Tree.from_bracket("(S(NP(DT the)(NN cat))(VP(VBZ sleep))(O(. .)))") == tree
    assert tree.children[0].production() == "NP -> DT NN"
    assert tree.children[0].children[0].is_preterminal
    assert tree.leaves() == ["the", "cat", "sleep", "."]
    assert tree.size() == 12  # S + 3 chunks + 4 POS nodes + 4 leaves


def test_indented_form_puts_a_constituent_on_each_line_and_parses_back():
    tree = Tree.from_bracket("(S (NP (DT the) (NN cat)) (VP (VBZ sleep)) (O (. .)))")
    assert tree.to_indented().splitlines() == [
        "(S",
        "  (NP",
        "    (DT the)",
        "    (NN cat))",
        "  (VP",
        "    (VBZ sleep))",
        "  (O",
        "    (. .)))",
    ]
    assert Tree.from_bracket(tree.to_indented()) == tree


def test_bracket_escapes_brackets_in_labels():
    tree = Tree("S", (Tree("O", (Tree("-LRB-", (Tree("("),)),)),))
    assert tree.to_bracket() == "(S (O (-LRB- -LRB-)))"
    assert Tree.from_bracket(tree.to_bracket()).leaves() == ["("]


@pytest.mark.parametrize("text", ["", "(S (A a)", "(S (A a)))", "(S (A a)) extra", "((A a))", "a b"])
def test_bad_bracket_text_is_rejected(text):
    with pytest.raises(ValueError):
        Tree.from_bracket(text)


def test_relabel_shares_untouched_branches():
    tree = Tree.from_bracket("(S (NP (NN cat)) (VP (VBZ sleep)))")
    tagged = tree.relabel({(0,): "REL-NP", (0, 0): "REL-NN"})
    assert tagged.to_bracket() == "(S (REL-NP (REL-NN cat)) (VP (VBZ sleep)))"
    assert tagged.children[1] is tree.children[1]
    assert tree.to_bracket() == "(S (NP (NN cat)) (VP (VBZ sleep)))"  # immutable


# ---------------------------------------------------------------------------------------------
# Kernels: hand-computed values


def test_stk_hand_computed_self_kernel():
    # Nodes S, A, B (leaves have no production, Delta = 0).
    # lambda = 1: Delta(A,A) = Delta(B,B) = 1 (pre-terminals);
    #   Delta(S,S) = (1 + Delta(A,A)) (1 + Delta(B,B)) = 2 * 2 = 4;  K = 4 + 1 + 1 = 6
    #   (the 6 fragments: A->a, B->b, S->A B, and S with A and/or B expanded).
    assert stk(T_AB, T_AB, lam=1.0) == pytest.approx(6.0)
    # lambda = 0.4: Delta(A,A) = Delta(B,B) = 0.4; Delta(S,S) = 0.4 * 1.4 * 1.4 = 0.784;
    #   K = 0.784 + 0.4 + 0.4 = 1.584
    assert stk(T_AB, T_AB, lam=0.4) == pytest.approx(1.584)


def test_ptk_hand_computed_self_kernel():
    # lambda = mu = 1: leaves Delta(a,a) = Delta(b,b) = mu lambda^2 = 1;
    #   Delta(A,A) = mu (lambda^2 + lambda^2 Delta(a,a)) = 1 + 1 = 2 (fragments A, A->a); same for B;
    #   Delta(S,S) = 1 + [ (A):(A) 2 + (B):(B) 2 + (A,B):(A,B) 2*2 ] = 9; K = 9 + 2 + 2 + 1 + 1 = 15
    assert ptk(T_AB, T_AB, lam=1.0, mu=1.0) == pytest.approx(15.0)
    # lambda = mu = 0.4: leaves 0.4 * 0.16 = 0.064; Delta(A,A) = 0.4 (0.16 + 0.16 * 0.064) = 0.068096;
    #   Delta(S,S) = 0.4 (0.16 + 0.16 * 0.068096 * 2 + 0.4^(2+2) * 0.068096^2)
    #              = 0.4 (0.16 + 0.02179072 + 0.000118709...) = 0.07276377...
    #   K = 0.07276377 + 2 * 0.068096 + 2 * 0.064 = 0.33695577...
    delta_a = 0.4 * (0.16 + 0.16 * 0.064)
    delta_s = 0.4 * (0.16 + 2 * 0.16 * delta_a + 0.4**4 * delta_a**2)
    assert delta_a == pytest.approx(0.068096)
    assert ptk(T_AB, T_AB) == pytest.approx(delta_s + 2 * delta_a + 2 * 0.064)
    assert ptk(T_AB, T_AB) == pytest.approx(0.3369557715, abs=1e-9)


def test_ptk_child_order_matters():
    # lambda = mu = 1, (S A B) vs (S B A): the subsequence (A, B) no longer matches,
    # Delta(S,S) = 1 + 2 + 2 = 5; K = 5 + 2 + 2 + 1 + 1 = 11 (15 in the same order).
    assert ptk(T_AB, T_BA, lam=1.0, mu=1.0) == pytest.approx(11.0)


def test_ptk_gap_is_decayed_and_stk_needs_whole_productions():
    # lambda = 0.5, mu = 1, (S A C B) vs (S A B): leaves 0.25; Delta(A,A) = Delta(B,B) = 0.25 * 1.25
    # = 0.3125. Delta(S,S) = lambda^2 + lambda^(1+1) (0.3125 + 0.3125)
    #   + lambda^(3+2) 0.3125^2  [(A, B) spans 3 children in the first tree, 2 in the second]
    #   = 0.25 + 0.15625 + 0.0030517578125 = 0.4093017578125; K = 0.4093017578125 + 0.625 + 0.5
    assert ptk(T_ACB, T_AB, lam=0.5, mu=1.0) == pytest.approx(1.5343017578125)
    assert ptk(T_AB, T_ACB, lam=0.5, mu=1.0) == pytest.approx(1.5343017578125)
    # STK: S -> A C B differs from S -> A B, so only Delta(A,A) + Delta(B,B) = 2 lambda = 1.0.
    assert stk(T_ACB, T_AB, lam=0.5) == pytest.approx(1.0)


def test_normalisation_by_hand():
    # lambda = mu = 1: K(AB, BA) = 11 and K(AB, AB) = K(BA, BA) = 15 (above), so 11 / sqrt(15 * 15).
    assert tree_kernel(T_AB, T_BA, kind="ptk", lam=1.0, mu=1.0) == pytest.approx(11 / 15)
    assert tree_kernel(T_ACB, T_ACB) == pytest.approx(1.0)
    assert tree_kernel(T_AB, T_BA, normalize=False) == pytest.approx(ptk(T_AB, T_BA))


def test_decays_shift_weight_between_small_and_large_fragments():
    # A larger lambda weighs large fragments (which only a tree shares with itself) more, so the
    # normalised similarity of two different trees falls as lambda grows; mu does the same with depth.
    lambdas = (0.1, 0.4, 0.7, 1.0)
    ptk_sims = [tree_kernel(T_AB, T_ACB, kind="ptk", lam=lam, mu=1.0) for lam in lambdas]
    stk_sims = [tree_kernel(T_AB, T_ACB, kind="stk", lam=lam) for lam in lambdas]
    assert ptk_sims == sorted(ptk_sims, reverse=True) and ptk_sims[0] > ptk_sims[-1] + 0.1
    assert stk_sims == sorted(stk_sims, reverse=True) and stk_sims[0] > stk_sims[-1] + 0.1
    deep_x, deep_y = Tree.from_bracket("(S (A (X x)) (B b))"), Tree.from_bracket("(S (A (Y y)) (B b))")
    mu_sims = [tree_kernel(deep_x, deep_y, kind="ptk", lam=0.4, mu=mu) for mu in (0.1, 0.4, 0.7, 1.0)]
    assert mu_sims == sorted(mu_sims, reverse=True) and mu_sims[0] > mu_sims[-1]


def test_nothing_in_common_gives_zero():
    other = Tree.from_bracket("(X (Y y) (Z z))")
    assert stk(T_AB, other) == 0.0
    assert ptk(T_AB, other) == 0.0
    assert tree_kernel(T_AB, other, kind="ptk") == 0.0
    assert tree_kernel(T_AB, Tree("a"), kind="stk") == 0.0  # a lone leaf has no production: K(x,x) = 0


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError):
        tree_kernel(T_AB, T_AB, kind="sst")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ptk(T_AB, T_AB, lam=0.0)


# Brute force from the definitions, for small random trees.


def _brute_stk(x: Tree, y: Tree, lam: float) -> float:
    def delta(n1: Tree, n2: Tree) -> float:
        if n1.is_leaf or n2.is_leaf or n1.production() != n2.production():
            return 0.0
        return lam * math.prod(1 + delta(c1, c2) for c1, c2 in zip(n1.children, n2.children))

    return sum(delta(n1, n2) for n1 in x.nodes() for n2 in y.nodes())


def _brute_ptk(x: Tree, y: Tree, lam: float, mu: float) -> float:
    def delta(n1: Tree, n2: Tree) -> float:
        if n1.label != n2.label:
            return 0.0
        total = lam**2
        for length in range(1, min(len(n1.children), len(n2.children)) + 1):
            for i1 in itertools.combinations(range(len(n1.children)), length):
                for i2 in itertools.combinations(range(len(n2.children)), length):
                    span = (i1[-1] - i1[0] + 1) + (i2[-1] - i2[0] + 1)
                    product = math.prod(delta(n1.children[h], n2.children[k]) for h, k in zip(i1, i2))
                    total += lam**span * product
        return mu * total

    return sum(delta(n1, n2) for n1 in x.nodes() for n2 in y.nodes())


def _random_tree(rng: random.Random, depth: int) -> Tree:
    if depth == 0 or rng.random() < 0.25:
        return Tree(rng.choice("ab"))
    children = tuple(_random_tree(rng, depth - 1) for _ in range(rng.randint(1, 4)))
    return Tree(rng.choice("XYZ"), children)


def test_kernels_match_brute_force_on_random_trees():
    rng = random.Random(7)
    trees = [_random_tree(rng, 3) for _ in range(12)]
    for x, y in itertools.combinations(trees, 2):
        assert ptk(x, y, lam=0.4, mu=0.4) == pytest.approx(_brute_ptk(x, y, 0.4, 0.4), rel=1e-9, abs=1e-12)
        assert ptk(x, y, lam=0.7, mu=0.9) == pytest.approx(_brute_ptk(x, y, 0.7, 0.9), rel=1e-9, abs=1e-12)
        assert stk(x, y, lam=0.4) == pytest.approx(_brute_stk(x, y, 0.4), rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Real spaCy parses

WICCA_Q = "What do practitioners of Wicca worship ?"  # TrecQA TEST.xml (not in DEV), first block
WICCA_A = "An estimated 50,000 Americans practice Wicca , a form of polytheistic nature worship ."
TWAIN_Q = "Who wrote Tom Sawyer ?"
TWAIN_A = "Mark Twain wrote Tom Sawyer in 1876 ."
EXTRA = [
    "Where is the Eiffel Tower ?",
    "The Eiffel Tower is in Paris , the capital of France .",
    "How many people live in Paris ?",
    "What year did the Berlin Wall fall ?",
    "Which city hosted the 1992 Summer Olympics ?",
    "Barcelona hosted the Summer Olympics in 1992 , and the games did not lose money .",
]


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RERANK_LAB_DATA", str(tmp_path_factory.mktemp("data")))
        from qa_core.text.nlp import parse_many

        texts = [WICCA_Q, WICCA_A, TWAIN_Q, TWAIN_A, *EXTRA]
        return dict(zip(texts, parse_many(texts), strict=True))


def _rel_labels(tree: Tree) -> list[str]:
    return [node.label for node in tree.nodes() if node.label.startswith("REL-")]


def test_shallow_tree_chunks_and_token_map(parsed):
    shallow = build_shallow_tree(parsed[TWAIN_A])
    # "1876" is outside spaCy's noun chunks: a NUM run becomes its own NP.
    assert shallow.tree.to_bracket() == (
        "(S (NP (NNP mark) (NNP twain)) (VP (VBD write)) (NP (NNP tom) (NNP sawyer)) "
        "(PP (IN in)) (NP (CD 1876)) (O (. .)))"
    )
    tom = shallow.token_nodes[3]
    assert tom is not None and (tom.chunk, tom.pos) == ((2,), (2, 0))
    assert shallow.tree.node(tom.pos).children[0].label == "tom"
    negated = build_shallow_tree(parsed[EXTRA[5]]).tree
    assert "(VP (VBD do) (RB not) (VB lose))" in negated.to_bracket()
    for text in parsed:
        assert Tree.from_bracket(build_shallow_tree(parsed[text]).tree.to_bracket()) == build_shallow_tree(
            parsed[text]
        ).tree


def test_rel_tags_the_wicca_pair(parsed):
    tagged = rel_tag(parsed[WICCA_Q], parsed[WICCA_A])  # no focus/class given: lexical REL only
    # Shared content lemmas: "wicca" (NNP in both) and "worship" (spaCy: NN in both sentences).
    assert [(link.q_start, link.a_start, link.kind, link.label) for link in tagged.links] == [
        (4, 5, "REL", "wicca"),
        (5, 12, "REL", "worship"),
    ]
    assert tagged.question.to_bracket() == (
        "(S (NP (WP what)) (VP (VBP do)) (NP (NNS practitioner)) (PP (IN of)) "
        "(REL-NP (REL-NNP wicca) (REL-NN worship)) (O (. ?)))"
    )
    assert tagged.answer.to_bracket() == (
        "(S (NP (DT an) (JJ estimated) (CD 50,000) (NNPS americans)) (VP (VBP practice)) "
        "(REL-NP (REL-NNP wicca)) (O (, ,)) (NP (DT a) (NN form)) (PP (IN of)) "
        "(REL-NP (JJ polytheistic) (NN nature) (REL-NN worship)) (O (. .)))"
    )
    for tree in (tagged.question, tagged.answer):
        assert not any(leaf.startswith("REL-") for leaf in tree.leaves())
        # Stopwords ("what", "do", "of") stay untagged even though both sentences have "of".
        assert "(PP (IN of))" in tree.to_bracket()


def test_focus_link_to_the_person_named_in_the_answer(parsed):
    q, a = parsed[TWAIN_Q], parsed[TWAIN_A]
    assert heuristic_focus_and_class(q) == (0, "HUM")
    # The small spaCy model tags both "Mark Twain" and "Tom Sawyer" as PERSON, so both answer NPs are
    # linked to the focus chunk ("Who"); the focus tag replaces the lexical REL-NP on "Tom Sawyer".
    assert (0, 2, "PERSON") in a.ents and (3, 5, "PERSON") in a.ents
    tagged = rel_tag(q, a, *heuristic_focus_and_class(q))
    assert tagged.question.to_bracket() == (
        "(S (REL-FOCUS-HUM (WP who)) (REL-VP (REL-VBD write)) (REL-NP (REL-NNP tom) (REL-NNP sawyer)) (O (. ?)))"
    )
    assert tagged.answer.to_bracket() == (
        "(S (REL-FOCUS-HUM (NNP mark) (NNP twain)) (REL-VP (REL-VBD write)) "
        "(REL-FOCUS-HUM (REL-NNP tom) (REL-NNP sawyer)) (PP (IN in)) (NP (CD 1876)) (O (. .)))"
    )
    focus_links = [link for link in tagged.links if link.kind == "REL-FOCUS-HUM"]
    assert [(link.q_start, link.q_end, link.a_start, link.a_end, link.label) for link in focus_links] == [
        (0, 1, 0, 2, "PERSON"),
        (0, 1, 3, 5, "PERSON"),
    ]
    # An explicit class that no answer entity fits gives no focus link.
    assert not [link for link in rel_tag(q, a, focus=0, qclass="LOC").links if link.kind.startswith("REL-FOCUS")]


def test_heuristic_focus_and_class(parsed):
    where, how_many, what_year, which_city = (parsed[EXTRA[i]] for i in (0, 2, 3, 4))
    assert heuristic_focus_and_class(where) == (0, "LOC")
    assert heuristic_focus_and_class(how_many) == (2, "NUM")  # focus "people"
    assert heuristic_focus_and_class(what_year) == (1, "NUM")  # focus "year"
    assert heuristic_focus_and_class(which_city) == (1, "LOC")  # focus "city"
    assert heuristic_focus_and_class(parsed[WICCA_Q]) == (2, "ENTY")  # focus "practitioners"


def test_kernels_on_shallow_trees_and_gram_matrix(parsed):
    trees = [rel_tag(parsed[WICCA_Q], parsed[text], 2, "ENTY").answer for text in parsed]
    trees += [build_shallow_tree(parsed[text]).tree for text in parsed]
    for kind in ("ptk", "stk"):
        gram = gram_matrix(trees, kind=kind, n_jobs=1)
        assert np.allclose(gram, gram.T)
        assert np.allclose(np.diag(gram), 1.0)
        assert gram.min() >= 0.0 and gram.max() <= 1.0 + 1e-12
        x, y = trees[1], trees[3]
        assert gram[1, 3] == pytest.approx(tree_kernel(x, y, kind=kind))
        assert tree_kernel(x, y, kind=kind) == pytest.approx(tree_kernel(y, x, kind=kind))
        raw = gram_matrix(trees[:3], trees[3:], kind=kind, normalize=False, n_jobs=1)
        assert raw[2, 0] == pytest.approx(ptk(trees[2], trees[3]) if kind == "ptk" else stk(trees[2], trees[3]))
    # Two threads fill the same matrices as one.
    assert np.allclose(gram_matrix(trees, n_jobs=2), gram_matrix(trees, n_jobs=1))
    assert np.allclose(gram_matrix(trees[:5], trees[5:], n_jobs=2), gram_matrix(trees, n_jobs=1)[:5, 5:])
