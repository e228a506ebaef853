"""FastAPI dependencies: database sessions, Redis, settings, the outbox relay (set up in the lifespan)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession


async def db_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session per request from the app's session factory."""
    async with request.app.state.sessionmaker() as session:
        yield session
