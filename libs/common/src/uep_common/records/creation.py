"""Build an evaluation row and its EvaluationRequested event.

Shared by the gateway's ``POST /v1/evaluations`` (single, batch over several models, A/B arms) and the
scheduler's scheduled (cron) runs, so that both create exactly the same rows. The caller adds the row and
stages the event in the outbox in one transaction (after the budget hook ``check_creation``, and the work
limits of :mod:`uep_common.records.work_limits`). A creation refused (a model that cannot answer the benchmark,
a work limit) raises :class:`WorkLimitRefused`, which names the request field and the numbers.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import SET_KIND_OF_METRIC, EvaluationConfig, check_evaluation_config, parse_benchmark_config
from uep_common.contract.events import EvaluationRequested, EvaluationStatus, Priority
from uep_common.registry.model_registry import model_query, split_ref, visible_models
from uep_common.runtime.telemetry import current_trace_headers
from uep_common.tables.models import Benchmark, Evaluation, Model

if TYPE_CHECKING:
    pass


class WorkLimitRefused(Exception):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """A creation refused by a work limit: HTTP ``status_code`` (422 the request can never fit, 409 the
    tenant's queue is full now, 429 the per-minute rate; then ``retry_after_s`` says when one more fits),
    ``field`` (the request field to change, e.g. ``repeats``), ``reason`` (with the numbers) and ``kind``."""

    def __init__(self, status_code: int, field: str, reason: str, kind: str, retry_after_s: int | None = None) -> None:
        super().__init__(reason)
        self.status_code, self.field, self.reason, self.kind = status_code, field, reason, kind
        self.retry_after_s = retry_after_s


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
