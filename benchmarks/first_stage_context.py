"""Does indexing each sentence with its document's context put more right answers in the top 50?

WikiQA's candidates for a question are the summary sentences of one Wikipedia page in page order
(``benchmark_formats.DOCUMENT_POOLS``), and many right answers name their subject only by a pronoun
("He was born in ..."): a sentence indexed alone cannot match the question's subject. DPR-style
indexes put a passage's title with it; WikiQA's files name no page, but its first sentence usually
names the subject. ``retrieval.Analysis.context`` indexes each sentence with its document's first
sentence (``lead``) and/or the sentences either side (``neighbours``). This uses no labels, only which
document a sentence came from (``candidate_pools.document_of``: a URL, or a pool of such a format);
TrecQA's pools are not documents (sentences of many news articles), so it has no context as imported.

The rule, fixed before TEST was read: out of the grid (``CONTEXTS`` x with or without
``retrieval.FIRST_STAGE_FEEDBACK``, the first stage's analysis otherwise unchanged), the setting with
the best mean DEV recall@50 over WikiQA and TrecQA (then mean recall@10) replaces Ask's first stage
(context none, with RM3) only if it finds a right answer in the top 50 for at least ``MIN_GAIN`` more
WikiQA DEV questions, and for no fewer TrecQA DEV questions in the top 10 or the top 50. TrecQA's
pools read as if they were documents are measured on DEV too: they stay without context (as
imported) unless that also finds no fewer TrecQA DEV questions at 10 and 50. TEST is read once, for
today's first stage and the one adopted.

    .venv/bin/python benchmarks/first_stage_context.py
    .venv/bin/python benchmarks/first_stage_context.py --render
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import time

from common import machine, measure_or_render, shared_datasets
from first_stage import CUTOFFS, SELECT_AT, mean_recall, recall_row, recalls

from qa_core.data.benchmark_formats import DOCUMENT_POOLS
from qa_core.retrieval import CONTEXT_PARTS, FIRST_STAGE, FIRST_STAGE_FEEDBACK, BM25Index, Feedback, in_context
from qa_core.services.candidate_pools import (
    CollectionRow,
    collection_passages,
    dataset_rows,
    document_of,
    sentence_key,
    unique_sentences,
)

CONTEXTS: tuple[tuple[str, ...], ...] = ((), ("lead",), ("neighbours",), ("lead", "neighbours"))
FEEDBACKS: dict[str, Feedback | None] = {"without RM3": None, "with RM3": FIRST_STAGE_FEEDBACK}
MIN_GAIN = 2  # WikiQA DEV questions (1/126 each), as the RM3 rule
TIMED_QUESTIONS = 100


def context_name(context: tuple[str, ...]) -> str:
    return " + ".join(CONTEXT_PARTS[part] for part in context) or "none"


def pools_as_documents(rows: list[CollectionRow]) -> list[CollectionRow]:
    """The rows read as if each question's pool were one document (what WikiQA's format declares)."""
    pool_format = next(iter(DOCUMENT_POOLS))
    return [(qid, doc_id, text, pool_format, None) for qid, doc_id, text, _, _ in rows]


def repeats(rows: list[CollectionRow], context: tuple[str, ...]) -> dict[str, int]:
    """Sentences met again in a later row, and how many of those repeats have another context there
    than at their first occurrence (the one the index uses)."""
    indexed = in_context([(text, document_of(qid, source, url)) for qid, _, text, source, url in rows], context)
    first: dict[str, str] = {}
    again = elsewhere = 0
    for (_, _, text, _, _), as_indexed in zip(rows, indexed):
        key = sentence_key(text)
        if key in first:
            again += 1
            elsewhere += first[key] != sentence_key(as_indexed)
        else:
            first[key] = sentence_key(as_indexed)
    return {"repeats": again, "with another context": elsewhere}


def search_ms(index: BM25Index, questions: list[str], feedback: Feedback | None) -> float:
    """p50 milliseconds of a top-50 search (the first stage's work per typed question)."""
    times = []
    for question in questions:
        started = time.perf_counter()
        index.search(question, SELECT_AT, feedback)
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times)


