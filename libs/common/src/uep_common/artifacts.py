"""Content-addressed artifact files (reports and other files uep writes) under ``UEP_ARTIFACT_DIR``.

A file is stored once per content: its name is its SHA-256 (``ab/abcdef….html``), its ``artifacts`` row is
unique on the hash, and each evaluation that uses it has an ``artifact_refs`` row. The file is written
(atomically: temporary file + rename) before the row commits; a rolled-back transaction can leave a file
without a row, which a later write of the same content reuses.

Default directory: ``.run/dev/artifacts`` under the working directory; the local stack sets
``UEP_ARTIFACT_DIR=.run/<stack>/artifacts``. Every process that reads or writes artifacts (reporter,
gateway, retention) must see the same directory (a shared volume in Kubernetes).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

from pydantic import Field
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.db.reports import Artifact, ArtifactRef
from uep_common.settings import CommonSettings

SUFFIXES = {"text/html": ".html", "application/json": ".json", "application/pdf": ".pdf", "image/png": ".png"}


class ArtifactSettings(CommonSettings):
    """``UEP_ARTIFACT_DIR``: where artifact files live."""

    artifact_dir: Path = Field(Path(".run/dev/artifacts"), description="Directory of content-addressed artifact files.")


def artifact_dir(settings: CommonSettings | None = None) -> Path:
    """The artifact directory (absolute), from ``settings.artifact_dir`` if present, else the environment."""
    value = getattr(settings, "artifact_dir", None) or ArtifactSettings().artifact_dir
    return Path(value).resolve()


class ArtifactStore:
    """Writes and finds artifact files under ``root``.

    Args:
        root: the artifact directory (created on first write).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_of(self, artifact: Artifact) -> Path:
        """Absolute path of an artifact's file."""
        return self.root / artifact.path

    def write_file(self, data: bytes, media_type: str) -> tuple[str, str]:
        """Write ``data`` under its hash (skipped when the file already exists); returns (sha256, relative path)."""
        digest = hashlib.sha256(data).hexdigest()
        rel = f"{digest[:2]}/{digest}{SUFFIXES.get(media_type, '.bin')}"
        path = self.root / rel
        if not (path.exists() and path.stat().st_size == len(data)):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return digest, rel

    async def put(self, session: AsyncSession, data: bytes, media_type: str, evaluation_id: uuid.UUID, kind: str) -> Artifact:
        """Store ``data`` (file + ``artifacts`` row, reused when the content exists) and reference it from
        ``evaluation_id`` as ``kind``. Runs in the caller's transaction; returns the artifact row."""
        digest, rel = self.write_file(data, media_type)
        await session.execute(
            pg_insert(Artifact)
            .values(id=uuid.uuid4(), sha256=digest, path=rel, bytes=len(data), media_type=media_type)
            .on_conflict_do_nothing(index_elements=["sha256"])
        )
        artifact = await session.scalar(select(Artifact).where(Artifact.sha256 == digest))
        assert artifact is not None
        await session.execute(
            pg_insert(ArtifactRef)
            .values(artifact_id=artifact.id, evaluation_id=evaluation_id, kind=kind)
            .on_conflict_do_nothing(constraint="uq_artifact_refs")
        )
        return artifact
