"""Persistence of the models context: registered versions, promotions for a dataset (or every
dataset, ``*``), and roll backs (a stack of promotions per scope)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.audit import authorize, authorize_training, record
from db.base import (
    ANY_DATASET,
    REGISTER_ATTEMPTS,
    NewVersion,
    StoreBase,
    insert_model_version,
    insert_promotion,
    model_dict,
    promoted_scopes,
    promotion_scope,
    promotions,
    serves,
)
from db.models import ModelVersionRow
from qa_core.access import Actor, Permission
from qa_core.types import InputError


class VersionStore(StoreBase):
    """The model registry: which versions exist and which one each dataset uses."""


    def register_model(self, name: str, new: NewVersion, scope: str | None = None, *, actor: Actor | None = None) -> int:
        """Record ``new`` as the next version of model ``name`` and return its ``model_versions`` id;
        with ``new.promote``, make it the version used for ``scope`` (default: the dataset it was
        trained on, ``training_data["dataset"]``, else every dataset, ``*``). Training needs the
        right to train, promoting also the right to promote."""
        promote_for = (scope or promotion_scope(new.training_data)) if new.promote else None

        def register(session: Session) -> int:
            who = authorize_training(session, actor, promote=promote_for is not None, team=self.team)
            version_id = insert_model_version(session, name, new, promote_for)
            record(session, who, "register", name, {"version_id": version_id, "promoted_for": promote_for,
                                                    "dataset": new.training_data.get("dataset")})
            return version_id

        return self.retrying(register, REGISTER_ATTEMPTS)

    def model_versions(self, name: str | None = None) -> list[dict[str, Any]]:
        """Registered versions, by name then version, each with the scopes it is promoted for."""
        with self.session_scope() as session:
            query = select(ModelVersionRow).order_by(ModelVersionRow.name, ModelVersionRow.version)
            if name is not None:
                query = query.where(ModelVersionRow.name == name)
            scopes = promoted_scopes(session, name)
            return [model_dict(row, scopes.get(row.id)) for row in session.scalars(query)]

    def promoted_model(self, name: str, scope: str = ANY_DATASET) -> dict[str, Any] | None:
        """The version of ``name`` that ``scope`` (a dataset, or ``*``) uses: its latest promotion
        there, else its latest promotion for every dataset (``*``), else the newest version trained
        on that dataset or on none in particular, else ``None``. ``"promoted"`` in the result says
        whether a promotion chose it."""
        with self.session_scope() as session:
            history = promotions(session, name, scope) or promotions(session, name, ANY_DATASET)
            if history:
                row = session.get(ModelVersionRow, history[0].version_id)
                promoted = True
            else:
                newest = session.scalars(
                    select(ModelVersionRow).where(ModelVersionRow.name == name).order_by(ModelVersionRow.version.desc())
                )
                row = next((r for r in newest if serves(r.training_data, scope)), None)
                promoted = False
            if row is None:
                return None
            return {**model_dict(row, promoted_scopes(session, name).get(row.id)), "promoted": promoted}

    def promotion_history(self, name: str, scope: str) -> list[dict[str, Any]]:
        """The versions promoted for ``scope`` (then for every dataset, ``*``), newest promotion
        first, each version once: where a fallback goes after the version in use."""
        with self.session_scope() as session:
            scopes = promoted_scopes(session, name)
            seen: dict[int, dict[str, Any]] = {}
            history = promotions(session, name, scope)
            if scope != ANY_DATASET:
                history += promotions(session, name, ANY_DATASET)
            for promotion in history:
                if promotion.version_id not in seen:
                    row = session.get(ModelVersionRow, promotion.version_id)
                    seen[promotion.version_id] = {
                        **model_dict(row, scopes.get(row.id)), "action": promotion.action,
                        "promoted_at": promotion.promoted_at,
                    }
            return list(seen.values())

    def model_version(self, version_id: int) -> dict[str, Any]:
        """One registered version by its ``model_versions`` id."""
        with self.session_scope() as session:
            row = session.get(ModelVersionRow, version_id)
            if row is None:
                raise InputError(f"no model version with id {version_id}")
            return model_dict(row, promoted_scopes(session, row.name).get(row.id))

    def promote(self, name: str, version: int, scope: str, *, actor: Actor | None = None) -> None:
        """Make ``version`` of ``name`` the one ``scope`` uses (a dataset, possibly another than the
        one it was trained on, or ``*``)."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.PROMOTE, team=self.team)
            row = session.scalars(
                select(ModelVersionRow).where(ModelVersionRow.name == name, ModelVersionRow.version == version)
            ).first()
            if row is None:
                raise InputError(f"model {name!r} has no version {version}")
            insert_promotion(session, name, scope, row.id, "promote")
            record(session, who, "promote", name, {"version": version, "scope": scope})

    def rollback_target(self, name: str, scope: str) -> dict[str, Any] | None:
        """The version of ``name`` that ``rollback`` would put back for ``scope``, or None when no
        other version was promoted there before (the Train page labels and enables its button so)."""
        with self.session_scope() as session:
            row = self._rollback_row(session, name, scope)
            return None if row is None else model_dict(row, promoted_scopes(session, name).get(row.id))

    def rollback(self, name: str, scope: str, *, actor: Actor | None = None) -> dict[str, Any]:
        """Promote again, for ``scope`` only, the version of ``name`` promoted there before the
        current one, and return it; ``InputError`` when there is none."""
        with self.session_scope() as session:
            who = authorize(session, actor, Permission.ROLLBACK, team=self.team)
            row = self._rollback_row(session, name, scope)
            if row is None:
                raise InputError(f"model {name!r} has no earlier version promoted for {scope!r} to roll back to")
            insert_promotion(session, name, scope, row.id, "rollback")
            record(session, who, "rollback", name, {"version": row.version, "scope": scope})
            return model_dict(row, promoted_scopes(session, name).get(row.id))

    @staticmethod
    def _rollback_row(session: Session, name: str, scope: str) -> ModelVersionRow | None:
        """The version promoted before the current one, a roll back undoing the promotion it rolled
        back (a stack): after 1, 4 and a roll back to 1, nothing is left to roll back to (not 4)."""
        stack: list[int] = []
        for promotion in reversed(promotions(session, name, scope)):  # oldest first
            if promotion.action == "rollback" and stack:
                stack.pop()
            if not stack or stack[-1] != promotion.version_id:
                stack.append(promotion.version_id)
        earlier = next((v for v in reversed(stack[:-1]) if v != stack[-1]), None)
        return None if earlier is None else session.get(ModelVersionRow, earlier)
