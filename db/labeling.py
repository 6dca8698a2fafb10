"""The labelling queue's claims (leases); labels, their undo and adjudications are ``db/labels.py``.

Queue claims (leases)
---------------------
The Label page and the learning-loop simulation hand out (question, candidate) pairs through
``claim_next``. A claim is a lease held by one app session (the ``holder``, e.g. a Streamlit
session id; by default the annotator's name) until it is labelled, skipped, released or expires.
The database keeps at most one open claim per candidate (a partial unique index), so two
sessions never hold the same pair at once, whatever the back end and however many processes.

Which pairs an annotator may be handed (the redundancy rule):

- a pair wants ``targets[candidate_id]`` distinct annotators (1 when absent; the labelling
  package's ``QueuePolicy`` gives a seeded share of pairs 2 or more, so agreement can be measured);
- it is handed to an annotator who has no current label on it, while it has fewer current
  labels (from distinct annotators) than it wants and no adjudication;
- in the caller's order (a strategy's ranking), except that pairs this annotator skipped go
  last: skipping means "later", not "never";
- another session's unexpired claim hides a pair; an expired one is ended ("expired") by the next
  claim, so a closed browser tab frees its pair after the lease.

The pairwise and top-k queues lease through the same claims (``claim_group``): one claim per
candidate shown, opened together, so an item is on one screen at a time and a candidate is never
shown by two sessions at once, whichever the mode.

Times are the application's clock (UTC): with several hosts on PostgreSQL, clock skew shifts
lease expiry by as much.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import ColumnElement, exists, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from db.annotation import guideline_in_force
from db.audit import authorize
from db.base import (
    StoreBase,
    candidates_of,
    check_annotator,
    check_grade,
    check_text,
    current_label_ids,
    insert_id,
    not_retracted,
    now,
)
from db.labels import UNDO_ATTEMPTS, LastLabelUndo
from db.models import AdjudicationRow, CandidateRow, LabelRow, QueueClaimRow
from qa_core.access import Actor, Permission, acting_name
from qa_core.types import InputError, StorageError

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 600.0
END_OUTCOMES = ("skipped", "released")


class Claim(NamedTuple):
    """A lease on one candidate, held by ``holder`` for ``annotator`` until ``expires_at``."""

    claim_id: int
    candidate_id: int
    annotator: str
    holder: str
    claimed_at: datetime
    expires_at: datetime


class QueueProgress(NamedTuple):
    """Counts over a queue's pairs, for one annotator (see ``LabelingStore.queue_progress``)."""

    total: int  # pairs in the queue
    complete: int  # pairs that want no more labels (enough annotators, or adjudicated)
    labelled_by_me: int  # pairs with a current label by this annotator
    available_to_me: int  # pairs this annotator could be handed now
    held_by_others: int  # pairs this annotator could be handed, but another session holds now
    judgements: int  # current labels on the queue's pairs, all annotators together


@dataclass(frozen=True)
class QueueScope:
    """Which queue a claim (``claim_next``) or a count (``queue_progress``) is about: ``annotator``'s
    view of ``order``, the dataset's candidate ids best first
    (``qa_core.services.labeling.order_candidates``), shown in one app session (``holder``, default
    the annotator), a pair wanting ``targets[candidate_id]`` annotators (1 when absent)."""

    dataset: str
    order: Sequence[int]
    annotator: str
    holder: str | None = None
    targets: Mapping[int, int] = field(default_factory=dict)


class _NoLongerEligible(Exception):
    """Raised inside a claim's (or a renewal's) transaction to roll it back."""


@dataclass
class _QueueState:
    """One consistent read of what the queue rules need for a dataset."""

    annotators: dict[int, set[str]] = field(default_factory=dict)  # current labels' annotators
    adjudicated: set[int] = field(default_factory=set)
    open_claims: dict[int, QueueClaimRow] = field(default_factory=dict)  # not ended, maybe expired
    skipped: set[int] = field(default_factory=set)  # by the annotator asking

    def eligible(self, candidate_id: int, annotator: str, target: int) -> bool:
        names = self.annotators.get(candidate_id, set())
        return candidate_id not in self.adjudicated and annotator not in names and len(names) < target

    def held_by_other(self, candidate_id: int, holder: str, at: datetime) -> bool:
        claim = self.open_claims.get(candidate_id)
        return claim is not None and claim.holder != holder and claim.expires_at > at


