"""Baselines every neural model must beat: BM25 over the pool, and IDF-weighted word overlap."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from qa_core.rankers.base import (
    CandidateInput,
    Capabilities,
    Explanation,
    Pool,
    Ranker,
    candidate_at,
    candidate_texts,
)
from qa_core.retrieval import bm25_scores, bm25_scores_per_query
from qa_core.text.features import FEATURE_NAMES, IdfTable, content_words, overlap_features
from qa_core.text.links import lexical_links
from qa_core.text.nlp import Parsed, parse_many
from qa_core.text.vectors import normalize
from qa_core.training.events import ProgressCallback
from qa_core.types import Question


class BM25Ranker(Ranker):
    """BM25 (bm25s, Lucene variant) with IDF statistics from the pool being ranked."""

    name = "bm25"
    title = "BM25 (bm25s, IDF from the pool)"
    capabilities = Capabilities(pool_dependent=True, explains=frozenset({"answer_weights", "links"}))

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        return [self._pool_scores(question, candidate_texts(candidates)) for question, candidates in pools]

    @staticmethod
    def _pool_scores(question: str, texts: list[str]) -> np.ndarray:
        return bm25_scores(question, texts) if texts else np.zeros(0)

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        """Each answer token that is a question term carries its part of that term's share of the
        BM25 score, so that the words add up to the score where spaCy's words are bm25s's tokens
        (every demo candidate); a word the two split differently ("O'Brien", "5,000") carries no
        share, and the words then add up to less.

        BM25 is a sum over query terms, so a term's share is the candidate's BM25 score for that
        term alone, with the IDF of the same pool the score used, counted as often as the question
        repeats the term (bm25s sums over the query's tokens); a term the answer repeats splits its
        share equally between its occurrences (the term's score already counts them all).
        """
        texts = candidate_texts(candidates)
        candidate = candidate_at(candidates, index)
        q_parsed, a_parsed = parse_many([question, candidate.text])
        answer_words = [token.lower() for token in a_parsed.tokens]
        in_answer = Counter(answer_words)
        in_question = Counter(token.lower() for token in q_parsed.tokens)
        terms = sorted(in_question.keys() & in_answer.keys())
        score, *term_scores = bm25_scores_per_query([question, *terms], texts)
        share = {
            term: float(term_score[index]) * in_question[term] / in_answer[term]
            for term, term_score in zip(terms, term_scores)
        }
        return Explanation(
            score=float(score[index]),
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=[share.get(word, 0.0) for word in answer_words],
            weight_kind="bm25",
            links=lexical_links(q_parsed, a_parsed),
        )


IDF_OVERLAP_NONSTOP = FEATURE_NAMES.index("idf_overlap_nonstop")


def _words(parsed: Parsed) -> list[str]:
    """Normalised words, as ``overlap_features`` looks them up in the IdfTable."""
    return [normalize(token) for token in parsed.tokens if token.strip()]


class WordOverlapRanker(Ranker):
    """Share of the question's non-stopword IDF mass that the answer contains.

    ``fit`` learns the IDF from train+dev candidate texts (cheap, label-free); unfitted, each pool
    is its own IDF corpus, so a word in every candidate counts for nothing.
    """

    name = "overlap"
    title = "IDF-weighted word overlap"
    # Unfitted, the IDF is the pool's.
    capabilities = Capabilities(
        learns_statistics=True, pool_dependent=True, explains=frozenset({"answer_weights", "links"})
    )

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.idf: IdfTable | None = None

    def fit(
        self,
        train: Sequence[Question],
        dev: Sequence[Question],
        *,
        seed: int = 1,
        analyzer: Any = None,
        progress: bool = True,
        callback: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        texts = [c.text for q in [*train, *dev] for c in q.candidates]
        self.idf = IdfTable.fit(_words(parsed) for parsed in parse_many(texts))
        return {"idf_documents": self.idf.documents, "idf_words": len(self.idf.df)}

    def _parsed_pools(self, pools: Sequence[Pool]) -> list[tuple[Parsed, list[Parsed], IdfTable]]:
        """Each pool's parsed question, answers and IDF; every distinct text of all the pools goes
        through spaCy in one batch (a counterfactual edit or a faithfulness deletion is one pool per
        edited answer: parsed one by one, they cost twice as much)."""
        texts = list(dict.fromkeys(t for question, candidates in pools for t in (question, *candidate_texts(candidates))))
        parsed = dict(zip(texts, parse_many(texts)))
        out = []
        for question, candidates in pools:
            answers = [parsed[text] for text in candidate_texts(candidates)]
            idf = self.idf if self.idf is not None else IdfTable.fit(_words(a) for a in answers)
            out.append((parsed[question], answers, idf))
        return out

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        return [
            np.array([overlap_features(q_parsed, a, idf)[IDF_OVERLAP_NONSTOP] for a in answers], dtype=np.float64)
            for q_parsed, answers, idf in self._parsed_pools(pools)
        ]

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        """Each answer content word shared with the question weighs its IDF (the pool's when unfitted,
        as in ``score``)."""
        candidate_at(candidates, index)
        [(q_parsed, answers, idf)] = self._parsed_pools([(question, candidates)])
        a_parsed = answers[index]
        shared = content_words(q_parsed) & content_words(a_parsed)
        return Explanation(
            score=float(overlap_features(q_parsed, a_parsed, idf)[IDF_OVERLAP_NONSTOP]),
            question_tokens=list(q_parsed.tokens),
            answer_tokens=list(a_parsed.tokens),
            answer_weights=[idf.idf(w) if w in shared else 0.0 for w in map(normalize, a_parsed.tokens)],
            weight_kind="idf",
            links=lexical_links(q_parsed, a_parsed),
        )

    def state(self) -> dict[str, Any]:
        return {**super().state(), "idf": self.idf.to_dict() if self.idf is not None else None}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WordOverlapRanker:
        ranker = cls()
        ranker.idf = IdfTable.from_dict(state["idf"]) if state.get("idf") is not None else None
        return ranker
