"""Candidate identity and retirement, the store id, and promotion times of older versions.

- ``candidates.match_key`` and ``questions/candidates.retired_at`` and ``position``: a re-import
  updates rows in place, matched by content, keeps the file's order in ``position``, and marks
  what left the file retired instead of deleting it (with its labels). The unique (question, doc_id) and (dataset, qid) constraints become partial
  indexes over the current rows, since a retired row may share an id with a current one.
- ``store_info`` with a random ``store_id`` that marks this store's checkpoint files.
- ``promoted_at`` for a version promoted before revision 0002 recorded it: its creation time, so
  roll back can return to it.

No row is removed or changed except ``promoted_at`` where it was missing.

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-03
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTIVE = "retired_at IS NULL"


def upgrade() -> None:
    info = op.create_table(
        "store_info",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_store_info"),
    )
    op.bulk_insert(info, [{"key": "store_id", "value": uuid.uuid4().hex[:12]}])

    with op.batch_alter_table("questions") as batch:
        batch.add_column(sa.Column("position", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))
        batch.drop_constraint("uq_questions_dataset_id_qid", type_="unique")
    op.create_index("ix_questions_dataset_id", "questions", ["dataset_id"])
    op.create_index(
        "uq_questions_active_qid", "questions", ["dataset_id", "qid"], unique=True,
        sqlite_where=sa.text(ACTIVE), postgresql_where=sa.text(ACTIVE),
    )

    with op.batch_alter_table("candidates") as batch:
        batch.add_column(sa.Column("match_key", sa.String(), nullable=True))
        batch.add_column(sa.Column("position", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))
        batch.drop_constraint("uq_candidates_question_id_doc_id", type_="unique")
    op.create_index("ix_candidates_question_id", "candidates", ["question_id"])
    op.create_index(
        "uq_candidates_active_doc_id", "candidates", ["question_id", "doc_id"], unique=True,
        sqlite_where=sa.text(ACTIVE), postgresql_where=sa.text(ACTIVE),
    )

    # Revision 0002 added promoted_at empty: the version promoted then is the one to roll back to.
    model_versions = sa.table(
        "model_versions",
        sa.column("promoted", sa.Boolean()),
        sa.column("promoted_at", sa.DateTime(timezone=True)),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    op.execute(
        model_versions.update()
        .where(model_versions.c.promoted.is_(True), model_versions.c.promoted_at.is_(None))
        .values(promoted_at=model_versions.c.created_at)
    )


def downgrade() -> None:
    connection = op.get_bind()
    retired = sum(
        connection.execute(sa.text(f"SELECT COUNT(*) FROM {table} WHERE retired_at IS NOT NULL")).scalar_one()
        for table in ("questions", "candidates")
    )
    if retired:
        # Revision 0002 has no place for them: dropping them would delete their labels.
        raise RuntimeError(
            f"cannot downgrade below 0003: {retired} retired questions and candidates hold kept labels; "
            "export them first (python -m qa_core data orphans) and delete the datasets"
        )
    op.drop_index("uq_candidates_active_doc_id", table_name="candidates")
    op.drop_index("ix_candidates_question_id", table_name="candidates")
    with op.batch_alter_table("candidates") as batch:
        batch.drop_column("retired_at")
        batch.drop_column("position")
        batch.drop_column("match_key")
        batch.create_unique_constraint("uq_candidates_question_id_doc_id", ["question_id", "doc_id"])
    op.drop_index("uq_questions_active_qid", table_name="questions")
    op.drop_index("ix_questions_dataset_id", table_name="questions")
    with op.batch_alter_table("questions") as batch:
        batch.drop_column("retired_at")
        batch.drop_column("position")
        batch.create_unique_constraint("uq_questions_dataset_id_qid", ["dataset_id", "qid"])
    op.drop_table("store_info")
