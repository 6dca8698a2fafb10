"""How far to trust a heatmap: the faithfulness of a ranker's explanations, measured as ERASER does
(DeYoung et al., ACL 2020), for rankers.

For a (question, candidate) pair, rank the answer's words by the explanation's ``answer_weights``
(highest first; equal weights in a seeded random order, so a tie never favours the start of the
answer) and take the top k% of them (at least one word):

- comprehensiveness = score(answer) - score(answer without the top-k words): how much the score
  needed them (higher is better);
- sufficiency = score(answer) - score(only the top-k words): how much is lost when the model sees
  nothing else (lower is better).

Each is compared with the same deletion of k% random words (the mean over ``RANDOM_DRAWS`` seeded
draws): a heatmap that reflects what the model used beats random. A deletion is a counterfactual
edit and goes through ``Ranker.score_edits``, the path the app's edits take (inside the pool for a
pool-dependent model such as BM25). Words are the answer's non-whitespace spaCy tokens, and an
edited answer is its kept words joined by single spaces.

Scores live on each model's own scale (a probability, a BM25 sum, an SVM margin), so summaries
also give the drops as a share of the model's score range over the evaluated pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from qa_core.explain import explainers
from qa_core.rankers.base import CandidateInput, Explanation, Ranker, as_candidates, candidate_at
from qa_core.text.edits import only, without, words
from qa_core.text.nlp import parse
from qa_core.types import Question

FRACTIONS = (0.1, 0.2, 0.5)
RANDOM_DRAWS = 5
SEED = 1


def top_words(weights: Sequence[float], positions: Sequence[int], fraction: float, rng: np.random.Generator) -> list[int]:
    """The ``fraction`` of ``positions`` with the highest weight (at least one); ties in random order."""
    count = max(1, math.ceil(fraction * len(positions)))
    shuffled = rng.permutation(len(positions))
    order = sorted(shuffled, key=lambda i: -float(weights[positions[i]]))  # stable: ties stay shuffled
    return sorted(positions[i] for i in order[:count])


@dataclass(frozen=True)
class Deletion:
    """One deletion of an answer's words: the answer without them, and only them."""

    without: str
    only: str


def deletion_edits(
    tokens: Sequence[str], weights: Sequence[float], fractions: Sequence[float], draws: int, seed: int
) -> dict[float, tuple[Deletion, list[Deletion]]]:
    """Per fraction: the deletion of the top words by ``weights`` and ``draws`` deletions of as many
    random words (one seeded generator, drawn in this order)."""
    positions = words(tokens)
    rng = np.random.default_rng(seed)
    edits = {}
    for fraction in fractions:
        top = top_words(weights, positions, fraction, rng)
        randoms = []
        for _ in range(draws):
            chosen = sorted(rng.choice(positions, size=len(top), replace=False).tolist()) if positions else []
            randoms.append(Deletion(without(tokens, chosen), only(tokens, chosen)))
        edits[fraction] = (Deletion(without(tokens, top), only(tokens, top)), randoms)
    return edits


@dataclass(frozen=True)
class PairDeletions:
    """One pair's scores under each deletion: per fraction, the top-k edit and the random draws."""

    score: float
    comprehensiveness: dict[float, float]
    sufficiency: dict[float, float]
    random_comprehensiveness: dict[float, float]  # mean over the random draws
    random_sufficiency: dict[float, float]


def _checked_tokens(candidates: Sequence[CandidateInput], index: int, explanation: Explanation) -> list[str]:
    if parse(candidate_at(candidates, index).text).tokens != tuple(explanation.answer_tokens):
        raise ValueError("the explanation's answer tokens are not the candidate's")
    return list(explanation.answer_tokens)


