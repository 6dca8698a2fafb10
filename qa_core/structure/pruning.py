"""Attention-based tree pruning (Romeo et al. 2016, Algorithm 1), with weights from any ranker.

``PruneTree(T, h)``: a leaf whose word weight is below ``h`` is removed unless it is REL; an internal
node left without children is removed unless it is REL-tagged. Our reading of "REL" for a leaf:
the leaf of a REL-tagged POS node (the matched word itself); the paper's trees have the same tags,
and keeping the tag while dropping the word that matched would keep a link with nothing in it.
The root always stays (a kernel needs a tree).

Weights: one per spaCy token of each text, from ``Explanation.question_weights`` and
``answer_weights`` of any ranker's ``explain`` (the attention LSTM's attention, SM-CNN's gradient
saliency, ...) or any callable of the same shape. They are scaled per text by their maximum, so
one threshold ``h`` in [0, 1] means the same for a 5-word question and a 40-word answer (attention
sums to 1 over a text, so raw values shrink with length).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from qa_core.structure.rel import REL_PREFIX, RelTagged
from qa_core.structure.trees import Tree

if TYPE_CHECKING:
    from qa_core.text.nlp import Parsed

WeightSource = Callable[[str, str], tuple[Sequence[float], Sequence[float]]]
"""(question, candidate) -> (question token weights, answer token weights), one per spaCy token."""


class TokenWeights(Protocol):
    """What pruning reads of an explanation (``qa_core.rankers.base.Explanation`` has it)."""

    question_tokens: list[str]
    question_weights: list[float] | None
    answer_weights: list[float]


def explain_weights(explain: Callable[[str, str], TokenWeights]) -> WeightSource:
    """An explanation of (question, candidate), e.g. ``lambda q, a: ranker.explain(q, [a], 0)``, as a
    weight source (its question weights may be missing: then all 1, which prunes nothing in the
    question)."""

    def weights(question: str, candidate: str) -> tuple[Sequence[float], Sequence[float]]:
        explanation = explain(question, candidate)
        question_weights = explanation.question_weights
        if question_weights is None:
            question_weights = [1.0] * len(explanation.question_tokens)
        return question_weights, explanation.answer_weights

    return weights


def scaled(weights: Sequence[float]) -> list[float]:
    """Weights divided by their largest absolute value (all zeros stay zeros)."""
    top = max((abs(w) for w in weights), default=0.0)
    return [abs(w) / top if top > 0 else 0.0 for w in weights]


def token_weights(parsed: Parsed, weights: Sequence[float], max_tokens: int | None = None) -> list[float]:
    """Scaled weights in the order of the shallow tree's leaves (whitespace tokens have no leaf)."""
    if len(weights) != len(parsed.tokens):
        raise ValueError(f"{len(weights)} weights for {len(parsed.tokens)} tokens")
    limit = len(parsed.tokens) if max_tokens is None else min(max_tokens, len(parsed.tokens))
    values = scaled(weights)
    return [values[i] for i in range(limit) if parsed.pos[i] != "SPACE"]


def _is_rel(label: str) -> bool:
    return label.startswith(REL_PREFIX)


def prune_tree(tree: Tree, leaf_weights: Sequence[float], threshold: float) -> Tree:
    """Algorithm 1 on a REL-tagged tree; ``leaf_weights`` follow the leaves left to right."""
    weights: Iterator[float] = iter(leaf_weights)

    def prune(node: Tree, parent_is_rel: bool) -> Tree | None:
        if node.is_leaf:
            weight = next(weights)
            return node if weight >= threshold or parent_is_rel else None
        rel = _is_rel(node.label)
        children = tuple(kept for child in node.children if (kept := prune(child, rel)) is not None)
        if not children and not rel:
            return None
        return node if children == node.children else Tree(node.label, children)

    if len(leaf_weights) != len(tree.leaves()):
        raise ValueError(f"{len(leaf_weights)} weights for {len(tree.leaves())} leaves")
    return prune(tree, False) or Tree(tree.label)


def prune_pair(
    tagged: RelTagged,
    q: Parsed,
    a: Parsed,
    weights: tuple[Sequence[float], Sequence[float]],
    threshold: float,
    max_tokens: int | None = None,
) -> RelTagged:
    """Both trees of a tagged pair pruned with their texts' token weights."""
    question_weights, answer_weights = weights
    return RelTagged(
        question=prune_tree(tagged.question, token_weights(q, question_weights, max_tokens), threshold),
        answer=prune_tree(tagged.answer, token_weights(a, answer_weights, max_tokens), threshold),
        links=tagged.links,
        focus=tagged.focus,
        qclass=tagged.qclass,
    )
