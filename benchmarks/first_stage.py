"""How often does the first stage put a right answer where a reranker can see it?

A question typed on Ask searches the dataset's whole collection (every split's unique candidate
sentences, ``candidate_pools.collection_sentences``) with BM25, and the reranker only sees the top n. This
measures recall@10/50/100: the share of questions with at least one right answer (a sentence labelled
correct for that question) among the first n, on WikiQA and TrecQA, questions typed as they are.

The analysis (stop list, stemmer, k1, b) is chosen on DEV only, by the mean of the two datasets' DEV
recall@50 (then recall@10); TEST is read once, for bm25s' defaults (before) and the chosen analysis.

    .venv/bin/python benchmarks/first_stage.py
    .venv/bin/python benchmarks/first_stage.py --render
"""

from __future__ import annotations

import itertools
import statistics

from common import machine, measure_or_render, shared_datasets

from qa_core.retrieval import PLAIN, QUESTION_WORDS, Analysis, BM25Index, Feedback
from qa_core.services.candidate_pools import collection_sentences, sentence_key
from qa_core.types import Dataset

CUTOFFS = (10, 50, 100)
SELECT_AT = 50
STOP_LISTS = {"bm25s": PLAIN.stopwords, "bm25s + question words": PLAIN.stopwords + QUESTION_WORDS}
STEMMERS = (None, "english")
K1S = (0.6, 0.9, 1.2, 1.5, 2.0)
BS = (0.3, 0.5, 0.75, 0.9, 1.0)


def grid() -> list[tuple[str, Analysis]]:
    """Every analysis tried on DEV, named by its stop list."""
    return [
        (stop_name, Analysis(stopwords=stopwords, stemmer=stemmer, k1=k1, b=b))
        for (stop_name, stopwords), stemmer, k1, b in itertools.product(STOP_LISTS.items(), STEMMERS, K1S, BS)
    ]


def recalls(dataset: Dataset, index: BM25Index, keys: dict[str, str], split: str,
            feedback: Feedback | None = None) -> dict[str, float]:
    """Recall@n (and the count of questions found) over the split's questions that have a right
    answer (the others cannot be found); ``feedback``: searched with RM3 expansion."""
    found = {n: 0 for n in CUTOFFS}
    questions = 0
    for question in dataset.split(split):
        right = {sentence_key(c.text) for c in question.candidates if c.label and c.label > 0}
        if not right:
            continue
        questions += 1
        hits = [keys[doc_id] in right for doc_id, _ in index.search(question.text, max(CUTOFFS), feedback)]
        for n in CUTOFFS:
            found[n] += any(hits[:n])
    return {"questions": questions, **{f"found@{n}": found[n] for n in CUTOFFS},
            **{f"recall@{n}": found[n] / questions for n in CUTOFFS}}


def measure() -> dict:
    datasets = shared_datasets()
    collections = {name: collection_sentences(dataset) for name, dataset in datasets.items()}
    keys = {name: {doc_id: sentence_key(c.text) for doc_id, c in sentences.items()} for name, sentences in collections.items()}

    def evaluate(analysis: Analysis, split: str) -> dict[str, dict[str, float]]:
        out = {}
        for name, dataset in datasets.items():
            index = BM25Index.build([(doc_id, c.text) for doc_id, c in collections[name].items()], analysis)
            out[name] = recalls(dataset, index, keys[name], split)
        return out

    dev = []
    for stop_name, analysis in grid():
        scores = evaluate(analysis, "dev")
        dev.append({"stop list": stop_name, "stemmer": analysis.stemmer, "k1": analysis.k1, "b": analysis.b, "dev": scores})
        print(stop_name, analysis.stemmer, analysis.k1, analysis.b,
              {name: round(s[f"recall@{SELECT_AT}"], 4) for name, s in scores.items()}, flush=True)
    best = max(dev, key=lambda row: (mean_recall(row["dev"], SELECT_AT), mean_recall(row["dev"], 10)))
    chosen = Analysis(stopwords=STOP_LISTS[best["stop list"]], stemmer=best["stemmer"], k1=best["k1"], b=best["b"])
    return {
        "machine": machine(),
        "collection_sizes": {name: len(sentences) for name, sentences in collections.items()},
        "dev_grid": dev,
        "chosen": {key: best[key] for key in ("stop list", "stemmer", "k1", "b")},
        "test": {"before (bm25s defaults)": evaluate(PLAIN, "test"), "after (chosen on DEV)": evaluate(chosen, "test")},
    }


def mean_recall(scores: dict[str, dict[str, float]], n: int) -> float:
    return statistics.fmean(s[f"recall@{n}"] for s in scores.values())


def recall_row(label: str, scores: dict[str, dict[str, float]]) -> str:
    cells = " | ".join(f"{scores[name][f'recall@{n}']:.3f}" for name in sorted(scores) for n in CUTOFFS)
    return f"| {label} | {cells} |"


