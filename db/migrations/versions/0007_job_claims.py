"""Training jobs served by workers (``python -m qa_core worker``): who runs a job (``runner``:
``process``, the process the launcher starts, as before; ``worker``, any worker that claims it),
the claim that holds it (``claim``: one token per attempt, written by the claiming worker), the
lease that claim holds until (``lease_until``: renewed by its heartbeats; an expired lease makes
the job claimable again) and how often it was claimed (``attempts``).

Existing jobs keep running as they did: their runner is ``process``; those that started count
one attempt.

Revision ID: 0007
Revises: 0006 (0006_users_and_audit: this revision was written as 0006 revising 0005 beside it,
and chained after it when main, which had it, was merged)
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.add_column(sa.Column("runner", sa.Text(), nullable=False, server_default="process"))
        batch.add_column(sa.Column("claim", sa.Text(), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
    op.execute("UPDATE training_jobs SET attempts = 1 WHERE started_at IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_column("attempts")
        batch.drop_column("lease_until")
        batch.drop_column("claim")
        batch.drop_column("runner")
