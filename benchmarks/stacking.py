"""The stacker (``qa_core/stacking.py``) over the rankers' runs, and the best system per dataset
against today's best (the z-score ensemble without compare-aggregate), on the targets' settings.

    .venv/bin/python benchmarks/stacking.py --oof        # out-of-fold TRAIN runs of the members (slow)
    .venv/bin/python benchmarks/stacking.py              # stack, compare, render

Out-of-fold TRAIN runs: 5 folds over TRAIN's questions, members trained with seed 1 and their
default settings (compare-aggregate with the wh-word rules, as in its benchmark runs), kept as
``runs/<dataset>/<member>.oof5.train.run.gz``. The stacker of seed N reads those for TRAIN and the
members' seed-N DEV and TEST runs from ``benchmarks/rankers.py`` (seedless members their one run),
and LightGBM runs with seed N. Hyper-parameters per seed on DEV (``PARAM_GRID``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch
from common import machine, machine_line, mean_std, read_results, shared_datasets, write_result, write_section
from compare_aggregate import MAIN_SEEDS, SETTING
from ensemble import members_for_seed, read_run, stored_runs
from paired import minimum_detectable_difference, per_question_ap, randomisation_p
from rankers import RUNS, evaluate_both

from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.data.exporters import write_trec_run
from qa_core.evaluation import evaluate, qrels_from_questions
from qa_core.fusion import fuse, select_members
from qa_core.rankers import registry
from qa_core.rankers.base import Ranker
from qa_core.stacking import out_of_fold_run, select_stacker
from qa_core.types import Dataset, Question

# Fixed before any stacker was fitted: every model whose out-of-fold runs fit the CPU budget and need
# no question classifiers (their out-of-fold members would have to read the same trained classifiers
# as their stored runs). Left out: CNN_WO+SO and the tree kernel (classifiers), MP-HCNN, the attention
# LSTM and global-local attention (the slowest to train, 5 folds each).
MEMBERS = ("bm25", "overlap", "smcnn", "cnn_wo", "compare_aggregate")
UNTRAINED = {"bm25"}  # reads nothing from training data
FOLDS = 5
OOF_SEED = 1
TODAY = "ensemble"  # today's best system on both datasets (docs/benchmarks.md before compare-aggregate)

# Fixed before any DEV number of the stacker or the new ensemble was seen:
SELECTION_RULE = (
    "Rule fixed before the runs: the best system per dataset is the candidate with the highest mean DEV MAP "
    "over seeds 1-5 among compare-aggregate alone, the z-score ensemble re-chosen with compare-aggregate among "
    "its candidates, and the stacker; it is compared with today's best (the ensemble without compare-aggregate) "
    "on TEST, and a gain is claimed only at p < 0.05 (paired randomisation test, 10,000 permutations, "
    "per-question AP averaged over seeds 1-5)."
)


def oof_path(dataset: str, member: str) -> Path:
    return RUNS / dataset / f"{member}.oof{FOLDS}.train.run.gz"


def train_member(name: str):
    def train(train: list[Question], dev: list[Question], seed: int) -> Ranker:
        ranker = registry.create(name)
        if name not in UNTRAINED:  # the wh-word rules for the one member that reads question analysis
            ranker.fit(train, dev, seed=seed, analyzer=QuestionAnalyzer(), progress=False)
        return ranker

    return train


def compute_oof(dataset: Dataset, members: list[str]) -> None:
    for member in members:
        path = oof_path(dataset.name, member)
        if path.exists():
            continue
        started, load = time.perf_counter(), os.getloadavg()[0]
        run = out_of_fold_run(train_member(member), dataset.split("train"), dataset.split("dev"), folds=FOLDS,
                              seed=OOF_SEED)  # fmt: skip
        write_trec_run(run, path, tag=f"{member}.oof{FOLDS}")
        print(dataset.name, member, f"oof {time.perf_counter() - started:.0f}s load {load:.1f}", flush=True)


def seed_runs(dataset: str, seed: int, split: str, exclude: tuple[str, ...] = ()) -> dict[str, dict]:
    """Every stored model's run of ``split`` for ``seed`` (seedless models: their one run)."""
    runs = {m: by_seed for m, by_seed in stored_runs(dataset).items() if m not in exclude}
    return {m: read_run(p if split == "test" else p.with_name(p.name.replace(".test.", f".{split}.")))
            for m, p in members_for_seed(runs, seed).items()}  # fmt: skip


def ensemble_run(dataset: str, seed: int, dev: list[Question], exclude: tuple[str, ...]) -> tuple[dict, float]:
    """TEST run and DEV MAP of the DEV-chosen z-score ensemble of the stored runs (``benchmarks/ensemble.py``)."""
    weights, dev_map = select_members(seed_runs(dataset, seed, "dev", exclude), qrels_from_questions(dev))
    test_runs = seed_runs(dataset, seed, "test", exclude)
    return fuse({m: test_runs[m] for m in weights}, weights), dev_map


