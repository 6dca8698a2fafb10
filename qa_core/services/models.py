"""Models, versions and promotion: the front door the Train page and ``python -m qa_core models|gc``
use. It owns the rules of a promotion: a version is promoted for a dataset only once it was compared
with the one in use on that dataset's DEV questions and is not significantly worse there, or the
person promoting confirmed it anyway; promoting the version already in use is refused; a roll back
puts back the version the page offered, not one another session promoted meanwhile. Who may
promote or roll back is checked again inside the write's transaction (``db/versions.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qa_core.types import InputError

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.access import Actor
    from qa_core.services.retraining import VersionCheck


def checkpoints_in_use(store: Store) -> set[Path]:
    """Every registered version's checkpoint file: what garbage collection must keep."""
    return {Path(entry["checkpoint_path"]) for entry in store.models.model_versions()}


def needs_confirmation(check: VersionCheck | None, compared: bool) -> bool:
    """Whether promoting needs the person's confirmation: the version was not compared with the one
    in use on DEV (a checkpoint missing or refused), or it is significantly worse there."""
    return not compared or (check is not None and check.significantly_worse)


def promote(
    store: Store, model: str, number: int, dataset: str, *, actor: Actor | None, check: VersionCheck | None = None,
    compared: bool = True, confirmed: bool = False,
) -> None:
    """Make version ``number`` of ``model`` the one ``dataset`` uses; ``check`` and ``compared`` are
    what the DEV comparison found (``check_against_promoted``; ``compared=False`` when it could not
    run). ``InputError`` when the version is already in use there or needs a confirmation it lacks."""
    current = store.models.promoted_model(model, dataset)
    if current is not None and current["promoted"] and current["version"] == number:
        raise InputError(f"{model} version {number} is already the one promoted for {dataset}")
    if needs_confirmation(check, compared) and not confirmed:
        reason = "was not compared with the promoted one on DEV" if not compared else "is significantly worse on DEV"
        raise InputError(f"{model} version {number} {reason}: confirm the promotion first")
    store.models.promote(model, number, dataset, actor=actor)


def rollback(store: Store, model: str, dataset: str, expected: int | None, *, actor: Actor | None) -> dict[str, Any]:
    """Promote again for ``dataset`` the version promoted there before the current one, and return
    it. ``expected`` is the version the person was offered: when another session promoted or rolled
    back meanwhile, the target changed and nothing is done (they would not get what they clicked)."""
    target = store.models.rollback_target(model, dataset)
    if target is None or target["version"] != expected:
        now = "nothing to roll back to" if target is None else f"a roll back would now put back version {target['version']}"
        raise InputError(f"the versions of {model} for {dataset} changed meanwhile ({now}); look again")
    return store.models.rollback(model, dataset, actor=actor)
