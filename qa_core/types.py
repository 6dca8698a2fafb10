"""In-memory data types shared by importers, rankers, training and evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Candidate:
    """One candidate answer of a question's pool.

    ``label`` is graded gold relevance (0 = not relevant) or ``None`` when unjudged.
    ``first_stage_rank`` is 1-based, as in a TREC run.
    """

    doc_id: str
    text: str
    label: int | None = None
    first_stage_rank: int | None = None
    first_stage_score: float | None = None
    source: str = ""
    url: str | None = None


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


class InputError(ValueError):
    """Bad user input (file, question, option): the message is shown to the user as is."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}" + (f", line {line}" if line is not None else "") + ": "
        super().__init__(where + message)
        self.path = path
        self.line = line


class NotTrainedError(RuntimeError):
    """A trainable model was asked to predict before it was trained or loaded."""
