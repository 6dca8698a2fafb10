"""Runs that are not a ranker to call: per-seed TREC run files (what ``benchmarks/rankers.py`` keeps),
the store's runs from ``python -m qa_core evaluate`` (one per model version), and fused runs built
from rankers (``qa_core.fusion``) and kept in the store under a ``fusion:`` tag. The Compare page and
the benchmark report read them through here.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qa_core.evaluation import Run, evaluate, qrels_from_questions
from qa_core.fusion import Fusion, apply_fusion, tune_fusion
from qa_core.rankers.base import Ranker
from qa_core.services.experiments import score_questions
from qa_core.types import Dataset, InputError, Question

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor

# <model>[.seed<N>].<split>.run[.gz], as benchmarks/rankers.py names them
RUN_FILE = re.compile(r"(?P<model>[A-Za-z0-9_-]+?)(?:\.seed(?P<seed>\d+))?\.(?P<split>[A-Za-z0-9_-]+)\.run(?:\.gz)?")
FUSION_PREFIX = "fusion:"
FILES, EVALUATED = "run files", "evaluate runs"


def read_run(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run file (gzipped or not) as ``{qid: {doc_id: score}}``; a bad line is an ``InputError``
    naming it."""
    from qa_core.data.importers import read_trec_run

    return {qid: {doc: score for doc, _, score in docs} for qid, docs in read_trec_run(path).items()}


def run_files(folder: Path, split: str) -> dict[str, dict[int | None, Path]]:
    """``{model: {seed (None for a seedless run): path}}`` for the split's run files in ``folder``."""
    found: dict[str, dict[int | None, Path]] = defaultdict(dict)
    for path in sorted(folder.glob(f"*.{split}.run*")) if folder.is_dir() else []:
        match = RUN_FILE.fullmatch(path.name)
        if match is not None and match["split"] == split:
            found[match["model"]][None if match["seed"] is None else int(match["seed"])] = path
    return {model: dict(sorted(by_seed.items(), key=lambda item: item[0] or 0)) for model, by_seed in found.items()}


@dataclass(frozen=True)
class SeedRun:
    """One run of a model: a file (one seed) or a stored run (one model version)."""

    label: str  # "seed 3", "version 2"
    path: Path | None = None
    run_id: int | None = None


def seed_groups(store: Store, dataset: str, split: str, folder: Path | None) -> dict[str, list[SeedRun]]:
    """Every model's runs on the split, one group per model and source: ``"<model> · run files"`` from
    ``folder`` (a dataset's folder of per-seed runs) and ``"<model> · evaluate runs"`` from the store
    (the newest run per model version; fused runs are not seeds)."""
    groups: dict[str, list[SeedRun]] = {}
    for model, by_seed in run_files(folder, split).items() if folder is not None else []:
        groups[f"{model} · {FILES}"] = [
            SeedRun("one run" if seed is None else f"seed {seed}", path=path) for seed, path in by_seed.items()
        ]
    newest: dict[str, dict[int, SeedRun]] = defaultdict(dict)
    for run in store.runs.runs(dataset):  # newest first
        version = run["model_version_id"]
        if run["split"] != split or version is None or run["tag"].startswith(FUSION_PREFIX):
            continue
        newest[run["model"]].setdefault(version, SeedRun(f"version {run['model_version']}", run_id=run["id"]))
    for model, by_version in sorted(newest.items()):
        groups[f"{model} · {EVALUATED}"] = list(by_version.values())
    return groups


def load_runs(store: Store, runs: Sequence[SeedRun]) -> list[Run]:
    return [read_run(run.path) if run.path is not None else store.runs.load_run(run.run_id) for run in runs]


# ---------------------------------------------------------------------- fused runs


def fusion_tags(store: Store, dataset: str) -> list[str]:
    """Tags of the fused runs kept for ``dataset``, newest first."""
    return list(dict.fromkeys(run["tag"] for run in store.runs.runs(dataset) if run["tag"].startswith(FUSION_PREFIX)))


def load_tagged_run(store: Store, dataset: str, tag: str, split: str) -> Run:
    """The newest run with ``tag`` on ``split``."""
    for run in store.runs.runs(dataset):
        if run["tag"] == tag and run["split"] == split:
            return store.runs.load_run(run["id"])
    raise InputError(f"{tag} has no run on split {split!r}; fuse the models again on this split")


