"""Labelling: queue orders (strategies), the labelling session over the store's leases,
agreement between annotators, and the rule that turns stored labels into training labels.

No Streamlit here: the Label and Train pages and the learning-loop simulation call these.
"""

from qa_core.services.labeling.agreement import (
    AgreementReport,
    Conflict,
    PairAgreement,
    agreement_report,
    conflicts,
    krippendorff_alpha,
    pairwise_kappa,
)
from qa_core.services.labeling.queue import LabelingSession, QueueItem, QueuePolicy
from qa_core.services.labeling.strategies import STRATEGIES, model_scores, order_candidates
from qa_core.services.labeling.training_labels import ResolvedLabel, TrainingLabels, training_dataset, training_labels

__all__ = [
    "STRATEGIES",
    "AgreementReport",
    "Conflict",
    "LabelingSession",
    "PairAgreement",
    "QueueItem",
    "QueuePolicy",
    "ResolvedLabel",
    "TrainingLabels",
    "agreement_report",
    "conflicts",
    "krippendorff_alpha",
    "model_scores",
    "order_candidates",
    "pairwise_kappa",
    "training_dataset",
    "training_labels",
]
