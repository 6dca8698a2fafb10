"""Labelling: queue orders (strategies), the labelling session over the store's leases,
agreement between annotators, and the rule that turns stored labels into training labels.

No Streamlit here: the Label and Train pages and the learning-loop simulation call these.
"""

from qa_core.services.labeling.agreement import (
    MIN_SHARED_PAIRS,
    NOT_ENOUGH,
    AgreementReport,
    Conflict,
    Interval,
    PairAgreement,
    agreement_report,
    conflicts,
    krippendorff_alpha,
    pairwise_kappa,
    report_from_labels,
)
from qa_core.services.labeling.background import BackgroundScores, ScoringProgress
from qa_core.services.labeling.queue import LabelingSession, QueueItem, QueuePolicy, annotator_name, queue_policy
from qa_core.services.labeling.strategies import STRATEGIES, model_scores, order_candidates
from qa_core.services.labeling.training_labels import ResolvedLabel, TrainingLabels, training_dataset, training_labels

__all__ = [
    "MIN_SHARED_PAIRS",
    "NOT_ENOUGH",
    "STRATEGIES",
    "AgreementReport",
    "BackgroundScores",
    "Conflict",
    "Interval",
    "LabelingSession",
    "PairAgreement",
    "QueueItem",
    "QueuePolicy",
    "ResolvedLabel",
    "ScoringProgress",
    "TrainingLabels",
    "agreement_report",
    "annotator_name",
    "conflicts",
    "krippendorff_alpha",
    "model_scores",
    "order_candidates",
    "pairwise_kappa",
    "queue_policy",
    "report_from_labels",
    "training_dataset",
    "training_labels",
]