def stack_dataset(dataset: Dataset, seeds: list[int]) -> dict[str, Any]:
    name = dataset.name
    train, dev, test = dataset.split("train"), dataset.split("dev"), dataset.split("test")
    train_runs = {m: read_run(oof_path(name, m)) for m in MEMBERS}
    dev_qrels, test_qrels = qrels_from_questions(dev), qrels_from_questions(test)
    clean = SETTING[name] == "clean"
    systems: dict[str, dict[str, Any]] = {s: {"runs": []} for s in (TODAY, "ensemble+ca", "compare_aggregate", "stacker")}
    test_runs_of: dict[str, list[dict]] = {s: [] for s in systems}
    for seed in seeds:
        dev_runs, test_runs = seed_runs(name, seed, "dev"), seed_runs(name, seed, "test")
        stacker, stack_dev = select_stacker(MEMBERS, train, train_runs, dev, {m: dev_runs[m] for m in MEMBERS}, seed=seed)
        stacked = stacker.score(test, {m: test_runs[m] for m in MEMBERS})
        today_test, today_dev = ensemble_run(name, seed, dev, exclude=("compare_aggregate",))
        new_test, new_dev = ensemble_run(name, seed, dev, exclude=())
        ca_dev = evaluate(dev_runs["compare_aggregate"], dev_qrels).aggregate["map"]
        for system, run, dev_map, extra in (
            (TODAY, today_test, today_dev, {}),
            ("ensemble+ca", new_test, new_dev, {}),
            ("compare_aggregate", test_runs["compare_aggregate"], ca_dev, {}),
            ("stacker", stacked, stack_dev, {"params": vars(stacker.params), "importances": stacker.importances}),
        ):
            systems[system]["runs"].append({"seed": seed, "dev_map": dev_map, **evaluate_both(run, test), **extra})
            test_runs_of[system].append(run)
        print(name, seed, {s: round(v["runs"][-1][SETTING[name]]["map"], 4) for s, v in systems.items()}, flush=True)
    today_ap = per_question_ap(test_runs_of[TODAY], test_qrels, clean)
    for system, entry in systems.items():
        if system == TODAY or not test_runs_of[system]:
            continue
        ap = per_question_ap(test_runs_of[system], test_qrels, clean)
        entry["against_today"] = {
            "difference": sum(ap[q] - today_ap[q] for q in ap) / len(ap),
            "p": randomisation_p(ap, today_ap),
            "mdd": minimum_detectable_difference(ap, today_ap),
        }
    main = {s: mean_std([r["dev_map"] for r in e["runs"]])[0] for s, e in systems.items()}
    best = max((s for s in systems if s != TODAY), key=lambda s: main[s])
    return {"systems": systems, "best": best, "setting": SETTING[name]}


def render_section() -> list[str]:
    results = {r["model"]: r for r in read_results("stacking")}.get("stacking")
    lines = [
        "## Stacking and the best system",
        "",
        "Script: `benchmarks/stacking.py` (library: `qa_core/stacking.py`). The stacker is LightGBM's lambdarank "
        "over each member's per-pool z-score and rank plus word-overlap and length features, trained on "
        f"out-of-fold TRAIN scores ({FOLDS} folds over TRAIN's questions, members trained with seed {OOF_SEED} "
        "on the other folds; DEV only selects the members' epochs, as in every run here) and never on DEV or "
        "TEST; its hyper-parameters are chosen per seed on DEV from a 9-point grid (leaves 3/7/15 x trees "
        f"50/150/400, learning rate 0.05). Members: {', '.join(MEMBERS)}. Left out for this 2-core machine's "
        "CPU budget: CNN_WO+SO and the tree kernel (their out-of-fold members would need the question "
        "classifiers trained again), MP-HCNN, the attention LSTM and global-local attention (the slowest to "
        "train five times over). Deviation: the "
        "out-of-fold members have one seed, while the DEV and TEST features of stacker seed N come from the "
        "members' seed-N runs trained on all of TRAIN. Today's best is the z-score ensemble as "
        "`benchmarks/ensemble.py` builds it without compare-aggregate; `ensemble+ca` is the same method with "
        "compare-aggregate among its candidates. Δ, p and MDD compare per-question TEST AP (averaged over "
        "seeds 1-5) with today's best. The stacker has no held-out seed: the members have no seed-11 runs.",
        "",
        SELECTION_RULE,
        "",
    ]
    if results is None:
        return lines
    for dataset, entry in results["datasets"].items():
        setting = entry["setting"]
        lines += [
            f"### {dataset} ({setting} TEST)",
            "",
            "| system | DEV MAP | TEST MAP | TEST range | Δ points vs today | p | MDD points |",
            "|---|---|---|---|---|---|---|",
        ]
        for system, values in entry["systems"].items():
            main = values["runs"]
            tests = [r[setting]["map"] for r in main]
            dev_mean, dev_std = mean_std([r["dev_map"] for r in main])
            test_mean, test_std = mean_std(tests)
            against = values.get("against_today")
            stats = ("- | - | -" if against is None else
                     f"{100 * against['difference']:+.2f} | {against['p']:.4f} | {100 * against['mdd']:.2f}")  # fmt: skip
            marker = " (best on DEV)" if system == entry["best"] else ""
            lines.append(
                f"| {system}{marker} | {dev_mean:.4f} ± {dev_std:.4f} | {test_mean:.4f} ± {test_std:.4f} | "
                f"{min(tests):.4f}-{max(tests):.4f} | {stats} |"
            )
        lines.append("")
    lines += [f"Machine: {machine_line(results['machine'])}.", ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--oof", action="store_true", help="compute the missing out-of-fold TRAIN runs first")
    parser.add_argument("--members", nargs="+", default=list(MEMBERS), choices=list(MEMBERS))
    parser.add_argument("--datasets", nargs="+", default=["wikiqa", "trecqa"])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(MAIN_SEEDS), help="seeds every member has")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    datasets = {name: ds for name, ds in shared_datasets().items() if name in args.datasets}
    if args.oof:
        for dataset in datasets.values():
            compute_oof(dataset, args.members)
        return
    result: dict[str, Any] = {"model": "stacking", "machine": machine(), "datasets": {}}
    for name, dataset in datasets.items():
        result["datasets"][name] = stack_dataset(dataset, args.seeds)
    print(write_result("stacking", result))
    print(write_section("stacking", render_section()))


if __name__ == "__main__":
    main()
