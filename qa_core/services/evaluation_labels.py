"""Which labels a reported metric is computed against: one rule for Compare, Errors and the CLI.

- ``gold`` (the default): the dataset's own labels as imported. Labels made in the app never
  change a metric under this rule, so annotating TEST pairs cannot move a reported TEST number;
  the benchmarks read the datasets' files and so always evaluate against gold.
- ``training``: the training-label rule of ``qa_core.services.labeling.training_labels``
  (adjudicated, else the annotators' majority, else gold), to see what the team's labels say.

Every page and the CLI name the rule they used (``describe``), and every per-question row says
where its labels came from (``EvaluationLabels.sources``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from qa_core.services.labeling.training_labels import SOURCES, training_dataset
from qa_core.types import InputError, Question

if TYPE_CHECKING:
    from db.store import Store


class LabelRule(StrEnum):
    GOLD = "gold"
    TRAINING = "training"


DESCRIPTIONS = {
    LabelRule.GOLD: "the dataset's gold labels as imported (labels made in the app do not change them)",
    LabelRule.TRAINING: "the training-label rule: the latest adjudication, else the annotators' majority, "
                        "else the dataset's gold label",
}


@dataclass(frozen=True)
class EvaluationLabels:
    """The dataset's questions with the rule's labels in ``Candidate.label``, and each question's
    label source (``"adjudicated"``, ``"labels"`` or ``"gold"``: the strongest among its candidates)."""

    rule: LabelRule
    questions: list[Question]
    sources: dict[str, str]

    def split(self, split: str | None) -> list[Question]:
        """The questions of ``split`` (all of them for ``None``)."""
        return [q for q in self.questions if split is None or q.split == split]


def parse_rule(text: str) -> LabelRule:
    try:
        return LabelRule(text)
    except ValueError:
        raise InputError(f"unknown label rule {text!r}; choose one of {', '.join(LabelRule)}") from None


def describe(rule: LabelRule) -> str:
    """The line a page or the CLI shows beside its numbers."""
    return f"Labels: {rule.value}, {DESCRIPTIONS[rule]}."


def evaluation_labels(
    store: Store, dataset: str, rule: LabelRule = LabelRule.GOLD, loaded: Sequence[Question] | None = None
) -> EvaluationLabels:
    """The labels of ``dataset`` under ``rule``; ``loaded``: its questions as already loaded (a
    page's cache), which the gold rule uses as they are."""
    if rule is LabelRule.GOLD:
        questions = list(loaded) if loaded is not None else store.datasets.load_dataset(dataset).questions
        return EvaluationLabels(rule, questions, dict.fromkeys((q.qid for q in questions), "gold"))
    relabelled, resolved = training_dataset(store, dataset, gold=True)
    sources: dict[str, str] = {}
    for row in resolved.candidates:
        label = resolved.labels.get(row.candidate_id)
        if label is not None:  # SOURCES runs strongest first
            previous = sources.get(row.qid, "gold")
            sources[row.qid] = min(previous, label.source, key=SOURCES.index)
    return EvaluationLabels(rule, relabelled.questions, {q.qid: sources.get(q.qid, "gold") for q in relabelled.questions})
