"""The labelling queue as the Label page (and the simulation) drives it, without Streamlit.

A ``LabelingSession`` is one annotator labelling one queue in one app session: ``current()``
gives the pair to show (leased to this session, so no other session shows it at the same time),
``label``/``skip`` finish it, ``undo`` takes back the annotator's last judgement and shows that
pair again, ``progress`` counts. It holds no state the store does not have, so a page can build
it on every rerun.

The redundancy rule (who may be handed which pair) is the store's (``db/labeling.py``); the
``QueuePolicy`` here says how many annotators each pair wants: by default one, and two for a
seeded 20% of pairs, the overlap that Cohen's kappa and Krippendorff's alpha are computed on
(as Label Studio's "overlap" setting). A pair is in the overlap sample or not whatever the
queue order, so every queue with the same policy seed agrees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from db.base import check_annotator
from db.labeling import DEFAULT_LEASE_SECONDS, Claim, QueueProgress, QueueScope
from qa_core.services.labeling.strategies import DEFAULT_POOL_DEPTH, POOL, Scores, order_candidates
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.base import CandidateRecord
    from db.store import Store
    from qa_core.access import Actor


@dataclass(frozen=True)
class QueuePolicy:
    """How many annotators a pair wants, and how long a session may hold one."""

    overlap: int = 2  # annotators wanted on a pair of the overlap sample
    overlap_share: float = 0.2  # share of pairs in the overlap sample; the others want one
    seed: int = 0  # picks the sample
    lease_seconds: float = DEFAULT_LEASE_SECONDS

    def __post_init__(self) -> None:
        if self.overlap < 1:
            raise InputError(f"overlap must be at least 1 annotator, got {self.overlap}")
        if not 0.0 <= self.overlap_share <= 1.0:
            raise InputError(f"overlap share must lie in [0, 1], got {self.overlap_share}")
        if self.lease_seconds <= 0:
            raise InputError(f"a lease must last more than 0 seconds, got {self.lease_seconds}")

    def in_overlap(self, candidate_id: int) -> bool:
        """Whether the pair is in the overlap sample: a stable hash of (seed, id), not ``hash()``,
        which changes between processes."""
        digest = hashlib.blake2b(f"{self.seed}:{candidate_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64 < self.overlap_share

    def targets(self, candidate_ids: Sequence[int]) -> dict[int, int]:
        """``{candidate_id: annotators wanted}`` for the store's queue calls."""
        return {c: self.overlap if self.in_overlap(c) else 1 for c in candidate_ids}


def annotator_name(typed: str) -> str:
    """A typed annotator or reviewer name as the store keeps it; ``InputError`` for a blank one,
    one made only of invisible (zero-width) characters, or one hiding such a character."""
    return check_annotator(typed)


def judged_candidates(store: Store, dataset: str) -> set[int]:
    """Candidate ids of ``dataset`` with a judgement in the store: a current label or an
    adjudication (what the queue collects; a gold label from the import is not one)."""
    return set(store.labels.current_labels(dataset)) | set(store.labels.adjudications(dataset))


def queue_policy(store: Store, dataset: str) -> QueuePolicy:
    """The dataset's policy as set on the Label page (the share of double-annotated pairs is the
    store's, so every session draws the same sample)."""
    settings = store.annotation.annotation_settings(dataset)
    return QueuePolicy(overlap=settings.overlap, overlap_share=settings.overlap_share)


@dataclass(frozen=True)
class QueueItem:
    """The pair a session shows, with the lease that reserves it."""

    claim: Claim
    record: CandidateRecord

    @property
    def candidate_id(self) -> int:
        return self.claim.candidate_id


