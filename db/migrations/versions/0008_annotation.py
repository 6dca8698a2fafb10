"""Annotation (issue 21): per-dataset guidelines with versions, per-dataset labelling settings (the
share of double-annotated pairs), and on every label the queue claim it was given under (whose
undo it is, when the pair was shown) and the guideline version it was made under; pairwise and
top-k preference judgements with their retractions (undo).

Only new tables and nullable columns: every existing label keeps its row, with no claim and no
guideline version (it was made before either was recorded).

Revision ID: 0008
Revises: 0007 (0007_job_claims)
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "guidelines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("author", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name="fk_guidelines_dataset_id_datasets", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_guidelines"),
        sa.UniqueConstraint("dataset_id", "version", name="uq_guidelines_dataset_id_version"),
    )
    op.create_table(
        "annotation_settings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("overlap_share", sa.Double(), nullable=False),
        sa.Column("overlap", sa.Integer(), nullable=False),
        sa.Column("changed_by", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name="fk_annotation_settings_dataset_id_datasets", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_annotation_settings"),
    )
    op.create_index("ix_annotation_settings_dataset_id", "annotation_settings", ["dataset_id"])
    with op.batch_alter_table("labels") as batch:
        batch.add_column(sa.Column("claim_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("guideline_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            "fk_labels_claim_id_queue_claims", "queue_claims", ["claim_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_foreign_key(
            "fk_labels_guideline_id_guidelines", "guidelines", ["guideline_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index("ix_labels_claim_id", ["claim_id"])


    op.create_table(
        "preference_judgements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("shown", sa.JSON(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.Column("picked", sa.JSON(), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("holder", sa.String(), nullable=True),
        sa.Column("guideline_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["question_id"], ["questions.id"], name="fk_preference_judgements_question_id_questions", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_preference_judgements_user_id_users", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["guideline_id"], ["guidelines.id"], name="fk_preference_judgements_guideline_id_guidelines",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_preference_judgements"),
    )
    op.create_index("ix_preference_judgements_question_id", "preference_judgements", ["question_id"])
    op.create_index("ix_preference_judgements_annotator", "preference_judgements", ["annotator"])
    op.create_index("ix_preference_judgements_user_id", "preference_judgements", ["user_id"])
    op.create_table(
        "preference_retractions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("judgement_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["judgement_id"], ["preference_judgements.id"],
            name="fk_preference_retractions_judgement_id_preference_judgements", ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_preference_retractions"),
        sa.UniqueConstraint("judgement_id", name="uq_preference_retractions_judgement_id"),
    )


def downgrade() -> None:
    op.drop_table("preference_retractions")
    op.drop_index("ix_preference_judgements_user_id", table_name="preference_judgements")
    op.drop_index("ix_preference_judgements_annotator", table_name="preference_judgements")
    op.drop_index("ix_preference_judgements_question_id", table_name="preference_judgements")
    op.drop_table("preference_judgements")
    with op.batch_alter_table("labels") as batch:
        batch.drop_index("ix_labels_claim_id")
        batch.drop_constraint("fk_labels_guideline_id_guidelines", type_="foreignkey")
        batch.drop_constraint("fk_labels_claim_id_queue_claims", type_="foreignkey")
        batch.drop_column("guideline_id")
        batch.drop_column("claim_id")
    op.drop_index("ix_annotation_settings_dataset_id", table_name="annotation_settings")
    op.drop_table("annotation_settings")
    op.drop_table("guidelines")
