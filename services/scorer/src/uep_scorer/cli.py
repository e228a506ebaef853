"""``uep-scorer``: the scorer service, and offline scoring of files without the broker.

Commands::

    uep-scorer                       # run the scorer service (same as `uep-scorer serve`)
    uep-scorer serve
    uep-scorer metrics               # list the metrics with their version, parameters and source
    uep-scorer score --metric NAME [--param KEY=VALUE ...] [--summary] IN.jsonl

``score`` reads JSON lines holding ``prediction``, ``reference`` and the metric's own fields (e.g.
``choices``, ``test``/``entry_point``, ``n``/``c``) and writes one JSON line per input to stdout:
``{"line", "id", "extracted", "correct", "score", "metric", "version", "details"}``. A line that cannot be
scored gets ``{"line", "error"}`` naming the line and the field; the exit status is then 2. ``--summary``
appends ``{"summary": {...}}``: n, decided, correct, accuracy (correct / decided), mean score, errors, the
extraction failure rate (share of scored lines where nothing could be extracted) and, for metrics with a
corpus level (sentence_bleu, sentence_chrf), ``corpus`` (e.g. corpus BLEU, which is not the mean of
sentence BLEU) with its sacrebleu signature.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer

from uep_common.contract.params import param_problems
from uep_scorer.metrics import MetricInputError, UnknownMetricError, available_metrics, get_metric

app = typer.Typer(add_completion=False, help=__doc__.split("\n")[0], no_args_is_help=False)


@app.callback(invoke_without_command=True)
def _default(ctx: typer.Context) -> None:
    """With no command, run the service."""
    if ctx.invoked_subcommand is None:
        serve()


@app.command()
def serve() -> None:
    """Run the scorer service (Kafka consumer; health on UEP_HEALTH_PORT, default 8093)."""
    from uep_scorer.main import main as run_service

    run_service()


@app.command()
def metrics(as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False) -> None:
    """List every metric with its version, parameters and source."""
    rows: list[dict[str, Any]] = []
    for name in available_metrics():
        m = get_metric(name)
        rows.append({"name": name, "version": m.version, "params": dict(m.params), "source": m.source})
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("metric", "version", "parameters", "source", show_lines=True)
    for r in rows:
        table.add_row(r["name"], r["version"], "\n".join(f"{k}: {v}" for k, v in r["params"].items()) or "—", r["source"])
    Console().print(table)


def parse_param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → (key, value); the value is JSON when it parses (``5``, ``true``, ``["a"]``), else a string.

    Raises:
        typer.BadParameter: no ``=`` or an empty key.
    """
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise typer.BadParameter(f"--param {text!r}: expected KEY=VALUE")
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw


def reference_of(record: dict[str, Any]) -> dict[str, Any]:
    """The metric's reference dict from one input line: ``reference`` (a dict, or a scalar that becomes
    ``{"answer": scalar}``) plus every other field of the line except ``prediction`` and ``id``."""
    ref = record.get("reference")
    base = dict(ref) if isinstance(ref, dict) else ({} if ref is None else {"answer": ref})
    extra = {k: v for k, v in record.items() if k not in ("prediction", "reference", "id")}
    return {**extra, **base}


def score_lines(lines: Iterable[str], metric_name: str, params: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score JSONL ``lines`` (an iterable of str); returns (output records, summary)."""
    metric = get_metric(metric_name)
    out: list[dict[str, Any]] = []
    corpus_inputs: tuple[list[str], list[dict[str, Any]]] = ([], [])
    decided = correct = errors = no_answer = scored = 0
    scores: list[float] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            out.append({"line": number, "error": f"line {number}: invalid JSON: {exc.msg}"})
            errors += 1
            continue
        if not isinstance(record, dict) or "prediction" not in record:
            out.append({"line": number, "error": f"line {number}: field 'prediction' is missing"})
            errors += 1
            continue
        if record["prediction"] is not None and not isinstance(record["prediction"], str):
            out.append({"line": number, "error": f"line {number}: field 'prediction' must be a string"})
            errors += 1
            continue
        try:
            r = metric.score(record["prediction"] or "", reference_of(record), params)
        except MetricInputError as exc:
            out.append({"line": number, "error": f"line {number}: {exc}"})
            errors += 1
            continue
        scored += 1
        corpus_inputs[0].append(record["prediction"] or "")
        corpus_inputs[1].append(reference_of(record))
        if r.is_correct is not None:
            decided += 1
            correct += bool(r.is_correct)
        if r.score is not None:
            scores.append(r.score)
        no_answer += r.details.get("extraction") == "no_answer"
        out.append(
            {
                "line": number,
                "id": record.get("id"),
                "extracted": r.extracted,
                "correct": r.is_correct,
                "score": r.score,
                "metric": r.name,
                "version": r.version,
                "details": r.details,
            }
        )
    summary = {
        "metric": metric.name,
        "version": metric.version,
        "n": scored,
        "decided": decided,
        "correct": correct,
        "accuracy": correct / decided if decided else None,
        "mean_score": sum(scores) / len(scores) if scores else None,
        "errors": errors,
        "extraction_failure_rate": no_answer / scored if scored else None,
    }
    if hasattr(metric, "corpus") and scored:  # corpus-level scores (e.g. corpus BLEU) over all scored lines
        summary["corpus"] = metric.corpus(*corpus_inputs, params)
    return out, summary


@app.command()
def score(
    infile: Annotated[Path, typer.Argument(help="JSONL input ('-' for stdin)", allow_dash=True)],
    metric: Annotated[str, typer.Option("--metric", "-m", help="metric name (see `uep-scorer metrics`)")],
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE, repeatable")] = None,
    summary: Annotated[bool, typer.Option("--summary", help="append the aggregate as a last line")] = False,
) -> None:
    """Score a JSONL file offline, without the broker."""
    try:
        get_metric(metric)
    except UnknownMetricError as exc:
        raise typer.BadParameter(str(exc), param_hint="--metric") from None
    params = dict(parse_param(p) for p in (param or []))
    m = get_metric(metric)
    problems = param_problems(params, m.param_types, m.required_params)
    if problems:
        raise typer.BadParameter("; ".join(f"{name!r} {reason}" for name, reason in problems), param_hint="--param")
    if str(infile) == "-":
        lines = sys.stdin
    else:
        if not infile.is_file():
            raise typer.BadParameter(f"no such file: {infile}", param_hint="IN.jsonl")
        lines = infile.open(encoding="utf-8")
    records, agg = score_lines(lines, metric, params)
    for rec in records:
        typer.echo(json.dumps(rec, ensure_ascii=False, default=str))
    if summary:
        typer.echo(json.dumps({"summary": agg}, ensure_ascii=False))
    if agg["errors"]:
        raise typer.Exit(2)


def main() -> None:
    """Console entry point."""
    app()
