"""Simulated annotator on WikiQA: how many labels does each queue strategy need?

Every curve starts from the same seed set (whole TRAIN questions in seeded random order, cut at the
first budget), then each round orders the unlabelled TRAIN pairs with the Label page's strategy
(``qa_core.services.labeling.strategies``), writes the first ones' gold grades into a temporary SQLite store
as annotator ``simulated``, reads the training labels back by the documented rule
(``training_dataset``), retrains SM-CNN from scratch with the round's seed, and evaluates on gold
DEV (model selection) and TEST (reported only). ``qa_core.services.labeling.curves.simulate_loop`` is the
loop; this script runs it over strategies and seeds and renders the section and the figure.

    nice -n 10 .venv/bin/python benchmarks/learning_loop.py --seeds 1 2 3
    .venv/bin/python benchmarks/learning_loop.py --render   # re-render from the stored results
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from common import ROOT, machine, machine_line, mean_std, shared_datasets, write_result, write_section

from db.store import Store
from qa_core.rankers import registry
from qa_core.services.experiments import evaluate_ranker, train_ranker
from qa_core.services.labeling.curves import (
    CurvePoint,
    curve_figure,
    curve_summary,
    labels_to_reach,
    simulate_loop,
)
from qa_core.services.labeling.strategies import STRATEGIES, model_scores
from qa_core.services.labeling.training_labels import training_dataset
from qa_core.text.nlp import parse_many

RESULT = "learning_loop"
FIGURE = ROOT / "docs" / "learning_curve.html"
PICTURE = ROOT / "docs" / "learning_curve.png"
# Cumulative TRAIN labels per round: the seed set (10% of WikiQA's 8,672 TRAIN pairs, i.e. about
# 10% of its questions), then roughly x1.5 per round; the full set (8,672) is the full-data run.
BUDGETS = (870, 1300, 1950, 2900, 4350)
# Shorter training than the rankers benchmark (max 25 epochs, patience 5, dev check every 10
# batches) so that 12 curves fit the CPU budget of a shared 2-core machine; the full-data runs use
# the same settings, so every point is comparable with the full-data MAP.
MODEL_CONFIG = {"max_epochs": 10, "patience": 3, "eval_every": 20}
COMMITTEE = "bm25"  # the disagreement strategy compares the current SM-CNN with BM25's ranking


def full_data_run(store: Store, seed: int) -> CurvePoint:
    """SM-CNN on every TRAIN label (the same store path: gold on train and dev), one seed."""
    data, resolved = training_dataset(store, "wikiqa", gold={"train", "dev"})
    with tempfile.TemporaryDirectory() as tmp:
        outcome = train_ranker(
            "smcnn", data, seed=seed, progress=False, checkpoint=Path(tmp) / "full.pt", model_config=MODEL_CONFIG
        )
    test = store.datasets.load_dataset("wikiqa", split="test").questions
    return CurvePoint(
        labels=sum(c.label is not None for q in data.split("train") for c in q.candidates),
        dev_map=float(outcome.metrics["dev_map"]),
        test_map=float(evaluate_ranker(outcome.ranker, test).aggregate["map"]),
        train_seconds=float(outcome.report["seconds"]),
    )


def run(seeds: list[int], strategies: list[str], budgets: list[int]) -> dict[str, Any]:
    torch.set_num_threads(1)  # two threads fight the other jobs on a shared 2-core machine
    dataset = shared_datasets()["wikiqa"]
    parse_many([q.text for q in dataset.questions] + [c.text for q in dataset.questions for c in q.candidates])
    result: dict[str, Any] = {
        "machine": machine(),
        "dataset": "wikiqa",
        "model": "smcnn",
        "budgets": budgets,
        "seeds": seeds,
        "committee": COMMITTEE,
        "model_config": MODEL_CONFIG,
        "torch_threads": torch.get_num_threads(),
        "full": [],
        "curves": {strategy: [] for strategy in strategies},
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.sqlite"
        store = Store(f"sqlite:///{template}")
        store.datasets.import_dataset(dataset)
        bm25 = registry.create(COMMITTEE)  # IDF from each pool: nothing to fit
        committee = {COMMITTEE: model_scores(bm25, store.datasets.candidate_rows("wikiqa", split="train"))}
        for seed in seeds:
            point = full_data_run(store, seed)
            result["full"].append({"seed": seed, **point.__dict__})
            print(
                f"full seed {seed}: dev {point.dev_map:.4f} test {point.test_map:.4f} ({point.train_seconds}s)",
                flush=True,
            )
        store.close()
        for seed in seeds:
            for strategy in strategies:
                path = Path(tmp) / f"{strategy}-{seed}.sqlite"
                shutil.copy(template, path)  # a fresh store without labels for every curve
                curve_store = Store(f"sqlite:///{path}")
                points = simulate_loop(
                    curve_store,
                    "wikiqa",
                    strategy,
                    budgets,
                    seed=seed,
                    model_config=MODEL_CONFIG,
                    committee=committee,
                    on_point=lambda p, s=strategy, sd=seed: print(
                        f"{s} seed {sd} labels {p.labels}: dev {p.dev_map:.4f} test {p.test_map:.4f} "
                        f"({p.train_seconds}s, {time.perf_counter() - started:.0f}s so far)",
                        flush=True,
                    ),
                )
                curve_store.close()
                path.unlink()
                result["curves"][strategy].append({"seed": seed, "points": [p.__dict__ for p in points]})
                result["seconds"] = round(time.perf_counter() - started, 1)
                write_result(RESULT, result)  # after every curve: a stopped run keeps what it did
    return result


def analyse(result: dict[str, Any]) -> dict[str, Any]:
    """Mean curves, full-data MAP, and the labels each strategy needs for 95% / 100% of it."""
    full = [CurvePoint(**{k: v for k, v in row.items() if k != "seed"}) for row in result["full"]]
    analysis: dict[str, Any] = {"full_labels": full[0].labels}
    for metric in ("dev_map", "test_map"):
        full_mean, full_std = mean_std([getattr(p, metric) for p in full])
        per_strategy = {}
        for strategy, curves in result["curves"].items():
            points = [[CurvePoint(**p) for p in curve["points"]] for curve in curves]
            summary = curve_summary(points, metric)
            per_strategy[strategy] = {
                "summary": summary,
                "labels_95": labels_to_reach(summary, 0.95 * full_mean),
                "labels_100": labels_to_reach(summary, full_mean),
                "seeds": len(curves),
            }
        analysis[metric] = {"full": (full_mean, full_std), "strategies": per_strategy}
    return analysis


def _needed(labels: int | None, budgets: list[int]) -> str:
    return f"{labels:,}" if labels is not None else f"> {budgets[-1]:,}"


def render(result: dict[str, Any]) -> list[str]:
    analysis = analyse(result)
    budgets = result["budgets"]
    full_labels = analysis["full_labels"]
    lines = [
        "## Learning loop: simulated annotator on WikiQA",
        "",
        "Script: `benchmarks/learning_loop.py` (loop: `qa_core.services.labeling.curves.simulate_loop`). Seed set: "
        f"{budgets[0]:,} TRAIN pairs (whole questions in seeded random order, about 10% of TRAIN); each round "
        "orders the unlabelled TRAIN pairs with the Label page's queue strategy, writes the first ones' gold "
        "grades into a temporary SQLite store as annotator `simulated`, reads the training labels back by the "
        "documented rule and retrains SM-CNN from scratch (no warm start), selecting on gold DEV MAP; TEST is "
        f"only reported. Training settings {result['model_config']} (shorter than the rankers benchmark's "
        f"25 epochs / patience 5 / check every 10 batches, to fit the CPU budget; the full-data runs use the same). Cumulative budgets: {', '.join(f'{b:,}' for b in budgets)}; full data = all "
        f"{full_labels:,} TRAIN pairs. Uncertainty reads the current SM-CNN's P(relevant); disagreement "
        f"compares the current SM-CNN's within-question ranking with {result['committee'].upper()}'s. "
        f"Mean ± std over seeds {', '.join(map(str, result['seeds']))} (a seed fixes the seed set, the "
        "strategies' tie-breaking and the training).",
        "",
    ]
    for metric, split in (("test_map", "TEST"), ("dev_map", "DEV")):
        block = analysis[metric]
        full_mean, full_std = block["full"]
        lines += [
            f"### {split} MAP against TRAIN labels",
            "",
            "| strategy | "
            + " | ".join(f"{b:,}" for b in budgets)
            + f" | labels for 95% of full ({0.95 * full_mean:.4f}) "
            f"| labels for 100% of full ({full_mean:.4f}) |",
            "|---|" + "---|" * (len(budgets) + 2),
        ]
        for strategy, entry in block["strategies"].items():
            by_labels = {row["labels"]: row for row in entry["summary"]}
            cells = [
                f"{by_labels[b]['mean']:.4f} ± {by_labels[b]['std']:.4f}" if b in by_labels else "-" for b in budgets
            ]
            lines.append(
                f"| {strategy} | {' | '.join(cells)} | {_needed(entry['labels_95'], budgets)} "
                f"| {_needed(entry['labels_100'], budgets)} |"
            )
        lines += [f"| full data ({full_labels:,} labels) | {full_mean:.4f} ± {full_std:.4f} |", ""]
    lines += [_verdict(analysis["test_map"], budgets, "TEST"), "", _verdict(analysis["dev_map"], budgets, "DEV"), ""]
    lines += [
        f"Figure: `docs/learning_curve.html` (plotly){_picture_note()}. Labels needed are read off the "
        "measured budgets (the first whose mean reaches the target), so they are as coarse as the grid. "
        f"Whole run: {result.get('seconds', 0) / 60:.0f} min, niced, on a machine shared with other jobs.",
        "",
        f"Machine: {machine_line(result['machine'])}.",
        "",
    ]
    return lines


def _picture_note() -> str:
    if PICTURE.exists():
        return " and `docs/learning_curve.png` (drawn by headless Chromium where kaleido is not installed)"
    return " (no static PNG: neither kaleido nor Chromium was available)"


def _verdict(block: dict[str, Any], budgets: list[int], split: str) -> str:
    """Whether some strategy needs at most half the labels random needs, said plainly."""
    strategies = block["strategies"]
    if "random" not in strategies:
        return ""
    full_mean = block["full"][0]
    seed_mean = strategies["random"]["summary"][0]["mean"]
    sentences = [
        f"the seed set alone reaches {seed_mean / full_mean:.0%} of the full-data {split} MAP, so a strategy can "
        f"only save labels between {budgets[0]:,} and random's count"
    ]
    for level in ("95", "100"):
        random_needs = strategies["random"][f"labels_{level}"]
        for strategy, entry in strategies.items():
            if strategy == "random":
                continue
            needs = entry[f"labels_{level}"]
            if needs is None:
                sentences.append(f"{strategy} does not reach {level}% within {budgets[-1]:,} labels")
            elif random_needs is None:
                sentences.append(
                    f"{strategy} reaches {level}% with {needs:,} labels; random does not within {budgets[-1]:,}"
                )
            else:
                half = "at most half" if needs <= random_needs / 2 else f"{needs / random_needs:.0%}"
                sentences.append(
                    f"{strategy} needs {needs:,} labels for {level}% against random's {random_needs:,} ({half})"
                )
    return f"Verdict ({split}, mean curves): " + "; ".join(sentences) + "."


def save_figure(result: dict[str, Any]) -> None:
    analysis = analyse(result)
    block = analysis["test_map"]
    full_mean = block["full"][0]
    series = {strategy: entry["summary"] for strategy, entry in block["strategies"].items()}
    series["full data"] = [{"labels": analysis["full_labels"], "mean": full_mean, "std": block["full"][1]}]
    figure = curve_figure(
        series,
        title="SM-CNN on WikiQA: TEST MAP against TRAIN labels (simulated annotator, mean ± std over seeds)",
        y_title="TEST MAP",
        references={"full data": full_mean, "95% of full data": 0.95 * full_mean},
    )
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    figure.write_html(FIGURE, include_plotlyjs="cdn")
    try:
        figure.write_image(PICTURE, width=1100, height=600)
    except (ImportError, ValueError, RuntimeError) as error:
        print(f"kaleido cannot write the PNG ({str(error).strip().splitlines()[0]}); trying Chromium")
        screenshot(figure, PICTURE)


def screenshot(figure: Any, path: Path) -> None:
    """The static PNG through headless Chromium (the test suite's browser) when kaleido is absent:
    the figure as a self-contained page, photographed."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("no static PNG: neither kaleido nor playwright is installed")
        return
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "figure.html"
        figure.write_html(page_path, include_plotlyjs=True, full_html=True, default_width=1100, default_height=600)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1120, "height": 620})
            page.goto(page_path.as_uri())
            page.wait_for_selector(".js-plotly-plot")
            page.screenshot(path=str(path))
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--render", action="store_true", help="only re-render from the stored results")
    args = parser.parse_args()
    if args.render:
        import json

        from common import RESULTS

        result = json.loads((RESULTS / f"{RESULT}.json").read_text())
    else:
        result = run(args.seeds, args.strategies, args.budgets)
        print(write_result(RESULT, result))
    save_figure(result)
    print(write_section(RESULT, render(result)))


if __name__ == "__main__":
    main()
