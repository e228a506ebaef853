"""Reports (HTML, JSON, PDF) and comparisons."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
