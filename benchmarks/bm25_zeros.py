"""Why the BM25 baseline scores so many candidates exactly 0 (and ties them): TEST candidates of
TrecQA and WikiQA counted by whether they share a query term with their question under the
baseline's own tokenisation (``bm25s.tokenize``, its English stopwords, no stemming). Writes
``results/bm25_zeros.json`` and its section of docs/benchmarks.md.

    .venv/bin/python benchmarks/bm25_zeros.py
"""

from __future__ import annotations

from typing import Any

import bm25s
from common import machine, machine_line, shared_datasets, write_result, write_section

from qa_core.retrieval import STOPWORDS, bm25_scores


def _terms(texts: list[str]) -> list[set[str]]:
    return [set(tokens) for tokens in bm25s.tokenize(texts, stopwords=STOPWORDS, return_ids=False, show_progress=False)]


def _plural_stripped(terms: set[str]) -> set[str]:
    """A crude stemmer (a final -s off): how many zeros a stemmer could turn into a match."""
    return {term[:-1] if term.endswith("s") else term for term in terms}


def count(questions: list[Any]) -> dict[str, int]:
    counts = dict.fromkeys(("candidates", "relevant", "zero", "zero_relevant", "zero_sharing_a_term",
                            "zero_matching_without_plural_s", "pools", "pools_all_zero"), 0)
    for question in questions:
        if not question.candidates:
            continue
        texts = [c.text for c in question.candidates]
        scores = bm25_scores(question.text, texts)
        query = _terms([question.text])[0]
        counts["pools"] += 1
        counts["pools_all_zero"] += bool((scores == 0).all())
        for candidate, score, terms in zip(question.candidates, scores, _terms(texts)):
            relevant = (candidate.label or 0) > 0
            counts["candidates"] += 1
            counts["relevant"] += relevant
            if score == 0:
                counts["zero"] += 1
                counts["zero_relevant"] += relevant
                counts["zero_sharing_a_term"] += bool(query & terms)
                counts["zero_matching_without_plural_s"] += bool(_plural_stripped(query) & _plural_stripped(terms))
    return counts


def render(result: dict[str, Any]) -> list[str]:
    rows = [f"| {name} | {c['candidates']:,} | {c['zero']:,} | {c['zero_relevant']} of {c['relevant']} | "
            f"{c['zero_sharing_a_term']} | {c['zero_matching_without_plural_s']} | {c['pools_all_zero']} of {c['pools']} |"
            for name, c in result["datasets"].items()]
    return [
        "## Why BM25 scores so many candidates 0",
        "",
        "Script: `benchmarks/bm25_zeros.py`. The BM25 baseline (`qa_core.rankers.baselines.BM25Ranker`) scores each "
        "TEST pool with bm25s (Lucene BM25, IDF from the pool); counted by whether a candidate shares a query term "
        "with its question under the same tokenisation (lowercase, bm25s' English stopwords, no stemming):",
        "",
        "| TEST | candidates | score 0 | of them correct | sharing a query term | matching once a final -s is cut "
        "| pools all 0 |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Every zero is a candidate without a single query term: BM25's score is a sum over the query terms a "
        "candidate contains, and Lucene's IDF, log(1 + (N - df + 0.5) / (df + 0.5)), is positive for every term "
        "however small the pool, so neither the pool's IDF nor the stopword list zeroes a shared term. That is "
        "BM25, not a defect of the baseline, and it is kept: WikiQA's candidates are the sentences of one "
        "Wikipedia summary, many of which never name the question's words. A stemmer would give a few of them "
        "a term (the crude cut of a final -s matches the column above) and change the baseline, so the BM25 "
        "reranker keeps bm25s' defaults; the first stage for typed questions does stem (PyStemmer's Snowball "
        "stemmer, chosen on DEV: see the first-stage section). On WikiQA these zeros are most of BM25's tied candidates; "
        "TrecQA's ties are mostly equal non-zero scores. The rankers' section gives their tie-aware values.",
        "",
        f"Machine: {machine_line(result['machine'])}.",
    ]


def main() -> None:
    result = {"machine": machine(),
              "datasets": {name: count(dataset.split("test")) for name, dataset in shared_datasets().items()}}
    write_result("bm25_zeros", result)
    write_section("bm25_zeros", render(result))


if __name__ == "__main__":
    main()