def pair_deletions(
    ranker: Ranker,
    question: str,
    candidates: Sequence[CandidateInput],
    index: int,
    explanation: Explanation | None = None,
    *,
    score: float | None = None,
    fractions: Sequence[float] = FRACTIONS,
    draws: int = RANDOM_DRAWS,
    seed: int = SEED,
) -> PairDeletions:
    """Comprehensiveness and sufficiency of candidate ``index``'s explanation, and of random words.

    ``explanation`` and ``score`` default to the ranker's own (a page passes the ones it shows)."""
    explanation = explanation or ranker.explain(question, candidates, index)
    score = explanation.score if score is None else score
    tokens = _checked_tokens(candidates, index, explanation)
    planned = deletion_edits(tokens, explanation.answer_weights, fractions, draws, seed)
    edits = [text for top, randoms in planned.values() for d in (top, *randoms) for text in (d.without, d.only)]
    edited = iter(ranker.score_edits(question, candidates, index, edits).tolist())
    out: dict[str, dict[float, float]] = {name: {} for name in ("comp", "suff", "random_comp", "random_suff")}
    for fraction in fractions:
        out["comp"][fraction], out["suff"][fraction] = score - next(edited), score - next(edited)
        randoms = [(score - next(edited), score - next(edited)) for _ in range(draws)]
        out["random_comp"][fraction] = float(np.mean([c for c, _ in randoms]))
        out["random_suff"][fraction] = float(np.mean([s for _, s in randoms]))
    return PairDeletions(score, out["comp"], out["suff"], out["random_comp"], out["random_suff"])


@dataclass(frozen=True)
class GapDeletions:
    """Why A is above B, tested: the gap score(A) - score(B), and per fraction how much deleting A's
    top-k words by its attribution narrows it (``narrowing``), against k random words of A."""

    gap: float
    narrowing: dict[float, float]
    random_narrowing: dict[float, float]  # mean over the random draws


def gap_deletions(
    ranker: Ranker,
    question: str,
    candidates: Sequence[CandidateInput],
    above: int,
    below: int,
    explanation: Explanation,
    *,
    fractions: Sequence[float] = FRACTIONS,
    draws: int = RANDOM_DRAWS,
    seed: int = SEED,
) -> GapDeletions:
    """The contrastive deletion test of candidate ``above`` over ``below``, by ``explanation`` of
    ``above`` (its words' attribution to score(A) is their attribution to score(A) - score(B): they
    are not in B). The deletions are the single-candidate test's (same seed, same draws). Each edited
    gap is scored in one ``score_pools`` call: for a pool-dependent model (BM25's pool IDF, a fusion's
    normalisation) in the whole edited pool, so B's score moves with A's edit as it would on the page;
    for any other, A and B alone (their scores do not depend on the rest of the pool)."""
    tokens = _checked_tokens(candidates, above, explanation)
    records = as_candidates(candidates)
    planned = deletion_edits(tokens, explanation.answer_weights, fractions, draws, seed)
    texts = [records[above].text, *(d.without for top, randoms in planned.values() for d in (top, *randoms))]
    pool = records if ranker.capabilities.pool_dependent else [records[above], records[below]]
    a, b = (above, below) if ranker.capabilities.pool_dependent else (0, 1)
    pools = [(question, [replace(r, text=text) if i == a else r for i, r in enumerate(pool)]) for text in texts]
    gaps = iter(float(scores[a] - scores[b]) for scores in ranker.score_pools(pools))
    gap = next(gaps)
    narrowing, random_narrowing = {}, {}
    for fraction in fractions:
        narrowing[fraction] = gap - next(gaps)
        random_narrowing[fraction] = float(np.mean([gap - next(gaps) for _ in range(draws)]))
    return GapDeletions(gap, narrowing, random_narrowing)


