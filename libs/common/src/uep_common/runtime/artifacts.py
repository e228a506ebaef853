"""Content-addressed artifact files (reports and other files uep writes), in storage every pod can read.

A file is stored once per content: its name is its SHA-256 (``ab/abcdef….html``), its ``artifacts`` row is
unique on the hash, and each evaluation that uses it has an ``artifact_refs`` row. The file is written before
the row commits; a rolled-back transaction can leave a file without a row, which a later write of the same
content reuses.

Where the bytes live is a :class:`BlobStore`, chosen by ``UEP_ARTIFACT_BACKEND``:

* ``file`` (default): a directory, ``UEP_ARTIFACT_DIR`` (default ``.run/dev/artifacts`` under the working
  directory; the local stack sets ``.run/<stack>/artifacts``). Writes are atomic (temporary file + rename).
  Every process that reads or writes artifacts (reporter, gateway) must see the same directory, so on
  Kubernetes this needs a ReadWriteMany volume.
* ``s3``: an S3-compatible object store (AWS S3, MinIO, Ceph RGW, GCS's XML API…) through boto3:
  ``UEP_ARTIFACT_S3_BUCKET``, ``UEP_ARTIFACT_S3_ENDPOINT_URL`` (empty = AWS), ``UEP_ARTIFACT_S3_PREFIX``,
  ``UEP_ARTIFACT_S3_REGION``; credentials by boto3's own chain (``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY`` from a Secret, or a workload identity). The production path: the reporter
  writes, the gateway and retention read and delete, from any pod.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.runtime.settings import CommonSettings
from uep_common.tables.reports import Artifact, ArtifactRef

SUFFIXES = {"text/html": ".html", "application/json": ".json", "application/pdf": ".pdf", "image/png": ".png"}


class ArtifactSettings(CommonSettings):
    """Where artifact files live (see the module docstring)."""

    artifact_backend: Literal["file", "s3"] = Field("file", description="file (a shared directory) or s3.")
    artifact_dir: Path = Field(Path(".run/dev/artifacts"), description="Directory of content-addressed artifact files.")
    artifact_s3_bucket: str = Field("", description="Bucket of the s3 backend (required with it).")
    artifact_s3_endpoint_url: str = Field("", description="S3 endpoint, e.g. http://minio:9000; empty = AWS's.")
    artifact_s3_prefix: str = Field("uep/artifacts/", description="Key prefix of every artifact object.")
    artifact_s3_region: str = Field("us-east-1", description="Region of the bucket.")


class BlobStore(Protocol):
    """Bytes under relative keys (``ab/abcd….html``). Implementations are synchronous and thread-safe; async
    callers run them with ``asyncio.to_thread``."""

    def write(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` (the content is the key's hash, so an existing object is kept)."""

    def read(self, key: str) -> bytes | None:
        """The bytes under ``key``, or None when there are none."""

    def delete(self, key: str) -> bool:
        """Remove ``key``; False when it was not there."""


class FileBlobs:
    """A :class:`BlobStore` in the directory ``root`` (created on first write)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, key: str) -> Path:
        """The file of ``key``; raises ``ValueError`` for a key that would leave the root."""
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"artifact key {key!r} leaves the artifact directory")
        return path

    def write(self, key: str, data: bytes) -> None:
        """Write ``data`` to the file of ``key`` through a temporary file and a rename, so a reader never sees
        a partial file; an existing file of the same size is kept (the key is the content's hash)."""
        path = self.path(key)
        if path.exists() and path.stat().st_size == len(data):
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def read(self, key: str) -> bytes | None:
        """The bytes of the file of ``key``, or None when there is no such file."""
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    def delete(self, key: str) -> bool:
        """Remove the file of ``key``; False when it was not there."""
        try:
            self.path(key).unlink()
            return True
        except FileNotFoundError:
            return False


class S3Blobs:
    """A :class:`BlobStore` in an S3 bucket under ``prefix``, through a boto3 S3 client.

    Errors other than a missing object propagate as botocore's ``ClientError`` / ``EndpointConnectionError``."""

    def __init__(self, client: Any, bucket: str, prefix: str = "") -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix

    @classmethod
    def from_settings(cls, settings: ArtifactSettings) -> S3Blobs:
        """A client for the settings' endpoint and region (credentials from boto3's chain)."""
        if not settings.artifact_s3_bucket:
            raise ValueError("UEP_ARTIFACT_S3_BUCKET is required with UEP_ARTIFACT_BACKEND=s3")
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=settings.artifact_s3_endpoint_url or None,
            region_name=settings.artifact_s3_region,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=30),
        )
        return cls(client, settings.artifact_s3_bucket, settings.artifact_s3_prefix)

    def _missing(self, exc: Exception) -> bool:
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
        return code in {"NoSuchKey", "404", "NotFound"}

    def write(self, key: str, data: bytes) -> None:
        """Put ``data`` as the object ``prefix + key`` (S3 replaces an object whole: no partial read)."""
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data)

    def read(self, key: str) -> bytes | None:
        """The bytes of the object ``prefix + key``, or None when there is no such object."""
        try:
            body: bytes = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read()
        except Exception as exc:
            if self._missing(exc):
                return None
            raise
        return body

    def delete(self, key: str) -> bool:
        """Remove the object ``prefix + key``; False when it was not there (looked up first: S3's delete
        succeeds for a missing key too)."""
        try:
            self.client.head_object(Bucket=self.bucket, Key=self.prefix + key)
        except Exception as exc:
            if self._missing(exc):
                return False
            raise
        self.client.delete_object(Bucket=self.bucket, Key=self.prefix + key)
        return True