class LabelingSession:
    """One annotator labelling one queue in one app session (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        dataset: str,
        order: Sequence[int],
        annotator: str,
        *,
        holder: str | None = None,
        policy: QueuePolicy | None = None,
        records: Sequence[CandidateRecord] | None = None,
        actor: Actor | None = None,
        split: str | None = None,
    ):
        """``order``: the dataset's (``split``'s, if given) candidate ids best first
        (``order_candidates``); ``holder``: the app session's id (default: the annotator, i.e. one
        session per annotator); ``records``: those candidates' ``candidate_rows`` if the caller
        has them already; ``actor``: who writes the labels (the store checks it; default: the
        local user in local mode)."""
        if not annotator or not annotator.strip():
            raise InputError("choose or type an annotator name first")
        self.store, self.dataset = store, dataset
        self.annotator = annotator.strip()
        self.holder = holder or self.annotator
        self.policy = policy or QueuePolicy()
        self.order = list(dict.fromkeys(order))
        self.split = split
        self.records = {
            r.candidate_id: r for r in (records if records is not None else store.datasets.candidate_rows(dataset, split=split))
        }
        unknown = [c for c in self.order if c not in self.records]
        if unknown:
            raise InputError(f"the queue holds {len(unknown)} candidate ids that are not in dataset {dataset!r}")
        self.targets = self.policy.targets(self.order)
        self.actor = actor

    @property
    def scope(self) -> QueueScope:
        """The store's name for this session's queue (what it claims from and counts)."""
        return QueueScope(self.dataset, self.order, self.annotator, self.holder, self.targets)

    @classmethod
    def build(
        cls,
        store: Store,
        dataset: str,
        annotator: str,
        strategy: str = "random",
        *,
        seed: int = 0,
        scores: Mapping[str, Scores] | None = None,
        split: str | None = None,
        holder: str | None = None,
        policy: QueuePolicy | None = None,
        actor: Actor | None = None,
        depth: int = DEFAULT_POOL_DEPTH,
    ) -> LabelingSession:
        """A session over ``dataset`` (one ``split`` if given) in ``strategy``'s order (``depth``:
        the ``pool`` order's, whose unjudged pairs come first)."""
        records = store.datasets.candidate_rows(dataset, split=split)
        judged = judged_candidates(store, dataset) if strategy == POOL else ()
        order = order_candidates(strategy, records, seed=seed, scores=scores, depth=depth, judged=judged)
        return cls(store, dataset, order, annotator, holder=holder, policy=policy, records=records, actor=actor, split=split)

    def current(self) -> QueueItem | None:
        """The pair to show now (the same one on every call until it is finished), or ``None``
        when nothing is left for this annotator."""
        claim = self.store.queue.claim_next(self.scope, lease_seconds=self.policy.lease_seconds, actor=self.actor)
        return None if claim is None else QueueItem(claim, self.records[claim.candidate_id])

    def label(self, item: QueueItem, value: int, note: str | None = None) -> int:
        """Record the annotator's grade (0..4) of the item shown (written at once, with history);
        returns the label id."""
        return self.store.queue.label_claim(item.claim.claim_id, value, note, actor=self.actor)

    def skip(self, item: QueueItem) -> None:
        """Put the item back, at the end of this annotator's queue."""
        self.store.queue.end_claim(item.claim.claim_id, "skipped", actor=self.actor)

    def undo(self) -> QueueItem | None:
        """Retract the annotator's last judgement in this session's queue (its dataset and split,
        given in this app session; history keeps it) and show that pair again, in one transaction;
        ``None``, with nothing taken back, when there is nothing to undo, another session holds
        that pair now, or the queue no longer wants this annotator's label on it (adjudicated since,
        or enough other annotators judged it)."""
        claim = self.store.queue.undo_and_claim(
            self.dataset, self.annotator, self.holder, self.split, targets=self.targets,
            lease_seconds=self.policy.lease_seconds, actor=self.actor,
        )
        return None if claim is None else QueueItem(claim, self.records[claim.candidate_id])

    def close(self) -> int:
        """Release this session's leases (annotator switched, page left); returns how many."""
        return self.store.queue.release_claims(self.dataset, self.holder, actor=self.actor)

    def progress(self) -> QueueProgress:
        """Counts for the progress bar: ``labelled_by_me`` of ``labelled_by_me + available_to_me``
        for the annotator, ``complete`` of ``total`` for the queue."""
        return self.store.queue.queue_progress(self.scope)
