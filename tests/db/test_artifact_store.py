"""The artifact store's backends (uep_common.runtime.artifacts): the file directory and an S3-compatible object store
(moto's S3 server, a real HTTP endpoint on 127.0.0.1, reached through boto3 exactly as a production bucket is),
and ``ArtifactStore.put`` writing the row and the object in one go on a migrated database."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from uep_common.runtime.artifacts import ArtifactStore

from .migrated import SERVER, migrated_database

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_ARTIFACT_DB", "uep_artifact_store")
BUCKET = "uep-test-artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """An S3-compatible HTTP server (moto's server mode) with one bucket; its URL."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    url = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s").create_bucket(
        Bucket=BUCKET
    )
    yield url
    server.stop()


@pytest.fixture()
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("UEP_ARTIFACT_BACKEND", "s3")
    monkeypatch.setenv("UEP_ARTIFACT_S3_BUCKET", BUCKET)
    monkeypatch.setenv("UEP_ARTIFACT_S3_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("UEP_ARTIFACT_S3_PREFIX", "t/")
    return s3_endpoint


def _stores(tmp_path: Path, s3_env: str) -> dict[str, ArtifactStore]:
    from uep_common.runtime.artifacts import ArtifactStore, S3Blobs, artifact_store

    s3 = artifact_store()  # from the environment: UEP_ARTIFACT_BACKEND=s3
    assert isinstance(s3.blobs, S3Blobs) and s3.root is None
    return {"file": ArtifactStore(tmp_path / "artifacts"), "s3": s3}


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_blobs_write_read_delete(backend: str, tmp_path: Path, s3_env: str) -> None:
    store = _stores(tmp_path, s3_env)[backend]
    data = b"<html>report</html>"
    digest, key = store.write_file(data, "text/html")
    assert digest == hashlib.sha256(data).hexdigest()
    assert key == f"{digest[:2]}/{digest}.html"
    store.write_file(data, "text/html")  # same content again: kept, no error
    assert store.blobs.read(key) == data
    assert store.delete(key) is True
    assert store.delete(key) is False
    assert store.blobs.read(key) is None


def test_s3_objects_are_under_the_prefix(tmp_path: Path, s3_env: str) -> None:
    import boto3

    store = _stores(tmp_path, s3_env)["s3"]
    _, key = store.write_file(b"{}", "application/json")
    client = boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix="t/").get("Contents", [])]
    assert f"t/{key}" in keys


def test_file_keys_cannot_leave_the_directory(tmp_path: Path) -> None:
    from uep_common.runtime.artifacts import FileBlobs

    with pytest.raises(ValueError, match="leaves the artifact directory"):
        FileBlobs(tmp_path).read("../../etc/passwd")


def test_s3_backend_needs_a_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    from uep_common.runtime.artifacts import artifact_store

    monkeypatch.setenv("UEP_ARTIFACT_BACKEND", "s3")
    monkeypatch.delenv("UEP_ARTIFACT_S3_BUCKET", raising=False)
    with pytest.raises(ValueError, match="UEP_ARTIFACT_S3_BUCKET"):
        artifact_store()


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


def test_put_on_s3_writes_row_reference_and_object_and_retention_deletes_it(engine: Engine, tmp_path: Path, s3_env: str) -> None:
    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.tables.models import Benchmark, Evaluation, Model, Tenant
    from uep_common.tables.reports import Artifact, ArtifactRef
    from uep_reporter.retention_policy import delete_file

    with Session(engine) as s, s.begin():
        tenant = Tenant(slug=f"art-{uuid.uuid4().hex[:6]}", name="T")
        model = Model(name=f"art-model-{uuid.uuid4().hex[:6]}", backend="triton", endpoint="127.0.0.1:1")
        bench = Benchmark(slug=f"art-b-{uuid.uuid4().hex[:6]}", name="b", version="v1", category="nlp")
        s.add_all([tenant, model, bench])
        s.flush()
        ev = Evaluation(tenant_id=tenant.id, benchmark_id=bench.id, model_id=model.id, total_items=1)
        s.add(ev)
        s.flush()
        ev_id = ev.id
    store = _stores(tmp_path, s3_env)["s3"]
    data = b"%PDF-1.7 uep " + uuid.uuid4().bytes

    async def put() -> uuid.UUID:
        aengine = make_async_engine(f"{SERVER}/{DB_NAME}")
        try:
            async with make_sessionmaker(aengine)() as session, session.begin():
                artifact = await store.put(session, data, "application/pdf", ev_id, "report_pdf")
                artifact_id: uuid.UUID = artifact.id
                return artifact_id
        finally:
            await aengine.dispose()

    artifact_id = asyncio.run(put())
    with Session(engine) as s:
        artifact = s.get(Artifact, artifact_id)
        assert artifact is not None and artifact.bytes == len(data) and artifact.path.endswith(".pdf")
        assert s.scalar(select(ArtifactRef.kind).where(ArtifactRef.artifact_id == artifact_id)) == "report_pdf"
        assert store.read(artifact) == data
        assert delete_file(artifact.path, store) is True  # retention's path, through the store
        assert store.read(artifact) is None
