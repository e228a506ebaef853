"""Every uep table on one metadata: imports the core tables (:mod:`.models`) and each area's table module.

Alembic (``migrations/env.py``) takes :data:`metadata` as its target, so autogenerate and the migration
checks see all tables. A service needs only the table modules it uses: each one registers its tables on
``Base.metadata`` when it is imported, and the core tables it references by foreign key come with it.
"""

from __future__ import annotations

from uep_common.tables import annotation, budgets, identity, judging, leaderboards, lifecycle, models, reports, scheduling
from uep_common.tables.base import Base

TABLE_MODULES = (models, identity, scheduling, budgets, lifecycle, judging, annotation, reports, leaderboards)
"""The modules that define tables: the core ones first, then one module per area."""

metadata = Base.metadata
"""The metadata holding every table of :data:`TABLE_MODULES`."""