def build_fusion(
    rankers: Mapping[str, Ranker], dev: Sequence[Question], split_runs: Mapping[str, Run], method: str
) -> tuple[Fusion, Run, Run]:
    """Tune ``method`` on the DEV questions (each ranker scores them) and fuse ``split_runs`` (the same
    rankers' runs on the split being compared); returns the recipe and the fused DEV and split runs."""
    pooled = [q for q in dev if q.candidates]
    if not pooled:
        raise InputError("the dataset has no dev split to tune the fusion on")
    dev_runs = {name: score_questions(ranker, pooled) for name, ranker in rankers.items()}
    recipe = tune_fusion(method, dev_runs, qrels_from_questions(pooled))
    return recipe, apply_fusion(recipe, dev_runs), apply_fusion(recipe, split_runs)


def save_fusion(
    store: Store, dataset: str, recipe: Fusion, runs: Mapping[str, tuple[Sequence[Question], Run]], *,
    actor: Actor | None = None,
) -> list[int]:
    """Keep the fused run of each split (``{split: (questions, run)}``) under the recipe's tag, with its
    metrics, the method, members and parameters chosen on DEV; returns the run ids. ``actor``: who
    saves them (the store checks the right to train)."""
    ids = []
    for split, (questions, run) in runs.items():
        result = evaluate(run, qrels_from_questions(questions))
        metrics = {**result.aggregate, "questions": result.questions, "method": recipe.method,
                   "members": list(recipe.members), "params": recipe.params, "dev_map": recipe.dev_map}
        ids.append(store.runs.save_run(dataset, split, run, metrics, tag=recipe.tag, actor=actor))
    return ids


@dataclass(frozen=True)
class KeptEvaluation:
    """What ``evaluate_and_keep`` measured (``line``: the metrics and counts, with the kept run's
    id), the run itself, and a note for people (e.g. which version was loaded), if any."""

    line: dict[str, Any]
    run: Run
    ranker_name: str
    notice: str | None


def evaluate_and_keep(
    store: Store, model: str, dataset: str, split: str, rule: str, *, clean: bool = False,
    progress: Callable[[int, int], None] | None = None, actor: Actor | None,
) -> KeptEvaluation:
    """Score ``model`` (a registered name or a checkpoint path) on ``dataset``'s ``split`` under the
    label ``rule``, and keep the run in the store with the version that made it. The rules: a
    trainable model is evaluated only with a version trained on or promoted for the dataset
    (``NotTrainedError`` says how to train one), the version the pages use; the metrics count
    ties fairly (``tie_aware``) and, where the run ranks unjudged candidates, say so (``judgements``)."""
    from qa_core.evaluation import judgements, tie_aware
    from qa_core.rankers import registry
    from qa_core.services import model_loading
    from qa_core.services.evaluation_labels import evaluation_labels, parse_rule
    from qa_core.services.experiments import require_split, score_and_evaluate

    version_id, notice = None, None
    if model in registry.trainable():  # else a baseline, a checkpoint path or a system (model_loading.load_ranker)
        loaded = model_loading.load_trained(store, model, dataset)
        ranker, version_id, notice = loaded.ranker, loaded.version["id"], loaded.notice
    else:
        ranker = model_loading.load_ranker(store, model, dataset)
    labels = evaluation_labels(store, dataset, parse_rule(rule))
    questions = require_split(Dataset(dataset, labels.questions), split)
    run, result = score_and_evaluate(ranker, questions, clean=clean, progress=progress)
    line = {"model": model, "data": dataset, "split": split, "labels": labels.rule.value, **result.aggregate}
    line.update(questions=result.questions, clean=result.clean)
    qrels = qrels_from_questions(questions)
    line.update(tie_aware(run, qrels, clean=clean).to_dict())
    judged = judgements(run, qrels, clean=clean)
    if not judged.complete:  # beside the standard numbers, which count unjudged candidates as not relevant
        line["judgements"] = judged.to_dict()
    line["run_id"] = store.runs.save_run(dataset, split, run, dict(line), model_version_id=version_id, tag=ranker.name,
                                         actor=actor)
    return KeptEvaluation(line, run, ranker.name, notice)
