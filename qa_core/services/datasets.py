"""Datasets and imports: the front door the pages and ``python -m qa_core data ...`` use. It owns
which file formats and label sources exist, who an imported qrels file's labels are
recorded under, and what an import reports. Who may import is checked inside the write's
transaction (``db/datasets.py``, ``db/labels.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from db.store import Store  # the type pages name the store by, too
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.reimport import ImportReport
    from qa_core.access import Actor

EXPORT_FORMATS = ("qrels", "jsonl")


def splits(store: Store, name: str) -> list[str]:
    """The splits of ``name`` that hold questions, sorted."""
    return list(store.datasets.dataset_summary(name)["questions"])


def import_file(
    store: Store, path: Path, *, fmt: str | None = None, name: str | None = None, replace: bool = False,
    actor: Actor | None,
) -> tuple[str, ImportReport]:
    """Read the dataset file or folder at ``path`` (bad input: ``InputError`` naming file and
    line) and store it; returns its name and what happened to the stored candidates."""
    from qa_core.data.importers import load_dataset

    dataset = load_dataset(path, fmt=fmt, name=name)
    return dataset.name, store.datasets.import_dataset(dataset, replace=replace, actor=actor)


def import_run(store: Store, dataset: str, path: Path, *, actor: Actor | None) -> int:
    """Set first-stage ranks and scores from a TREC run file; returns the questions it covers.
    Every (qid, doc_id) must exist in ``dataset``, else nothing is written (the error names the
    file and the pair's line)."""
    from qa_core.data.importers import read_trec_run_located

    run, lines = read_trec_run_located(path)
    store.datasets.set_first_stage(dataset, run, lines=lines, path=str(path), actor=actor)
    return len(run)


def import_qrels(
    store: Store, dataset: str, path: Path, annotator: str | None = None, *, actor: Actor | None
) -> dict[str, Any]:
    """Add a TREC qrels file's judgements as labels by ``annotator`` (default ``qrels:<file name>``,
    so the source stays visible beside people's labels); a bad line names its line number."""
    from qa_core.data.importers import read_qrels_located

    qrels, lines = read_qrels_located(path)
    annotator = annotator or f"qrels:{path.name}"
    result = store.labels.import_qrels(dataset, qrels, annotator, lines=lines, path=str(path), actor=actor)
    return {"labels": result.added, "unchanged": result.unchanged, "annotator": annotator}


def export(store: Store, dataset: str, out: Path, fmt: str = "qrels", source: str = "labels") -> int:
    """Write ``dataset``'s labels as TREC qrels (``source``: the stored labels or gold) or its whole
    label history as JSON lines; returns the lines written."""
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"export format must be one of {', '.join(EXPORT_FORMATS)}, got {fmt!r}")
    if fmt == "qrels":
        return store.labels.export_qrels(dataset, out, source=source)
    return store.labels.export_labels_jsonl(dataset, out)


def database_refusal(error: Exception) -> str:
    """One sentence for a database refusal that reached a command outside the store's own sessions
    (inside them the store already says it so: ``StorageError``)."""
    from db.base import describe_database_error

    return describe_database_error(error) if hasattr(error, "orig") else str(error)