def measure() -> dict:
    datasets = shared_datasets()
    rows = {name: dataset_rows(dataset) for name, dataset in datasets.items()}
    keys = {name: {doc_id: sentence_key(text) for doc_id, text in unique_sentences(rows[name])} for name in datasets}
    readings = {**{(name, "as imported"): rows[name] for name in datasets},
                ("trecqa", "pools as documents"): pools_as_documents(rows["trecqa"])}
    indexes: dict[tuple[str, str, tuple[str, ...]], BM25Index] = {}
    build_s: dict[str, float] = {}
    for (name, reading), reading_rows in readings.items():
        for context in CONTEXTS:
            analysis = dataclasses.replace(FIRST_STAGE, context=context)
            started = time.perf_counter()
            indexes[name, reading, context] = BM25Index.build(collection_passages(reading_rows, analysis), analysis)
            build_s[f"{name}, {reading}, context {context_name(context)}"] = time.perf_counter() - started

    def evaluate(reading: dict[str, str], context: tuple[str, ...], feedback: Feedback | None, split: str) -> dict:
        return {name: recalls(datasets[name], indexes[name, reading[name], context], keys[name], split, feedback)
                for name in datasets}

    imported = {name: "as imported" for name in datasets}
    grid = []
    for context, (feedback_name, feedback) in itertools.product(CONTEXTS, FEEDBACKS.items()):
        grid.append({"context": list(context), "feedback": feedback_name, "dev": evaluate(imported, context, feedback, "dev")})
        print(context_name(context), feedback_name,
              {name: s[f"found@{SELECT_AT}"] for name, s in grid[-1]["dev"].items()}, flush=True)
    baseline = next(row for row in grid if not row["context"] and row["feedback"] == "with RM3")
    best = max(grid, key=lambda row: (mean_recall(row["dev"], SELECT_AT), mean_recall(row["dev"], 10)))
    gain = {name: {f"@{n}": best["dev"][name][f"found@{n}"] - baseline["dev"][name][f"found@{n}"] for n in (10, SELECT_AT)}
            for name in datasets}
    adopted = gain["wikiqa"][f"@{SELECT_AT}"] >= MIN_GAIN and min(gain["trecqa"].values()) >= 0
    chosen_context, chosen_feedback = tuple(best["context"]), FEEDBACKS[best["feedback"]]
    as_documents = {"trecqa": "pools as documents", "wikiqa": "as imported"}
    trecqa_pools = {"without context": baseline["dev"]["trecqa"],
                    "chosen context": evaluate(as_documents, chosen_context, chosen_feedback, "dev")["trecqa"]}
    dev_questions = [q.text for q in datasets["wikiqa"].split("dev")][:TIMED_QUESTIONS]
    timing = {f"context {context_name(context)}": search_ms(indexes["wikiqa", "as imported", context], dev_questions,
                                                            FIRST_STAGE_FEEDBACK)
              for context in ((), chosen_context)}
    return {
        "machine": machine(),
        "collection_sizes": {name: len(keys[name]) for name in datasets},
        "repeats": {name: repeats(rows[name], chosen_context) for name in datasets},
        "dev_grid": grid,
        "chosen": {"context": list(chosen_context), "feedback": best["feedback"]},
        "dev_gain_questions": gain,
        "adopted": adopted,
        "trecqa_pools_as_documents_dev": trecqa_pools,
        "index_build_s": build_s,
        "wikiqa_search_p50_ms_with_rm3": timing,
        "test": {
            "today (no context, with RM3)": evaluate(imported, (), FIRST_STAGE_FEEDBACK, "test"),
            "chosen on DEV": evaluate(imported, chosen_context, chosen_feedback, "test"),
        },
    }


