"""Who queued each training job (issue 45): ``created_by`` (the actor's name), ``created_by_kind``
(``access``'s actor kinds: user, local, operator, system) and ``created_by_user_id`` (a signed-in
user's row). A job registers and promotes its version as its creator, authorised with the role they
hold when it finishes, not as the worker or process that runs it.

Jobs queued before keep none: they act as their runner, as they did.

Revision ID: 0012
Revises: 0011 (0011_systems)
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.add_column(sa.Column("created_by", sa.Text(), nullable=True))
        batch.add_column(sa.Column("created_by_kind", sa.Text(), nullable=True))
        batch.add_column(sa.Column("created_by_user_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(op.f("fk_training_jobs_created_by_user_id_users"), "users", ["created_by_user_id"],
                                 ["id"], ondelete="SET NULL")


def downgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_constraint(op.f("fk_training_jobs_created_by_user_id_users"), type_="foreignkey")
        batch.drop_column("created_by_user_id")
        batch.drop_column("created_by_kind")
        batch.drop_column("created_by")
