"""Structure benchmarks on TrecQA: tree-kernel speed, the thesis's Table 6.4 rows (V, CH+V, CH+V+F)
and attention pruning (Romeo et al. 2016, Algorithm 1). Results: ``benchmarks/results/structure.json``
and the "structure" section of docs/benchmarks.md.

    .venv/bin/python benchmarks/structure.py                                 # all parts, SM-CNN saliency
    .venv/bin/python benchmarks/structure.py --parts pruning --weights attention_lstm
    .venv/bin/python benchmarks/structure.py --parts pruning --weights-checkpoint data/models/m.pt

Pruning weights come from any ranker's ``explain`` (question and answer token weights): the ranker
named by ``--weights`` is trained on TrecQA TRAIN (seed 1) unless ``--weights-checkpoint`` gives a
trained one. Parts not run keep their previous results.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from common import RESULTS, machine, machine_line, shared_datasets, write_result, write_section

from qa_core.rankers import registry
from qa_core.rankers.tree_kernel import TreeKernelConfig, TreeKernelRanker
from qa_core.services.experiments import evaluate_ranker, train_ranker
from qa_core.structure.kernels import Forest, evaluations, gram_matrix
from qa_core.structure.pruning import explain_weights, prune_pair
from qa_core.structure.rel import heuristic_focus_and_class, rel_tag
from qa_core.text.nlp import parse_many
from qa_core.types import Dataset, Question

THRESHOLDS = (0.0, 0.2, 0.4, 0.6, 0.8)
DECAY_GRID = (0.2, 0.4)
ABLATIONS = {
    "V": TreeKernelConfig(use_trees=False, use_focus=False),
    "CH+V": TreeKernelConfig(use_focus=False),
    "CH+V+F": TreeKernelConfig(),
}
PUBLISHED = {"V": (0.5627, 0.6294), "CH+V": (0.6611, 0.7419), "CH+V+F": (0.6829, 0.7520)}


def _pools(questions: list[Question]) -> list[tuple[str, list]]:
    return [(q.text, q.candidates) for q in questions]


def _test_metrics(ranker: TreeKernelRanker, test: list[Question]) -> dict[str, Any]:
    raw, clean = evaluate_ranker(ranker, test), evaluate_ranker(ranker, test, clean=True)
    return {"raw": raw.aggregate, "clean": clean.aggregate, "questions": [raw.questions, clean.questions]}


def speed(dataset: Dataset) -> dict[str, Any]:
    """Kernel evaluations per second (1 and 2 threads) and the TRAIN Gram matrices' time."""
    train = dataset.split("train")
    pairs = TreeKernelRanker().structures(_pools(train))
    sample = Forest.build(pairs.answers[:1000])
    out: dict[str, Any] = {"sample_trees": sample.n_trees, "sample_mean_nodes": float(sample.sizes().mean())}
    for kind in ("ptk", "stk"):
        gram_matrix(pairs.answers[:20], kind=kind, n_jobs=1)  # compile / load the numba cache
        for jobs in (1, 2):
            started, cpu_started = time.perf_counter(), time.process_time()
            gram_matrix(sample, kind=kind, n_jobs=jobs, normalize=False)
            seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
            out[f"{kind}_evaluations_per_second_{jobs}_threads"] = evaluations(sample.n_trees) / seconds
            # CPU time of all the process's threads: what a job costs, whatever else the machine runs.
            out[f"{kind}_evaluations_per_cpu_second_{jobs}_threads"] = evaluations(sample.n_trees) / cpu_seconds
    questions, answers = Forest.build(pairs.questions), Forest.build(pairs.answers)
    started, cpu_started = time.perf_counter(), time.process_time()
    gram_matrix(questions, n_jobs=2)
    gram_matrix(answers, n_jobs=2)
    out["train_gram_seconds"] = time.perf_counter() - started
    out["train_gram_cpu_seconds"] = time.process_time() - cpu_started
    out["train_pairs"] = len(pairs)
    out["train_unique_trees"] = {"questions": questions.n_trees, "answers": answers.n_trees}
    out["train_gram_evaluations"] = evaluations(questions.n_trees) + evaluations(answers.n_trees)
    out["train_mean_nodes"] = {
        "questions": float(questions.sizes().mean()), "answers": float(answers.sizes().mean())
    }
    texts = [(q.text, c.text) for q in train[:20] for c in q.candidates[:10]]
    parse_many([t for pair in texts for t in pair])
    started = time.perf_counter()
    for question, candidate in texts:
        q, a = parse_many([question, candidate])
        rel_tag(q, a, *heuristic_focus_and_class(q))
    out["links_ms_per_pair"] = 1000 * (time.perf_counter() - started) / len(texts)
    print("speed", json.dumps(out), flush=True)
    return out