class LabelingStore(StoreBase):
    """The labelling queue's claims: who is shown which pair, and until when (``store.queue``)."""

    # ------------------------------------------------------------------ queue claims

    def claim_next(
        self, scope: QueueScope, *, lease_seconds: float = DEFAULT_LEASE_SECONDS, actor: Actor | None = None
    ) -> Claim | None:
        """The pair ``scope.holder`` should show ``scope.annotator`` next, leased to it; ``None``
        when the queue has nothing left for this annotator (see the module docstring for the rule).
        A signed-in ``actor`` claims only in their own name; every write checks the right to label.

        Idempotent for a page that reruns: while the holder's claim is open and its pair still
        wants this annotator's label, the same claim comes back with its lease renewed.
        """
        annotator = self._claimant(actor, scope.annotator)
        holder = check_annotator(scope.holder or annotator, "holder")
        dataset, order, targets = scope.dataset, scope.order, scope.targets
        with self.session_scope() as session:
            state = _read_state(session, dataset, annotator)
        position: dict[int, int] = {}
        for i, candidate_id in enumerate(order):
            position.setdefault(candidate_id, i)
        at = now()

        mine = sorted(
            (claim for claim in state.open_claims.values() if claim.holder == holder),
            key=lambda claim: position.get(claim.candidate_id, len(position)),
        )
        for claim in mine:
            wanted = claim.candidate_id in position and state.eligible(
                claim.candidate_id, annotator, targets.get(claim.candidate_id, 1)
            )
            if wanted and claim.annotator == annotator:
                renewed = self._renew(claim, lease_seconds, actor)
                if renewed is not None:  # a tab shows one pair: the rest it held (e.g. a pairwise item) go back
                    self._end_claims([other.id for other in mine if other.id != claim.id], actor)
                    return renewed
            else:
                self._end_claims([claim.id], actor)

        offered = [
            candidate_id
            for candidate_id in position
            if state.eligible(candidate_id, annotator, targets.get(candidate_id, 1))
            and not state.held_by_other(candidate_id, holder, at)
        ]
        offered.sort(key=lambda candidate_id: (candidate_id in state.skipped, position[candidate_id]))
        for candidate_id in offered:
            claim = self._try_claim([candidate_id], annotator, holder, targets.get(candidate_id, 1), lease_seconds, actor)
            if claim is not None:
                return claim
        return None

    def claim_group(
        self,
        groups: Sequence[Sequence[int]],
        annotator: str,
        holder: str | None = None,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        actor: Actor | None = None,
    ) -> tuple[int, ...] | None:
        """Lease the first of ``groups`` (each the candidates shown together: a pairwise pair, a
        top-k pool) that no other session holds any candidate of, to ``holder``; ``None`` when
        every group is held elsewhere (or there is none). ``groups`` come in the order the caller
        wants them shown (the preference queue's: what the annotator has not judged, skipped last).

        The same claims as the graded queue's, one per candidate, opened together in one
        transaction: the unique index on open claims keeps every candidate on one screen at a
        time, whatever the mode, and an expired lease frees its group. Idempotent for a page that
        reruns: a group the holder holds whole comes back, its leases renewed; the holder's other
        open claims are released (a tab shows one item)."""
        annotator = self._claimant(actor, annotator)
        holder = check_annotator(holder or annotator, "holder")
        groups = [tuple(dict.fromkeys(group)) for group in groups if group]
        wanted = {candidate_id for group in groups for candidate_id in group}
        with self.session_scope() as session:
            claims = list(session.scalars(
                select(QueueClaimRow).where(
                    QueueClaimRow.ended_at.is_(None),
                    (QueueClaimRow.holder == holder) | QueueClaimRow.candidate_id.in_(wanted),
                )
            ))
        at = now()
        mine = {claim.candidate_id: claim for claim in claims if claim.holder == holder and claim.annotator == annotator}
        held = next((group for group in groups if all(c in mine for c in group)), None)
        if held is not None and self._renew_all([mine[c] for c in held], lease_seconds, actor):
            self._end_claims([claim.id for claim in claims if claim.holder == holder and claim.candidate_id not in held],
                             actor)
            return held
        self._end_claims([claim.id for claim in claims if claim.holder == holder], actor)
        busy = {claim.candidate_id for claim in claims if claim.holder != holder and claim.expires_at > at}
        for group in groups:
            if busy.isdisjoint(group) and self._try_claim(group, annotator, holder, None, lease_seconds, actor) is not None:
                return group
        return None

    def end_claim(self, claim_id: int, outcome: str = "released", *, actor: Actor | None = None) -> bool:
        """End an open claim as ``skipped`` (the pair goes to the end of this annotator's queue)
        or ``released`` (back in the queue as it was); returns whether it was still open. A
        signed-in ``actor`` ends only claims in their own name."""
        if outcome not in END_OUTCOMES:
            raise InputError(f"a claim ends as one of {', '.join(END_OUTCOMES)}, not {outcome!r}")
        with self.session_scope() as session:
            _own_claim(session, claim_id, authorize(session, actor, Permission.LABEL, team=self.team))
            return end_open_claims(session, outcome, QueueClaimRow.id == claim_id) == 1

    def release_claims(self, dataset: str, holder: str, *, actor: Actor | None = None) -> int:
        """End every open claim of ``holder`` on ``dataset``'s pairs as released (a session that
        leaves, switches annotator, or undoes); returns how many it ended. A signed-in ``actor``
        releases only claims in their own name.

        Best effort: when the database refuses the write (full, read-only) the claims stay open
        until their lease ends, which frees the pairs just the same, so a page that only tidies
        up is not stopped by it (the next write it needs reports the problem)."""
        try:
            with self.session_scope() as session:
                who = authorize(session, actor, Permission.LABEL, team=self.team)
                mine = (QueueClaimRow.annotator == who.name,) if who.signed_in else ()
                return end_open_claims(
                    session, "released", QueueClaimRow.candidate_id.in_(candidates_of(session, dataset, CandidateRow.id)),
                    QueueClaimRow.holder == holder, *mine,
                )
        except StorageError as error:
            log.warning("claims of %s on %s stay open until their lease ends: %s", holder, dataset, error)
            return 0

    def undo_and_claim(
        self, dataset: str, annotator: str, holder: str, split: str | None = None, *, targets: Mapping[int, int],
        lease_seconds: float = DEFAULT_LEASE_SECONDS, actor: Actor | None = None,
    ) -> Claim | None:
        """Retract the latest current judgement that ``annotator`` gave through ``holder`` in
        ``dataset`` (its ``split`` if given) and lease that pair to ``holder`` again, to show it,
        in one transaction; ``None``, with nothing retracted, when there is no such judgement,
        another undo took it back meanwhile, another session holds that pair now, or the queue
        would not hand the pair to this annotator once the judgement is gone (adjudicated since,
        or the others' labels reach its ``targets[candidate_id]``, 1 when absent: the
        redundancy rule of ``claim_next``), since the next ``claim_next`` would not show it. The
        holder's other open claims on the dataset end (a tab shows one pair). A signed-in
        ``actor`` undoes only their own judgements."""
        undoing = LastLabelUndo()

        def undo(session: Session) -> Claim:
            who = authorize(session, actor, Permission.LABEL, team=self.team)
            undoer = check_annotator(acting_name(who, annotator))
            label = undoing.retract(session, undoer, dataset, holder, split)
            if label is None or not _still_eligible(session, label.candidate_id, undoer, targets.get(label.candidate_id, 1)):
                raise _NoLongerEligible
            at = now()
            end_open_claims(session, "expired", QueueClaimRow.candidate_id == label.candidate_id, QueueClaimRow.expires_at <= at, at=at)
            end_open_claims(
                session, "released", QueueClaimRow.candidate_id.in_(candidates_of(session, dataset, CandidateRow.id)),
                QueueClaimRow.holder == holder,
            )
            if session.scalar(select(exists().where(QueueClaimRow.candidate_id == label.candidate_id, QueueClaimRow.ended_at.is_(None)))):
                raise _NoLongerEligible  # another session shows the pair: take nothing back
            expires = at + timedelta(seconds=lease_seconds)
            claim_id = insert_id(
                session, QueueClaimRow, candidate_id=label.candidate_id, annotator=undoer, holder=holder,
                claimed_at=at, expires_at=expires,
            )
            return Claim(claim_id, label.candidate_id, undoer, holder, at, expires)

        try:  # a concurrent claim of the pair (the unique index on open claims) is seen on the next attempt
            return self.retrying(undo, UNDO_ATTEMPTS)
        except _NoLongerEligible:
            return None

    def label_claim(self, claim_id: int, value: int, note: str | None = None, *, actor: Actor | None = None) -> int:
        """Append the claim's annotator's judgement of its pair and end the claim ("labelled"), in
        one transaction; returns the label id. A signed-in ``actor`` labels only claims in their name.

        The label is written even when the lease ran out meanwhile: a judgement is never lost.
        """
        value, note = check_grade(value), check_text(note, "the note")
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.LABEL, team=self.team)
            claim = _own_claim(session, claim_id, who)
            label_id = insert_id(
                session, LabelRow, candidate_id=claim.candidate_id, annotator=claim.annotator, value=value,
                note=note, user_id=who.user_id, claim_id=claim.id,
                guideline_id=guideline_in_force(session, claim.candidate_id),
            )
            end_open_claims(session, "labelled", QueueClaimRow.id == claim_id)
            return label_id

    def open_claims(self, dataset: str) -> list[Claim]:
        """Unexpired claims on the dataset's pairs, oldest first (who is labelling what now)."""
        with self.session_scope() as session:
            rows = session.scalars(
                select(QueueClaimRow)
                .where(
                    QueueClaimRow.candidate_id.in_(candidates_of(session, dataset, CandidateRow.id)),
                    QueueClaimRow.ended_at.is_(None),
                    QueueClaimRow.expires_at > now(),
                )
                .order_by(QueueClaimRow.id)
            )
            return [_claim(row) for row in rows]

    def queue_progress(self, scope: QueueScope) -> QueueProgress:
        """Done/total counts of the queue ``scope.order`` for ``scope.annotator`` (see ``QueueProgress``)."""
        annotator = check_annotator(scope.annotator)
        holder = scope.holder or annotator
        dataset, order, targets = scope.dataset, scope.order, scope.targets
        with self.session_scope() as session:
            state = _read_state(session, dataset, annotator)
        at = now()
        pairs = list(dict.fromkeys(order))
        wanted = [c for c in pairs if state.eligible(c, annotator, targets.get(c, 1))]
        held = sum(state.held_by_other(c, holder, at) for c in wanted)
        return QueueProgress(
            total=len(pairs),
            complete=sum(
                c in state.adjudicated or len(state.annotators.get(c, ())) >= targets.get(c, 1) for c in pairs
            ),
            labelled_by_me=sum(annotator in state.annotators.get(c, ()) for c in pairs),
            available_to_me=len(wanted) - held,
            held_by_others=held,
            judgements=sum(len(state.annotators.get(c, ())) for c in pairs),
        )

    def _claimant(self, actor: Actor | None, annotator: str) -> str:
        """The annotator a claim is made for: a signed-in ``actor`` claims only in their own name."""
        return check_annotator(acting_name(actor, annotator) if actor is not None else annotator)

    def _renew(self, claim: QueueClaimRow, lease_seconds: float, actor: Actor | None) -> Claim | None:
        """Extend an open claim's lease (from now, inside the write); ``None`` when it was ended meanwhile."""
        with self.session_scope() as session:
            authorize(session, actor, Permission.LABEL, team=self.team)
            expires_at = now() + timedelta(seconds=lease_seconds)
            result = session.execute(
                update(QueueClaimRow)
                .where(QueueClaimRow.id == claim.id, QueueClaimRow.ended_at.is_(None))
                .values(expires_at=expires_at)
            )
            if result.rowcount != 1:
                return None
        return Claim(claim.id, claim.candidate_id, claim.annotator, claim.holder, claim.claimed_at, expires_at)

    def _renew_all(self, claims: Sequence[QueueClaimRow], lease_seconds: float, actor: Actor | None) -> bool:
        """Extend the leases of a group's open claims together; ``False`` (nothing changed) when
        any of them was ended meanwhile."""
        try:
            with self.session_scope() as session:
                authorize(session, actor, Permission.LABEL, team=self.team)
                expires_at = now() + timedelta(seconds=lease_seconds)
                result = session.execute(
                    update(QueueClaimRow)
                    .where(QueueClaimRow.id.in_([claim.id for claim in claims]), QueueClaimRow.ended_at.is_(None))
                    .values(expires_at=expires_at)
                )
                if result.rowcount != len(claims):
                    raise _NoLongerEligible
        except _NoLongerEligible:
            return False
        return True

    def _end_claims(self, claim_ids: Sequence[int], actor: Actor | None) -> None:
        """Release the holder's own claims (the caller read them as the holder's)."""
        if claim_ids:
            with self.session_scope() as session:
                authorize(session, actor, Permission.LABEL, team=self.team)
                end_open_claims(session, "released", QueueClaimRow.id.in_(claim_ids))

    def _try_claim(
        self, candidate_ids: Sequence[int], annotator: str, holder: str, target: int | None, lease_seconds: float,
        actor: Actor | None,
    ) -> Claim | None:
        """Open a claim on one pair (or on every candidate of a group, all or none) in its own
        transaction and return the first; ``None`` if another session holds any of them or (with
        a ``target``, one pair) the pair stopped wanting this annotator since the queue was read.

        The unique index on open claims decides races; the eligibility check runs again after the
        insert, inside the transaction, so a pair labelled meanwhile by the session that held it
        is not handed out a second time. Its times are taken after the write lock (the first
        statement), so on SQLite the claims of one pair never overlap in time.
        """
        ids = list(candidate_ids)
        try:
            with self.session_scope() as session:
                authorize(session, actor, Permission.LABEL, team=self.team)
                ended = now()
                end_open_claims(  # the first write: on SQLite it waits for the write lock
                    session, "expired", QueueClaimRow.candidate_id.in_(ids), QueueClaimRow.expires_at <= ended, at=ended
                )
                at = now()
                expires = at + timedelta(seconds=lease_seconds)
                claim_ids = [
                    insert_id(
                        session, QueueClaimRow, candidate_id=c, annotator=annotator, holder=holder, claimed_at=at,
                        expires_at=expires,
                    )
                    for c in ids
                ]
                if target is not None and not _still_eligible(session, ids[0], annotator, target):
                    raise _NoLongerEligible
                return Claim(claim_ids[0], ids[0], annotator, holder, at, expires)
        except (IntegrityError, _NoLongerEligible):
            return None


