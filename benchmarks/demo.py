"""The first run: does the bundled demo corpus teach SM-CNN to answer what a newcomer types?

``make run`` imports ``qa_core/data/demo_corpus.jsonl`` and trains SM-CNN on it (seed 1); the question
to type first is "which scientist discovered penicillin". For seeds 1-5 this trains SM-CNN on a
version of the demo corpus through the CLI's path (``experiments.train_ranker``) and records, per
seed: the rank of the Fleming sentence among the BM25 candidates on Ask's path
(``candidate_pools.candidates_for_question`` + ``ranking.rank_pool``), its score and the runner-up's, the
saliency of its words, the training time and TEST MAP. The Fleming sentence is itself a TRAIN
positive (demo-09, "Who discovered penicillin?"), so the held-out check is every DEV and TEST
question typed the same way (lower case, no question mark) and ranked over the whole collection:
the share whose own answer comes first. BM25 and word overlap are measured alike; SM-CNN's
per-question TEST AP (mean over the seeds) is compared with theirs by a paired randomisation test.

    .venv/bin/python benchmarks/demo.py                                       # the bundled corpus
    .venv/bin/python benchmarks/demo.py --corpus old.jsonl --tag "40 questions"
    .venv/bin/python benchmarks/demo.py --render                              # section from stored results
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import RESULTS, machine, machine_line, mean_std, write_result, write_section

SEEDS = (1, 2, 3, 4, 5)
TYPED = "which scientist discovered penicillin"
ANSWER = "demo-09/demo-09-1"  # the Fleming sentence in the collection (qid/doc_id)
BASELINES = ("bm25", "overlap")
RESAMPLES = 10_000
RESULT = "demo"


def typed(question: str) -> str:
    """A dataset question as a newcomer types it: lower case, without the question mark."""
    return question.rstrip(" ?").lower()


def rank_of(ranking: Any, doc_ids: set[str]) -> int | None:
    """Rank of the best-placed of ``doc_ids`` (None: BM25 did not retrieve any of them)."""
    return next((s.rank for s in ranking.scored if s.candidate.doc_id in doc_ids), None)


def typed_questions(dataset: Any) -> dict[str, tuple[str, set[str]]]:
    """Every DEV and TEST question, typed, with the collection ids of its relevant sentences."""
    return {
        q.qid: (typed(q.text), {f"{q.qid}/{c.doc_id}" for c in q.candidates if (c.label or 0) > 0})
        for q in dataset.questions
        if q.split in ("dev", "test")
    }


def randomisation_p(model: list[float], reference: list[float]) -> float:
    """Two-sided paired randomisation test (signs of the per-question differences flipped at random)."""
    from scipy.stats import permutation_test

    result = permutation_test(
        (np.asarray(model), np.asarray(reference)),
        lambda a, b: np.mean(a - b),
        permutation_type="samples",
        n_resamples=RESAMPLES,
        random_state=0,
    )
    return float(result.pvalue)


def smcnn_seed(
    seed: int, dataset: Any, folder: str, pool: list[Any], typed_ranks: Callable[[Any], dict[str, int | None]]
) -> dict[str, Any]:
    """SM-CNN trained with ``seed``: where it ranks Fleming for the typed question and why, its TEST MAP
    and per-question AP, and its ranks for the typed held-out questions."""
    from qa_core.services.experiments import evaluate_ranker, train_ranker
    from qa_core.services.ranking import rank_pool

    test = dataset.split("test")
    outcome = train_ranker("smcnn", dataset, seed=seed, progress=False, checkpoint=Path(folder) / f"s{seed}.pt")
    ranking = rank_pool(outcome.ranker, TYPED, pool)
    rank = rank_of(ranking, {ANSWER})
    explanation = ranking.explain(rank)
    largest = max(explanation.answer_weights)
    saliency = [(token, weight / largest) for token, weight in zip(explanation.answer_tokens, explanation.answer_weights)
                if token.strip()]
    result = evaluate_ranker(outcome.ranker, test)
    runner_up = next(s for s in ranking.scored if s.candidate.doc_id != ANSWER)
    print(f"seed {seed}: Fleming at {rank}, TEST MAP {result.aggregate['map']:.4f}", flush=True)
    return {
        "seed": seed,
        "fleming_rank": rank,
        "fleming_score": explanation.score,
        "runner_up": runner_up.candidate.text,
        "runner_up_score": runner_up.score,
        "saliency": saliency,
        "train_seconds": outcome.report["seconds"],
        "epochs": outcome.report.get("epochs_run"),
        "dev_map": outcome.metrics["dev_map"],
        "test_map": result.aggregate["map"],
        "test_ap": result.per_query["map"].to_dict(),
        "typed_ranks": typed_ranks(outcome.ranker),
    }


def measure(corpus: Path) -> dict[str, Any]:
    """Everything the section reports, for one version of the demo corpus."""
    load_average = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        os.environ["RERANK_LAB_DATA"] = folder  # checkpoints and parse caches of this run only
        from db.store import Store
        from qa_core.data.importers import load_pairs
        from qa_core.services import candidate_pools, model_loading
        from qa_core.services.experiments import evaluate_ranker
        from qa_core.services.ranking import rank_pool

        dataset = load_pairs(corpus, name="demo")
        store = Store(f"sqlite:///{folder}/store.sqlite")
        store.datasets.import_dataset(dataset)
        test = dataset.split("test")
        pool = candidate_pools.candidates_for_question(store, "demo", TYPED)
        held_out = typed_questions(dataset)
        held_out_pools = {qid: candidate_pools.candidates_for_question(store, "demo", text) for qid, (text, _) in held_out.items()}

        def typed_ranks(ranker: Any) -> dict[str, int | None]:
            return {qid: rank_of(rank_pool(ranker, held_out[qid][0], held_out_pools[qid]), held_out[qid][1])
                    for qid in held_out}

        models: dict[str, Any] = {}
        for name in BASELINES:
            ranker = model_loading.load_ranker(store, name, "demo")
            result = evaluate_ranker(ranker, test)
            models[name] = {
                "test_map": result.aggregate["map"],
                "test_ap": result.per_query["map"].to_dict(),
                "fleming_rank": rank_of(rank_pool(ranker, TYPED, pool), {ANSWER}),
                "typed_ranks": typed_ranks(ranker),
            }
        seeds = [smcnn_seed(seed, dataset, folder, pool, typed_ranks) for seed in SEEDS]
        store.close()
    qids = sorted(seeds[0]["test_ap"])
    smcnn_ap = [statistics.fmean(s["test_ap"][q] for s in seeds) for q in qids]
    for name in BASELINES:
        models[name]["p_smcnn_vs"] = randomisation_p(smcnn_ap, [models[name]["test_ap"][q] for q in qids])
    return {
        "machine": machine(),
        "load_average": load_average,
        "torch_threads": torch.get_num_threads(),
        "questions": {split: len(dataset.split(split)) for split in ("train", "dev", "test")},
        "pairs": {split: sum(len(q.candidates) for q in dataset.split(split)) for split in ("train", "dev", "test")},
        "typed_splits": {q.qid: q.split for q in dataset.questions if q.split in ("dev", "test")},
        "bm25_candidates": len(pool),
        "fleming_first_stage_rank": next(c.first_stage_rank for c in pool if c.doc_id == ANSWER),
        "baselines": models,
        "smcnn": seeds,
    }


def firsts(ranks: dict[str, int | None], split: str, splits: dict[str, str]) -> int:
    """How many of ``split``'s typed questions have their own answer ranked first."""
    return sum(rank == 1 for qid, rank in ranks.items() if splits[qid] == split)


