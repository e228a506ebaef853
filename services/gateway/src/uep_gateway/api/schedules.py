"""Batch, A/B and scheduled (cron) evaluations."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
