"""Capacity bounds of an allocation pass, and adaptive concurrency per model (AIMD).

Bounds on items leased and not yet scored (open leases in PostgreSQL, so they hold across every
evaluation and every scheduler replica):

- per model: ``model_lease_factor`` × its serving capacity (``models.max_in_flight``; no bound when the
  registry gives none), lowered by the adaptive limit below;
- per evaluation: its ``max_parallel`` (``config["max_in_flight"]``) or the scheduler's default, and at
  most ``ceil(max_evaluation_share × max_in_flight_global)``;
- globally: ``max_in_flight_global``.

Adaptive concurrency: additive increase, multiplicative decrease (Chiu & Jain, "Analysis of the Increase
and Decrease Algorithms for Congestion Avoidance in Computer Networks", 1989; TCP congestion avoidance,
Jacobson 1988; Inspect AI adapts its model connections the same way). A batch of scores in which a model
shows an overload error (:data:`OVERLOAD_ERRORS`), or a score marked ``throttled`` (a retry got past one),
halves the model's limit (not below 1); otherwise each
success adds ``1 / limit`` (one more slot per window of ``limit`` successes) up to the registry capacity.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.configs import parse_evaluation_config
from uep_common.db.models import Evaluation, Model
from uep_common.db.scheduling import SchedModel
from uep_common.events import ScoreComputed

OVERLOAD_ERRORS = frozenset({"triton_unavailable", "openai_unavailable", "timeout", "rate_limited"})
"""Inference error types that mean the model is overloaded or unreachable (the inference service's
transient kinds)."""


def evaluation_bound(ev: Evaluation, default: int, global_max: int, share: float) -> int:
    """Open leases allowed for ``ev``: its ``max_parallel`` (stored as ``config["max_in_flight"]``) or
    ``default``, capped at ``ceil(share × global_max)``."""
    explicit = parse_evaluation_config(ev.config).max_in_flight
    return max(1, min(int(explicit or default), math.ceil(share * global_max)))


def model_bound(model: Model, factor: float, adaptive_limit: float | None) -> int | None:
    """Open leases allowed for ``model`` across every evaluation: ``floor(factor × min(capacity, adaptive
    limit))`` (at least 1), or None (unbounded) when the registry has no capacity for it."""
    if not model.max_in_flight:
        return None
    cap = float(model.max_in_flight)
    if adaptive_limit is not None:
        cap = min(cap, max(1.0, adaptive_limit))
    return max(1, math.floor(factor * cap))


async def adapt(session: AsyncSession, scores: list[ScoreComputed]) -> dict[uuid.UUID, str]:
    """Apply one AIMD step per model seen in ``scores`` (inside the caller's transaction; atomic in SQL, so
    replicas may call it concurrently). Returns ``{model_id: "decrease" | "increase"}`` for models whose
    limit moved."""
    overload: Counter[uuid.UUID] = Counter()
    ok: Counter[uuid.UUID] = Counter()
    for s in scores:
        if s.throttled or (s.error is not None and s.error.stage == "inference" and s.error.type in OVERLOAD_ERRORS):
            overload[s.model_id] += 1  # an overload error, or one a retry got past
        elif s.error is None:
            ok[s.model_id] += 1
    ids = list({*overload, *ok})
    if not ids:
        return {}
    caps = {m: c for m, c in await session.execute(select(Model.id, Model.max_in_flight).where(Model.id.in_(ids))) if c}
    tracked = set(await session.scalars(select(SchedModel.model_id).where(SchedModel.model_id.in_(list(caps)))))
    moved: dict[uuid.UUID, str] = {}
    for model_id, cap in caps.items():
        if overload[model_id]:
            # first overload of a model: start from half its capacity
            stmt = (
                insert(SchedModel)
                .values(model_id=model_id, limit=max(1.0, cap * 0.5))
                .on_conflict_do_update(
                    index_elements=[SchedModel.model_id], set_={"limit": func.greatest(1.0, SchedModel.limit * 0.5)}
                )
            )
            moved[model_id] = "decrease"
        elif model_id in tracked:
            stmt = (
                insert(SchedModel)
                .values(model_id=model_id, limit=float(cap))
                .on_conflict_do_update(
                    index_elements=[SchedModel.model_id],
                    set_={"limit": func.least(float(cap), SchedModel.limit + ok[model_id] / SchedModel.limit)},
                )
            )
            moved[model_id] = "increase"
        else:
            continue  # never overloaded: nothing to track, the registry capacity holds
        await session.execute(stmt)
    return moved
