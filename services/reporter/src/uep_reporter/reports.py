"""Writing reports: build (:mod:`uep_reporter.report`), store the files as artifacts, mark the ``reports`` row
ready and stage ReportReady in the outbox — artifacts, row and event in one transaction.

Triggers: an EvaluationCompleted (once per evaluation: a redelivered event finds the ready report and does
nothing) and a ReportRequested (``POST /v1/evaluations/{id}/reports``: fills the pending row the gateway
created). A build that fails marks the row ``failed`` with the reason; a PDF that Chromium cannot render
leaves the report ready without a PDF (``pdf_error`` says why).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.analytics.judge_standing import DEFAULT_MIN_AGREEMENT
from uep_common.contract.events import EvaluationCompleted, ReportReady, ReportRequested, Topics
from uep_common.runtime.artifacts import ArtifactStore, artifact_store
from uep_common.runtime.consuming import consume
from uep_common.runtime.messaging import consumer_options
from uep_common.runtime.outbox import OutboxRelay, add_to_outbox
from uep_common.tables.models import Evaluation
from uep_common.tables.reports import Report as ReportRow
from uep_reporter import instruments
from uep_reporter.pdf import PdfUnavailable, html_to_pdf
from uep_reporter.report import ReportError, collect, render_html, render_json
from uep_reporter.report_model import REPORT_SCHEMA_VERSION, Report
from uep_reporter.settings import ReporterSettings

log = logging.getLogger(__name__)

REPORTED_STATUSES = ("completed", "failed", "stopped", "budget_exhausted")
"""Statuses whose EvaluationCompleted triggers a report (a cancelled evaluation gets one only on request)."""


def links(evaluation_id: uuid.UUID) -> dict[str, str]:
    """Gateway paths of an evaluation's report files."""
    base = f"/v1/evaluations/{evaluation_id}"
    return {f: f"{base}/report.{f}" for f in ("html", "json", "pdf")}


# What ``broker.subscriber(...)`` returns, as a decorator of a :func:`consume` handler: mypy resolves the call to
# ``Any`` (its overloads are ambiguous given ``**consumer_options(...)``), so it is bound to this type first.
Subscribe = Callable[[Callable[[KafkaMessage], Awaitable[None]]], object]


class ReportWriter:
    """Builds and stores reports.

    Args:
        sessionmaker: async session factory of the system of record.
        store: where artifact files go.
        render_pdf: render the PDF with Chromium (False: HTML and JSON only).
        on_written: called after a report commits (e.g. the outbox relay's ``kick``).
        judge_min_agreement: ``UEP_JUDGE_MIN_AGREEMENT``, the judge calibration threshold of the judge section.
    """

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        store: ArtifactStore,
        render_pdf: bool = True,
        on_written: Callable[[], None] | None = None,
        judge_min_agreement: float = DEFAULT_MIN_AGREEMENT,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._store = store
        self._render_pdf = render_pdf
        self._on_written = on_written
        self._judge_min_agreement = judge_min_agreement
        self._lock = asyncio.Lock()  # one build at a time per process: Chromium and matplotlib are heavy

    async def on_completed(self, evaluation_id: uuid.UUID) -> uuid.UUID | None:
        """Write the completion report of an evaluation unless it has a ready one (a pending one, left by a build
        that a crash interrupted, is built again); returns the report id or None."""
        async with self._sessionmaker() as session, session.begin():
            ev = await session.scalar(select(Evaluation).where(Evaluation.id == evaluation_id).with_for_update())
            if ev is None or ev.status not in REPORTED_STATUSES or not ev.completed_items:
                return None
            rows = dict(
                (
                    await session.execute(
                        select(ReportRow.status, ReportRow.id).where(
                            ReportRow.evaluation_id == evaluation_id, ReportRow.trigger == "completed"
                        )
                    )
                ).all()
            )
            if "ready" in rows:
                return None
            # a pending row is what a build interrupted by a crash left: this redelivery finishes it
            report_id = rows.get("pending") or uuid.uuid4()
            if "pending" not in rows:
                session.add(ReportRow(id=report_id, evaluation_id=evaluation_id, status="pending", trigger="completed"))
        await self.build(report_id, evaluation_id)
        return report_id

    async def build(self, report_id: uuid.UUID, evaluation_id: uuid.UUID, baseline_id: uuid.UUID | None = None) -> str:
        """Fill the report row ``report_id`` (created pending); returns its final status (ready | failed)."""
        async with self._lock:
            timings: dict[str, float] = {}
            t0 = time.perf_counter()
            try:
                async with self._sessionmaker() as session:
                    report = await collect(session, evaluation_id, baseline_id, report_id, self._judge_min_agreement)
                timings["collect"] = (time.perf_counter() - t0) * 1000
                t1 = time.perf_counter()
                html = await asyncio.to_thread(render_html, report)
                body = render_json(report)
                timings["render"] = (time.perf_counter() - t1) * 1000
            except ReportError as exc:
                await self._fail(report_id, str(exc))
                return "failed"
            except Exception as exc:
                log.exception("report %s of evaluation %s failed", report_id, evaluation_id)
                await self._fail(report_id, f"{type(exc).__name__}: {exc}"[:2000])
                return "failed"
            pdf, pdf_error = None, None
            if self._render_pdf:
                t2 = time.perf_counter()
                try:
                    pdf = await html_to_pdf(html)
                except PdfUnavailable as exc:
                    pdf_error = str(exc)
                    log.warning("report %s: no PDF: %s", report_id, exc)
                timings["pdf"] = (time.perf_counter() - t2) * 1000
            else:
                pdf_error = "PDF rendering is off (UEP_REPORT_PDF=false)"
            await self._store_report(report, html.encode(), body, pdf, pdf_error, timings)
            if self._on_written:
                self._on_written()
            log.info(
                "report %s of evaluation %s ready (%s)",
                report_id,
                evaluation_id,
                ", ".join(f"{k} {v:.0f} ms" for k, v in timings.items()),
            )
            instruments.observe_report("ready", time.perf_counter() - t0)
            return "ready"

    async def _fail(self, report_id: uuid.UUID, error: str) -> None:
        instruments.observe_report("failed")
        async with self._sessionmaker() as session, session.begin():
            row = await session.get(ReportRow, report_id)
            if row is not None:
                row.status, row.error, row.completed_at = "failed", error, datetime.now(UTC)

    async def _store_report(
        self, report: Report, html: bytes, body: bytes, pdf: bytes | None, pdf_error: str | None, timings: dict[str, Any]
    ) -> None:
        ev_id = report.evaluation.id
        async with self._sessionmaker() as session, session.begin():
            ev = await session.get(Evaluation, ev_id)
            files = {
                "html": await self._store.put(session, html, "text/html", ev_id, "report_html"),
                "json": await self._store.put(session, body, "application/json", ev_id, "report_json"),
            }
            if pdf is not None:
                files["pdf"] = await self._store.put(session, pdf, "application/pdf", ev_id, "report_pdf")
            await session.execute(
                pg_insert(ReportRow)
                .values(id=report.report_id, evaluation_id=ev_id, status="pending", trigger="request")
                .on_conflict_do_nothing(index_elements=["id"])
            )
            row = await session.get(ReportRow, report.report_id)
            assert row is not None  # inserted just above if it was missing
            assert ev is not None  # the report row's evaluation (a foreign key)
            row.status = "ready"
            row.schema_version = REPORT_SCHEMA_VERSION
            row.baseline_evaluation_id = report.comparison.baseline.evaluation_id if report.comparison else None
            row.html_artifact_id = files["html"].id
            row.json_artifact_id = files["json"].id
            row.pdf_artifact_id = files["pdf"].id if "pdf" in files else None
            row.pdf_error = pdf_error
            row.build_ms = {k: round(v, 1) for k, v in timings.items()}
            row.completed_at = datetime.now(UTC)
            add_to_outbox(
                session,
                ReportReady(
                    evaluation_id=ev_id,
                    tenant_id=ev.tenant_id,
                    report_id=report.report_id,
                    report_schema_version=REPORT_SCHEMA_VERSION,
                    baseline_evaluation_id=row.baseline_evaluation_id,
                    formats=list(files),
                    artifacts={f: a.sha256 for f, a in files.items()},
                    links={f: p for f, p in links(ev_id).items() if f in files},
                ),
                trace_headers=ev.trace_context or {},
            )


