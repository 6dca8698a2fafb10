"""Baselines every neural model must beat: BM25 over the pool, and IDF-weighted word overlap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qa_core.rankers.base import CandidateInput, Explanation, ProgressCallback, Ranker, candidate_text
from qa_core.rankers.registry import register
from qa_core.retrieval import bm25_scores
from qa_core.text.features import FEATURE_NAMES, IdfTable, overlap_features
from qa_core.text.links import lexical_links
from qa_core.text.nlp import Parsed, parse_many
from qa_core.text.vectors import normalize
from qa_core.types import Question


@register
class BM25Ranker(Ranker):
    """BM25 (bm25s, Lucene variant) with IDF statistics from the pool being ranked."""

    name = "bm25"

    def score(self, question: str, candidates: Sequence[CandidateInput]) -> np.ndarray:
        texts = [candidate_text(c) for c in candidates]
        return bm25_scores(question, texts) if texts else np.zeros(0)

    def explain(self, question: str, candidate: CandidateInput) -> Explanation:
        """Each answer token that is a question term carries that term's share of the BM25 score.

        BM25 is a sum over query terms, so the term's share is the BM25 score of the candidate for
        that term alone (IDF from this one-candidate pool, as ``score`` would compute it).
        """
        candidate = candidate_text(candidate)
        q_parsed, a_parsed = parse_many([question, candidate])
        question_terms = {token.lower() for token in q_parsed.tokens}
        share = {term: float(bm25_scores(term, [candidate])[0]) for term in question_terms}
        weights = [share.get(token.lower(), 0.0) for token in a_parsed.tokens]
        return Explanation(
            score=float(self.score(question, [candidate])[0]),
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=weights,
            weight_kind="bm25",
            links=lexical_links(q_parsed, a_parsed),
        )


OVERLAP_NONSTOP = FEATURE_NAMES.index("overlap_nonstop")
IDF_OVERLAP_NONSTOP = FEATURE_NAMES.index("idf_overlap_nonstop")


def _words(parsed: Parsed) -> list[str]:
    """Normalised words, as ``overlap_features`` looks them up in the IdfTable."""
    return [normalize(token) for token in parsed.tokens if token.strip()]


def _content_words(parsed: Parsed) -> set[str]:
    return {
        normalize(token)
        for token, stop, punct in zip(parsed.tokens, parsed.is_stop, parsed.is_punct)
        if token.strip() and not (stop or punct)
    }


@register
class WordOverlapRanker(Ranker):
    """Share of the question's non-stopword IDF mass that the answer contains.

    ``fit`` learns the IDF from train+dev candidate texts (cheap, label-free); unfitted, each pool
    is its own IDF corpus, so a word in every candidate counts for nothing.
    """

    name = "overlap"

    def __init__(self, idf: IdfTable | None = None):
        self.idf = idf

    def fit(
        self,
        train: Sequence[Question],
        dev: Sequence[Question],
        *,
        seed: int = 1,
        progress: bool = True,
        callback: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        texts = [c.text for q in [*train, *dev] for c in q.candidates]
        self.idf = IdfTable.fit(_words(parsed) for parsed in parse_many(texts))
        return {"idf_documents": self.idf.documents, "idf_words": len(self.idf.df)}

    def score(self, question: str, candidates: Sequence[CandidateInput]) -> np.ndarray:
        q_parsed, *answers = parse_many([question, *(candidate_text(c) for c in candidates)])
        idf = self.idf if self.idf is not None else IdfTable.fit(_words(parsed) for parsed in answers)
        return np.array(
            [overlap_features(q_parsed, a_parsed, idf)[IDF_OVERLAP_NONSTOP] for a_parsed in answers],
            dtype=np.float64,
        )

    def explain(self, question: str, candidate: CandidateInput) -> Explanation:
        """Each answer content word shared with the question weighs its IDF.

        Unfitted, a one-candidate pool gives every word IDF 0, so matches then weigh 1 (plain
        overlap) and the score is the plain non-stopword overlap.
        """
        q_parsed, a_parsed = parse_many([question, candidate_text(candidate)])
        shared = _content_words(q_parsed) & _content_words(a_parsed)
        features = overlap_features(q_parsed, a_parsed, self.idf if self.idf is not None else IdfTable())
        if self.idf is not None:
            weight, score, kind = self.idf.idf, features[IDF_OVERLAP_NONSTOP], "idf"
        else:
            weight, score, kind = (lambda word: 1.0), features[OVERLAP_NONSTOP], "overlap"
        words = [normalize(token) for token in a_parsed.tokens]
        return Explanation(
            score=float(score),
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=[weight(word) if word in shared else 0.0 for word in words],
            weight_kind=kind,
            links=lexical_links(q_parsed, a_parsed),
        )

    def state(self) -> dict[str, Any]:
        return {"idf": self.idf.to_dict() if self.idf is not None else None}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WordOverlapRanker:
        return cls(IdfTable.from_dict(state["idf"]) if state.get("idf") is not None else None)
