"""Run fingerprints: everything that determines an evaluation's scores besides chance, and the diff of two.

A fingerprint is a flat ``{field: value}`` dict (values JSON-ready). Each field belongs to a group:

==========  ===========================================================================================
group       fields
==========  ===========================================================================================
model       ``model.name``, ``model.version``, ``model.id``, ``model.backend``, ``model.triton_model_name``,
            ``model.triton_model_version``
benchmark   ``benchmark.slug``, ``benchmark.version`` (content hash of the samples and config)
prompt      ``prompt.template_sha256`` (SHA-256 of the Jinja2 template the items were rendered with: an A/B
            arm's own ``prompt_template``, else the benchmark's), ``prompt.fewshot_k``, ``prompt.chat`` (each
            the evaluation's override, else the benchmark's: :func:`uep_common.contract.configs.item_prompt`, the
            definition the scheduler dispatches with)
decoding    ``decoding.max_tokens`` (benchmark override, else the model's default), ``decoding.temperature``,
            ``decoding.stop`` (model's + benchmark's)
run         ``run.repeats``, ``run.sample_limit``, ``run.sampling`` and ``run.sampling_seed`` (which samples a
            limited run took, :mod:`uep_common.records.sampling`), ``run.max_parallel`` (``config.max_parallel`` /
            ``max_in_flight``; None = scheduler default), ``run.batch_size`` (``config.batch_size``, None when unset)
scorer      ``scorer.metric``, ``scorer.params`` (the metric deciding each item's verdict and its parameters,
            benchmark config), ``scorer.metrics`` (only when the benchmark declares ``metrics``: each entry
            ``{name, params, primary}`` in declared order — the order decides which per-item metric gives the
            verdict and which entry is primary by default, so it is part of the configuration),
            ``scorer.primary`` (the set-level headline :attr:`~uep_common.contract.configs.BenchmarkConfig.primary_score`,
            also only with ``metrics``), ``scorer.metric_versions`` (``{metric: [versions]}`` of the stored
            scores). A benchmark with ``metric`` alone keeps the fingerprint it always had.
==========  ===========================================================================================

:func:`diff_fingerprints` names every field that differs and warns when a group other than ``model`` differs:
then a score change cannot be attributed to the model alone.
"""

from __future__ import annotations

import hashlib
import uuid

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import BenchmarkConfig, item_prompt, parse_benchmark_config, parse_evaluation_config
from uep_common.tables.models import Benchmark, Evaluation, Model, SampleResult

GROUPS = ("model", "benchmark", "prompt", "decoding", "run", "scorer")


class FingerprintChange(BaseModel):
    """One field whose value differs between the baseline and the current run."""

    field: str
    group: str = Field(description="One of model, benchmark, prompt, decoding, run, scorer.")
    baseline: object | None
    current: object | None


class FingerprintDiff(BaseModel):
    """What changed between two runs; ``warning`` is set when more than the model changed."""

    changes: list[FingerprintChange]
    changed_groups: list[str]
    only_model_changed: bool = Field(description="True when every change is in the model group (or nothing changed).")
    warning: str | None = None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def metric_versions(session: AsyncSession, evaluation_id: uuid.UUID) -> dict[str, list[str]]:
    """``{metric_name: [versions…]}`` of the scores stored for an evaluation (sorted)."""
    rows = await session.execute(
        select(SampleResult.metric_name, SampleResult.metric_version)
        .where(SampleResult.evaluation_id == evaluation_id, SampleResult.metric_name.is_not(None))
        .distinct()
    )
    out: dict[str, set[str]] = {}
    for name, version in rows:
        assert name is not None  # the query filters on metric_name IS NOT NULL
        if version is None:  # writers always set a version with a metric name
            continue
        out.setdefault(name, set()).add(version)
    return {k: sorted(v) for k, v in sorted(out.items())}


def build_fingerprint(ev: Evaluation, model: Model, bench: Benchmark, versions: dict[str, list[str]]) -> dict[str, object]:
    """The fingerprint of ``ev`` from its rows (see the module docstring for the fields).

    Raises:
        pydantic.ValidationError: a config column does not parse (:mod:`uep_common.contract.configs`).
    """
    cfg = parse_evaluation_config(ev.config)
    bench_cfg = parse_benchmark_config(bench.config)
    prompt = item_prompt(bench_cfg, cfg)  # what the items were rendered with (an arm's overrides applied)
    metric = bench_cfg.scoring_metric
    dec = model.decoding_defaults or {}
    return {
        "model.name": model.name,
        "model.version": model.version,
        "model.id": str(model.id),
        "model.backend": model.backend,
        "model.triton_model_name": model.triton_model_name,
        "model.triton_model_version": model.triton_model_version,
        "benchmark.slug": bench.slug,
        "benchmark.version": bench.version,
        "prompt.template_sha256": _sha(prompt.template),
        "prompt.fewshot_k": prompt.fewshot_k,
        "prompt.chat": prompt.chat,
        "decoding.max_tokens": prompt.max_tokens or dec.get("max_tokens", 256),
        "decoding.temperature": dec.get("temperature", 0.0),
        "decoding.stop": [*dec.get("stop", []), *prompt.stop],
        "run.repeats": ev.repeats,
        "run.sample_limit": ev.sample_limit,
        "run.sampling": cfg.sampling or "first",
        "run.sampling_seed": cfg.sampling_seed,
        "run.max_parallel": cfg.max_parallel,
        "run.batch_size": cfg.batch_size,
        "scorer.metric": bench_cfg.metric_name,
        "scorer.params": metric.params if metric else {},
        **_declared_metrics(bench_cfg),
        "scorer.metric_versions": versions,
    }


def _declared_metrics(bench_cfg: BenchmarkConfig) -> dict[str, object]:
    """``scorer.metrics`` and ``scorer.primary`` of a benchmark declaring ``metrics``; nothing otherwise."""
    if not bench_cfg.metrics:
        return {}
    return {
        "scorer.metrics": [{"name": m.name, "params": m.params, "primary": m.primary} for m in bench_cfg.metrics],
        "scorer.primary": bench_cfg.primary_score,
    }


async def fingerprint(session: AsyncSession, evaluation_id: uuid.UUID) -> dict[str, object]:
    """Load an evaluation and build its fingerprint.

    Raises:
        LookupError: unknown evaluation.
    """
    ev = await session.get(Evaluation, evaluation_id)
    if ev is None:
        raise LookupError(f"unknown evaluation {evaluation_id}")
    model = await session.get(Model, ev.model_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    assert model is not None and bench is not None  # foreign keys of the evaluation
    return build_fingerprint(ev, model, bench, await metric_versions(session, evaluation_id))


def diff_fingerprints(baseline: dict[str, object], current: dict[str, object]) -> FingerprintDiff:
    """Every field whose value differs (in fingerprint order), and a warning when a group other than
    ``model`` changed."""
    fields = list(dict.fromkeys([*current, *baseline]))
    changes = [
        FingerprintChange(field=f, group=f.split(".", 1)[0], baseline=baseline.get(f), current=current.get(f))
        for f in fields
        if baseline.get(f) != current.get(f)
    ]
    groups = list(dict.fromkeys(c.group for c in changes))
    others = [c.field for c in changes if c.group != "model"]
    warning = None
    if others:
        warning = (
            "the runs differ in more than the model (" + ", ".join(others) + "): a score difference cannot be "
            "attributed to the model alone"
        )
    return FingerprintDiff(changes=changes, changed_groups=groups, only_model_changed=not others, warning=warning)
