"""Datasets and imports: the front door the pages and ``python -m qa_core data ...`` use. It owns
opening the store (an unreadable URL or an unreachable database is one sentence, never a
traceback), which file formats and label sources exist, who an imported qrels file's labels are
recorded under, and what an import reports. Who may import is checked inside the write's
transaction (``db/datasets.py``, ``db/labels.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from db.store import Store  # the type pages name the store by, too
from qa_core import config
from qa_core.types import Dataset, InputError

if TYPE_CHECKING:
    from db.reimport import ImportReport
    from qa_core.access import Actor

EXPORT_FORMATS = ("qrels", "jsonl")


def open_store(url: str | None = None, *, team: bool = False) -> Store:
    """The store at ``url``, else the configured one (``RERANK_LAB_DB`` or SQLite in the data
    folder); ``team``: writes need a signed-in user. ``InputError`` saying why it cannot be opened,
    with any password in the URL masked."""
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from qa_core.services.store_setup import masked_url

    url = config.database_url() if url is None else url  # an empty URL is refused, not replaced
    try:
        return Store(url, team=team)
    except InputError as error:  # an unreadable URL: the message repeats none of it
        raise InputError(f"cannot open the store: {error}") from None
    except (ArgumentError, SQLAlchemyError) as error:
        reason = str(getattr(error, "orig", None) or error).splitlines()[0]
        raise InputError(f"cannot open the store at {masked_url(url)}: {reason}") from None


def names(store: Store) -> list[str]:
    """The stored datasets' names, sorted."""
    return store.datasets.dataset_names()


def load(store: Store, name: str, split: str | None = None) -> Dataset:
    """Dataset ``name`` (one ``split`` if given) with its questions, pools and gold labels."""
    return store.datasets.load_dataset(name, split=split)


def summary(store: Store, name: str) -> dict[str, Any]:
    """Counts of ``name``: questions per split, candidates, gold positives, labelled, orphaned labels."""
    return store.datasets.dataset_summary(name)


def splits(store: Store, name: str) -> list[str]:
    """The splits of ``name`` that hold questions, sorted."""
    return list(summary(store, name)["questions"])


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
    Every (qid, doc_id) must exist in ``dataset``, else nothing is written."""
    from qa_core.data.importers import read_trec_run

    run = read_trec_run(path)
    store.datasets.set_first_stage(dataset, run, actor=actor)
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


def orphaned_labels(store: Store, dataset: str) -> Iterator[dict[str, Any]]:
    """Labels kept on candidates that a re-import retired or edited, oldest first."""
    yield from store.labels.orphaned_labels(dataset)


def database_refusal(error: Exception) -> str:
    """One sentence for a database refusal that reached a command outside the store's own sessions
    (inside them the store already says it so: ``StorageError``)."""
    from db.base import describe_database_error

    return describe_database_error(error) if hasattr(error, "orig") else str(error)
