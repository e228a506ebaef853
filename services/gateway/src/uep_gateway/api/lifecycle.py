"""Stop, retry and dead-letter re-drive of evaluations."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
