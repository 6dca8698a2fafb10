"""Exporters: TREC runs, TREC qrels and JSONL, each written atomically (``qa_core.checkpoints.atomic_file``):
a crash halfway leaves the old file or the complete new one, never a truncated file that a later
evaluation would silently read."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from qa_core import ordering
from qa_core.checkpoints import atomic_file
from qa_core.types import InputError


def _write_atomically(path: str | Path, lines: Iterable[str]) -> int:
    """Write ``lines`` to ``path`` through a temporary sibling file; returns the lines written.

    A ``.gz`` path is gzip-compressed (with no timestamp, so equal content gives equal bytes);
    ir-measures and trec_eval read such runs directly.
    """
    count = 0
    with atomic_file(path, "wb") as raw:
        gzipped = str(path).endswith(".gz")
        binary = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if gzipped else raw
        handle = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
        for line in lines:
            handle.write(line)
            count += 1
        handle.detach()  # flushes; leaves ``raw`` open for atomic_file's fsync
        if gzipped:
            binary.close()  # writes the gzip trailer (GzipFile never closes a fileobj it was given)
    return count


def _trec_token(value: str, what: str) -> str:
    """TREC files are whitespace-separated: an id with whitespace would corrupt every later column."""
    text = str(value)
    if not text or any(c.isspace() for c in text):
        raise InputError(f"{what} {text!r} cannot be written to a TREC file (empty or holds whitespace)")
    return text


def _run_lines(run: Mapping[str, Mapping[str, float]], tag: str) -> Iterator[str]:
    tag = _trec_token(tag, "run tag")
    for qid, scores in run.items():
        qid = _trec_token(qid, "query id")
        # Lines and the rank column in the project's one order (``qa_core.ordering``: trec_eval's).
        for rank, (doc_id, score) in enumerate(ordering.ranked(scores), start=1):
            yield f"{qid} Q0 {_trec_token(doc_id, 'document id')} {rank} {float(score)!r} {tag}\n"


def write_trec_run(run: Mapping[str, Mapping[str, float]], path: str | Path, tag: str) -> int:
    """Write ``{qid: {doc_id: score}}`` as a TREC run (``qid Q0 doc_id rank score tag``); returns the lines.

    Scores are written with ``repr`` so that reading the run back gives the same floats; the rank
    column follows ``qa_core.ordering`` (ties by doc_id descending), the order trec_eval and
    ir-measures evaluate, so a reader of the rank column sees the same ranking.
    """
    return _write_atomically(path, _run_lines(run, tag))


def write_trec_run_chunks(chunks: Iterable[Mapping[str, Mapping[str, float]]], path: str | Path, tag: str) -> int:
    """``write_trec_run`` for a stream of partial runs, each holding whole queries (a batch job's
    chunks): lines are written as chunks arrive, and the file appears only when the stream ends."""
    return _write_atomically(path, (line for run in chunks for line in _run_lines(run, tag)))


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> int:
    """Write ``{qid: {doc_id: grade}}`` as TREC qrels (``qid 0 doc_id grade``); returns the lines."""
    return _write_atomically(
        path,
        (
            f"{_trec_token(qid, 'query id')} 0 {_trec_token(doc_id, 'document id')} {int(grade)}\n"
            for qid, grades in qrels.items()
            for doc_id, grade in grades.items()
        ),
    )


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write one JSON object a line (UTF-8, not ASCII-escaped); returns the lines."""
    return _write_atomically(path, (json.dumps(dict(row), ensure_ascii=False) + "\n" for row in rows))
