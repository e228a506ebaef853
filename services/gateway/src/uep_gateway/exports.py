"""Per-item exports in the formats of the tools people already use: lm-evaluation-harness's logged samples
and Inspect AI's eval log. Pure functions over what :mod:`uep_gateway.usecases.exports` reads.

lm-evaluation-harness (``--log_samples``, file ``samples_<task>.jsonl``): one JSON object per document, as
``lm_eval.evaluator.evaluate`` logs it: ``doc_id``, ``doc``, ``target``, ``arguments`` (each request's
arguments: ``[context, gen_kwargs]`` for ``generate_until``, ``[context, continuation]`` per choice for
``loglikelihood``), ``resps`` (each request's raw responses), ``filtered_resps`` (each request's response after
the task's filters), ``filter``, ``metrics`` (the metric names), ``doc_hash``, ``prompt_hash``, ``target_hash``
(SHA-256 hex of the JSON of the doc with ``indent=2, ensure_ascii=False``, of the first context, and of
``str(target)``: ``lm_eval.utils.hash_string``), then each metric's value under its name.

Inspect AI (``inspect_ai.log.EvalLog``, JSON log format version 2): ``version``, ``status`` (``started``,
``success``, ``cancelled``, ``error``), ``eval`` (``EvalSpec``: ids, ``created``, ``task``, ``dataset``,
``model``, ``config``), ``plan`` (``EvalPlan``: solver steps), ``results`` (``EvalResults``: sample counts and
``scores``, each an ``EvalScore`` with ``metrics`` by name), ``stats`` (``EvalStats``: times and
``model_usage``), ``error`` (only when failed), ``samples`` (``EvalSample``: ``id``, ``epoch``, ``input``,
``choices``, ``target``, ``messages``, ``output`` (a ``ModelOutput``), ``scores`` (``Score`` by scorer name:
``value``, ``answer``, ``explanation``, ``metadata``), ``metadata``, ``model_usage``, ``total_time``, ``error``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from uep_common.contract.events import PromptSpec

EXPORT_FORMATS = ("lm-eval", "inspect")
"""The ``format`` values of ``GET /v1/evaluations/{id}/export``."""

INSPECT_STATUS = {
    "pending": "started",
    "running": "started",
    "completed": "success",
    "failed": "error",
    "cancelled": "cancelled",
    "interrupted": "error",
    "stopped": "cancelled",
    "budget_exhausted": "cancelled",
}
"""An evaluation's status as Inspect's ``EvalStatus``."""


@dataclass(frozen=True)
class ItemRecord:
    """One exported item: the sample (``ordinal``, ``external_id``, ``input``, ``reference``, ``meta``), the prompt
    it was sent (None for a model that takes none) and its stored result."""

    ordinal: int
    external_id: str | None
    input: dict[str, Any]
    reference: dict[str, Any]
    prompt: str | None
    repeat: int = 0
    arm: str = "main"
    output: str | None = None
    extracted: str | None = None
    score: float | None = None
    metric_name: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def numeric_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """The numeric values of a result's ``metrics`` (booleans as 0/1), by name; labels and None left out."""
    return {k: float(v) for k, v in metrics.items() if isinstance(v, bool | int | float)}


def item_choices(prompt: PromptSpec, item: ItemRecord) -> list[str] | None:
    """The choices of a log-likelihood item (the prompt's fixed ``choices`` or the input field it names), else
    None."""
    if prompt.loglik is None:
        return None
    if prompt.loglik.choices is not None:
        return list(prompt.loglik.choices)
    value = item.input.get(prompt.loglik.choices_field or "")
    return [str(c) for c in value] if isinstance(value, list) else None


def item_target(item: ItemRecord) -> Any:
    """The reference as one value: a choice item's gold index, else ``answer``, else the first of ``answers``,
    else the whole reference."""
    ref = item.reference
    for key in ("gold", "answer", "label"):
        if key in ref:
            return ref[key]
    answers = ref.get("answers")
    if isinstance(answers, list) and answers:
        return answers[0]
    return ref


