"""Train a stored model version again from its record and say whether it comes out the same
(``python -m qa_core reproduce``; the record: ``training.reproducibility.provenance`` in the
version's ``training_data["reproducibility"]``)."""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from db.store import Store
from qa_core.checkpoints import load_checkpoint
from qa_core.services.analysis import analyzer_for
from qa_core.services.experiments import EVAL_SPLIT, train_ranker, version_record
from qa_core.training import reproducibility
from qa_core.types import Dataset, InputError

_NOT_METRICS = {"train_seconds"}  # wall time: never the same twice


@dataclass
class Reproduction:
    """The stored version against its retraining."""

    model: str
    dataset: str
    version: int
    weights_identical: bool  # the checkpoints hold the same tensors and data, bit for bit
    max_weight_difference: float  # the largest absolute difference of any weight (inf: other shapes)
    metrics: dict[str, dict[str, float | None]]  # name -> stored, retrained, difference
    data_identical: bool | None  # the TRAIN and DEV data fingerprints (None: the version recorded none)
    notes: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.weights_identical and all(m["difference"] == 0 for m in self.metrics.values())

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "data": self.dataset, "version": self.version, "identical": self.identical,
                "weights_identical": self.weights_identical,
                "max_weight_difference": self.max_weight_difference if math.isfinite(self.max_weight_difference) else None,
                "data_identical": self.data_identical, "metrics": self.metrics, "notes": self.notes}


def _tensors(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a checkpoint state by path (tensors and plain values)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _tensors(item, f"{prefix}/{key}").items()}
    if isinstance(value, (list, tuple)) and any(isinstance(item, (dict, torch.Tensor)) for item in value):
        return {k: v for i, item in enumerate(value) for k, v in _tensors(item, f"{prefix}/{i}").items()}
    return {prefix: value}


def weight_difference(stored: str | Path, retrained: str | Path) -> float:
    """The largest absolute difference between the two checkpoints' weights; inf when their
    structure, shapes or plain data differ."""
    first, second = (_tensors(load_checkpoint(path)[1]) for path in (stored, retrained))
    if first.keys() != second.keys():
        return math.inf
    largest = 0.0
    for key, a in first.items():
        b = second[key]
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape:
                return math.inf
            if a.numel():
                largest = max(largest, float((a.double() - b.double()).abs().max()))
        elif a != b:
            return math.inf
    return largest


def _version(store: Store, model: str, number: int) -> dict[str, Any]:
    versions = store.models.model_versions(model)
    for row in versions:
        if row["version"] == number:
            return row
    known = ", ".join(str(row["version"]) for row in versions) or "none"
    raise InputError(f"model {model!r} has no version {number} (versions: {known})")


def _training_data(store: Store, name: str, recorded: dict[str, Any]) -> Dataset:
    """The dataset as the version was trained on it: gold labels, or the store's label rule."""
    if recorded.get("labels", "gold") == "gold":
        return store.datasets.load_dataset(name)
    from qa_core.services.labeling import training_dataset

    return training_dataset(store, name, gold=recorded.get("gold", False))[0]


def reproduce(store: Store, model: str, dataset: str, number: int, progress: bool = False) -> Reproduction:
    """Train version ``number`` of ``model`` again (same seed, splits, settings, threads and label
    rule; not registered) and compare its checkpoint and metrics with the stored ones."""
    row = _version(store, model, number)
    recorded = row["training_data"] or {}
    if recorded.get("dataset") != dataset:
        raise InputError(f"version {number} of {model!r} was trained on {recorded.get('dataset')!r}, not {dataset!r}")
    record = recorded.get("reproducibility") or {}
    notes = [] if record else ["the version recorded no reproducibility settings (trained before they were "
                               "recorded): retrained with today's defaults and its recorded seed and splits"]
    seed, train_split, dev_split = recorded.get("seed", 1), recorded.get("train", "train"), recorded.get("dev", "dev")
    settings = record.get("settings") or recorded.get("config") or {}
    data = _training_data(store, dataset, recorded)
    if record.get("code_commit") not in (None, reproducibility.code_commit()):
        notes.append(f"trained at code {record['code_commit']}, retrained at {reproducibility.code_commit()}")
    if record.get("libraries") not in (None, reproducibility.library_versions()):
        notes.append("library versions differ from the recorded ones")
    if record.get("cpu") not in (None, reproducibility.cpu_model()):
        notes.append(f"trained on a {record['cpu']}, retrained on a {reproducibility.cpu_model()}")
    with tempfile.TemporaryDirectory(prefix="reproduce-") as folder:
        outcome = train_ranker(model, data, seed=seed, train_split=train_split, dev_split=dev_split,
                               progress=progress, checkpoint=Path(folder) / "retrained.pt", model_config=settings,
                               analyzer=analyzer_for(store, model, settings), threads=record.get("threads"))
        gold_eval = store.datasets.load_dataset(dataset, split=EVAL_SPLIT).questions
        _, metrics = version_record(outcome, data, gold_eval, seed=seed, train_split=train_split, dev_split=dev_split)
        # The hash training recorded is of the file as trained; the registered file has its version id
        # stamped in since (``model_versions.checkpoint_sha256``), so without the former the weights decide.
        trained_sha = record.get("checkpoint_sha256")
        if trained_sha is not None and trained_sha == outcome.provenance["checkpoint_sha256"]:
            identical, difference = True, 0.0
        elif Path(row["checkpoint_path"]).is_file():
            difference = weight_difference(row["checkpoint_path"], outcome.checkpoint)
            identical = trained_sha is None and difference == 0.0
        else:
            identical, difference = False, math.nan
            notes.append(f"the stored checkpoint {row['checkpoint_path']} is gone: weights compared by SHA-256 only")
    fingerprints = record.get("data_fingerprint")
    data_identical = None if fingerprints is None else fingerprints == outcome.provenance["data_fingerprint"]
    if data_identical is False:
        notes.append("the TRAIN or DEV data (texts, labels) changed since this version was trained")
    compared = {}
    for name, stored in (row["metrics"] or {}).items():
        if name in _NOT_METRICS or not isinstance(stored, (int, float)):
            continue
        again = metrics.get(name)
        compared[name] = {"stored": stored, "retrained": again,
                          "difference": None if again is None else float(again) - float(stored)}
    return Reproduction(model, dataset, number, identical, difference, compared, data_identical, notes)