def render_section(results: dict) -> list[str]:
    names = sorted(results["collection_sizes"])
    header = " | ".join(f"{name} @{n}" for name in names for n in CUTOFFS)
    chosen = results["chosen"]
    chosen_label = f"context: {context_name(tuple(chosen['context']))}, {chosen['feedback']}"
    gains = "; ".join(f"{name} {gain['@10']:+d} at 10, {gain[f'@{SELECT_AT}']:+d} at {SELECT_AT}"
                      for name, gain in sorted(results["dev_gain_questions"].items()))
    verdict = ("adopted: Ask's first stage indexes with it (`retrieval.FIRST_STAGE`)" if results["adopted"]
               else "not adopted: Ask's first stage stays as it was")
    pools = results["trecqa_pools_as_documents_dev"]
    pool_cells = ", ".join(f"{label} {scores['found@10']} and {scores['found@50']}" for label, scores in pools.items())
    pools_safe = all(pools["chosen context"][f"found@{n}"] >= pools["without context"][f"found@{n}"] for n in (10, 50))
    repeated = "; ".join(f"{name}: {r['repeats']:,} repeats, {r['with another context']:,} of them with another context "
                         "than their first occurrence's" for name, r in sorted(results["repeats"].items()))
    sizes = ", ".join(f"{name} {size:,} sentences" for name, size in sorted(results["collection_sizes"].items()))
    builds = ", ".join(f"{label.removeprefix('wikiqa, as imported, ')} {seconds:.1f} s"
                       for label, seconds in results["index_build_s"].items() if label.startswith("wikiqa, as imported"))
    timing = ", ".join(f"{label} {ms:.1f} ms" for label, ms in results["wikiqa_search_p50_ms_with_rm3"].items())
    return [
        "## First stage: each sentence indexed with its document's context",
        "",
        "Script: `benchmarks/first_stage_context.py`. The first stage of the section above (question words stopped, "
        "Snowball stemmer, k1 2.0, b 0.3), with and without the RM3 expansion of the section below, with each sentence indexed together with context from its own "
        "document (`qa_core.retrieval.Analysis.context`, `in_context`): the document's first sentence (in WikiQA "
        "usually the one naming the page's subject: \"BMC Software, Inc. is an American company ...\"; what a "
        "DPR-style index gets from a title), the sentences either side, or both. Which document a sentence came "
        "from is all it uses, never a label: its URL when the import has one (a CSV/JSONL `url` column, fragment "
        "aside), else its question's pool for a format whose pools are one document each (WikiQA, "
        "`benchmark_formats.DOCUMENT_POOLS`: a pool is the summary sentences of one Wikipedia page, in page order). "
        "TrecQA's pools are sentences of many news articles, so it has no documents as imported and the context "
        f"leaves it as it was. Same collections ({sizes}) and questions as above. A sentence repeated in several "
        "pools is one sentence of the collection, indexed with its first occurrence's context "
        f"({repeated}). Rule fixed before TEST: the best of the {len(results['dev_grid'])} settings by mean DEV "
        f"recall@50 (then @10) replaces today's first stage only with at least {MIN_GAIN} more WikiQA DEV questions "
        "found in the top 50 and none fewer on TrecQA DEV in the top 10 or 50; TrecQA's pools read as documents "
        "are checked on DEV the same way; TEST read once.",
        "",
        "DEV:",
        "",
        f"| first stage | {header} |",
        "|---|" + "---|" * len(names) * len(CUTOFFS),
        *(recall_row(f"context: {context_name(tuple(row['context']))}, {row['feedback']}", row["dev"])
          for row in results["dev_grid"]),
        "",
        "TEST (read once):",
        "",
        f"| first stage | {header} |",
        "|---|" + "---|" * len(names) * len(CUTOFFS),
        *(recall_row(label if label.startswith("today") else f"{chosen_label} (chosen on DEV)", scores)
          for label, scores in results["test"].items()),
        "",
        f"Chosen on DEV: {chosen_label}; questions found against today's first stage on DEV: {gains}; {verdict}. "
        f"TrecQA DEV with its pools read as documents (questions found at 10 and 50): {pool_cells}: "
        + ("no loss, yet TrecQA's pools are not documents, so it stays without context."
           if pools_safe else "a loss: TrecQA's pools stay without context, as imported.")
        + f" Cost (one run each on the shared cores: noisy): WikiQA index build, {builds}; top-50 search with RM3, "
        f"p50 over {TIMED_QUESTIONS} WikiQA DEV questions: {timing}.",
        "",
        "How to read it. WikiQA TEST recall@50 goes from 210 to 227 of 243 questions (0.864 to 0.934), past issue "
        "40's goal of 0.90; recall@10 from 179 to 200. On DEV the first sentence alone and with the sentences either "
        "side find the same 123 of 126 questions in the top 50; recall@10 (106 against 103) chose the second. The "
        "gain is partly WikiQA's construction: its collection is only the pages Bing returned for its questions, "
        "so a question's own page is always there and its first sentence names the subject the question names; "
        "over a whole encyclopedia, where many pages share those words, the context would find the right page "
        "less often, and this collection cannot say by how much. k1 and b were not chosen again for the longer "
        "indexed texts (the grid of the recall section was not rerun with context). TrecQA as imported is "
        "unchanged by construction (no documents); its TEST recall@10 stays 0.854 (76 of 89) against 0.910 (81) "
        "without RM3: RM3 was adopted by its DEV rule (DEV recall@10 0.949 to 0.962) and loses 5 TrecQA TEST "
        "questions at 10 (none net at 50, where Ask's reranker reads); reported, not tuned on TEST. Looked at after the "
        "decision (changing nothing): RM3 moves five TrecQA TEST right answers from ranks 6 to 10 down to ranks 11 to "
        "16, or, for 'Who was President of the United States in 1922?', out of the top 100; at 50 it loses one "
        "question (the Wiggles, 20th without it) and finds one (the Khmer Rouge's first leader, 34th, not in the "
        "top 100 without it). Ask's first stage "
        "is this setting (`retrieval.FIRST_STAGE`, its saved index keyed by it, so indexes saved before it are "
        "rebuilt) and its caption says so; for a user's collection the `url` column of a CSV/JSONL import names "
        "the document (the store keeps it per candidate); the collection's index reads it in the same one pass.",
    ]


def main() -> None:
    measure_or_render("first_stage_context", __doc__, measure, render_section)


if __name__ == "__main__":
    main()
