"""Build an evaluation row and its EvaluationRequested event.

Shared by the gateway's ``POST /v1/evaluations`` (single, batch over several models, A/B arms) and the
scheduler's scheduled (cron) runs, so that both create exactly the same rows. The caller adds the row and
stages the event in the outbox in one transaction (after the budget hook ``check_creation``).

Work limits (one place for both paths): :class:`WorkLimits` (site defaults from the ``UEP_MAX_*`` /
``UEP_MIN_SCHEDULE_INTERVAL_S`` settings, overridden per tenant by the ``tenants`` columns),
:func:`check_items` (items per evaluation), :func:`check_work_limits` (that, items queued, evaluations per
minute; under a per-tenant transaction lock) and :func:`check_schedule_interval` (closest two runs of a cron).
Each raises :class:`WorkLimitRefused`, which names the request field and the numbers.

The per-minute rate is counted from the ``evaluations`` rows themselves (``created_at`` in the last 60 s,
index ``ix_evaluations_tenant_created``) rather than with a Redis counter (such as the ``limits`` library):
the count is read in the creating transaction under the tenant's lock, so it is exact across gateway replicas
and the scheduler, a request refused later (budget, bad field) or rolled back never uses up the quota, and
the scheduler, which creates scheduled runs without Redis, applies the very same rule.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from croniter import croniter
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import SET_KIND_OF_METRIC, EvaluationConfig, check_evaluation_config, parse_benchmark_config
from uep_common.contract.events import EvaluationRequested, EvaluationStatus, Priority
from uep_common.records.lifecycle import UNFINISHED
from uep_common.registry.model_registry import model_query, split_ref, visible_models
from uep_common.runtime.telemetry import current_trace_headers
from uep_common.tables.models import TENANT_LIMIT_COLUMNS, Benchmark, Evaluation, Model, Tenant

if TYPE_CHECKING:
    from uep_common.runtime.settings import CommonSettings


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


async def find_benchmark(session: AsyncSession, ref: str, version: str | None = None) -> Benchmark | None:
    """Benchmark by slug or id, the newest non-draft version unless ``version`` (content hash); None if none."""
    as_id = _as_uuid(ref)
    q = select(Benchmark).where(Benchmark.id == as_id) if as_id else select(Benchmark).where(Benchmark.slug == ref)
    if version:
        q = q.where(Benchmark.version == version)
    return await session.scalar(q.where(Benchmark.status != "draft").order_by(Benchmark.created_at.desc()).limit(1))


class ModelUnusableError(Exception):
    """The model an evaluation names cannot be evaluated by the tenant: ``field`` (``model`` or
    ``model_version``), ``reason`` and ``kind`` (``unknown_model``, ``model_inactive``, ``conflicting_fields``)."""

    def __init__(self, field: str, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.field, self.reason, self.kind = field, reason, kind


async def usable_model(session: AsyncSession, ref: str, version: str | None, tenant_id: uuid.UUID) -> Model:
    """The model tenant ``tenant_id`` means by ``ref`` (a name, ``name@version`` or an id) and ``version``,
    among the models it may see (:func:`uep_common.registry.model_registry.visible_models`): its own before a site
    model before another tenant's shared one (:func:`~uep_common.registry.model_registry.model_query`); without a
    version, the newest active one.

    Raises:
        ModelUnusableError: none is visible (``unknown_model``, naming ``model_version`` when only the version
            is unknown), it is deactivated (``model_inactive``), or ``ref``'s ``@version`` differs from
            ``version`` (``conflicting_fields``).
    """
    as_id = _as_uuid(ref)
    name, at_version = (ref, None) if as_id else split_ref(ref)
    if at_version is not None and version is not None and at_version != version:
        raise ModelUnusableError(
            "model_version", f"model {ref!r} names version {at_version!r}, model_version {version!r}", "conflicting_fields"
        )
    version = version or at_version
    if as_id:
        q = select(Model).where(Model.id == as_id, visible_models(tenant_id))
        model = await session.scalar(q.where(Model.version == version) if version else q)
    else:
        model = await session.scalar(model_query(name, version, tenant_id))
    if model is None:
        field = "model_version" if version and not at_version else "model"
        raise ModelUnusableError(field, f"unknown model {name!r}" + (f" version {version!r}" if version else ""), "unknown_model")
    if not model.active:
        raise ModelUnusableError(
            "model",
            f"model {model.name}@{model.version} is deactivated: it takes no new evaluations",
            "model_inactive",
        )
    return model


async def find_model(
    session: AsyncSession, ref: str, version: str | None = None, tenant_id: uuid.UUID | None = None
) -> Model | None:
    """The model :func:`usable_model` gives tenant ``tenant_id``, or None when there is none it may evaluate.
    Without ``tenant_id`` (callers that act for no tenant): by name or id among every model, the most
    recently registered version unless ``version``."""
    if tenant_id is not None:
        try:
            return await usable_model(session, ref, version, tenant_id)
        except ModelUnusableError:
            return None
    as_id = _as_uuid(ref)
    q = select(Model).where(Model.id == as_id) if as_id else select(Model).where(Model.name == ref)
    if version:
        q = q.where(Model.version == version)
    return await session.scalar(q.order_by(Model.created_at.desc()).limit(1))


def evaluation_config(
    max_parallel: int | None = None,
    fewshot_k: int | None = None,
    chat_template: bool | None = None,
    prompt_template: str | None = None,
    sample_timeout_s: float | None = None,
    sampling: str | None = None,
    sampling_seed: int | None = None,
    sample_ordinals: list[int] | None = None,
) -> dict[str, Any]:
    """``evaluations.config`` (:class:`uep_common.contract.configs.EvaluationConfig` as JSON) from the create options
    (None = not set, left out). ``max_parallel`` is stored as ``max_in_flight`` (the scheduler's
    per-evaluation bound); ``sample_timeout_s`` bounds each model call, seconds; ``sampling``,
    ``sampling_seed`` and ``sample_ordinals`` say which samples a limited run takes
    (:func:`uep_common.records.sampling.choose_ordinals`).

    Raises:
        pydantic.ValidationError: an option out of the model's bounds (``loc`` names the stored key).
    """
    cfg = EvaluationConfig(
        max_in_flight=max_parallel,
        fewshot_k=fewshot_k,
        chat_template=chat_template,
        prompt_template=prompt_template,
        sample_timeout_s=sample_timeout_s,
        sampling=sampling if sample_ordinals is not None else None,
        sampling_seed=sampling_seed if sample_ordinals is not None else None,
        sample_ordinals=sample_ordinals,
    )
    return cfg.model_dump(mode="json", exclude_none=True, exclude={"schema_version"})


def new_evaluation(
    *,
    tenant_id: uuid.UUID,
    bench: Benchmark,
    model: Model,
    sample_limit: int | None,
    repeats: int,
    priority: Priority | str,
    config: dict[str, Any],
    arm: str = "main",
    batch_id: uuid.UUID | None = None,
    experiment_id: uuid.UUID | None = None,
    schedule_id: uuid.UUID | None = None,
    idempotency_key: str | None = None,
    evaluation_id: uuid.UUID | None = None,
) -> tuple[Evaluation, EvaluationRequested]:
    """A pending evaluation of ``model`` on ``bench`` (``total_items`` = min(sample_limit, samples) ×
    repeats; one arm per evaluation) and the EvaluationRequested announcing it. The trace context is the
    current span's (call inside the evaluation's root span). Nothing is added to a session.

    Raises:
        pydantic.ValidationError: ``config`` is not a valid :class:`uep_common.contract.configs.EvaluationConfig`.
        WorkLimitRefused: 422 naming ``model``, the model cannot answer the benchmark's requests
            (:func:`check_model_fits`).
    """
    check_model_fits(bench, model)
    priority = Priority(priority)
    n_samples = min(sample_limit or bench.sample_count, bench.sample_count)
    evaluation_id = evaluation_id or uuid.uuid4()
    ev = Evaluation(
        id=evaluation_id,
        tenant_id=tenant_id,
        benchmark_id=bench.id,
        model_id=model.id,
        status=EvaluationStatus.pending.value,
        priority=priority.value,
        sample_limit=sample_limit,
        repeats=repeats,
        total_items=n_samples * repeats,
        config=check_evaluation_config(config),
        trace_context=current_trace_headers(),
        idempotency_key=idempotency_key,
        arm=arm,
        batch_id=batch_id,
        experiment_id=experiment_id,
        schedule_id=schedule_id,
    )
    event = EvaluationRequested(
        evaluation_id=evaluation_id,
        tenant_id=tenant_id,
        benchmark_id=bench.id,
        benchmark_slug=bench.slug,
        benchmark_version=bench.version,
        model_id=model.id,
        model_name=model.name,
        sample_limit=sample_limit,
        repeats=repeats,
        priority=priority,
        total_items=ev.total_items,
        arm=arm,
        batch_id=batch_id,
        experiment_id=experiment_id,
        schedule_id=schedule_id,
    )
    return ev, event


def check_model_fits(bench: Benchmark, model: Model) -> None:
    """Refuse a model that cannot answer what the benchmark asks: a log-likelihood benchmark (its prompt has a
    ``loglik`` block) needs a model whose registry row declares ``supports_logprobs`` (its backend answers
    log-likelihood requests: a Triton model with the ``continuation`` input, an OpenAI-compatible
    completions endpoint returning echoed prompt log-probabilities).

    It must also be of a kind the benchmark takes (:func:`check_model_kind`).

    Raises:
        WorkLimitRefused: 422, field ``model``, kind ``model_lacks_loglikelihood`` (or one of
            :func:`check_model_kind`'s).
    """
    check_model_kind(bench, model)
    if parse_benchmark_config(bench.config).prompt_spec.loglik is not None and not model.supports_logprobs:
        raise WorkLimitRefused(
            422,
            "model",
            f"benchmark {bench.slug!r} is scored by log-likelihood, and model {model.name!r} does not answer "
            "log-likelihood requests (its registry row does not declare supports_logprobs)",
            "model_lacks_loglikelihood",
        )


def benchmark_task(bench: Benchmark) -> str:
    """What a benchmark asks of a model: ``"classification"`` (it lists ``class_names`` or is scored by
    ``label_match``), ``"ranking"`` (scored by ``ndcg``) or ``"generation"`` (any other metric)."""
    cfg = parse_benchmark_config(bench.config)
    if cfg.class_names:
        return "classification"
    return SET_KIND_OF_METRIC.get(cfg.metric_name or "", "generation")


def check_model_kind(bench: Benchmark, model: Model) -> None:
    """Refuse a model whose kind cannot answer the benchmark's items (:func:`benchmark_task`): a generation
    model (an LLM) answers generation benchmarks, and classification ones that have a prompt template (it is
    then evaluated as a classifier: its reply names a class); a classifier answers classification benchmarks
    whose classes it has (``spec.class_names`` includes the benchmark's ``class_names``); a ranking or
    embedding model answers ranking benchmarks.

    Raises:
        WorkLimitRefused: 422, field ``model``, kind ``model_kind_mismatch`` or ``model_classes_mismatch``.
    """
    task, kind = benchmark_task(bench), str(model.kind or "generation")
    cfg = parse_benchmark_config(bench.config)
    fits = {
        "generation": task == "generation" or (task == "classification" and cfg.prompt is not None),
        "classification": task == "classification",
        "ranking": task == "ranking",
        "embedding": task == "ranking",
    }.get(kind, False)
    if not fits:
        needs = {
            "generation": "a generation model",
            "classification": "a classifier, or an LLM when the benchmark has a prompt template",
            "ranking": "a ranking or embedding model",
        }[task]
        raise WorkLimitRefused(
            422,
            "model",
            f"benchmark {bench.slug!r} is a {task} benchmark, which needs {needs}; model {model.name!r} is a {kind} model"
            + (" and the benchmark has no prompt template" if kind == "generation" and task == "classification" else ""),
            "model_kind_mismatch",
        )
    classes = (model.spec or {}).get("class_names")
    if kind == "classification" and cfg.class_names and isinstance(classes, list):
        missing = [c for c in cfg.class_names if c not in classes]
        if missing:
            raise WorkLimitRefused(
                422,
                "model",
                f"benchmark {bench.slug!r} has the classes {cfg.class_names}; model {model.name!r} predicts {classes}, "
                f"without {missing}",
                "model_classes_mismatch",
            )


# ---------------------------------------------------------------------------------------------- work limits

UNFINISHED_STATUSES = UNFINISHED
"""Statuses whose items count as queued (:data:`uep_common.records.lifecycle.UNFINISHED`: ``interrupted`` ones resume
on retry)."""
RATE_WINDOW_S = 60


@dataclass(frozen=True)
class WorkLimits:
    """The work one tenant may ask for (all counts are items or evaluations; the interval is in seconds).

    ``max_items_per_evaluation``: items (samples × repeats) of one evaluation; ``max_queued_items``: items not
    yet finished across the tenant's unfinished evaluations (:data:`UNFINISHED_STATUSES`), the new ones
    included; ``max_evaluations_per_minute``: evaluations created in any 60 s; ``min_schedule_interval_s``:
    the closest two runs of one schedule."""

    max_items_per_evaluation: int
    max_queued_items: int
    max_evaluations_per_minute: int
    min_schedule_interval_s: int

    @classmethod
    def from_settings(cls, settings: CommonSettings) -> WorkLimits:
        """The site defaults from a :class:`uep_common.runtime.settings.CommonSettings` (or any subclass)."""
        return cls(**{c: int(getattr(settings, c)) for c in TENANT_LIMIT_COLUMNS})

    def for_tenant(self, tenant: Tenant | None) -> WorkLimits:
        """These limits with ``tenant``'s own values (its non-null ``tenants`` columns) applied."""
        if tenant is None:
            return self
        return replace(self, **{c: int(v) for c in TENANT_LIMIT_COLUMNS if (v := getattr(tenant, c, None)) is not None})


class WorkLimitRefused(Exception):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """A creation refused by a work limit: HTTP ``status_code`` (422 the request can never fit, 409 the
    tenant's queue is full now, 429 the per-minute rate; then ``retry_after_s`` says when one more fits),
    ``field`` (the request field to change, e.g. ``repeats``), ``reason`` (with the numbers) and ``kind``."""

    def __init__(self, status_code: int, field: str, reason: str, kind: str, retry_after_s: int | None = None) -> None:
        super().__init__(reason)
        self.status_code, self.field, self.reason, self.kind = status_code, field, reason, kind
        self.retry_after_s = retry_after_s


def _n(x: int) -> str:
    return f"{x:,}"


def check_items(
    sample_count: int, sample_limit: int | None, repeats: int, limits: WorkLimits, what: str = "the evaluation"
) -> int:
    """Items of one evaluation (min(sample_limit, sample_count) × repeats); raises :class:`WorkLimitRefused`
    422 naming ``sample_limit`` (when one repeat alone is too many) or ``repeats`` when over
    ``limits.max_items_per_evaluation``."""
    samples = min(sample_limit or sample_count, sample_count)
    items = samples * repeats
    cap = limits.max_items_per_evaluation
    if items > cap:
        field = "sample_limit" if samples > cap else "repeats"
        hint = (
            f"set sample_limit to at most {_n(cap // repeats)}"
            if field == "sample_limit"
            else f"at most {_n(cap // samples)} repeats of {_n(samples)} samples"
        )
        raise WorkLimitRefused(
            422,
            field,
            f"{what} would have {_n(items)} items ({_n(samples)} samples × {_n(repeats)} repeats); at most {_n(cap)} items "
            f"per evaluation ({hint})",
            "too_many_items",
        )
    return items


async def lock_tenant_creations(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Serialize the creations of one tenant until the transaction ends (``pg_advisory_xact_lock``), so that
    the queued-items and per-minute counts, and an ``Idempotency-Key`` lookup, see every earlier creation."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"uep-create:{tenant_id}"})


async def check_work_limits(
    session: AsyncSession,
    tenant: Tenant,
    evaluations: list[Evaluation],
    limits: WorkLimits,
    many_field: str | None = None,
) -> None:
    """Before new ``evaluations`` of ``tenant`` (one request, or one scheduled run) are committed: take the
    tenant's creation lock, then check each one's items, the tenant's queued items with these, and the
    evaluations created in the last 60 s with these. ``limits`` are the site's (the tenant's columns are
    applied here). ``many_field`` names the request field that made several evaluations (``models``/``arms``).
    Raises :class:`WorkLimitRefused`; reads only, so nothing is written either way."""
    limits = limits.for_tenant(tenant)
    await lock_tenant_creations(session, tenant.id)
    for ev in evaluations:
        if ev.total_items > limits.max_items_per_evaluation:
            bench = await session.get(Benchmark, ev.benchmark_id)
            check_items(bench.sample_count if bench else ev.total_items, ev.sample_limit, ev.repeats, limits)
    with session.no_autoflush:
        queued = await session.scalar(
            select(func.coalesce(func.sum(func.greatest(Evaluation.total_items - Evaluation.completed_items, 0)), 0)).where(
                Evaluation.tenant_id == tenant.id, Evaluation.status.in_(UNFINISHED_STATUSES)
            )
        )
        assert queued is not None  # coalesce(..., 0)
        new_items = sum(ev.total_items for ev in evaluations)
        if int(queued) + new_items > limits.max_queued_items:
            raise WorkLimitRefused(
                409,
                "sample_limit",
                f"tenant {tenant.slug!r} has {_n(int(queued))} items queued (not yet finished); {_n(new_items)} more would "
                f"exceed its limit of {_n(limits.max_queued_items)} queued items: wait for evaluations to finish, cancel "
                "some, or evaluate fewer items",
                "too_many_queued_items",
            )
        cap = limits.max_evaluations_per_minute
        if len(evaluations) > cap:
            raise WorkLimitRefused(
                422,
                many_field or "models",
                f"{len(evaluations)} evaluations in one request; tenant {tenant.slug!r} may create at most {cap} per minute",
                "too_many_evaluations",
            )
        window = text(f"now() - interval '{RATE_WINDOW_S} seconds'")
        recent = list(
            await session.scalars(
                select(Evaluation.created_at)
                .where(Evaluation.tenant_id == tenant.id, Evaluation.created_at > window)
                .order_by(Evaluation.created_at)
            )
        )
        if len(recent) + len(evaluations) > cap:
            # the creation that must leave the window before these fit
            oldest = recent[len(recent) + len(evaluations) - cap - 1]
            db_now = await session.scalar(select(func.now()))
            assert db_now is not None  # now() is never NULL
            retry = max(1, math.ceil((oldest + timedelta(seconds=RATE_WINDOW_S) - db_now).total_seconds()))
            raise WorkLimitRefused(
                429,
                "X-UEP-Tenant",
                f"tenant {tenant.slug!r} created {len(recent)} evaluations in the last {RATE_WINDOW_S} s; at most {cap} per "
                f"{RATE_WINDOW_S} s: retry in {retry} s",
                "rate_limited",
                retry_after_s=retry,
            )


SCHEDULE_INTERVAL_PROBE_RUNS = 500
SCHEDULE_INTERVAL_PROBE_DAYS = 400


def min_cron_gap(cron: str, start: datetime | None = None, below_s: float | None = None) -> float:
    """The smallest gap, seconds, between consecutive runs of ``cron`` (UTC; croniter) over its next
    :data:`SCHEDULE_INTERVAL_PROBE_RUNS` runs or :data:`SCHEDULE_INTERVAL_PROBE_DAYS` days from ``start``
    (default now), whichever ends first; stops early at the first gap under ``below_s``. A cron's times are
    a product of its fields, so a close pair shows up within its first matching days. ``math.inf`` when it
    runs at most once."""
    start = (start or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    it = croniter(cron, start)
    end = start + timedelta(days=SCHEDULE_INTERVAL_PROBE_DAYS)
    prev = it.get_next(datetime)
    gap = math.inf
    for _ in range(SCHEDULE_INTERVAL_PROBE_RUNS):
        nxt = it.get_next(datetime)
        gap = min(gap, (nxt - prev).total_seconds())
        if (below_s is not None and gap < below_s) or nxt > end:
            break
        prev = nxt
    return gap


def check_schedule_interval(cron: str, limits: WorkLimits, start: datetime | None = None) -> None:
    """Raise :class:`WorkLimitRefused` 422 naming ``cron`` when two consecutive runs of ``cron`` are closer
    than ``limits.min_schedule_interval_s`` (see :func:`min_cron_gap`). ``cron`` must be valid."""
    interval = limits.min_schedule_interval_s
    gap = min_cron_gap(cron, start, below_s=interval)
    if gap < interval:
        raise WorkLimitRefused(
            422,
            "cron",
            f"cron {cron!r} runs {gap:g} s apart; schedules may run at most once every {interval} s",
            "schedule_too_frequent",
        )


def next_allowed_run(cron: str, last_run: datetime, limits: WorkLimits) -> datetime:
    """The first time of ``cron`` at least ``limits.min_schedule_interval_s`` after ``last_run`` (cron times are
    whole seconds)."""
    after = last_run.astimezone(UTC) + timedelta(seconds=limits.min_schedule_interval_s - 1)
    nxt: datetime = croniter(cron, after).get_next(datetime)
    return nxt.astimezone(UTC)
