"""compaction of ended evaluations: ``evaluations.details_compacted_at`` (when compaction last finished with the
evaluation), ``budget_accounts.ledger_compacted_at`` (from then a settle of an item without a lease is dropped),
``spend_ledger.entries`` (how many ledger entries an aggregate row stands for; NULL on a row as written) and the
trigger that drops such late settle rows (``uep_reporter.compaction``, ``uep_common.records.ledger_compaction``)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03 12:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

DROP_LATE_SETTLE = """
CREATE OR REPLACE FUNCTION uep_drop_late_settle() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM budget_accounts a
             WHERE a.evaluation_id = NEW.evaluation_id AND a.ledger_compacted_at IS NOT NULL)
     AND NOT EXISTS (SELECT 1 FROM sample_leases l
                     WHERE l.evaluation_id = NEW.evaluation_id AND l.sample_id = NEW.sample_id
                       AND l.repeat = NEW.repeat AND l.arm = NEW.arm) THEN
    RETURN NULL;
  END IF;
  RETURN NEW;
END $$
"""


def upgrade() -> None:
    op.add_column("evaluations", sa.Column("details_compacted_at", sa.DateTime(timezone=True)))
    op.add_column("budget_accounts", sa.Column("ledger_compacted_at", sa.DateTime(timezone=True)))
    op.add_column("spend_ledger", sa.Column("entries", sa.Integer()))
    op.execute(DROP_LATE_SETTLE)
    op.execute(
        "CREATE TRIGGER spend_ledger_late_settle BEFORE INSERT ON spend_ledger FOR EACH ROW "
        "WHEN (NEW.kind = 'settle' AND NEW.sample_id IS NOT NULL) EXECUTE FUNCTION uep_drop_late_settle()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS spend_ledger_late_settle ON spend_ledger")
    op.execute("DROP FUNCTION IF EXISTS uep_drop_late_settle()")
    op.drop_column("spend_ledger", "entries")
    op.drop_column("budget_accounts", "ledger_compacted_at")
    op.drop_column("evaluations", "details_compacted_at")
