"""Register the default tenant, the built-in benchmarks and the local Triton models (idempotent).

Test fixtures among the local models (``LocalModel.fixture``: the deterministic judge stand-ins) are registered
active only with ``UEP_SEED_TEST_FIXTURES=1`` (the test stack); otherwise they are not registered, and a row
left from an earlier seed is deactivated, so no catalogue lists them as usable.

A benchmark version is its content hash (:func:`uep_common.contract.benchmarks.content_hash`), so seeding twice, or
on another machine, yields the same version and no new rows.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from uep_common.builtin import catalog, datasets
from uep_common.contract.benchmarks import content_hash
from uep_common.contract.configs import check_benchmark_config
from uep_common.runtime.session import make_sync_engine
from uep_common.runtime.settings import CommonSettings
from uep_common.tables.budgets import seed_costs
from uep_common.tables.models import Benchmark, Model, Sample, Tenant

DEFAULT_TENANT_SLUG = "default"


class TritonSettings(BaseSettings):
    """Where the seed's built-in models are served (``UEP_TRITON_*`` environment variables), and whether it
    registers the test fixtures among them (``UEP_SEED_TEST_FIXTURES``)."""

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    triton_host: str = Field("127.0.0.1", description="Triton's host as the inference service reaches it.")
    triton_protocol: str = Field("grpc", description="'http': register http://host:port; anything else gRPC.")
    triton_http_port: int = Field(8000, ge=1, le=65535)
    triton_grpc_port: int = Field(8001, ge=1, le=65535)
    seed_test_fixtures: bool = Field(
        False, description="Register the deterministic judge stand-ins active (the test stack); else never listed."
    )


def triton_endpoint() -> str:
    """Endpoint registered for local Triton models: ``grpc://host:port`` or, with
    ``UEP_TRITON_PROTOCOL=http``, ``http://host:port`` (ports from ``UEP_TRITON_GRPC_PORT``/``_HTTP_PORT``)."""
    t = TritonSettings()
    if t.triton_protocol == "http":
        return f"http://{t.triton_host}:{t.triton_http_port}"
    return f"grpc://{t.triton_host}:{t.triton_grpc_port}"


def seed(settings: CommonSettings) -> str:
    """Seed the database of ``settings``; returns a one-line report.

    Raises:
        pydantic.ValidationError: a built-in benchmark's config is not a valid
            :class:`uep_common.contract.configs.BenchmarkConfig` (nothing is written).
    """
    engine = make_sync_engine(settings.database_url)
    added: list[str] = []
    with Session(engine) as s, s.begin():
        if not s.scalar(select(Tenant).where(Tenant.slug == DEFAULT_TENANT_SLUG)):
            s.add(Tenant(slug=DEFAULT_TENANT_SLUG, name="Default tenant"))
            added.append("tenant default")
        for b in catalog.BENCHMARKS:
            config = check_benchmark_config(b.config)  # the same keys and values: the version does not change
            items = b.loader()
            version = content_hash(config, items)
            if s.scalar(select(Benchmark.id).where(Benchmark.slug == b.slug, Benchmark.version == version)):
                continue
            lic = datasets.LICENSES[b.license_key]
            row = Benchmark(
                slug=b.slug,
                name=b.name,
                description=b.description,
                version=version,
                category=b.category,
                status="active",
                is_builtin=True,
                evaluation_type=b.evaluation_type.value,
                capability_dimensions=b.capability_dimensions,
                config=config,
                license=f"{lic.name} ({lic.spdx})",
                source=f"{lic.source}; package {lic.package}",
                sample_count=len(items),
            )
            s.add(row)
            s.flush()
            rows = [
                {
                    "benchmark_id": row.id,
                    "ordinal": it.ordinal,
                    "external_id": it.external_id,
                    "input": it.input,
                    "reference": it.reference,
                    "meta": {},
                }
                for it in items
            ]
            for i in range(0, len(rows), 2000):
                s.execute(insert(Sample), rows[i : i + 2000])
            added.append(f"benchmark {b.slug}@{version[:12]} ({len(items)} samples)")
        endpoint = triton_endpoint()
        fixtures = TritonSettings().seed_test_fixtures
        for m in catalog.LOCAL_MODELS:
            existing = s.scalar(select(Model).where(Model.name == m.name, Model.version == m.version))
            if m.fixture and not fixtures:
                if existing is not None and existing.active:
                    existing.active = False
                    added.append(f"model {m.name} deactivated (a test fixture)")
                continue
            if existing is None:
                s.add(
                    Model(
                        name=m.name,
                        version=m.version,
                        description=m.description,
                        backend="triton",
                        endpoint=endpoint,
                        triton_model_name=m.triton_model_name,
                        decoding_defaults=m.decoding_defaults,
                        max_in_flight=m.max_in_flight,
                        supports_logprobs=m.supports_logprobs,
                        kind=m.kind,
                        contract=m.contract,
                        spec=m.spec,
                    )
                )
                added.append(f"model {m.name}")
            else:  # local models are ours: keep their registry rows in step with the catalogue
                wanted = {
                    "endpoint": endpoint,
                    "description": m.description,
                    "triton_model_name": m.triton_model_name,
                    "decoding_defaults": m.decoding_defaults,
                    "max_in_flight": m.max_in_flight,
                    "supports_logprobs": m.supports_logprobs,
                    "kind": m.kind,
                    "contract": m.contract,
                    "spec": m.spec,
                    **({"active": True} if m.fixture else {}),
                }
                changed = [k for k, v in wanted.items() if getattr(existing, k) != v]
                for k in changed:
                    setattr(existing, k, wanted[k])
                if changed:
                    added.append(f"model {m.name} updated ({', '.join(changed)})")
        added += seed_costs(s)
    engine.dispose()
    return "seeded: " + (", ".join(added) if added else "nothing new")
