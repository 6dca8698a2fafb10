"""Labelling and training jobs: label retractions (undo), adjudications, queue claims (leases),
training jobs with their progress events, and when a model version was promoted.

Only new tables, new indexes and one nullable column: every existing row is kept as it is.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "label_retractions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("label_id", sa.Integer(), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["label_id"], ["labels.id"], name="fk_label_retractions_label_id_labels", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_label_retractions"),
        sa.UniqueConstraint("label_id", name="uq_label_retractions_label_id"),
    )
    op.create_index("ix_labels_annotator_id", "labels", ["annotator", "id"])

    op.create_table(
        "adjudications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("adjudicator", sa.String(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["candidate_id"], ["candidates.id"], name="fk_adjudications_candidate_id_candidates", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_adjudications"),
    )
    op.create_index("ix_adjudications_candidate_id", "adjudications", ["candidate_id"])

    op.create_table(
        "queue_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(
            ["candidate_id"], ["candidates.id"], name="fk_queue_claims_candidate_id_candidates", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_queue_claims"),
    )
    op.create_index("ix_queue_claims_candidate_id", "queue_claims", ["candidate_id"])
    op.create_index("ix_queue_claims_annotator", "queue_claims", ["annotator"])
    op.create_index("ix_queue_claims_holder", "queue_claims", ["holder"])
    # At most one open claim per candidate: what makes claiming atomic on both back ends.
    op.create_index(
        "uq_queue_claims_open_candidate_id",
        "queue_claims",
        ["candidate_id"],
        unique=True,
        sqlite_where=sa.text("ended_at IS NULL"),
        postgresql_where=sa.text("ended_at IS NULL"),
    )

    with op.batch_alter_table("model_versions") as batch:
        batch.add_column(sa.Column("promoted_at", sa.DateTime(timezone=True), nullable=True))

    op.create_table(
        "training_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("dataset", sa.String(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("phase", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("host", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("model_version_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name="fk_training_jobs_model_version_id_model_versions",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_training_jobs"),
    )
    op.create_index("ix_training_jobs_status", "training_jobs", ["status"])
    op.create_index("ix_training_jobs_model_version_id", "training_jobs", ["model_version_id"])

    op.create_table(
        "training_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=True),
        sa.Column("batch", sa.Integer(), nullable=True),
        sa.Column("loss", sa.Double(), nullable=True),
        sa.Column("dev_map", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["training_jobs.id"], name="fk_training_events_job_id_training_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_training_events"),
    )
    op.create_index("ix_training_events_job_id_id", "training_events", ["job_id", "id"])


def downgrade() -> None:
    op.drop_table("training_events")
    op.drop_table("training_jobs")
    with op.batch_alter_table("model_versions") as batch:
        batch.drop_column("promoted_at")
    op.drop_table("queue_claims")
    op.drop_table("adjudications")
    op.drop_index("ix_labels_annotator_id", table_name="labels")
    op.drop_table("label_retractions")