def faithfulness_table(
    ranker: Ranker,
    questions: Sequence[Question],
    *,
    fractions: Sequence[float] = FRACTIONS,
    draws: int = RANDOM_DRAWS,
    seed: int = SEED,
    explainer: str = explainers.MODEL,
) -> pd.DataFrame:
    """One row per (question, candidate) pair with a non-empty answer: its score and, per fraction
    k, ``comp@k``, ``suff@k``, ``random_comp@k`` and ``random_suff@k``, of the weights of
    ``explainer`` (``qa_core.explain.explainers``; the model's own by default)."""
    rows = []
    for question in questions:
        for index, candidate in enumerate(question.candidates):
            if not words(parse(candidate.text).tokens):
                continue
            explanation = explainers.explain(ranker, question.text, question.candidates, index, explainer)
            deletions = pair_deletions(
                ranker, question.text, question.candidates, index, explanation,
                fractions=fractions, draws=draws, seed=seed,
            )
            row = {"qid": question.qid, "doc_id": candidate.doc_id, "score": deletions.score}
            for k in fractions:
                row[f"comp@{k:g}"] = deletions.comprehensiveness[k]
                row[f"suff@{k:g}"] = deletions.sufficiency[k]
                row[f"random_comp@{k:g}"] = deletions.random_comprehensiveness[k]
                row[f"random_suff@{k:g}"] = deletions.random_sufficiency[k]
            rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class FaithfulnessSummary:
    """Means over pairs at one fraction, raw and as a share of the score range, with the paired
    randomisation test of the explanation against random words (two-sided p)."""

    fraction: float
    pairs: int
    score_range: float
    comprehensiveness: float
    random_comprehensiveness: float
    comprehensiveness_p: float | None
    sufficiency: float
    random_sufficiency: float
    sufficiency_p: float | None

    def share(self, value: float) -> float:
        """A drop as a share of the score range (0 when every pair scored the same)."""
        return value / self.score_range if self.score_range > 0 else 0.0

    @property
    def beats_random(self) -> bool:
        """More comprehensive AND more sufficient than random words, each at p < 0.01."""
        comp = self.comprehensiveness_p is not None and self.comprehensiveness_p < 0.01
        suff = self.sufficiency_p is not None and self.sufficiency_p < 0.01
        better = self.comprehensiveness > self.random_comprehensiveness and self.sufficiency < self.random_sufficiency
        return comp and suff and better


def summarise(table: pd.DataFrame, fractions: Sequence[float] = FRACTIONS) -> list[FaithfulnessSummary]:
    """Per fraction: the means and the paired randomisation tests (``qa_core.significance``)."""
    from qa_core.significance import randomisation_test

    score_range = float(table["score"].max() - table["score"].min()) if len(table) else 0.0
    summaries = []
    for k in fractions:
        comp, random_comp = table[f"comp@{k:g}"], table[f"random_comp@{k:g}"]
        suff, random_suff = table[f"suff@{k:g}"], table[f"random_suff@{k:g}"]
        summaries.append(
            FaithfulnessSummary(
                fraction=k,
                pairs=len(table),
                score_range=score_range,
                comprehensiveness=float(comp.mean()),
                random_comprehensiveness=float(random_comp.mean()),
                comprehensiveness_p=randomisation_test(comp, random_comp).p_value,
                sufficiency=float(suff.mean()),
                random_sufficiency=float(random_suff.mean()),
                sufficiency_p=randomisation_test(suff, random_suff).p_value,
            )
        )
    return summaries


@dataclass(frozen=True)
class GapSummary:
    """The contrastive test over pairs at one fraction: the mean gap, the mean narrowing by the
    explanation's top words and by random words, and the paired randomisation test (two-sided p)."""

    fraction: float
    pairs: int
    gap: float
    narrowing: float
    random_narrowing: float
    p: float | None

    @property
    def beats_random(self) -> bool:
        """Narrows the gap more than random words at p < 0.01."""
        return self.p is not None and self.p < 0.01 and self.narrowing > self.random_narrowing


def summarise_gaps(gaps: Sequence[GapDeletions], fractions: Sequence[float] = FRACTIONS) -> list[GapSummary]:
    """Per fraction, over the pairs' ``gap_deletions``: the means and the paired randomisation test."""
    from qa_core.significance import randomisation_test

    summaries = []
    for k in fractions:
        narrowing, random_narrowing = [g.narrowing[k] for g in gaps], [g.random_narrowing[k] for g in gaps]
        summaries.append(GapSummary(
            fraction=k,
            pairs=len(gaps),
            gap=float(np.mean([g.gap for g in gaps])) if gaps else 0.0,
            narrowing=float(np.mean(narrowing)) if gaps else 0.0,
            random_narrowing=float(np.mean(random_narrowing)) if gaps else 0.0,
            p=randomisation_test(narrowing, random_narrowing).p_value,
        ))
    return summaries