def ablation(dataset: Dataset) -> dict[str, Any]:
    train, dev, test = dataset.split("train"), dataset.split("dev"), dataset.split("test")
    rows = {}
    for name, config in ABLATIONS.items():
        ranker = TreeKernelRanker(config)
        started = time.perf_counter()
        report = ranker.fit(train, dev, progress=False)
        seconds = time.perf_counter() - started
        rows[name] = {
            "dev_map": report["best_dev_map"], "selected": report["selected"], "train_seconds": seconds,
            "support_vectors": report["support_vectors"], **_test_metrics(ranker, test),
        }
        print("ablation", name, json.dumps(rows[name]), flush=True)
    return rows


def decays(dataset: Dataset) -> dict[str, Any]:
    """CH+V+F with lambda and mu selected on DEV too (each point recomputes every Gram matrix)."""
    config = TreeKernelConfig(lambdas=DECAY_GRID, mus=DECAY_GRID)
    ranker = TreeKernelRanker(config)
    started = time.perf_counter()
    report = ranker.fit(dataset.split("train"), dataset.split("dev"), progress=False)
    best_per_point: dict[str, float] = {}
    for point in report["grid"]:
        key = f"{point['lambda']}/{point['mu']}"
        best_per_point[key] = max(best_per_point.get(key, float("-inf")), point["dev_map"])
    row = {
        "dev_map_by_decays": best_per_point, "selected": report["selected"], "dev_map": report["best_dev_map"],
        "train_seconds": time.perf_counter() - started, **_test_metrics(ranker, dataset.split("test")),
    }
    print("decays", json.dumps(row), flush=True)
    return row


def _weight_ranker(args: argparse.Namespace, dataset: Dataset):
    if args.weights_checkpoint:
        return registry.load(args.weights_checkpoint), f"checkpoint {args.weights_checkpoint}"
    outcome = train_ranker(args.weights, dataset, seed=1, progress=False)
    return outcome.ranker, f"{args.weights} trained on TrecQA TRAIN (seed 1)"


