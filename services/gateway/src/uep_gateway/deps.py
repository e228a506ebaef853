"""FastAPI dependencies: database sessions (tenant-scoped for routes, raw for authentication)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from uep_gateway.auth import principal_of
from uep_gateway.tenancy import scoped_session


async def db_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session per request, bound to the caller's tenant (:func:`uep_gateway.tenancy.scoped_session`).
    Resolving the caller may raise 401/403 (:func:`uep_gateway.auth.principal_of`)."""
    principal = await principal_of(request)
    async with request.app.state.sessionmaker() as session:
        yield scoped_session(session, principal)


async def unscoped_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session that row-level security does not restrict — only for the routes that run before a principal
    exists (sign-in) or that read the identity tables themselves."""
    async with request.app.state.sessionmaker() as session:
        yield session
