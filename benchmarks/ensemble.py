"""Score-level ensemble of the rankers whose DEV and TEST runs ``benchmarks/rankers.py`` kept.

Members are chosen per seed on DEV only (``qa_core.fusion.select_members``: the k runs with the best
DEV MAP, equal weights on z-normalised scores, k by cross-validation over DEV's questions); TEST is
scored once with the chosen members; the fused DEV and TEST runs are kept beside the members'
(``ensemble.seed<N>.<split>.run.gz``) for the significance tests. Fusion runs through ranx
(``qa_core.fusion``). For seed N a
member contributes its seed-N run; a member with a single run (baselines, the deterministic tree
kernel) contributes that run to every seed; the seeds are those that every model with several seeds
has, so each seed chooses among the same members.
Writes ``benchmarks/results/ranker_ensemble.json`` (rendered in the rankers table).

    .venv/bin/python benchmarks/ensemble.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common import machine, shared_datasets, write_result, write_section
from rankers import RUNS, evaluate_both, render_section, run_path, summarise

from qa_core.data.exporters import write_trec_run
from qa_core.evaluation import qrels_from_questions
from qa_core.fusion import fuse, select_members
from qa_core.rankers import registry
from qa_core.services.stored_runs import read_run, run_files


def stored_runs(dataset: str) -> dict[str, dict[int | None, Path]]:
    """``{model: {seed or None: test-run path}}`` for registered models that kept both a DEV and a TEST
    run (not the ensemble's own runs, nor ablations such as ``compare_aggregate-pointwise``)."""
    dev = run_files(RUNS / dataset, "dev")
    models = set(registry.available())
    found = {model: {seed: path for seed, path in by_seed.items() if seed in dev.get(model, {})}
             for model, by_seed in run_files(RUNS / dataset, "test").items() if model in models}
    return {model: by_seed for model, by_seed in found.items() if by_seed}


def common_seeds(runs: dict[str, dict[int | None, Path]]) -> list[int]:
    """The seeds every model with several seeds has, so that each seed's ensemble chooses among the
    same members (models with one run join every seed)."""
    seeded = [{seed for seed in by_seed if seed is not None} for by_seed in runs.values() if len(by_seed) > 1]
    return sorted(set.intersection(*seeded)) if seeded else []


def members_for_seed(runs: dict[str, dict[int | None, Path]], seed: int) -> dict[str, Path]:
    chosen = {}
    for model, by_seed in runs.items():
        if seed in by_seed:
            chosen[model] = by_seed[seed]
        elif len(by_seed) == 1:
            chosen[model] = next(iter(by_seed.values()))
    return chosen


def ensemble_dataset(name: str, questions: dict[str, list]) -> dict[str, Any] | None:
    runs = stored_runs(name)
    seeds = common_seeds(runs)
    if len(runs) < 2 or not seeds:
        print(f"{name}: fewer than two models with kept runs; run benchmarks/rankers.py first")
        return None
    dev_qrels, test = qrels_from_questions(questions["dev"]), questions["test"]
    results = []
    for seed in seeds:
        members = members_for_seed(runs, seed)
        dev = {model: read_run(path.with_name(path.name.replace(".test.", ".dev."))) for model, path in members.items()}
        weights, dev_map = select_members(dev, dev_qrels)
        fused = fuse({model: read_run(members[model]) for model in weights}, weights)
        for split, run in (("dev", fuse(dev, weights)), ("test", fused)):  # kept for the significance tests
            write_trec_run(run, run_path(name, "ensemble", seed, split), tag=f"ensemble.seed{seed}")
        results.append({"seed": seed, "weights": weights, "candidates": sorted(members), "dev_map": dev_map,
                        **evaluate_both(fused, test)})
        print(name, seed, weights, f"dev {dev_map:.4f}", f"test raw {results[-1]['raw']['map']:.4f}", flush=True)
    entry = {"seeds": seeds, "runs": results}
    entry["summary"] = summarise(entry)
    return entry


def main() -> None:
    datasets = shared_datasets()
    result: dict[str, Any] = {"model": "ensemble", "machine": machine(), "datasets": {}}
    for name, dataset in datasets.items():
        entry = ensemble_dataset(name, {split: dataset.split(split) for split in ("dev", "test")})
        if entry is not None:
            result["datasets"][name] = entry
    print(write_result("ranker_ensemble", result))
    print(write_section("rankers", render_section()))


if __name__ == "__main__":
    main()