def _loglik_values(output: str | None, n: int) -> list[list[Any]]:
    """``[logprob, is_greedy]`` of each of ``n`` choices from a log-likelihood item's output JSON (empty when
    the output is missing or malformed)."""
    try:
        parsed = json.loads(output or "")
        logprobs, greedy = parsed["logprobs"], parsed.get("is_greedy") or [False] * n
    except (ValueError, TypeError, KeyError):
        return []
    return [[float(lp), bool(g)] for lp, g in zip(logprobs, greedy, strict=False)][:n]


def lm_eval_sample(item: ItemRecord, prompt: PromptSpec, max_tokens: int | None) -> dict[str, Any]:
    """One line of lm-evaluation-harness's ``samples_<task>.jsonl`` for ``item`` (module docstring for the
    fields). ``doc`` is the original document of a task imported from lm-eval (``meta["lm_eval_doc"]``), else
    the sample's input fields; ``doc_id`` the sample ordinal. A generated item is one ``generate_until``
    request (``gen_kwargs``: ``until`` = the prompt's stop sequences, ``max_gen_toks`` = ``max_tokens`` when
    set); its filtered response is the metric's extracted answer (the output when there is none). A
    log-likelihood item is one ``loglikelihood`` request per choice, each answered ``[logprob, is_greedy]``.
    An item that failed carries its error under ``error`` and no metric values."""
    doc = item.meta.get("lm_eval_doc", item.input)
    target = item_target(item)
    context = item.prompt or ""
    choices = item_choices(prompt, item)
    if choices is not None and prompt.loglik is not None:
        arguments: list[list[Any]] = [[context, prompt.loglik.target_delimiter + c] for c in choices]
        values = _loglik_values(item.output, len(choices))
        resps: list[Any] = [[v] for v in values]
        filtered: list[Any] = values
    else:
        gen_kwargs: dict[str, Any] = {"until": list(prompt.stop)}
        if max_tokens is not None:
            gen_kwargs["max_gen_toks"] = max_tokens
        arguments = [[context, gen_kwargs]]
        resps = [[item.output or ""]]
        filtered = [item.extracted if item.extracted is not None else (item.output or "")]
    metrics = {} if item.error else numeric_metrics(item.metrics)
    line: dict[str, Any] = {
        "doc_id": item.ordinal,
        "doc": doc,
        "target": target,
        "arguments": arguments,
        "resps": resps,
        "filtered_resps": filtered,
        "filter": "none",
        "metrics": list(metrics),
        "doc_hash": _sha256(json.dumps(doc, indent=2, ensure_ascii=False, default=str)),
        "prompt_hash": _sha256(context),
        "target_hash": _sha256(str(target)),
        **metrics,
    }
    if item.repeat:
        line["repeat"] = item.repeat
    if item.error:
        line["error"] = item.error
    return line


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": input_tokens + output_tokens}


def inspect_sample(item: ItemRecord, prompt: PromptSpec, model: str) -> dict[str, Any]:
    """Inspect's ``EvalSample`` of ``item`` (module docstring). ``input`` is the prompt sent (the input fields
    as JSON for a model that takes no prompt); a choice item has ``choices`` and its target is the gold
    choice's letter (``A``, ``B``, … as Inspect's ``multiple_choice`` scorer reads it); ``epoch`` is the repeat
    plus one. Each numeric metric is a ``Score`` (the item's metric, which decides its verdict, carries the
    extracted ``answer``); the input fields, reference and arm are in ``metadata``."""
    text_input = item.prompt if item.prompt is not None else json.dumps(item.input, ensure_ascii=False, sort_keys=True)
    choices = item_choices(prompt, item)
    target: Any = item_target(item)
    if choices is not None and isinstance(target, int) and 0 <= target < 26:
        target = chr(ord("A") + target)
    usage = _usage(item.prompt_tokens or 0, item.completion_tokens or 0)
    content = item.output or ""
    assistant = {"role": "assistant", "content": content, "source": "generate"}
    scores: dict[str, dict[str, Any]] = {}
    if not item.error:
        for name, value in numeric_metrics(item.metrics).items():
            scores[name] = {
                "value": value,
                "answer": item.extracted if name == item.metric_name else None,
                "explanation": None,
                "metadata": None,
            }
    sample: dict[str, Any] = {
        "id": item.external_id if item.external_id is not None else item.ordinal,
        "epoch": item.repeat + 1,
        "input": text_input,
        "choices": choices,
        "target": target if isinstance(target, str) else json.dumps(target, ensure_ascii=False),
        "messages": [{"role": "user", "content": text_input, "source": "input"}, assistant],
        "output": {
            "model": model,
            "choices": [{"message": assistant, "stop_reason": "stop" if not item.error else "unknown"}],
            "usage": usage,
            "time": item.latency_ms / 1000 if item.latency_ms is not None else None,
        },
        "scores": scores,
        "metadata": {"input": item.input, "reference": item.reference, "arm": item.arm, "sample_ordinal": item.ordinal},
        "store": {},
        "events": [],
        "model_usage": {model: usage},
        "total_time": item.latency_ms / 1000 if item.latency_ms is not None else None,
        "attachments": {},
    }
    if item.error:
        sample["error"] = {"message": json.dumps(item.error, ensure_ascii=False), "traceback": "", "traceback_ansi": ""}
    return sample


