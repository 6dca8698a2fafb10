"""Loaders for the question-classification (UIUC, Li & Roth 2002) and question-focus label files.

Both formats are line based; a malformed line raises ``InputError`` naming the file and the line,
so a user pointing the app at their own download sees what to fix instead of a traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from qa_core.types import InputError

COARSE_CLASSES: tuple[str, ...] = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")

# A focus mark is one or more '#' at the start of a token, possibly after opening quotes or a
# bracket ("“#Hamlet”" marks Hamlet); the marked text must not be empty.
_FOCUS_MARK = re.compile(r"^([“\"‘'(]*)#+(?=.)")
# Inside a multi-word focus ("Statue of Liberty") the head noun is the word before "of".
_HEAD_BREAKERS = frozenset({"of"})


@dataclass(frozen=True)
class ClassifiedQuestion:
    """One UIUC line: ``coarse`` is one of ``COARSE_CLASSES``; ``fine`` the label after the colon."""

    text: str
    coarse: str
    fine: str


@dataclass(frozen=True)
class FocusQuestion:
    """A question with its focus marked.

    ``tokens`` are the whitespace-separated tokens as given, marks removed. ``marked`` lists every
    marked token (multi-word foci such as "#Nobel #Peace #Prize" mark several); ``focus`` is the one
    token a single-index tagger is trained and scored on: the head of the first marked run (its last
    token, or the token before "of": "Prize", "Statue").
    """

    qid: str
    tokens: tuple[str, ...]
    focus: int
    marked: tuple[int, ...]


def _read_lines(path: Path, encodings: tuple[str, ...]) -> list[str]:
    if not path.is_file():
        raise InputError(f"file not found: {path}")
    data = path.read_bytes()
    for encoding in encodings[:-1]:
        try:
            return data.decode(encoding).splitlines()
        except UnicodeDecodeError:
            continue
    return data.decode(encodings[-1]).splitlines()


def load_question_classes(path: str | Path) -> list[ClassifiedQuestion]:
    """Read a UIUC file (``COARSE:fine question tokens`` per line; blank lines skipped).

    train_5500.label is ISO-8859-1 while TREC_10.label and user files are usually UTF-8 (or
    ASCII): UTF-8 is tried first and ISO-8859-1, which decodes any byte, is the fallback.
    """
    path = Path(path)
    questions = []
    for number, line in enumerate(_read_lines(path, ("utf-8", "iso-8859-1")), start=1):
        if not line.strip():
            continue
        label, _, text = line.strip().partition(" ")
        coarse, colon, fine = label.partition(":")
        if not colon or not fine or not text.strip():
            raise InputError(f"expected 'COARSE:fine question', got {line.strip()!r}", path=str(path), line=number)
        if coarse not in COARSE_CLASSES:
            raise InputError(
                f"unknown coarse class {coarse!r} (expected one of {', '.join(COARSE_CLASSES)})",
                path=str(path),
                line=number,
            )
        questions.append(ClassifiedQuestion(text=text.strip(), coarse=coarse, fine=fine))
    return questions


def _head_of_first_run(marked: list[int], tokens: list[str]) -> int:
    head = marked[0]
    for index in marked[1:]:
        if index != head + 1 or tokens[index].lower() in _HEAD_BREAKERS:
            break
        head = index
    return head


def load_focus_questions(path: str | Path) -> list[FocusQuestion]:
    """Read a focus file (``id<TAB>question`` per line, focus words marked with a leading '#')."""
    path = Path(path)
    questions = []
    for number, line in enumerate(_read_lines(path, ("utf-8",)), start=1):
        if not line.strip():
            continue
        qid, tab, text = line.partition("\t")
        if not tab or not qid.strip() or not text.split():
            raise InputError(f"expected 'id<TAB>question', got {line!r}", path=str(path), line=number)
        tokens, marked = [], []
        for index, token in enumerate(text.split()):
            unmarked = _FOCUS_MARK.sub(r"\1", token)
            if unmarked != token:
                marked.append(index)
            tokens.append(unmarked)
        if not marked:
            raise InputError("no focus word marked with a leading '#'", path=str(path), line=number)
        questions.append(
            FocusQuestion(
                qid=qid.strip(),
                tokens=tuple(tokens),
                focus=_head_of_first_run(marked, tokens),
                marked=tuple(marked),
            )
        )
    return questions