def pruning(dataset: Dataset, args: argparse.Namespace) -> dict[str, Any]:
    """Prune both trees of every pair at each threshold h; h is chosen on DEV MAP."""
    train, dev, test = dataset.split("train"), dataset.split("dev"), dataset.split("test")
    weight_ranker, source = _weight_ranker(args, dataset)
    weigh = explain_weights(lambda question, candidate: weight_ranker.explain(question, [candidate], 0))
    started = time.perf_counter()
    weights = {(q.text, c.text): weigh(q.text, c.text) for q in [*train, *dev, *test] for c in q.candidates}
    weight_seconds = time.perf_counter() - started
    config = TreeKernelConfig()
    points = []
    for threshold in THRESHOLDS:
        sizes = {"before": 0, "after": 0}

        def prune(question, candidate, q, a, tagged, threshold=threshold, sizes=sizes):
            pruned = prune_pair(tagged, q, a, weights[(question, candidate)], threshold, config.max_tokens)
            sizes["before"] += tagged.question.size() + tagged.answer.size()
            sizes["after"] += pruned.question.size() + pruned.answer.size()
            return pruned

        ranker = TreeKernelRanker(config)
        ranker.tree_transform = prune
        report = ranker.fit(train, dev, progress=False)
        train_pruned = 1 - sizes["after"] / sizes["before"]
        point = {
            "threshold": threshold, "nodes_pruned": train_pruned, "dev_map": report["best_dev_map"],
            "kernel_seconds": report["kernel_seconds"], "svm_seconds": report["svm_seconds"],
            "selected": report["selected"], **_test_metrics(ranker, test),
        }
        points.append(point)
        print("pruning", json.dumps(point), flush=True)
    best = max(points, key=lambda p: p["dev_map"])
    return {"weights": source, "weight_seconds": weight_seconds, "points": points, "chosen_threshold": best["threshold"]}


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _render_speed(s: dict[str, Any]) -> list[str]:
    """Kernel evaluations per second and the TRAIN Gram matrix's cost."""
    lines = [
        "### Kernel speed (TrecQA TRAIN shallow trees, REL-tagged)", "",
        "Numba-compiled STK/PTK (lambda = mu = 0.4), unnormalised Gram matrix of the first "
        f"{s['sample_trees']} distinct answer trees ({s['sample_mean_nodes']:.1f} nodes on average).", "",
        "Wall-clock rates depend on what else the machine runs; per CPU-second (all threads of the "
        "process) is the cost of the work itself.", "",
        "| kernel | evaluations/s, 1 thread | evaluations/s, 2 threads | per CPU-second, 1 thread | "
        "per CPU-second, 2 threads |", "|---|---|---|---|---|",
        *(f"| {k.upper()} | " + " | ".join(
            _number(s.get(f"{k}_evaluations_per_{unit}_{jobs}_threads"), ",.0f")
            for unit in ("second", "cpu_second") for jobs in (1, 2)) + " |" for k in ("ptk", "stk")),
        "",
        f"TRAIN Gram matrices (normalised PTK, 2 threads): {s['train_gram_seconds']:.1f} s wall, "
        f"{_number(s.get('train_gram_cpu_seconds'), '.1f')} CPU-s, for "
        f"{s['train_pairs']:,} pairs = {s['train_unique_trees']['questions']:,} distinct question trees "
        f"({s['train_mean_nodes']['questions']:.1f} nodes) and {s['train_unique_trees']['answers']:,} "
        f"distinct answer trees ({s['train_mean_nodes']['answers']:.1f} nodes), "
        f"{s['train_gram_evaluations']:,} kernel evaluations. REL tagging of a pair (`rel_tag`, wh-word rules): "
        f"{s['links_ms_per_pair']:.2f} ms per pair (parses cached).", "",
    ]
    return lines