def _own_claim(session: Session, claim_id: int, who: Actor) -> QueueClaimRow:
    """The claim ``claim_id``, which a signed-in ``who`` may act on only in their own name."""
    claim = session.get(QueueClaimRow, claim_id)
    if claim is None:
        raise InputError(f"no queue claim with id {claim_id}")
    acting_name(who, claim.annotator)
    return claim


def end_open_claims(session: Session, outcome: str, *where: ColumnElement[bool], at: datetime | None = None) -> int:
    """End the open claims that match ``where`` as ``outcome`` (at ``at``, default now); returns how many."""
    ended = session.execute(
        update(QueueClaimRow).where(*where, QueueClaimRow.ended_at.is_(None)).values(ended_at=at or now(), outcome=outcome)
    )
    return ended.rowcount


def _read_state(session: Session, dataset: str, annotator: str) -> _QueueState:
    candidate_ids = candidates_of(session, dataset, CandidateRow.id)
    state = _QueueState()
    for candidate_id, name in session.execute(
        select(LabelRow.candidate_id, LabelRow.annotator).where(LabelRow.id.in_(current_label_ids(candidate_ids)))
    ):
        state.annotators.setdefault(candidate_id, set()).add(name)
    state.adjudicated = set(
        session.scalars(select(AdjudicationRow.candidate_id).where(AdjudicationRow.candidate_id.in_(candidate_ids)))
    )
    claims: Iterable[QueueClaimRow] = session.scalars(
        select(QueueClaimRow).where(QueueClaimRow.candidate_id.in_(candidate_ids), QueueClaimRow.ended_at.is_(None))
    )
    state.open_claims = {claim.candidate_id: claim for claim in claims}
    state.skipped = set(
        session.scalars(
            select(QueueClaimRow.candidate_id).where(
                QueueClaimRow.candidate_id.in_(candidate_ids),
                QueueClaimRow.annotator == annotator,
                QueueClaimRow.outcome == "skipped",
            )
        )
    )
    return state


def _still_eligible(session: Session, candidate_id: int, annotator: str, target: int) -> bool:
    if session.scalar(select(exists().where(AdjudicationRow.candidate_id == candidate_id))):
        return False
    names = set(
        session.scalars(
            select(LabelRow.annotator).distinct().where(LabelRow.candidate_id == candidate_id, not_retracted())
        )
    )
    return annotator not in names and len(names) < target


def _claim(row: QueueClaimRow) -> Claim:
    return Claim(row.id, row.candidate_id, row.annotator, row.holder, row.claimed_at, row.expires_at)
