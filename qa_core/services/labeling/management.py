"""What whoever manages a dataset's annotation sets: its guidelines (every save a new version), the
calibration of new annotators, and the share of double-annotated pairs.

Each write refuses first, with the reason, what the store would refuse (no right to manage the
dataset's annotation, no name to record, a value out of range), so a page shows why before any
write; the store checks the actor again inside the write's transaction (``db/audit.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from db.calibration import MAX_CALIBRATION_PAIRS
from qa_core.access import AccessDenied, Actor, Permission
from qa_core.types import InputError

if TYPE_CHECKING:
    from db.annotation import AnnotationSettings, Guideline
    from db.calibration import CalibrationSettings
    from db.store import Store

def may_manage(actor: Actor) -> bool:
    """Whether ``actor`` edits guidelines and settings (an admin in team mode, anyone locally)."""
    return actor.may(Permission.MANAGE_ANNOTATION)


def _check_manager(actor: Actor, changer: str | None, what: str) -> str:
    """``changer``, once ``actor`` may manage annotation and a name is there to record."""
    if not may_manage(actor):
        raise AccessDenied(f"{actor.describe()} may not change {what}: only an admin does")
    if changer is None:
        raise InputError(f"choose or type your name to change {what}: every change records who made it")
    return changer


def save_guidelines(store: Store, dataset: str, text: str, author: str | None, actor: Actor) -> Guideline:
    """``text`` as the dataset's next guideline version (text equal to the version in force keeps it)."""
    return store.annotation.save_guidelines(dataset, text, _check_manager(actor, author, "the guidelines"), actor=actor)


def calibration_line(settings: CalibrationSettings) -> str:
    """The calibration setting in force, said for the page."""
    state = f"on, {settings.pairs} gold pairs" if settings.enabled else "off"
    changed = f"set by {settings.changed_by}" if settings.changed_by else "the default"
    when = "A" if settings.enabled else "When on, a"
    # The rule of ``calibration.Calibration.build``: one who has labelled as many pairs is not new.
    return (f"Now {state} ({changed}). {when} new annotator (no calibration begun in this dataset and fewer than "
            f"{settings.pairs} current labels in it) judges the same gold pairs first, in the graded mode and without "
            "seeing gold, and sees their agreement with gold before real work; a calibration begun is finished, and "
            f"one who has labelled {settings.pairs} pairs or more here is not asked.")


def set_calibration(
    store: Store, dataset: str, enabled: bool, pairs: int, changer: str | None, actor: Actor
) -> CalibrationSettings:
    """Calibrate new annotators of ``dataset`` on ``pairs`` gold pairs first (or not): 1 to
    ``MAX_CALIBRATION_PAIRS``, the most a page offers."""
    if not 1 <= pairs <= MAX_CALIBRATION_PAIRS:
        raise InputError(f"a calibration shows 1 to {MAX_CALIBRATION_PAIRS} gold pairs, got {pairs}")
    return store.calibration.set_calibration(dataset, enabled, pairs, _check_manager(actor, changer, "the calibration"), actor=actor)


def overlap_line(settings: AnnotationSettings) -> str:
    """The share in force, said for the page."""
    changed = f"set by {settings.changed_by}" if settings.changed_by else "the default"
    return f"Now {settings.overlap_share:.0%} ({changed}); it applies to pairs not yet judged."


def set_overlap_percent(store: Store, dataset: str, percent: int, changer: str | None, actor: Actor) -> None:
    """Hand ``percent`` of the dataset's pairs not yet judged to two annotators or more; how many
    annotators such a pair wants stays as set."""
    if not 0 <= percent <= 100:
        raise InputError(f"the share of double-annotated pairs is a percentage from 0 to 100, got {percent}")
    changer = _check_manager(actor, changer, "the share of double-annotated pairs")
    overlap = store.annotation.annotation_settings(dataset).overlap
    store.annotation.set_annotation_settings(dataset, percent / 100, overlap, changer, actor=actor)
