"""Initial schema: datasets, questions, candidates, labels, model versions, runs.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_datasets"),
        sa.UniqueConstraint("name", name="uq_datasets_name"),
    )
    op.create_table(
        "questions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("qid", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("split", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name="fk_questions_dataset_id_datasets", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_questions"),
        sa.UniqueConstraint("dataset_id", "qid", name="uq_questions_dataset_id_qid"),
    )
    op.create_table(
        "candidates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("doc_id", sa.String(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("first_stage_rank", sa.Integer(), nullable=True),
        sa.Column("first_stage_score", sa.Double(), nullable=True),
        sa.Column("gold_label", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["question_id"], ["questions.id"], name="fk_candidates_question_id_questions", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_candidates"),
        sa.UniqueConstraint("question_id", "doc_id", name="uq_candidates_question_id_doc_id"),
    )
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["candidate_id"], ["candidates.id"], name="fk_labels_candidate_id_candidates", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_labels"),
    )
    op.create_index("ix_labels_candidate_id_annotator", "labels", ["candidate_id", "annotator"])
    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("training_data", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("checkpoint_path", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("promoted", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_model_versions"),
        sa.UniqueConstraint("name", "version", name="uq_model_versions_name_version"),
    )
    op.create_index(
        "uq_model_versions_promoted_name",
        "model_versions",
        ["name"],
        unique=True,
        sqlite_where=sa.column("promoted"),
        postgresql_where=sa.column("promoted"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model_version_id", sa.Integer(), nullable=True),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(), nullable=True),
        sa.Column("tag", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name="fk_runs_dataset_id_datasets", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["model_version_id"],
            ["model_versions.id"],
            name="fk_runs_model_version_id_model_versions",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_dataset_id", "runs", ["dataset_id"])
    op.create_index("ix_runs_model_version_id", "runs", ["model_version_id"])
    op.create_table(
        "run_scores",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("score", sa.Double(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["candidate_id"], ["candidates.id"], name="fk_run_scores_candidate_id_candidates", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_scores_run_id_runs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "candidate_id", name="pk_run_scores"),
    )
    op.create_index("ix_run_scores_candidate_id", "run_scores", ["candidate_id"])


def downgrade() -> None:
    op.drop_table("run_scores")
    op.drop_table("runs")
    op.drop_table("model_versions")
    op.drop_table("labels")
    op.drop_table("candidates")
    op.drop_table("questions")
    op.drop_table("datasets")
