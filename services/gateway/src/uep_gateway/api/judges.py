"""LLM-as-judge configuration and diagnostics."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
