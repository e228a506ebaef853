"""Benchmark versions: a version is the SHA-256 of the benchmark's canonical content."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Protocol


class Item(Protocol):
    """What the hash reads of a sample (DatasetItem and uploaded rows both have these)."""

    @property
    def external_id(self) -> str | None:
        """The sample's id in its source dataset, or None."""

    @property
    def input(self) -> dict[str, Any]:
        """The sample's input fields (JSON object)."""

    @property
    def reference(self) -> dict[str, Any]:
        """The sample's reference (gold) fields (JSON object)."""


def content_hash(config: dict[str, Any], items: Iterable[Item]) -> str:
    """SHA-256 hex of the canonical JSON (sorted keys, no whitespace) of ``config`` followed by each item's
    ``[external_id, input, reference]``, one per line, in order. Same content → same version."""
    h = hashlib.sha256()
    h.update(json.dumps(config, sort_keys=True, separators=(",", ":")).encode())
    for it in items:
        h.update(b"\n")
        h.update(json.dumps([it.external_id, it.input, it.reference], sort_keys=True, separators=(",", ":")).encode())
    return h.hexdigest()
