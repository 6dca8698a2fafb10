"""Promotion per (model, dataset): ``model_promotions`` replaces ``model_versions.promoted`` and
``promoted_at``, so a model trained on TrecQA no longer becomes "smcnn" for WikiQA's pages.

Carried over without changing which version any page uses today: for every model whose versions
name a training dataset (the rankers), each version ever promoted gets, in order of its
``promoted_at``, a history row for every dataset in the store, the currently promoted one last
(so that today's version stays in use for every dataset, now visibly, and roll back within a
dataset returns to the version promoted before it). Models whose versions name no dataset (the
question classifiers) get the same rows under the scope ``*``.

Downgrade puts ``promoted`` / ``promoted_at`` back from the newest promotion of each name, over
all scopes (the per-dataset history is lost).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ANY_DATASET = "*"


def upgrade() -> None:
    promotions = op.create_table(
        "model_promotions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("promoted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["version_id"], ["model_versions.id"], name="fk_model_promotions_version_id_model_versions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_model_promotions"),
    )
    op.create_index("ix_model_promotions_name_scope_id", "model_promotions", ["name", "scope", "id"])
    op.create_index("ix_model_promotions_version_id", "model_promotions", ["version_id"])

    connection = op.get_bind()
    datasets = [row.name for row in connection.execute(sa.text("SELECT name FROM datasets ORDER BY name"))]
    # Typed, so that each back end hands back datetimes and dicts.
    versions_table = sa.table(
        "model_versions",
        sa.column("id", sa.Integer()),
        sa.column("name", sa.String()),
        sa.column("training_data", sa.JSON()),
        sa.column("promoted", sa.Boolean()),
        sa.column("promoted_at", sa.DateTime(timezone=True)),
    )
    v = versions_table.c
    versions = connection.execute(
        sa.select(v.id, v.name, v.training_data, v.promoted_at)
        .where(sa.or_(v.promoted_at.is_not(None), v.promoted))
        .order_by(v.name, v.promoted, v.promoted_at, v.id)  # per name: earlier promotions, the current one last
    ).all()
    migrated_at = datetime.now(UTC)
    rows = []
    for version in versions:
        scopes = datasets if (version.training_data or {}).get("dataset") else [ANY_DATASET]
        promoted_at = version.promoted_at or migrated_at
        if promoted_at.tzinfo is None:  # SQLite keeps no zone: the store writes UTC
            promoted_at = promoted_at.replace(tzinfo=UTC)
        rows += [
            {"name": version.name, "scope": scope, "version_id": version.id, "action": "migrated",
             "promoted_at": promoted_at}
            for scope in scopes
        ]
    if rows:
        op.bulk_insert(promotions, rows)

    op.drop_index("uq_model_versions_promoted_name", table_name="model_versions")
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("promoted_at")
        batch.drop_column("promoted")


def downgrade() -> None:
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("promoted", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("promoted_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE model_versions SET promoted_at = "
        "(SELECT max(p.promoted_at) FROM model_promotions p WHERE p.version_id = model_versions.id)"
    )
    op.execute(
        "UPDATE model_versions SET promoted = TRUE WHERE id IN (SELECT p.version_id FROM model_promotions p "
        "WHERE p.id = (SELECT max(q.id) FROM model_promotions q WHERE q.name = p.name))"
    )
    op.create_index(
        "uq_model_versions_promoted_name", "model_versions", ["name"], unique=True,
        sqlite_where=sa.text("promoted"), postgresql_where=sa.text("promoted"),
    )
    op.drop_index("ix_model_promotions_version_id", table_name="model_promotions")
    op.drop_index("ix_model_promotions_name_scope_id", table_name="model_promotions")
    op.drop_table("model_promotions")
