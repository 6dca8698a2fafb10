"""In-memory data types shared by importers, rankers, training and evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Candidate:
    """One candidate answer of a question's pool.

    ``label`` is graded gold relevance (0 = not relevant) or ``None`` when unjudged.
    ``first_stage_rank`` is 1-based, as in a TREC run. ``positional_id``: the file had no id, so
    ``doc_id`` was made up from the position; the store then knows the candidate by its question
    and text rather than by that id (a re-import of reordered rows keeps every label on its text).
    """

    doc_id: str
    text: str
    label: int | None = None
    first_stage_rank: int | None = None
    first_stage_score: float | None = None
    source: str = ""
    url: str | None = None
    positional_id: bool = field(default=False, compare=False)


@dataclass
class Question:
    qid: str
    text: str
    candidates: list[Candidate] = field(default_factory=list)
    split: str = "train"


@dataclass
class Dataset:
    """A named collection of questions with their candidate pools, tagged by split."""

    name: str
    questions: list[Question] = field(default_factory=list)
    source: str = ""

    def split(self, name: str) -> list[Question]:
        return [q for q in self.questions if q.split == name]

    @property
    def splits(self) -> list[str]:
        return sorted({q.split for q in self.questions})

    def __len__(self) -> int:
        return len(self.questions)


MAX_NAME_CHARS = 200
"""Longest name or id the store keeps (dataset, annotator, model, question and candidate ids,
split): they are indexed, and PostgreSQL refuses index rows over 2,704 bytes."""

MAX_QUESTION_CHARS = 1_000
MAX_CANDIDATE_CHARS = 5_000
"""Longest question and candidate text the app takes, typed, edited or imported: rankers read
answer sentences or short passages (SM-CNN reads 100 tokens), and a 200 KB candidate froze the
Ask page for minutes. The longest WikiQA/TrecQA candidate is far below (README: Importing)."""


class InputError(ValueError):
    """Bad user input (file, question, option): the message is shown to the user as is."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}" + (f", line {line}" if line is not None else "") + ": "
        super().__init__(where + message)
        self.path = path
        self.line = line


class StorageError(InputError):
    """The database or the disk could not do what was asked (full, read-only, unreachable,
    locked for too long): shown to the user like ``InputError``, as one sentence."""


class NotTrainedError(RuntimeError):
    """A trainable model was asked to predict before it was trained or loaded."""