def artifact_dir(settings: CommonSettings | None = None) -> Path:
    """The artifact directory of the file backend (absolute), from ``settings.artifact_dir`` if present, else
    the environment."""
    value = getattr(settings, "artifact_dir", None) or ArtifactSettings().artifact_dir
    return Path(value).resolve()


def artifact_store(settings: CommonSettings | None = None) -> ArtifactStore:
    """The :class:`ArtifactStore` of the configured backend (``settings`` if it has the artifact fields, else
    the environment). Raises ``ValueError`` for an s3 backend without a bucket."""
    s = settings if isinstance(settings, ArtifactSettings) else ArtifactSettings()
    if getattr(settings, "artifact_backend", s.artifact_backend) == "s3":
        return ArtifactStore(blobs=S3Blobs.from_settings(s))
    return ArtifactStore(artifact_dir(settings))


class ArtifactStore:
    """Writes, reads and deletes artifact files and their rows.

    Args:
        root: directory of the file backend (used when ``blobs`` is None).
        blobs: any :class:`BlobStore` (e.g. :class:`S3Blobs`).
    """

    def __init__(self, root: Path | None = None, blobs: BlobStore | None = None) -> None:
        if blobs is None and root is None:
            raise ValueError("give root or blobs")
        self.blobs: BlobStore = blobs if blobs is not None else FileBlobs(Path(root))  # type: ignore[arg-type]

    @property
    def root(self) -> Path | None:
        """The directory of the file backend; None for other backends."""
        return self.blobs.root if isinstance(self.blobs, FileBlobs) else None

    def path_of(self, artifact: Artifact) -> Path | None:
        """The file of an artifact with the file backend; None with others."""
        return self.blobs.path(artifact.path) if isinstance(self.blobs, FileBlobs) else None

    @staticmethod
    def key_of(data: bytes, media_type: str) -> tuple[str, str]:
        """(sha256 hex, relative key) of ``data``."""
        digest = hashlib.sha256(data).hexdigest()
        return digest, f"{digest[:2]}/{digest}{SUFFIXES.get(media_type, '.bin')}"

    def write_file(self, data: bytes, media_type: str) -> tuple[str, str]:
        """Write ``data`` under its hash (skipped when already there); returns (sha256, relative key)."""
        digest, key = self.key_of(data, media_type)
        self.blobs.write(key, data)
        return digest, key

    def read(self, artifact: Artifact) -> bytes | None:
        """The bytes of ``artifact``, or None when its file is gone."""
        return self.blobs.read(artifact.path)

    def delete(self, key: str) -> bool:
        """Remove the file under ``key`` (an ``artifacts.path``); False when it was not there."""
        return self.blobs.delete(key)

    async def put(self, session: AsyncSession, data: bytes, media_type: str, evaluation_id: uuid.UUID, kind: str) -> Artifact:
        """Store ``data`` (file + ``artifacts`` row, reused when the content exists) and reference it from
        ``evaluation_id`` as ``kind``. Runs in the caller's transaction; returns the artifact row."""
        digest, rel = await asyncio.to_thread(self.write_file, data, media_type)
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