def render_section(stored: dict[str, dict[str, Any]]) -> list[str]:
    runs = dict(sorted(stored.items(), key=lambda item: sum(item[1]["pairs"].values())))  # smallest corpus first
    lines = [
        "## The demo corpus: a first run",
        "",
        "Script: `benchmarks/demo.py`. SM-CNN trained on a version of the bundled demo corpus as `make run` trains it "
        f"(seeds {SEEDS[0]}-{SEEDS[-1]}); \"{TYPED}\" typed on Ask: BM25's candidates over the corpus's sentences, "
        "reranked. The Fleming sentence is a TRAIN positive (demo-09 asks \"Who discovered penicillin?\"); the held-out "
        "check types every DEV and TEST question alike (lower case, no question mark) and counts those whose own answer "
        "is ranked first. p: paired randomisation test of SM-CNN's per-question TEST AP (mean over the seeds) against "
        f"the baseline's ({RESAMPLES:,} resamples). Train seconds: the fit alone (`report['seconds']`), median "
        "over the seeds; the first seed's also loads the word vectors.",
        "",
        "| corpus | questions train/dev/test | pairs | model | Fleming sentence first | typed DEV answered first | "
        "typed TEST answered first | DEV MAP | TEST MAP | p vs SM-CNN | train seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tag, run in runs.items():
        shape = "/".join(str(run["questions"][s]) for s in ("train", "dev", "test"))
        pairs, splits = sum(run["pairs"].values()), run["typed_splits"]
        held = {split: sum(s == split for s in splits.values()) for split in ("dev", "test")}
        for name, row in run["baselines"].items():
            typed_cells = " | ".join(f"{firsts(row['typed_ranks'], split, splits)}/{held[split]}" for split in held)
            lines.append(f"| {tag} | {shape} | {pairs} | {name} | rank {row['fleming_rank']} | {typed_cells} | - | "
                         f"{row['test_map']:.4f} | {row['p_smcnn_vs']:.4f} | - |")
        seeds = run["smcnn"]
        typed_cells = " | ".join(
            "{:.1f} ± {:.1f} of {}".format(*mean_std([firsts(s["typed_ranks"], split, splits) for s in seeds]), held[split])
            for split in held
        )
        dev_mean, dev_std = mean_std([s["dev_map"] for s in seeds])
        test_mean, test_std = mean_std([s["test_map"] for s in seeds])
        seconds = sorted(s["train_seconds"] for s in seeds)
        lines.append(
            f"| {tag} | {shape} | {pairs} | smcnn | {sum(s['fleming_rank'] == 1 for s in seeds)}/{len(seeds)} seeds "
            f"(ranks {', '.join(str(s['fleming_rank']) for s in seeds)}) | {typed_cells} | {dev_mean:.4f} ± {dev_std:.4f} | "
            f"{test_mean:.4f} ± {test_std:.4f} | | {statistics.median(seconds):.1f} (median; {seconds[0]:.1f}-{seconds[-1]:.1f}) |"
        )
    lines += ["", "Seed 1 (the model `make run` promotes), the Fleming sentence's saliency per word (scaled to its maximum):", ""]
    for tag, run in runs.items():
        seed = run["smcnn"][0]
        words = ", ".join(f"{token} {weight:.2f}" for token, weight in seed["saliency"])
        lines.append(f"- {tag}: score {seed['fleming_score']:.4f}, runner-up \"{seed['runner_up']}\" "
                     f"{seed['runner_up_score']:.4f}; {words}.")
    lines += [""]
    for tag, run in runs.items():
        lines.append(f"- {tag}: {machine_line(run['machine'])}; load average {run['load_average']:.1f}, "
                     f"{run['torch_threads']} torch threads.")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="a demo corpus JSONL file (default: the bundled one)")
    parser.add_argument("--tag", default="bundled", help="the row's name in the section")
    parser.add_argument("--render", action="store_true", help="only rewrite the markdown from the saved results")
    args = parser.parse_args()
    stored = RESULTS / f"{RESULT}.json"
    runs = json.loads(stored.read_text()) if stored.exists() else {}
    if not args.render:
        from qa_core.data.demo import DEMO_PATH

        runs[args.tag] = measure(args.corpus or DEMO_PATH)
        print(write_result(RESULT, runs))
    print(write_section(RESULT, render_section(runs)))


if __name__ == "__main__":
    main()
