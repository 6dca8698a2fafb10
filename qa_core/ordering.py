"""The one tie rule: how every ordering of candidates that the project makes or reads breaks ties.

Candidates are ordered by score, highest first; equal scores by doc_id *descending*, compared as
strings (code points, which is UTF-8 byte order). That is trec_eval's tie break (its ``qsort`` on
score, then ``strcmp`` of the docnos, reversed), so pytrec_eval and ir-measures evaluate a run in
exactly this order whatever order its lines come in. Metrics, the rank column of every run file
written, run files read back (scores decide, then the rule), the first-stage rank, the Ask and
Compare tables, the inputs handed to ranx and the stacker's rank feature all order through here.

Doc ids often encode pool position, so any tie break is a hidden position prior: where scores tie,
``qa_core.evaluation.tie_aware`` reports the expected metric over all orders of the tied
candidates and the range from the worst to the best order beside the rule's value.

ranx sorts a query's scores with numpy's unstable argsort and ignores the rank column of a run
file, so ties reach its metrics and its rank-based fusions (RRF) in no set order (measured: on
hand-made runs of five questions, pools of 20, three score values, ranx's MAP of a run file was
up to 0.09 off trec_eval's). ``strict`` makes the rule visible in the scores themselves (each
tied score one float step below the one before it) for what the project hands to ranx.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

TIE_RULE = "score descending, ties by doc_id descending (trec_eval's order)"


def ranked(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """``(doc_id, score)`` pairs of one question, best first by the rule."""
    return sorted(((str(doc), float(score)) for doc, score in scores.items()),
                  key=lambda item: (item[1], item[0]), reverse=True)  # fmt: skip


def order(doc_ids: Sequence[str], scores: Sequence[float] | np.ndarray) -> list[int]:
    """Positions into ``doc_ids``/``scores`` (one pool), best first by the rule."""
    if len(doc_ids) != len(scores):
        raise ValueError(f"{len(doc_ids)} doc ids but {len(scores)} scores")
    return sorted(range(len(doc_ids)), key=lambda i: (float(scores[i]), str(doc_ids[i])), reverse=True)


def tied_flags(scores: Sequence[float] | np.ndarray) -> list[bool]:
    """For each candidate of one pool: whether another candidate of the pool has exactly its score."""
    counts = Counter(float(score) for score in scores)
    return [counts[float(score)] > 1 for score in scores]


def tied_count(scores: Sequence[float] | np.ndarray) -> int:
    """How many candidates of one pool share their score with another candidate of the pool."""
    return sum(tied_flags(scores))


def strict(scores: Mapping[str, float]) -> dict[str, float]:
    """One question's scores with every tie broken by the rule in the scores themselves: each
    candidate tied with the one before it gets the next float below that one's score (a change of
    about 1e-16 relative). For tools that order ties in no set way (ranx)."""
    out: dict[str, float] = {}
    previous: float | None = None
    for doc_id, score in ranked(scores):
        if previous is not None and score >= previous:
            score = float(np.nextafter(previous, -np.inf))
        out[doc_id] = previous = score
    return out