def _render_ablation(ablation: dict[str, Any]) -> list[str]:
    """The thesis's Table 6.4 rows beside the published numbers."""
    lines = [
        "### TrecQA TEST: the thesis's Table 6.4 rows", "",
        "SVM (scikit-learn, precomputed kernel) on TRAIN (94 questions, 4,718 pairs); C and the feature-kernel "
        "weight selected on DEV MAP, decays fixed at lambda = mu = 0.4 (SVM-light-TK's defaults); the SVM "
        "is deterministic, so one run (no seeds). Train s: wall-clock of the whole grid on the shared "
        "machine. Differences from the thesis: "
        "spaCy `en_core_web_sm` chunks/NER instead of their UIMA pipeline; training on TrecQA TRAIN instead "
        "of their 824 TREC 11-12 questions (8,730 examples); focus and class from the wh-word heuristic, "
        "not their SVM classifiers; V = 21 similarity features (n-gram Jaccard/containment, lemma/POS "
        "n-gram and dependency-triple cosines, LCS, SM-CNN word overlaps, NER relatedness, PTK(q, a)) instead "
        "of their 43 (no DKPro/ESA/METEOR); a binary SVM, not the preference kernel. The thesis does not "
        "say raw or clean: both are shown.", "",
        "| system | dev MAP | TEST raw MAP | raw MRR | TEST clean MAP | clean MRR | train s | SVs | "
        "published MAP / MRR |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in [n for n in ABLATIONS if n in ablation]:
        row = ablation[name]
        published = PUBLISHED[name]
        lines.append(
            f"| {name} | {row['dev_map']:.4f} | {row['raw']['map']:.4f} | {row['raw']['mrr']:.4f} | "
            f"{row['clean']['map']:.4f} | {row['clean']['mrr']:.4f} | {row['train_seconds']:.0f} | "
            f"{row['support_vectors']} | {published[0]:.4f} / {published[1]:.4f} |"
        )
    lines.append("")
    return lines


def _render_decays(d: dict[str, Any]) -> list[str]:
    """The decays chosen on DEV and their TEST numbers."""
    cells = ", ".join(f"{key}: {value:.4f}" for key, value in d["dev_map_by_decays"].items())
    selected = d["selected"]
    return [
        "### Kernel decays selected on DEV (CH+V+F)", "",
        f"Best dev MAP per lambda/mu (over C and feature weight): {cells}. Selected lambda = "
        f"{selected['lam']}, mu = {selected['mu']}, C = {selected['c']}, feature weight = "
        f"{selected['feature_weight']}: TEST raw MAP {d['raw']['map']:.4f} / MRR {d['raw']['mrr']:.4f}, "
        f"clean MAP {d['clean']['map']:.4f} / MRR {d['clean']['mrr']:.4f}; {d['train_seconds']:.0f} s to "
        "train the whole grid. The registered `tree_kernel` keeps lambda = mu = 0.4 by default (one Gram "
        "computation per training run).", "",
    ]


def _render_pruning(p: dict[str, Any]) -> list[str]:
    """Attention pruning: nodes pruned and MAP per threshold h."""
    return [
        "### Attention pruning (Romeo et al. 2016, Algorithm 1) on TrecQA", "",
        f"Token weights: {p['weights']} (`explain` question/answer weights, scaled per text by their "
        "maximum). Leaves under h are dropped unless REL; internal nodes left childless are dropped unless "
        "REL-tagged. Both trees of every pair are pruned (train, dev and test); CH+V+F otherwise. "
        f"h is chosen on DEV: **h = {p['chosen_threshold']}**. The paper prunes SemEval question trees "
        "with its attention LSTM (SemEval is not in our data): here both TrecQA trees are pruned. "
        "Focus and class for the +F links: the question classifiers registered in the store when this "
        "ran (see the rankers section), so the h = 0 row differs from the CH+V+F row above (wh-word "
        "rules).", "",
        "| h | nodes pruned (TRAIN+DEV trees) | dev MAP | TEST raw MAP | TEST clean MAP | kernel s | SVM s |",
        "|---|---|---|---|---|---|---|",
        *(f"| {point['threshold']} | {100 * point['nodes_pruned']:.0f}% | {point['dev_map']:.4f} | "
          f"{point['raw']['map']:.4f} | {point['clean']['map']:.4f} | {point['kernel_seconds']:.0f} | "
          f"{point['svm_seconds']:.0f} |" for point in p["points"]),
        "",
    ]


def render(result: dict[str, Any]) -> list[str]:
    lines = ["## Structure: tree kernels, REL-linked trees, attention pruning", ""]
    lines += [f"Script: `benchmarks/structure.py`. Machine: {machine_line(result['machine'])}; the machine was "
              "shared with other jobs, so timings are rough.", ""]
    parts = (("speed", _render_speed), ("ablation", _render_ablation), ("decays", _render_decays),
             ("pruning", _render_pruning))
    for part, render_part in parts:
        if part in result:
            lines += render_part(result[part])
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="*", default=["speed", "ablation", "decays", "pruning"],
                        choices=["speed", "ablation", "decays", "pruning"],
                        help="parts to run; none: only re-render the section from the stored results")
    parser.add_argument("--weights", default="smcnn", help="ranker whose explain() gives the pruning weights")
    parser.add_argument("--weights-checkpoint", help="a trained checkpoint to take the weights from instead")
    args = parser.parse_args()
    dataset = shared_datasets()["trecqa"] if args.parts else None
    parts = {"speed": speed, "ablation": ablation, "decays": decays, "pruning": lambda d: pruning(d, args)}
    fresh = {name: run(dataset) for name, run in parts.items() if name in args.parts}
    # Read the previous results only now: another run of this script may have written meanwhile.
    path = RESULTS / "structure.json"
    result: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if fresh:
        result.update(fresh, machine=machine())
    print(write_result("structure", result))
    print(write_section("structure", render(result)))


if __name__ == "__main__":
    main()
