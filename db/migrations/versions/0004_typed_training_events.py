"""Training events for every model: ``epoch`` becomes ``step`` (epochs or grid points, named by
``unit``), with the planned ``total`` and a model's own ``detail`` (``qa_core.training.events``).

Existing events keep their values: their step is their epoch, their unit "epoch", their total unknown.

Stores written by the commits of 2026-11-23 between 659fa87 and 8df82d0 numbered this change 0003
(before candidate identity took that number): they are stamped 0003 with typed events and without
candidate identity. For them this revision applies candidate identity instead (read off the schema).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "store_info" not in inspector.get_table_names():  # stamped 0003 by the typed events' old number
        _candidate_identity().upgrade()
    if "step" in {column["name"] for column in inspector.get_columns("training_events")}:
        return  # typed already (the same stores)
    with op.batch_alter_table("training_events") as batch:
        batch.alter_column("epoch", new_column_name="step", existing_type=sa.Integer(), existing_nullable=True)
        batch.add_column(sa.Column("total", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("unit", sa.Text(), nullable=False, server_default="epoch"))
        batch.add_column(sa.Column("detail", sa.JSON(), nullable=True))


def _candidate_identity():
    """Revision 0003's module (a file name starting with a digit is no importable module name)."""
    spec = importlib.util.spec_from_file_location("candidate_identity", Path(__file__).with_name("0003_candidate_identity.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def downgrade() -> None:
    with op.batch_alter_table("training_events") as batch:
        batch.drop_column("detail")
        batch.drop_column("unit")
        batch.drop_column("total")
        batch.alter_column("step", new_column_name="epoch", existing_type=sa.Integer(), existing_nullable=True)
