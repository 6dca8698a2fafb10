"""Reading a user's file for the importers: its text (gzip, BOM, encodings and binary files refused
with the line), its lines, split names, and the checks every format shares (duplicate ids, one gold
label per text, text limits), each failing with an ``InputError`` naming the file and line."""

from __future__ import annotations

import codecs
import gzip
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qa_core.types import (
    MAX_CANDIDATE_CHARS,
    MAX_QUESTION_CHARS,
    InputError,
    Question,
)

GZIP_MAGIC = b"\x1f\x8b"
_SPLIT_ORDER = ("train", "dev", "test")
TEXT_LIMITS = {"question": MAX_QUESTION_CHARS, "candidate": MAX_CANDIDATE_CHARS}


def read_text(path: Path) -> str:
    """The UTF-8 text of a user file (gunzipped when it is gzip, a leading BOM dropped).

    Missing, empty, binary (NUL bytes: also what a UTF-16 file looks like) and non-UTF-8 files
    raise ``InputError`` with the line of the first offending byte.
    """
    if path.is_dir():
        raise InputError("is a folder; expected a file", path=str(path))
    if not path.is_file():
        raise InputError("file not found", path=str(path))
    data = path.read_bytes()
    if data.startswith(GZIP_MAGIC):  # the exporters write .gz when the path asks for it
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise InputError(f"corrupt gzip file: {error}", path=str(path)) from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    if not data.strip():
        raise InputError("file is empty", path=str(path))
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(
            "binary file (NUL byte found); expected UTF-8 text (UTF-16 files must be re-saved as UTF-8)",
            path=str(path),
            line=data.count(b"\n", 0, nul) + 1,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"not UTF-8 text (byte 0x{data[error.start]:02x}); re-save the file as UTF-8",
            path=str(path),
            line=data.count(b"\n", 0, error.start) + 1,
        ) from None


def read_lines(path: Path) -> list[str]:
    """The file's lines, split on newlines only.

    ``str.splitlines`` also splits on form feeds and U+2028, which occur inside sentences and would
    shift line numbers (and break line-aligned formats such as WikiQA).
    """
    return split_lines(read_text(path))


def split_lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def split_key(split: str) -> tuple[int, str]:
    """Sort key putting train, dev, test first, then any other split by name."""
    return (_SPLIT_ORDER.index(split) if split in _SPLIT_ORDER else len(_SPLIT_ORDER), split)


def split_from_name(stem: str) -> str:
    """'SemEval2016-Task3-CQA-QL-dev' -> 'dev'; names without train/dev/test count as train."""
    lowered = stem.lower()
    for split in ("test", "dev", "train"):
        if split in lowered:
            return split
    return "train"


class GoldByText:
    """The first gold label (and its line) of every candidate text of a question: the same text
    again with another label contradicts it, and a model cannot learn both."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, str], tuple[int | None, int | None]] = {}

    def check(self, qid: str, text: str, label: int | None, line: int | None, fail: Callable[[str], InputError]) -> None:
        first_label, first_line = self._first.setdefault((qid, text), (label, line))
        if first_label != label:
            where = f" on line {first_line}" if first_line is not None else ""
            raise fail(
                f"candidate {excerpt(text)} of question {qid} has gold label {label} here but {first_label}{where}; "
                "one text cannot be both"
            )


def excerpt(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def add_question(questions: dict[str, Question], question: Question, path: Path, line: int | None) -> None:
    if question.qid in questions:
        raise InputError(f"duplicate question id {question.qid!r}", path=str(path), line=line)
    questions[question.qid] = question




def integer(value: Any) -> int | None:
    """An int from a JSON int or a CSV cell of digits; None for anything else (bools, floats, words)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None



def within_limit(text: str, key: str, fail: Callable[[str], InputError]) -> str:
    if len(text) > TEXT_LIMITS[key]:
        raise fail(f"the {key} is too long ({len(text):,} characters; the limit is {TEXT_LIMITS[key]:,}): "
                   f"split it into passages first, {excerpt(text)}")
    return text


def failer(path: Path, line: int) -> Callable[[str], InputError]:
    return lambda message: InputError(message, path=str(path), line=line)

