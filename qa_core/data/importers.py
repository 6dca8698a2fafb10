"""Importers: benchmark formats and user files -> ``Dataset``; TREC run and qrels readers.

The front door of the data formats: format detection and ``load_dataset`` here, the readers in
``reading`` (text, lines, shared checks), ``benchmark_formats`` (WikiQA, TrecQA, SemEval),
``pairs`` (CSV, JSONL) and ``trec_files`` (runs, qrels), re-exported from here.

Every loader reads its whole input before returning, and any malformed input raises
``InputError`` naming the file and (where one exists) the line, so the CLI and pages can show the
user what to fix; nothing partial is ever returned.

Question ids must be unique within a dataset and candidate ids unique within a question: the store
and the TREC exporters key on them. Where a file has no candidate ids, the id made up from the
position is marked (``Candidate.positional_id``), and the store knows such a candidate by its
question and text instead. The same text twice in one question with different gold labels is
refused: the file must say which label holds.
"""


from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from qa_core import config
from qa_core.data.benchmark_formats import load_semeval, load_trecqa, load_wikiqa
from qa_core.data.pairs import load_pairs
from qa_core.data.reading import within_limit
from qa_core.data.trec_files import (
    read_qrels,
    read_qrels_located,
    read_run_located,
    read_trec_run,
    read_trec_run_located,
)
from qa_core.types import (
    Dataset,
    InputError,
)

# The loaders and readers of every format, imported from here (this module is the one way in).
__all__ = ["FORMATS", "check_memory", "detect_format", "load_dataset", "load_pairs", "load_semeval", "load_trecqa",
           "load_wikiqa", "read_qrels", "read_qrels_located", "read_run_located", "read_trec_run",
           "read_trec_run_located"]

FORMATS: tuple[str, ...] = ("wikiqa", "trecqa", "semeval", "csv", "jsonl")
_SNIFF_BYTES = 65536


def _sniff(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(_SNIFF_BYTES).decode("utf-8", errors="replace")


def detect_format(path: str | Path) -> str:
    """The format of a file or folder: WikiQA folders hold a.toks files; XML is told apart by its tags."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    if path.is_dir():
        if (path / "a.toks").exists() or any((d / "a.toks").exists() for d in path.iterdir() if d.is_dir()):
            return "wikiqa"
        xml_files = sorted(path.glob("*.xml"))
        if not xml_files:
            raise InputError(f"cannot tell the format of this folder; choose one of {', '.join(FORMATS)}", path=str(path))
        path = xml_files[0]
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("csv", "jsonl"):
        return suffix
    if suffix == "xml":
        head = _sniff(path)
        if "<QApairs" in head:
            return "trecqa"
        if "<OrgQuestion" in head:
            return "semeval"
    raise InputError(f"cannot tell the format; choose one of {', '.join(FORMATS)}", path=str(path))


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "wikiqa": load_wikiqa,
    "trecqa": load_trecqa,
    "semeval": load_semeval,
    "csv": lambda path, **kw: load_pairs(path, fmt="csv", **kw),
    "jsonl": lambda path, **kw: load_pairs(path, fmt="jsonl", **kw),
}


def load_dataset(path: str | Path, fmt: str = "auto", name: str | None = None) -> Dataset:
    """Load any supported format; ``fmt="auto"`` detects it (see ``detect_format``)."""
    if fmt != "auto" and fmt not in _LOADERS:
        raise InputError(f"unknown format {fmt!r}; expected auto or one of {', '.join(FORMATS)}")
    if name is not None and not name.strip():
        raise InputError("the dataset name is empty; give a name or leave it out to use the file name")
    path = Path(path)
    fmt = detect_format(path) if fmt == "auto" else fmt
    dataset = _LOADERS[fmt](path, **({"name": name} if name is not None else {}))
    _check_lengths(dataset, path)
    check_memory(dataset, path)
    return dataset


# What importing a collection and building its BM25 index take at their peak (the larger of the
# two processes), from benchmarks/scale.py (docs/benchmarks.md, "Scale"): the import's peak grew by
# 2.1 KB per candidate from 100k to 1M candidates (569 MB -> 2,420 MB) over ~360 MB of its own; the
# index build's by 1.2 KB (563 -> 1,604 MB) over ~450 MB. Rounded up to cover both.
MEMORY_BASE = 450 * 2**20
MEMORY_PER_CANDIDATE = 2_200


def check_memory(dataset: Dataset, path: Path) -> None:
    """``InputError`` with the estimate when the dataset is too large to import and index in the
    memory available (``config.available_memory``): a clear refusal before the store and the index
    are built, not an out-of-memory kill half-way. The file itself has been read by then."""
    available = config.available_memory()
    candidates = sum(len(question.candidates) for question in dataset.questions)
    needed = MEMORY_BASE + MEMORY_PER_CANDIDATE * candidates
    if available is not None and needed > available:
        raise InputError(
            f"the collection is too large for this machine: {candidates:,} candidates need about "
            f"{needed / 2**20:,.0f} MB to import and index ({MEMORY_BASE / 2**20:,.0f} MB + "
            f"{MEMORY_PER_CANDIDATE / 1024:.1f} KB per candidate, as measured), and {available / 2**20:,.0f} MB "
            "is available (RERANK_LAB_MEMORY_MB sets the budget); split it into several datasets or import it "
            "on a machine with more memory",
            path=str(path),
        )


def _check_lengths(dataset: Dataset, path: Path) -> None:
    """The text limits for the formats whose readers do not check them line by line (the CSV and
    JSONL readers do, naming the line): the error names the question and candidate instead."""
    for question in dataset.questions:
        texts = [("question", question.text, f"question {question.qid}")]
        texts += [("candidate", c.text, f"question {question.qid}, candidate {c.doc_id}") for c in question.candidates]
        for key, text, where in texts:
            within_limit(text, key, lambda message, where=where: InputError(f"{where}: {message}", path=str(path)))
