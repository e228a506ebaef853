"""Identity routes: sign-in and sessions, members, API keys, the audit log and tenants."""

from __future__ import annotations

from fastapi import APIRouter

from uep_gateway.validation import NUL_CHECK

router = APIRouter(tags=["identity"], dependencies=NUL_CHECK)
