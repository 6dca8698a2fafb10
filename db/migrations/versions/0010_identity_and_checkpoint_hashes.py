"""Identities and checkpoint hashes (issue 33).

- ``users`` are keyed by (``issuer``, ``subject``): two providers may issue one subject, and a
  second subject with a known email is another person. ``name`` is what the user's labels, claims
  and audit rows are recorded under, unique among users: their email when no other user had it at
  their first sign-in. ``merged_into`` points a user an admin merged into another at that user.
  Existing users get the issuer ``""`` (unknown: the first issuer that signs their subject in
  adopts them) and their email (their subject when they have none) as name; of two with one email,
  the later gets ``<email> #<id>``.
- ``model_versions.checkpoint_sha256``: the content hash of the registered checkpoint file, which
  loading checks; versions registered before it have none (their files are checked by kind and
  name only).
- ``candidates.text_edited_at``: when a re-import last changed a candidate's text under the same
  (qid, doc_id); the labels older than it judged the earlier text. Existing rows: unknown (none).

Revision ID: 0010
Revises: 0009 (0009_calibration)
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("issuer", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("name", sa.String(), nullable=True))
        batch.add_column(sa.Column("merged_into", sa.Integer(), nullable=True))
    users = sa.table("users", sa.column("id", sa.Integer()), sa.column("subject", sa.String()),
                     sa.column("email", sa.String()), sa.column("name", sa.String()))
    connection = op.get_bind()
    taken: set[str] = set()
    for user_id, subject, email in connection.execute(sa.select(users.c.id, users.c.subject, users.c.email)
                                                      .order_by(users.c.id)).all():
        name = email or subject
        if name.lower() in taken:
            name = f"{name} #{user_id}"
        taken.add(name.lower())
        connection.execute(sa.update(users).where(users.c.id == user_id).values(name=name))
    with op.batch_alter_table("users") as batch:
        batch.alter_column("name", existing_type=sa.String(), nullable=False)
        batch.drop_constraint("uq_users_subject", type_="unique")
        batch.create_unique_constraint("uq_users_issuer_subject", ["issuer", "subject"])
        batch.create_unique_constraint("uq_users_name", ["name"])
        batch.create_foreign_key("fk_users_merged_into_users", "users", ["merged_into"], ["id"])
    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("checkpoint_sha256", sa.String(), nullable=True))
    op.add_column("candidates", sa.Column("text_edited_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("candidates") as batch:
        batch.drop_column("text_edited_at")
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("checkpoint_sha256")
    with op.batch_alter_table("users") as batch:
        batch.drop_constraint("fk_users_merged_into_users", type_="foreignkey")
        batch.drop_constraint("uq_users_name", type_="unique")
        batch.drop_constraint("uq_users_issuer_subject", type_="unique")
        batch.create_unique_constraint("uq_users_subject", ["subject"])
        batch.drop_column("merged_into")
        batch.drop_column("name")
        batch.drop_column("issuer")
