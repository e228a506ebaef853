"""The tenant-scoped access path: every database session a route gets is bound to its caller's tenant.

:func:`scoped_session` (behind :func:`uep_gateway.deps.db_session`) runs each transaction of the session as
:data:`uep_common.tables.rls.SCOPED_ROLE` with the caller's tenant id set, so PostgreSQL's row-level security
shows and accepts only that tenant's rows (and the shared catalogue); a site admin acting across tenants
runs as :data:`uep_common.tables.rls.CROSS_TENANT_ROLE`. On top of that wall, routes fetch objects by id through
:func:`owned`, which filters on ``tenant_id`` itself and answers 404 — the same answer as for an id that
does not exist, so nothing tells another tenant's object apart from a missing one.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, event, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.rls import scope_statement
from uep_gateway.auth import Principal
from uep_gateway.errors import FieldError, Kind

M = TypeVar("M")


def scoped_session(session: AsyncSession, principal: Principal) -> AsyncSession:
    """Bind ``session`` to ``principal``: every transaction it begins first runs
    :func:`uep_common.tables.rls.scope_statement`. Returns the session (``session.info['principal']`` is set)."""
    statement = scope_statement(principal.tenant.id, cross_tenant=principal.site_act)

    def _scope(_session: Any, _transaction: Any, connection: Any) -> None:
        # Straight on the DBAPI cursor: the statement returns nothing the ORM needs, and this skips
        # SQLAlchemy's execution machinery on every transaction.
        cursor = connection.connection.cursor()
        try:
            cursor.execute(statement)
        finally:
            cursor.close()

    event.listen(session.sync_session, "after_begin", _scope)
    session.info["principal"] = principal
    return session


def principal_of_session(session: AsyncSession) -> Principal:
    """The principal a scoped session was bound to. Raises RuntimeError for an unscoped session."""
    principal = session.info.get("principal")
    if principal is None:
        raise RuntimeError("this session is not tenant-scoped (use uep_gateway.deps.db_session)")
    assert isinstance(principal, Principal)
    return principal


def tenant_filter(session: AsyncSession, model: Any) -> ColumnElement[bool]:
    """``model.tenant_id = <caller's tenant>`` for a query on ``session`` (true for a site admin acting
    across tenants)."""
    principal = principal_of_session(session)
    if principal.site_act:
        return true()
    clause: ColumnElement[bool] = model.tenant_id == principal.tenant.id
    return clause


async def owned(
    session: AsyncSession,
    model: type[M],
    object_id: Any,
    loc: tuple[str, ...],
    what: str,
    *,
    lock: bool = False,
    kind: Kind = "not_found",
) -> M:
    """The ``model`` row with primary key ``object_id`` owned by the caller's tenant (locked ``FOR UPDATE``
    until the transaction ends when ``lock``). Raises ``kind`` (``not_found``; ``invalid`` where the id is a body field)
    naming ``loc`` — ``"unknown <what> <id>"``, type ``unknown_<what>`` — when there is none or it is another
    tenant's: the same body either way."""
    table: Any = model
    q = select(table).where(table.id == object_id, tenant_filter(session, table))
    row: M | None = await session.scalar(q.with_for_update() if lock else q)
    if row is None:
        raise FieldError(kind, loc, f"unknown {what} {object_id}", f"unknown_{what.replace(' ', '_')}")
    return row


def caller_tenant_id(session: AsyncSession) -> uuid.UUID:
    """The id of the tenant the session's caller acts for."""
    return principal_of_session(session).tenant.id
