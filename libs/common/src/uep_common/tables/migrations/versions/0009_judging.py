"""judge verdicts, hybrid routing, judge diagnostics (judge)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 12:00:00
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _item_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("evaluation_id", sa.UUID(), nullable=False),
        sa.Column("sample_id", sa.UUID(), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(length=64), nullable=False),
    ]


def upgrade() -> None:
    jsonb = postgresql.JSONB(astext_type=sa.Text())
    op.create_table(
        "judge_verdicts",
        *_item_columns(),
        sa.Column("benchmark_id", sa.UUID(), nullable=False),
        sa.Column("candidate_model_id", sa.UUID(), nullable=False),
        sa.Column("opponent_model_id", sa.UUID(), nullable=True),
        sa.Column("judge_model_id", sa.UUID(), nullable=False),
        sa.Column("judge_model_name", sa.String(length=200), nullable=False),
        sa.Column("mode", sa.String(length=20), nullable=False),
        sa.Column("template", sa.String(length=100), nullable=False),
        sa.Column("template_version", sa.String(length=40), nullable=False),
        sa.Column("position", sa.String(length=2), nullable=False),
        sa.Column("valid", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("overall", sa.Float(), nullable=True),
        sa.Column("scores", jsonb, nullable=False),
        sa.Column("winner", sa.String(length=4), nullable=True),
        sa.Column("candidate_outcome", sa.String(length=4), nullable=True),
        sa.Column("reasoning", sa.Text(), nullable=True),
        sa.Column("raw_text", sa.Text(), nullable=True),
        sa.Column("attempts_log", jsonb, nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("answer_chars", sa.Integer(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["evaluation_id"], ["evaluations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "evaluation_id", "sample_id", "repeat", "arm", "judge_model_id", "position", name="uq_judge_verdicts_call"
        ),
    )
    op.create_index("ix_judge_verdicts_judge", "judge_verdicts", ["judge_model_name", "template", "template_version"])
    op.create_index("ix_judge_verdicts_evaluation", "judge_verdicts", ["evaluation_id"])

    op.create_table(
        "judge_items",
        *_item_columns(),
        sa.Column("mode", sa.String(length=20), nullable=False),
        sa.Column("decision", sa.String(length=10), nullable=False),
        sa.Column("details", jsonb, nullable=False),
        sa.Column("score_event_id", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("decision IN ('scored', 'invalid', 'human')", name="ck_judge_items_decision"),
        sa.ForeignKeyConstraint(["evaluation_id"], ["evaluations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("evaluation_id", "sample_id", "repeat", "arm", name="uq_judge_items_item"),
    )

    op.create_table(
        "hybrid_routes",
        *_item_columns(),
        sa.Column("stage", sa.String(length=10), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=False),
        sa.Column("details", jsonb, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("stage IN ('judge', 'human')", name="ck_hybrid_routes_stage"),
        sa.ForeignKeyConstraint(["evaluation_id"], ["evaluations.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["sample_id"], ["samples.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("evaluation_id", "sample_id", "repeat", "arm", "stage", name="uq_hybrid_routes_item_stage"),
    )
    op.create_index("ix_hybrid_routes_evaluation_stage", "hybrid_routes", ["evaluation_id", "stage"])


def downgrade() -> None:
    op.drop_index("ix_hybrid_routes_evaluation_stage", table_name="hybrid_routes")
    op.drop_table("hybrid_routes")
    op.drop_table("judge_items")
    op.drop_index("ix_judge_verdicts_evaluation", table_name="judge_verdicts")
    op.drop_index("ix_judge_verdicts_judge", table_name="judge_verdicts")
    op.drop_table("judge_verdicts")
