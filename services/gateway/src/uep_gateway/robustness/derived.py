"""The benchmark a robustness evaluation runs: the originals chosen from the source benchmark, then, for each
perturbation in request order, every original's variants (:mod:`uep_gateway.robustness.perturbations`).

It is an ordinary benchmark row (status ``draft``: no request names it, the caller's catalogue lists it, its
items can be previewed), private to the caller's tenant, so the scheduler, inference, scorer and reporter
run it as any other. Each sample's ``metadata["robustness"]`` says what it is (``perturbation``: ``original`` or
``name@version``, ``seed``, ``original_ordinal`` in the source benchmark, ``variant``); the config carries
the source benchmark's with a :class:`uep_common.contract.configs.RobustnessConfig`. The version is the SHA-256 of
the owner tenant and the content hash, so the same request (originals, perturbations, seed) of one tenant
finds the rows it stored before instead of storing them twice.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.benchmarks import content_hash
from uep_common.contract.configs import ORIGINAL, check_benchmark_config, item_prompt
from uep_common.tables.models import Benchmark, Sample
from uep_gateway.errors import FieldError
from uep_gateway.robustness.perturbations import NotApplicableError, Perturbation, perturbation

MAX_ROBUSTNESS_ITEMS = 20_000
"""Most items (originals and variants) of one robustness benchmark: the rows one request may store."""
SLUG_SUFFIX = "~robust"
"""Suffix of a robustness benchmark's slug (a character uploads refuse, so it names no uploaded benchmark)."""
LOC = ("body", "robustness")


@dataclass(frozen=True)
class DerivedItem:
    """One sample of a robustness benchmark (the fields :func:`uep_common.contract.benchmarks.content_hash` reads,
    and its metadata)."""

    external_id: str | None
    input: dict[str, Any]
    reference: dict[str, Any]
    meta: dict[str, Any]


def perturbations_of(refs: list[str]) -> list[Perturbation]:
    """The perturbations ``refs`` name (``name`` or ``name@version``). Raises ``invalid`` naming
    ``robustness.perturbations[i]`` for an unknown one or one named twice."""
    found: list[Perturbation] = []
    for i, ref in enumerate(refs):
        try:
            p = perturbation(ref)
        except ValueError as exc:
            raise FieldError("invalid", (*LOC, "perturbations", i), str(exc), "unknown_perturbation") from exc
        if p in found:
            raise FieldError("invalid", (*LOC, "perturbations", i), f"{p.ref} is named twice", "duplicate_perturbation")
        found.append(p)
    return found


def derive_items(samples: list[Sample], perturbations: list[Perturbation], seed: int) -> list[DerivedItem]:
    """The originals (``samples``, in order) then each perturbation's variants of each. Raises ``invalid``
    naming ``robustness.perturbations[i]`` when a perturbation cannot change an item, or
    ``robustness`` when the items would number more than :data:`MAX_ROBUSTNESS_ITEMS`."""
    items = [DerivedItem(s.external_id, s.input, s.reference, _meta(s, ORIGINAL, seed, 0)) for s in samples]
    for i, p in enumerate(perturbations):
        for s in samples:
            try:
                variants = p.apply(s.input, s.reference, seed, s.ordinal)
            except NotApplicableError as exc:
                raise FieldError(
                    "invalid", (*LOC, "perturbations", i), f"{p.ref} cannot change item {s.ordinal}: {exc}", "not_applicable"
                ) from exc
            name = (s.external_id or str(s.ordinal))[:160]
            items += [
                DerivedItem(f"{name}~{p.ref}/{v}", inp, ref, _meta(s, p.ref, seed, v)) for v, (inp, ref) in enumerate(variants)
            ]
            if len(items) > MAX_ROBUSTNESS_ITEMS:
                raise FieldError(
                    "invalid",
                    LOC,
                    f"the originals and their perturbed items would be more than {MAX_ROBUSTNESS_ITEMS:,}: "
                    "take fewer samples (sample_limit) or fewer perturbations",
                    "too_many_items",
                )
    return items


def _meta(sample: Sample, kind: str, seed: int, variant: int) -> dict[str, Any]:
    return {
        **(sample.meta or {}),
        "robustness": {"perturbation": kind, "seed": seed, "original_ordinal": sample.ordinal, "variant": variant},
    }


async def derive_benchmark(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    bench: Benchmark,
    ordinals: list[int],
    refs: list[str],
    seed: int,
    sampling: dict[str, Any] | None = None,
) -> Benchmark:
    """The robustness benchmark of ``bench``'s samples ``ordinals`` (chosen as ``sampling`` says:
    ``{"sampling": method, "sampling_seed": seed}``, recorded in its config) under the perturbations ``refs``
    and ``seed`` for ``tenant_id``: the stored one when this tenant stored the same content before, else a new one (added and
    flushed in ``session``, committed with the evaluation). Raises ``invalid`` naming the field: an unknown or
    inapplicable perturbation, too many items, or few-shot demonstrations (they would be drawn from the
    robustness benchmark's own items, the item's original among them)."""
    perturbations = perturbations_of(refs)
    if item_prompt(bench.config, None).fewshot_k:
        raise FieldError(
            "invalid", LOC, "a robustness evaluation runs zero-shot; this benchmark's prompt asks for demonstrations", "fewshot"
        )
    samples = list(
        await session.scalars(
            select(Sample).where(Sample.benchmark_id == bench.id, Sample.ordinal.in_(ordinals)).order_by(Sample.ordinal)
        )
    )
    items = derive_items(samples, perturbations, seed)
    config = check_benchmark_config(
        {
            **bench.config,
            "robustness": {
                "perturbations": [p.ref for p in perturbations],
                "seed": seed,
                "source_benchmark_id": str(bench.id),
                "source_version": bench.version,
                "originals": len(samples),
                **(sampling or {}),
            },
        }
    )
    version = hashlib.sha256(f"{tenant_id}:{content_hash(config, items)}".encode()).hexdigest()
    slug = bench.slug[: 100 - len(SLUG_SUFFIX)] + SLUG_SUFFIX
    new_id = await session.scalar(
        pg_insert(Benchmark)
        .values(
            id=uuid.uuid4(),
            slug=slug,
            name=f"{bench.name} (robustness)"[:200],
            description=f"{bench.slug}@{bench.version[:12]}: {len(samples)} items under {', '.join(p.ref for p in perturbations)} "
            f"(seed {seed})",
            version=version,
            category=bench.category,
            status="draft",
            is_builtin=False,
            evaluation_type=bench.evaluation_type,
            capability_dimensions=bench.capability_dimensions,
            config=config,
            license=bench.license,
            source=f"robustness of {bench.id}",
            sample_count=len(items),
            owner_tenant_id=tenant_id,
            visibility="private",
        )
        .on_conflict_do_nothing(constraint="uq_benchmarks_slug_version")
        .returning(Benchmark.id)
    )
    if new_id is not None:
        rows = [
            {
                "benchmark_id": new_id,
                "ordinal": i,
                "external_id": it.external_id,
                "input": it.input,
                "reference": it.reference,
                "meta": it.meta,
            }
            for i, it in enumerate(items)
        ]
        for i in range(0, len(rows), 2000):
            await session.execute(insert(Sample), rows[i : i + 2000])
    derived = await session.scalar(select(Benchmark).where(Benchmark.slug == slug, Benchmark.version == version))
    assert derived is not None  # inserted above, or stored by an earlier request of this tenant
    return derived
