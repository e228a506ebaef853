"""Cost estimates, caps and spend."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
