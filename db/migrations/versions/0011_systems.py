"""External systems (issue 36): named runs and scoring services that rank like a model.

- ``systems``: one row per system, ``kind`` "run" (its scores kept as JSON for one dataset, with the
  file's name and SHA-256) or "service" (a URL, with what its ``GET /info`` said), who added it and
  when. Nothing else points at it, so removing a system touches no label.

Revision ID: 0011
Revises: 0010 (0010_identity_and_checkpoint_hashes)
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "systems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=True),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("file_name", sa.Text(), nullable=True),
        sa.Column("file_sha256", sa.String(), nullable=True),
        sa.Column("info", sa.JSON(), nullable=True),
        sa.Column("scores", sa.JSON(), nullable=True),
        sa.Column("added_by", sa.String(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_systems_dataset_id_datasets"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_systems_user_id_users"), ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_systems")),
        sa.UniqueConstraint("name", name=op.f("uq_systems_name")),
    )
    op.create_index(op.f("ix_systems_dataset_id"), "systems", ["dataset_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_systems_dataset_id"), table_name="systems")
    op.drop_table("systems")