def dev_ablations(chosen: dict, dev: list[dict]) -> tuple[dict, list[tuple[str, dict]]]:
    """The DEV rows the section compares, one change at a time from bm25s' defaults to the chosen
    setting: the defaults' row and (label, row) for each step."""

    def best_dev(predicate) -> dict:
        return max((row for row in dev if predicate(row)),
                   key=lambda row: (mean_recall(row["dev"], SELECT_AT), mean_recall(row["dev"], 10)))

    default = next(row for row in dev if row["stop list"] == "bm25s" and row["stemmer"] is None
                   and row["k1"] == PLAIN.k1 and row["b"] == PLAIN.b)
    ablations = [
        ("bm25s defaults (k1 1.5, b 0.75, Lucene's 33 stop words, no stemmer)", default),
        ("+ question words stopped", next(row for row in dev if row["stop list"] != "bm25s" and row["stemmer"] is None
                                          and row["k1"] == PLAIN.k1 and row["b"] == PLAIN.b)),
        ("+ question words + Snowball stemmer", next(row for row in dev if row["stop list"] != "bm25s"
                                                     and row["stemmer"] and row["k1"] == PLAIN.k1 and row["b"] == PLAIN.b)),
        ("best k1, b without the stemmer", best_dev(lambda row: row["stop list"] != "bm25s" and not row["stemmer"])),
        (f"chosen: {chosen['stop list']}, stemmer {chosen['stemmer'] or 'none'}, k1 {chosen['k1']}, b {chosen['b']}",
         best_dev(lambda row: True)),
    ]
    return default, ablations


def render_section(results: dict) -> list[str]:
    names = sorted(results["collection_sizes"])
    header = " | ".join(f"{name} @{n}" for name in names for n in CUTOFFS)
    sizes = ", ".join(f"{name} {size:,} sentences" for name, size in sorted(results["collection_sizes"].items()))
    dev = results["dev_grid"]
    default, ablations = dev_ablations(results["chosen"], dev)
    lines = [
        "## First stage: recall of right answers for typed questions",
        "",
        "Script: `benchmarks/first_stage.py`. Each dataset's questions typed as they are against its whole collection "
        f"(every split's unique candidate sentences: {sizes}), BM25 through bm25s (`qa_core/retrieval.py`). Recall@n: "
        "share of the questions with a right answer that have one in BM25's top n (the reranker on Ask sees the top "
        "50). Stop list, stemmer, k1 and b chosen on DEV only, by the mean of the two datasets' DEV recall@50 "
        f"({len(dev)} settings: k1 in {K1S}, b in {BS}, two stop lists, with and without PyStemmer's English "
        "Snowball stemmer); TEST read once, for the defaults and the chosen setting.",
        "",
        "DEV (selection):",
        "",
        f"| setting | {header} |",
        "|---|" + "---|" * len(names) * len(CUTOFFS),
        *(recall_row(label, row["dev"]) for label, row in ablations),
        "",
        "TEST:",
        "",
        f"| first stage | {header} |",
        "|---|" + "---|" * len(names) * len(CUTOFFS),
        *(recall_row(label, scores) for label, scores in results["test"].items()),
        "",
        "Question counts (with a right answer): "
        + ", ".join(f"{name} {split.upper()} {scores[name]['questions']}"
                    for split, scores in (("dev", default["dev"]), ("test", next(iter(results["test"].values()))))
                    for name in names)
        + ". The question words stopped on top of bm25s' list are `qa_core.retrieval.QUESTION_WORDS` (wh-words, "
        "auxiliaries, question phrasing). The stop list and the stemmer carry the gain; among the best settings k1 "
        "and b change DEV recall@50 by one or two questions (1/126 = 0.008 on WikiQA), and the chosen point lies at "
        "the grid's edge (largest k1, smallest b): a wider grid may do slightly better, but by noise-sized amounts. "
        "The WikiQA TEST goal of recall@50 >= 0.90 is not reached by BM25 alone; RM3 expansion on top (section 'RM3 "
        "query expansion', adopted) adds one WikiQA TEST question (0.864), SM-CNN over the whole collection finds far "
        "fewer (section 'Reranking the whole collection'), and indexing each sentence with its document's context "
        "reaches it (0.934, section 'each sentence indexed with its document's context'). With RM3 alone, 33 of WikiQA "
        "TEST's 243 questions had no right answer in the top 50 (0.90 needed 219, 9 more): their right answers share "
        "too few terms with the question (paraphrase, a pronoun for the subject) for term matching; the document's "
        "context supplies the subject a pronoun stands for "
        "(averaged GloVe fused with BM25 gained nothing at 50 on WikiQA DEV in a trial, not kept).",
    ]
    return lines


if __name__ == "__main__":
    measure_or_render("first_stage", __doc__, measure, render_section)
