"""TREC run and qrels files, read with the line of every error (``ir_measures`` parses the
qrels' text as the evaluator does)."""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from pathlib import Path

import ir_measures

from qa_core import ordering
from qa_core.data.pairs import identifier, jsonl_records
from qa_core.data.reading import integer, read_text, split_lines
from qa_core.types import (
    InputError,
)


def _trec_fields(path: Path, text: str, shape: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank line, each checked to have ``shape``'s field count."""
    expected = len(shape.split())
    for number, line in enumerate(split_lines(text), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != expected:
            raise InputError(f"expected {expected} fields '{shape}', got {len(fields)}", path=str(path), line=number)
        yield number, fields


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, int, float]]]:
    """A TREC run: qid -> [(doc_id, position, score)] best first, positions numbered from 1.

    The scores decide the order and ties follow ``qa_core.ordering`` (trec_eval's order): the rank
    column is checked but, as trec_eval does, not trusted, so a run reads as every evaluator reads
    it. Parsed here rather than by ``ir_measures.read_trec_run`` for the line numbers of errors.
    """
    return read_trec_run_located(path)[0]


def read_trec_run_located(
    path: str | Path,
) -> tuple[dict[str, list[tuple[str, int, float]]], dict[tuple[str, str], int]]:
    """``read_trec_run`` and the line of every (qid, doc_id), so that a pair the caller refuses
    (a document its dataset lacks) is reported with its line."""
    run, lines = read_run_located(path, "trec")
    ranked = {qid: [(doc_id, position, score) for position, (doc_id, score) in enumerate(ordering.ranked(docs), start=1)]
              for qid, docs in run.items()}
    return ranked, lines


RUN_FORMATS = ("trec", "jsonl")


def read_run_located(
    path: str | Path, fmt: str | None = None
) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], int]]:
    """A run, ``{qid: {doc_id: score}}``, and the line of every (qid, doc_id), so that a pair the
    caller refuses (an id its dataset lacks) is reported with its line.

    ``fmt``: "trec" (``qid Q0 docid rank score tag``) or "jsonl" (``{"qid", "doc_id", "score"}`` a
    line); by default a ``.jsonl`` name is JSONL and anything else TREC. Duplicate pairs, scores that
    are not finite numbers and malformed lines are refused with their line.
    """
    path = Path(path)
    fmt = fmt or ("jsonl" if path.suffix.lower() == ".jsonl" else "trec")
    if fmt not in RUN_FORMATS:
        raise InputError(f"unknown run format {fmt!r}; expected one of {', '.join(RUN_FORMATS)}", path=str(path))
    run: dict[str, dict[str, float]] = {}
    lines: dict[tuple[str, str], int] = {}
    for number, qid, doc_id, score in (_trec_run_rows if fmt == "trec" else _jsonl_run_rows)(path):
        if not math.isfinite(score):
            raise InputError(f"score must be a finite number, got {score!r}", path=str(path), line=number)
        if (qid, doc_id) in lines:
            raise InputError(f"document {doc_id} appears twice for query {qid} (first on line {lines[qid, doc_id]})",
                             path=str(path), line=number)
        lines[qid, doc_id] = number
        run.setdefault(qid, {})[doc_id] = score
    return run, lines


def _trec_run_rows(path: Path) -> Iterator[tuple[int, str, str, float]]:
    for number, (qid, _, doc_id, rank_text, score_text, _tag) in _trec_fields(path, read_text(path), "qid Q0 docid rank score tag"):
        rank = integer(rank_text)
        if rank is None or rank < 0:
            raise InputError(f"rank must be a non-negative integer, got {rank_text!r}", path=str(path), line=number)
        try:
            score = float(score_text)
        except ValueError:
            raise InputError(f"score must be a finite number, got {score_text!r}", path=str(path), line=number) from None
        yield number, qid, doc_id, score


def _jsonl_run_rows(path: Path) -> Iterator[tuple[int, str, str, float]]:
    for number, record in jsonl_records(path):
        def fail(message: str, number: int = number) -> InputError:
            return InputError(message, path=str(path), line=number)

        qid, doc_id = identifier(record, "qid", fail), identifier(record, "doc_id", fail)
        if qid is None or doc_id is None:
            raise fail("each line needs \"qid\", \"doc_id\" and \"score\"")
        score = record.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise fail(f"score must be a finite number, got {score!r}")
        yield number, qid, doc_id, float(score)


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: qid -> {doc_id: grade} (see ``read_qrels_located``)."""
    return read_qrels_located(path)[0]


def read_qrels_located(path: str | Path) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
    """TREC qrels, qid -> {doc_id: grade}, and the line of every (qid, doc_id), so that a judgement
    the store refuses (unknown document, grade outside 0..4) is reported with its line.

    Each line's shape, integer grade and uniqueness are checked first, so an error names its line;
    ``ir_measures.read_trec_qrels`` then parses the text exactly as the evaluator does.
    """
    path = Path(path)
    text = read_text(path)
    lines: dict[tuple[str, str], int] = {}
    for number, (qid, _, doc_id, grade) in _trec_fields(path, text, "qid 0 docid grade"):
        if integer(grade) is None:
            raise InputError(f"grade must be an integer, got {grade!r}", path=str(path), line=number)
        if (qid, doc_id) in lines:
            raise InputError(f"document {doc_id} is judged twice for query {qid}", path=str(path), line=number)
        lines[(qid, doc_id)] = number
    qrels: dict[str, dict[str, int]] = {}
    for qrel in ir_measures.read_trec_qrels(io.StringIO(text)):
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
    return qrels, lines