def register_report_handlers(
    broker: KafkaBroker, settings: ReporterSettings, sessionmaker: async_sessionmaker[AsyncSession], relay: OutboxRelay | None
) -> ReportWriter:
    """Subscribe the report writer to EvaluationCompleted (group ``<prefix>.reporter-reports``) and
    ReportRequested (group ``<prefix>.reporter-report-requests``), and declare the ReportReady publisher.

    Both handlers are idempotent: a completion report is written once per evaluation, a requested report
    fills its pending row once. A database failure raises, so the event is redelivered.
    """
    writer = ReportWriter(
        sessionmaker,
        artifact_store(settings),
        render_pdf=settings.report_pdf,
        on_written=relay.kick if relay is not None else None,
        judge_min_agreement=settings.judge_min_agreement,
    )
    broker.publisher(Topics.REPORT_READY, schema=ReportReady, title="ReportReady")

    if settings.reports_enabled:
        subscribe_completed: Subscribe = broker.subscriber(
            Topics.EVALUATION_COMPLETED,
            **consumer_options(settings, "reporter-reports"),
            ack_policy=AckPolicy.NACK_ON_ERROR,
            title="reporter:EvaluationCompleted",
            description="Writes the report (HTML, JSON, PDF) of an evaluation that ended.",
        )

        @subscribe_completed
        @consume(
            broker,
            EvaluationCompleted,
            span="report on completion",
            attributes=lambda e: {"uep.evaluation_id": str(e.evaluation_id)},
        )
        async def on_completed(event: EvaluationCompleted) -> None:
            if event.status.value in REPORTED_STATUSES:
                await writer.on_completed(event.evaluation_id)

    subscribe_requested: Subscribe = broker.subscriber(
        Topics.REPORT_REQUESTED,
        **consumer_options(settings, "reporter-report-requests"),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="reporter:ReportRequested",
        description="Writes a report requested through POST /v1/evaluations/{id}/reports.",
    )

    @subscribe_requested
    @consume(broker, ReportRequested, span="report on request", attributes=lambda e: {"uep.report_id": str(e.report_id)})
    async def on_requested(event: ReportRequested) -> None:
        async with sessionmaker() as session:
            status = await session.scalar(select(ReportRow.status).where(ReportRow.id == event.report_id))
        if status == "pending":
            await writer.build(event.report_id, event.evaluation_id, event.baseline_evaluation_id)

    return writer
