"""Tables of LLM-as-judge and hybrid routing.

Models here use :class:`uep_common.db.models.Base`; they are imported by ``uep_common.db.models`` so that
Alembic and every service see one metadata.
"""

from __future__ import annotations

from uep_common.db.models import Base  # noqa: F401
