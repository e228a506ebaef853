"""Capacity bounds of an allocation pass, and adaptive concurrency per model (AIMD).

Bounds on items leased and not yet scored (open leases in PostgreSQL, so they hold across every
evaluation and every scheduler replica):

- per model: ``model_lease_factor`` × its serving capacity (``models.max_in_flight``; when the registry gives
  none, the scheduler's ``default_model_capacity``, 0 = no bound), lowered by the adaptive limit below, plus the items kept queued at inference
  (:func:`queue_depth`);
- per evaluation: its ``max_parallel`` (``config["max_in_flight"]``), else the larger of the scheduler's
  default and its model's bound (an evaluation alone keeps its model busy), and at most
  ``ceil(max_evaluation_share × max_in_flight_global)``;
- globally: ``max_in_flight_global``.

The queue at inference: a lease is released only once the item's score has travelled inference → scorer →
broker → scheduler, and the next item then travels out again (0.1–0.3 s on the local stack). With exactly
as many leases as slots the model idles for that round trip after every call. So a model with a known call
time gets ``ceil(slots × model_queue_seconds / call time)`` more leases (at most :data:`MAX_QUEUE_PER_SLOT`
per slot): those items wait at inference, whose per-replica semaphore (``uep_inference.service.ModelLimits``)
still admits only ``slots`` calls at once, and take a slot the moment it frees. By Little's law the model then
stays busy while the round trip is shorter than ``model_queue_seconds``. The costs are bounded by the same
time: a new urgent evaluation's first item waits behind at most that much queued work (the fair queue still
decides every lease), and a cancelled or stopped evaluation's queued items are dropped by inference without a
model call (``uep_inference.ended``). The call time is :class:`CallTimes`, learned from the scores this
replica sees; before a model's first score there is no queue.

Adaptive concurrency: additive increase, multiplicative decrease (Chiu & Jain, "Analysis of the Increase
and Decrease Algorithms for Congestion Avoidance in Computer Networks", 1989; TCP congestion avoidance,
Jacobson 1988; Inspect AI adapts its model connections the same way). A batch of scores in which a model
shows an overload error (:data:`OVERLOAD_ERRORS`), or a score marked ``throttled`` (a retry got past one),
halves the model's limit (not below 1); otherwise each
success adds ``1 / limit`` (one more slot per window of ``limit`` successes) up to the registry capacity. A
model without a registered capacity is held to ``default_model_capacity`` and adapts below it the same way: an
unbounded model could not back off, and its items would time out one after another under load.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import parse_evaluation_config
from uep_common.contract.events import ScoreComputed
from uep_common.tables.models import Evaluation, Model
from uep_common.tables.scheduling import SchedModel

OVERLOAD_ERRORS = frozenset({"triton_unavailable", "openai_unavailable", "timeout", "rate_limited"})
"""Inference error types that mean the model is overloaded or unreachable (the inference service's
transient kinds)."""


MAX_QUEUE_PER_SLOT = 64
"""Items queued at inference per model slot, at most, whatever the call time (a model answering errors in
microseconds must not get thousands of leases)."""

CALL_TIME_WEIGHT = 0.1
"""Weight of each new call in the moving average of :class:`CallTimes` (about the last 10–20 calls count)."""


class CallTimes:
    """Recent model call time per model (seconds): an exponentially weighted moving average of the
    ``latency_ms`` of successful scores (the model call's wall time, without the wait for a slot), each call
    weighing :data:`CALL_TIME_WEIGHT`. In memory, per scheduler replica: a replica that restarts learns it
    again from the next scores, and until then queues nothing (:func:`queue_depth`)."""

    def __init__(self) -> None:
        self._seconds: dict[uuid.UUID, float] = {}

    def observe(self, scores: list[ScoreComputed]) -> None:
        """Fold the call times of ``scores`` in (failed calls and scores without a latency are skipped: a fast
        error says nothing about how long the model takes)."""
        for s in scores:
            if s.error is None and s.latency_ms is not None and s.latency_ms >= 0:
                seconds = s.latency_ms / 1000.0
                old = self._seconds.get(s.model_id)
                self._seconds[s.model_id] = seconds if old is None else old + CALL_TIME_WEIGHT * (seconds - old)

    def get(self, model_id: uuid.UUID) -> float | None:
        """The model's recent call time in seconds, or None before its first successful score."""
        return self._seconds.get(model_id)

    def as_dict(self) -> dict[uuid.UUID, float]:
        """A copy of every model's call time."""
        return dict(self._seconds)


def queue_depth(slots: float, call_seconds: float | None, queue_seconds: float) -> int:
    """Items to keep queued at inference for a model with ``slots`` calls at once whose calls take
    ``call_seconds``: ``ceil(slots × queue_seconds / call_seconds)`` — the items the model serves in
    ``queue_seconds`` — at most ``ceil(slots × MAX_QUEUE_PER_SLOT)``; 0 when the call time is unknown or
    ``queue_seconds`` is 0."""
    if queue_seconds <= 0 or call_seconds is None:
        return 0
    cap = math.ceil(slots * MAX_QUEUE_PER_SLOT)
    return min(cap, math.ceil(slots * queue_seconds / max(call_seconds, 1e-4)))


def evaluation_bound(ev: Evaluation, default: int, global_max: int, share: float, model_window: int | None = None) -> int:
    """Open leases allowed for ``ev``: its ``max_parallel`` (stored as ``config["max_in_flight"]``), else the
    larger of ``default`` and ``model_window`` (its model's bound, :func:`model_bound`; None when the model has
    none), capped at ``ceil(share × global_max)``."""
    explicit = parse_evaluation_config(ev.config).max_in_flight
    wanted = int(explicit) if explicit else max(default, model_window or 0)
    return max(1, min(wanted, math.ceil(share * global_max)))


def capacity_of(model: Model, default_capacity: int = 0) -> int | None:
    """The serving capacity of ``model``: the registry's (``models.max_in_flight``), else ``default_capacity``;
    None (unbounded) when neither is set (``default_capacity`` 0)."""
    return model.max_in_flight or default_capacity or None


def model_bound(
    model: Model,
    factor: float,
    adaptive_limit: float | None,
    call_seconds: float | None = None,
    queue_seconds: float = 0.0,
    default_capacity: int = 0,
) -> int | None:
    """Open leases allowed for ``model`` across every evaluation: ``floor(factor × slots)`` (at least 1) with
    ``slots = min(capacity, adaptive limit)``, plus :func:`queue_depth` of those slots; the capacity is
    :func:`capacity_of` (``default_capacity`` when the registry gives none); None (unbounded) when there is none."""
    capacity = capacity_of(model, default_capacity)
    if not capacity:
        return None
    cap = float(capacity)
    if adaptive_limit is not None:
        cap = min(cap, max(1.0, adaptive_limit))
    return max(1, math.floor(factor * cap)) + queue_depth(cap, call_seconds, queue_seconds)


async def adapt(session: AsyncSession, scores: list[ScoreComputed], default_capacity: int = 0) -> dict[uuid.UUID, str]:
    """Apply one AIMD step per model seen in ``scores`` (inside the caller's transaction; atomic in SQL, so
    replicas may call it concurrently); a model without a registered capacity adapts below
    ``default_capacity`` (none when 0). Returns ``{model_id: "decrease" | "increase"}`` for models whose
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
    rows = await session.execute(select(Model.id, Model.max_in_flight).where(Model.id.in_(ids)))
    caps = {m: c or default_capacity for m, c in rows if c or default_capacity}
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
