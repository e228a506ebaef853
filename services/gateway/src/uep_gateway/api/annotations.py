"""Human evaluation: annotation tasks, next item, submissions, agreement, annotation page."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
