"""Training events for every model: ``epoch`` becomes ``step`` (epochs or grid points, named by
``unit``), with the planned ``total`` and a model's own ``detail`` (``qa_core.training.events``).

Existing events keep their values: their step is their epoch, their unit "epoch", their total unknown.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("training_events") as batch:
        batch.alter_column("epoch", new_column_name="step", existing_type=sa.Integer(), existing_nullable=True)
        batch.add_column(sa.Column("total", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("unit", sa.Text(), nullable=False, server_default="epoch"))
        batch.add_column(sa.Column("detail", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("training_events") as batch:
        batch.drop_column("detail")
        batch.drop_column("unit")
        batch.drop_column("total")
        batch.alter_column("step", new_column_name="epoch", existing_type=sa.Integer(), existing_nullable=True)
