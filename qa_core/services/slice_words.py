"""Across a slice of questions (an Errors slice: a question class, a length bucket, the worst 20):
which words, and which kinds of words, carry the top attributions in the wrong answers a model ranks
above right ones.

For each question of the slice, every wrong answer ranked above the best-ranked right one is
explained (the model's default explainer unless another is asked for, ``Ranking.explain``) and its
``TOP_WORDS`` highest-weighted words are kept (positive weights only: words that raised its score).
Each kept word is described by spaCy's parse of the answer (``qa_core.text.nlp``): its lemma, its
coarse part of speech, its entity type (or none) and whether the question has the same normalised word.
The tables count kept words per value of each description; ``examples`` lists them back to the
answers they came from (with the contrastive view's address).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlencode

import pandas as pd

from qa_core.rankers.base import Ranker
from qa_core.services.contrastive import VIEW, default_pair
from qa_core.services.ranking import Ranking, rank_pool
from qa_core.text.nlp import Parsed, parse_many
from qa_core.text.vectors import normalize
from qa_core.types import Question

TOP_WORDS = 3
DESCRIPTIONS = {"word": "lemma", "part of speech": "pos", "entity type": "entity", "question word": "in_question"}
EXAMPLE_COLUMNS = ["qid", "question", "rank", "doc_id", "answer", "word", "lemma", "pos", "entity", "in_question",
                   "weight", "ask"]


def _entity(parsed: Parsed, position: int) -> str:
    return next((label for start, end, label in parsed.ents if start <= position < end), "none")


def _top_positions(weights: Sequence[float], tokens: Sequence[str], count: int) -> list[int]:
    ranked = sorted((i for i, t in enumerate(tokens) if t.strip() and weights[i] > 0), key=lambda i: -weights[i])
    return ranked[:count]


def wrong_above_right(result: Ranking) -> list[int]:
    """Ranks of the wrong answers ranked above the best-ranked right one that a wrong one beats (gold labels)."""
    pair = default_pair(result)
    if pair is None:
        return []
    return [s.rank for s in result.scored[: pair[1] - 1] if s.candidate.label is not None and s.candidate.label <= 0]


def examples(
    ranker: Ranker, questions: Sequence[Question], dataset: str, model: str, explainer: str | None = None,
    top: int = TOP_WORDS,
) -> pd.DataFrame:
    """One row per top-attributed word of every wrong answer ranked above a right one (``EXAMPLE_COLUMNS``)."""
    rows = []
    for question in questions:
        result = rank_pool(ranker, question.text, question.candidates, qid=question.qid)
        ranks = wrong_above_right(result)
        if not ranks:
            continue
        q_parsed, *answers = parse_many([question.text, *(result.at(r).candidate.text for r in ranks)])
        question_words = {normalize(t) for t in q_parsed.tokens if t.strip()}
        link = "/Ask?" + urlencode({"dataset": dataset, "qid": question.qid, "model": model, "view": VIEW})
        for rank, parsed in zip(ranks, answers):
            explanation = result.explain(rank, explainer)
            for position in _top_positions(explanation.answer_weights, explanation.answer_tokens, top):
                rows.append({
                    "qid": question.qid, "question": question.text, "rank": rank,
                    "doc_id": result.at(rank).candidate.doc_id, "answer": parsed.text,
                    "word": parsed.tokens[position], "lemma": parsed.lemmas[position].lower(),
                    "pos": parsed.pos[position], "entity": _entity(parsed, position),
                    "in_question": "yes" if normalize(parsed.tokens[position]) in question_words else "no",
                    "weight": explanation.answer_weights[position], "ask": link,
                })
    return pd.DataFrame(rows, columns=EXAMPLE_COLUMNS)


def counts(found: pd.DataFrame, by: str) -> pd.DataFrame:
    """Kept words per value of ``by`` (a ``DESCRIPTIONS`` column): how many, in how many answers and
    questions, most first."""
    if found.empty:
        return pd.DataFrame(columns=[by, "words", "answers", "questions"])
    grouped = found.groupby(by, sort=False)
    table = pd.DataFrame({
        "words": grouped.size(),
        "answers": grouped.apply(lambda g: g[["qid", "doc_id"]].drop_duplicates().shape[0], include_groups=False),
        "questions": grouped["qid"].nunique(),
    }).reset_index()
    return table.sort_values(["words", by], ascending=[False, True], kind="stable").reset_index(drop=True)


def slice_questions(questions: Sequence[Question], table: pd.DataFrame, column: str | None, value: str | None,
                    worst: int | None = None) -> list[Question]:
    """The questions of an Errors slice: the rows of ``table`` (the Errors table, worst first) whose
    ``column`` equals ``value``, or the ``worst`` first rows."""
    rows = table if column is None else table[table[column].astype(str) == str(value)]
    qids = list(rows["qid"][:worst] if worst else rows["qid"])
    by_qid: Mapping[str, Question] = {q.qid: q for q in questions}
    return [by_qid[qid] for qid in qids if qid in by_qid]
