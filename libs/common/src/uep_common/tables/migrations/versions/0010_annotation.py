"""human annotation tasks, assignments, annotations, gold (human evaluation)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "annotators",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "annotation_tasks",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=20), nullable=False),
        sa.Column("source_evaluation_id", sa.UUID(), nullable=False),
        sa.Column("compare_evaluation_id", sa.UUID(), nullable=True),
        sa.Column("result_evaluation_id", sa.UUID(), nullable=True),
        sa.Column("questions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("guidelines", sa.Text(), nullable=False),
        sa.Column("annotations_per_item", sa.Integer(), nullable=False),
        sa.Column("assignment_ttl_seconds", sa.Integer(), nullable=False),
        sa.Column("quality_threshold", sa.Float(), nullable=False),
        sa.Column("min_gold_answers", sa.Integer(), nullable=False),
        sa.Column("gold_rating_tolerance", sa.Float(), nullable=False),
        sa.Column("show_reference", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("total_items", sa.Integer(), nullable=False),
        sa.Column("gold_items", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("source IN ('evaluation', 'hybrid')", name="ck_annotation_tasks_source"),
        sa.CheckConstraint("status IN ('open', 'completed')", name="ck_annotation_tasks_status"),
        sa.CheckConstraint("annotations_per_item >= 1", name="ck_annotation_tasks_per_item"),
        sa.CheckConstraint("quality_threshold >= 0 AND quality_threshold <= 1", name="ck_annotation_tasks_threshold"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"]),
        sa.ForeignKeyConstraint(["source_evaluation_id"], ["evaluations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["compare_evaluation_id"], ["evaluations.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["result_evaluation_id"], ["evaluations.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_annotation_tasks_source_evaluation_id"), "annotation_tasks", ["source_evaluation_id"])
    op.create_index(op.f("ix_annotation_tasks_result_evaluation_id"), "annotation_tasks", ["result_evaluation_id"])
    op.create_table(
        "annotation_items",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.UUID(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("evaluation_id", sa.UUID(), nullable=False),
        sa.Column("sample_id", sa.UUID(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(length=64), nullable=False),
        sa.Column("sample_ordinal", sa.Integer(), nullable=False),
        sa.Column("is_gold", sa.Boolean(), nullable=False),
        sa.Column("gold_answers", postgresql.JSONB(none_as_null=True, astext_type=sa.Text()), nullable=True),
        sa.Column("content", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("source_details", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("submitted_count", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("score_event_id", sa.UUID(), nullable=True),
        sa.CheckConstraint("status IN ('open', 'complete')", name="ck_annotation_items_status"),
        sa.ForeignKeyConstraint(["task_id"], ["annotation_tasks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["sample_id"], ["samples.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", "sample_id", "repeat", "arm", name="uq_annotation_items_item"),
    )
    op.create_index("ix_annotation_items_next", "annotation_items", ["task_id", "status", "position"])
    op.create_table(
        "annotation_assignments",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("task_id", sa.UUID(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("annotator_id", sa.UUID(), nullable=False),
        sa.Column("assigned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["task_id"], ["annotation_tasks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["item_id"], ["annotation_items.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotators.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "annotator_id", name="uq_annotation_assignments_item_annotator"),
    )
    op.create_index("ix_annotation_assignments_annotator", "annotation_assignments", ["task_id", "annotator_id"])
    op.create_table(
        "annotations",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.UUID(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("annotator_id", sa.UUID(), nullable=False),
        sa.Column("assignment_id", sa.UUID(), nullable=False),
        sa.Column("answers", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("gold_checked", sa.Integer(), nullable=False),
        sa.Column("gold_correct", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["annotation_tasks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["item_id"], ["annotation_items.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["annotator_id"], ["annotators.id"]),
        sa.ForeignKeyConstraint(["assignment_id"], ["annotation_assignments.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "annotator_id", name="uq_annotations_item_annotator"),
    )
    op.create_index("ix_annotations_task_annotator", "annotations", ["task_id", "annotator_id"])


def downgrade() -> None:
    op.drop_index("ix_annotations_task_annotator", table_name="annotations")
    op.drop_table("annotations")
    op.drop_index("ix_annotation_assignments_annotator", table_name="annotation_assignments")
    op.drop_table("annotation_assignments")
    op.drop_index("ix_annotation_items_next", table_name="annotation_items")
    op.drop_table("annotation_items")
    op.drop_index(op.f("ix_annotation_tasks_result_evaluation_id"), table_name="annotation_tasks")
    op.drop_index(op.f("ix_annotation_tasks_source_evaluation_id"), table_name="annotation_tasks")
    op.drop_table("annotation_tasks")
    op.drop_table("annotators")
