"""Calibration of new annotators (issue 21, item 1): per dataset, whether annotators without a
calibration record first judge a few gold pairs and how many (``calibration_settings``,
append-only, the latest row wins), and their calibration judgements (``calibration_judgements``):
the grade given, the gold label it is compared with as it was then, who, when the pair was shown
and judged, the app session and the guideline version in force, and the settings row the run
started under (its size). Calibration judgements are apart from ``labels``: they never count as
training labels nor in the agreement between annotators.

Only new tables: every existing row keeps its meaning.

Revision ID: 0009
Revises: 0008 (0008_annotation)
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "calibration_settings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("changed_by", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name="fk_calibration_settings_dataset_id_datasets", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_calibration_settings"),
    )
    op.create_index("ix_calibration_settings_dataset_id", "calibration_settings", ["dataset_id"])
    op.create_table(
        "calibration_judgements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("settings_id", sa.Integer(), nullable=False),
        sa.Column("candidate_id", sa.Integer(), nullable=False),
        sa.Column("annotator", sa.String(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("holder", sa.String(), nullable=True),
        sa.Column("value", sa.Integer(), nullable=False),
        sa.Column("gold", sa.Integer(), nullable=False),
        sa.Column("guideline_id", sa.Integer(), nullable=True),
        sa.Column("shown_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["settings_id"], ["calibration_settings.id"],
            name="fk_calibration_judgements_settings_id_calibration_settings", ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["candidate_id"], ["candidates.id"], name="fk_calibration_judgements_candidate_id_candidates",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_calibration_judgements_user_id_users", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["guideline_id"], ["guidelines.id"], name="fk_calibration_judgements_guideline_id_guidelines",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_calibration_judgements"),
        sa.UniqueConstraint("candidate_id", "annotator", name="uq_calibration_judgements_candidate_id_annotator"),
    )
    op.create_index("ix_calibration_judgements_annotator", "calibration_judgements", ["annotator"])
    op.create_index("ix_calibration_judgements_user_id", "calibration_judgements", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_calibration_judgements_user_id", table_name="calibration_judgements")
    op.drop_index("ix_calibration_judgements_annotator", table_name="calibration_judgements")
    op.drop_table("calibration_judgements")
    op.drop_index("ix_calibration_settings_dataset_id", table_name="calibration_settings")
    op.drop_table("calibration_settings")