@dataclass(frozen=True)
class RunRecord:
    """What Inspect's log header says of one evaluation (ids as strings, times aware)."""

    evaluation_id: str
    status: str
    created: datetime
    started: datetime | None
    completed: datetime | None
    task: str
    task_id: str
    task_version: str
    dataset_samples: int
    model: str
    repeats: int
    sample_limit: int | None
    arm: str
    error: str | None
    metric: str
    total_samples: int
    completed_samples: int
    metric_means: dict[str, float]
    input_tokens: int
    output_tokens: int


def inspect_header(run: RunRecord, prompt: PromptSpec, max_tokens: int | None) -> dict[str, Any]:
    """Inspect's ``EvalLog`` of ``run`` without its ``samples`` (module docstring). The plan is the prompt
    template then generation (or log-likelihood scoring of the choices); the one ``EvalScore`` is the
    benchmark's metric, with the mean of every per-item metric over the items that have it."""
    generate_config: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens is not None else {}
    if prompt.stop:
        generate_config["stop_seqs"] = list(prompt.stop)
    last_step = "loglikelihood" if prompt.loglik is not None else "generate"
    log: dict[str, Any] = {
        "version": 2,
        "status": INSPECT_STATUS.get(run.status, "error"),
        "eval": {
            "eval_id": run.evaluation_id,
            "run_id": run.evaluation_id,
            "created": run.created.isoformat(),
            "task": run.task,
            "task_id": run.task_id,
            "task_version": run.task_version,
            "task_attribs": {},
            "task_args": {},
            "dataset": {"name": run.task, "samples": run.dataset_samples},
            "model": run.model,
            "model_generate_config": generate_config,
            "model_args": {},
            "config": {"epochs": run.repeats, "limit": run.sample_limit},
            "packages": {},
            "metadata": {"uep_evaluation_id": run.evaluation_id, "arm": run.arm, "uep_status": run.status},
        },
        "plan": {
            "name": "plan",
            "steps": [
                {"solver": "prompt_template", "params": {"template": prompt.template, "fewshot_k": prompt.fewshot_k}},
                {"solver": last_step, "params": {}},
            ],
            "config": generate_config,
        },
        "results": {
            "total_samples": run.total_samples,
            "completed_samples": run.completed_samples,
            "scores": [
                {
                    "name": run.metric,
                    "scorer": run.metric,
                    "params": {},
                    "metrics": {k: {"name": k, "value": v, "params": {}} for k, v in run.metric_means.items()},
                }
            ],
        },
        "stats": {
            "started_at": (run.started or run.created).isoformat(),
            "completed_at": run.completed.isoformat() if run.completed else "",
            "model_usage": {run.model: _usage(run.input_tokens, run.output_tokens)},
        },
    }
    if log["status"] == "error":
        log["error"] = {"message": run.error or run.status, "traceback": "", "traceback_ansi": ""}
    return log
