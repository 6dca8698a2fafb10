"""The labels a model is trained on, from the store: one documented rule (issue 7.3).

For every pair of the dataset, the first that applies:

1. its latest adjudication (a reviewer settled it);
2. else the majority of its current labels (one per annotator: their latest unretracted
   judgement); a tie goes to the tied grade judged most recently. A pair whose annotators disagree
   is also listed as a conflict, so a reviewer can settle it;
3. else the grade its pairwise and top-k judgements give (``preferences.py``: Bradley-Terry
   strengths per question), when it was shown in any;
4. else its gold label (the dataset's own), when the caller asks for gold on that pair's split;
5. else no label: the pair is left out of training and of dev/test evaluation.

``training_dataset`` builds the ``qa_core.types.Dataset`` with those labels in
``Candidate.label``, so ``qa_core.services.experiments.train_ranker`` trains on it unchanged.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from qa_core.services.labeling.agreement import Conflict, conflict_list
from qa_core.services.labeling.preferences import preference_grades
from qa_core.types import Dataset

if TYPE_CHECKING:
    from db.base import CandidateRecord, LabelRecord
    from db.store import Store

SOURCES = ("adjudicated", "labels", "preferences", "gold")
GoldChoice = bool | str | Collection[str]  # True: every split; split names: only those splits


@dataclass(frozen=True)
class ResolvedLabel:
    value: int
    source: str  # one of SOURCES


@dataclass
class TrainingLabels:
    """The resolved label per candidate id, the conflicts settled by the majority rule, and the
    dataset's candidate rows they were resolved over (callers map ids to (qid, doc_id) with them
    instead of reading the rows again)."""

    labels: dict[int, ResolvedLabel] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)
    candidates: list[CandidateRecord] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Labels per source, e.g. ``{"adjudicated": 3, "labels": 120, "gold": 0}``."""
        counted = Counter(label.source for label in self.labels.values())
        return {source: counted[source] for source in SOURCES}


def resolve_labels(
    current: Sequence[LabelRecord],
    adjudications: Mapping[int, int],
    gold: Mapping[int, int] | None = None,
    preferences: Mapping[int, int] | None = None,
) -> dict[int, ResolvedLabel]:
    """The rule of the module docstring as a pure function: ``current`` labels (any order),
    ``adjudications`` ``{candidate_id: latest adjudicated grade}``, ``gold`` the gold grades that
    may fill gaps, ``preferences`` the grades preference judgements give. Returns
    ``{candidate_id: ResolvedLabel}`` for every pair that gets a label."""
    resolved = {candidate_id: ResolvedLabel(value, "adjudicated") for candidate_id, value in adjudications.items()}
    by_candidate: dict[int, list[LabelRecord]] = defaultdict(list)
    for label in current:
        by_candidate[label.candidate_id].append(label)
    for candidate_id, labels in by_candidate.items():
        if candidate_id not in resolved:
            resolved[candidate_id] = ResolvedLabel(_majority(labels), "labels")
    for candidate_id, value in (preferences or {}).items():
        resolved.setdefault(candidate_id, ResolvedLabel(value, "preferences"))
    for candidate_id, value in (gold or {}).items():
        if candidate_id not in resolved and value is not None:
            resolved[candidate_id] = ResolvedLabel(value, "gold")
    return resolved


def training_labels(store: Store, dataset: str, gold: GoldChoice = False) -> TrainingLabels:
    """The labels to train on for ``dataset`` (the module's rule) and the conflicts it settled.

    ``gold``: ``True`` lets gold labels fill the gaps on every split, a collection of split names
    only on those (e.g. ``{"dev"}`` to select models on gold dev labels while training on app
    labels), ``False`` never.
    """
    current = store.labels.current_label_records(dataset)
    adjudicated = {candidate_id: row["value"] for candidate_id, row in store.labels.adjudications(dataset).items()}
    records = store.datasets.candidate_rows(dataset)
    if gold is True:
        gold_values = {r.candidate_id: r.gold_label for r in records if r.gold_label is not None}
    else:
        splits = {gold} if isinstance(gold, str) else set(gold or ())
        gold_values = {
            r.candidate_id: r.gold_label
            for split in sorted(splits)
            for r in store.datasets.candidate_rows(dataset, split=split)
            if r.gold_label is not None
        }
    by_candidate: dict[int, dict[str, int]] = defaultdict(dict)
    for label in current:
        by_candidate[label.candidate_id][label.annotator] = label.value
    return TrainingLabels(
        resolve_labels(current, adjudicated, gold_values, preference_grades(store.preferences.preference_judgements(dataset))),
        conflict_list(by_candidate, adjudicated, records), records
    )


def training_dataset(store: Store, dataset: str, gold: GoldChoice = False) -> tuple[Dataset, TrainingLabels]:
    """``dataset`` with ``Candidate.label`` set by ``training_labels`` (``None`` where no label),
    same questions, splits and order; and the ``TrainingLabels`` it came from."""
    resolved = training_labels(store, dataset, gold)
    original = store.datasets.load_dataset(dataset)
    ids = {(r.qid, r.doc_id): r.candidate_id for r in resolved.candidates}
    questions = []
    for question in original.questions:
        candidates = []
        for candidate in question.candidates:
            label = resolved.labels.get(ids[(question.qid, candidate.doc_id)])
            candidates.append(dataclasses.replace(candidate, label=None if label is None else label.value))
        questions.append(dataclasses.replace(question, candidates=candidates))
    return Dataset(name=original.name, questions=questions, source=original.source), resolved


def _majority(labels: Sequence[LabelRecord]) -> int:
    """Most frequent grade; a tie goes to the tied grade whose latest judgement is newest."""
    counts = Counter(label.value for label in labels)
    latest = {label.value: label.label_id for label in sorted(labels, key=lambda label: label.label_id)}
    return max(counts, key=lambda value: (counts[value], latest[value]))

