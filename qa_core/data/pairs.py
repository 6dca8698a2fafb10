"""User files of question-candidate pairs: CSV with a header or JSON lines, one labelled pair a
row; every bad row is an ``InputError`` naming the file and line."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from qa_core.data.reading import GoldByText, excerpt, failer, integer, read_lines, read_text, within_limit
from qa_core.types import (
    MAX_NAME_CHARS,
    Candidate,
    Dataset,
    InputError,
    Question,
)

PAIRS_DEFAULT_SPLIT = "train"  # same default as ``Question.split``: an imported file is training data unless it says otherwise
MAX_LABEL = 4
PAIR_FIELDS_REQUIRED: tuple[str, ...] = ("question", "candidate", "label")
PAIR_FIELDS_OPTIONAL: tuple[str, ...] = ("qid", "doc_id", "split", "rank", "score", "url")
_CSV_EXTRA = "(fields beyond the header)"


def _csv_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""), restkey=_CSV_EXTRA)
    start = 1
    try:
        missing = [f for f in PAIR_FIELDS_REQUIRED if f not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"the header lacks column(s) {', '.join(missing)}", path=str(path), line=1)
        start = reader.line_num + 1
        for row in reader:
            if _CSV_EXTRA in row or None in row.values():
                raise InputError(f"expected {len(reader.fieldnames or [])} fields like the header", path=str(path), line=start)
            # Empty CSV cells mean "not given", as a missing JSON key does.
            yield start, {key: value for key, value in row.items() if value != ""}
            start = reader.line_num + 1
    except csv.Error as error:  # the csv module's own refusals, at the record that starts on ``start``
        raise InputError(_csv_problem(error), path=str(path), line=start) from None


def _csv_problem(error: csv.Error) -> str:
    if "field larger than field limit" in str(error):
        return f"a field is longer than {csv.field_size_limit():,} characters, the CSV reader's limit"
    return f"malformed CSV ({error})"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON's \\uXXXX escapes can make them; UTF-8 cannot hold them


def jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"invalid JSON: {error.msg} (column {error.colno})", path=str(path), line=number) from None
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", path=str(path), line=number)
        lone = _LONE_SURROGATE.search(json.dumps(record, ensure_ascii=False))
        if lone is not None:
            raise InputError(
                f"the escape \\u{ord(lone.group()):04x} is half of a surrogate pair without its other half, which "
                "is no character; write the character itself, or both halves (such as \\ud83d\\ude00)",
                path=str(path), line=number,
            )
        yield number, {key: value for key, value in record.items() if value is not None}



def identifier(record: dict[str, Any], key: str, fail: Callable[[str], InputError]) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(f"{key} must be a string or an integer, got {value!r}")
    text = str(value).strip()
    if not text or any(c.isspace() for c in text):
        raise fail(f"{key} must be non-empty without whitespace (TREC files cannot hold it), got {value!r}")
    if len(text) > MAX_NAME_CHARS or "\x00" in text:
        raise fail(f"{key} must be at most {MAX_NAME_CHARS} characters without NUL, got {excerpt(text)}")
    return text



def _text(record: dict[str, Any], key: str, fail: Callable[[str], InputError]) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{key} must be non-empty text, got {value!r}")
    if "\x00" in value:
        raise fail(f"{key} holds a NUL character, which no text may hold")
    return within_limit(value.strip(), key, fail)



def _pair_rows(records: Iterable[tuple[int, dict[str, Any]]], path: Path, source: str) -> list[Question]:
    questions: dict[str, Question] = {}
    first_line: dict[str, int] = {}
    candidate_lines: dict[tuple[str, str], int] = {}
    gold = GoldByText()
    for number, record in records:
        fail = failer(path, number)
        text = _text(record, "question", fail)
        candidate_text = _text(record, "candidate", fail)
        label = integer(record["label"]) if "label" in record else None
        if label is None or not 0 <= label <= MAX_LABEL:
            raise fail(f"label must be an integer 0..{MAX_LABEL}, got {record.get('label')!r}")
        qid = identifier(record, "qid", fail) or "q" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
        split = identifier(record, "split", fail) or PAIRS_DEFAULT_SPLIT
        rank = None
        if "rank" in record:
            rank = integer(record["rank"])
            if rank is None or rank < 1:
                raise fail(f"rank must be a positive integer, got {record['rank']!r}")
        score = None
        if "score" in record:
            try:
                score = float(record["score"])
            except (TypeError, ValueError):
                score = math.nan
            if isinstance(record["score"], bool) or not math.isfinite(score):
                raise fail(f"score must be a finite number, got {record['score']!r}")
        url = record.get("url")
        if url is not None and not isinstance(url, str):
            raise fail(f"url must be text, got {url!r}")

        question = questions.get(qid)
        if question is None:
            question = questions[qid] = Question(qid=qid, text=text, split=split)
            first_line[qid] = number
        elif question.text != text or question.split != split:
            raise fail(f"question {qid} has a different text or split on line {first_line[qid]}")
        given_id = identifier(record, "doc_id", fail)
        doc_id = given_id or f"{qid}-{len(question.candidates)}"
        if (qid, doc_id) in candidate_lines:
            raise fail(f"duplicate candidate ({qid}, {doc_id}), first on line {candidate_lines[qid, doc_id]}")
        candidate_lines[qid, doc_id] = number
        gold.check(qid, candidate_text, label, number, fail)
        question.candidates.append(
            Candidate(doc_id, candidate_text, label, first_stage_rank=rank, first_stage_score=score, source=source,
                      url=url, positional_id=given_id is None)
        )
    if not questions:
        raise InputError("no rows", path=str(path))
    return list(questions.values())


def load_pairs(path: str | Path, name: str | None = None, fmt: str | None = None) -> Dataset:
    """Question-candidate pairs from CSV (header row) or JSONL (one object a line).

    Required: question, candidate, label (an integer 0..4; strings such as "true" are refused).
    Optional: qid (default: a stable hash of the question text), doc_id (default
    ``f"{qid}-{index within question}"``), split (default ``PAIRS_DEFAULT_SPLIT``, "train"),
    rank and score (the first stage's), url. ``fmt`` ("csv" or "jsonl") overrides the extension.
    """
    path = Path(path)
    fmt = fmt or path.suffix.lower().lstrip(".")
    readers = {"csv": _csv_records, "jsonl": jsonl_records}
    if fmt not in readers:
        raise InputError("expected a .csv or .jsonl file", path=str(path))
    return Dataset(name=name or path.stem, questions=_pair_rows(readers[fmt](path), path, fmt), source=str(path))
