"""Reporter settings (``UEP_*`` environment variables)."""

from typing import Literal

from pydantic import Field

from uep_common.analytics.judge_standing import JudgeCalibrationSettings
from uep_common.runtime.artifacts import ArtifactSettings
from uep_common.runtime.outbox_retention import OutboxRetentionSettings

VacuumMode = Literal["auto", "on", "off"]
"""When the reporter's vacuum worker runs (:mod:`uep_reporter.vacuuming`)."""


class ReporterSettings(ArtifactSettings, OutboxRetentionSettings, JudgeCalibrationSettings):
    """Settings of the reporter service (with the artifact store's, ``UEP_ARTIFACT_*``, and the judge
    calibration threshold, ``UEP_JUDGE_MIN_AGREEMENT``)."""

    service_name: str = "reporter"
    reporter_batch_size: int = Field(500, ge=1, description="ScoreComputed events stored per transaction.")
    reporter_batch_timeout_ms: int = Field(
        1000,
        ge=1,
        description="Longest wait of one empty poll of the ScoreComputed consumer (uep_common.runtime.batch_polling.get_batch): "
        "scores are taken as soon as they are there, so this sets only how often an empty loop wakes.",
    )
    stop_loss_error_rate: float = Field(
        0.5, ge=0, le=1, description="An evaluation whose error rate exceeds this stops itself (failed)..."
    )
    stop_loss_min_items: int = Field(20, ge=1, description="... once at least this many results are in.")
    report_pdf: bool = Field(True, description="Render each report's PDF with headless Chromium.")
    reports_enabled: bool = Field(True, description="Write a report when an evaluation completes.")
    retention_keep_last: int = Field(20, ge=1, description="Evaluations whose per-item details are kept per benchmark and model.")
    retention_enabled: bool = Field(True, description="Run the periodic retention cleanup.")
    retention_interval_s: float = Field(3600.0, gt=0, description="Seconds between periodic retention runs.")
    retention_initial_delay_s: float = Field(300.0, ge=0, description="Seconds after start-up before the first periodic run.")
    retention_poll_s: float = Field(
        30.0,
        gt=0,
        description="Seconds between checks for runs requested through the API when no notification came (the "
        "gateway's NOTIFY wakes the worker at once; this is the backstop for one sent while its listener reconnected).",
    )
    compaction_enabled: bool = Field(True, description="Run the periodic compaction of ended evaluations.")
    compaction_grace_s: float = Field(
        600.0,
        ge=0,
        description="Seconds after an evaluation ended (and after a lease was released) before compaction deletes "
        "the leases it no longer needs and folds its spend-ledger rows.",
    )
    compaction_interval_s: float = Field(60.0, gt=0, description="Seconds between compaction rounds.")
    compaction_batch_size: int = Field(
        2000, ge=1, description="Leases deleted, and ledger rows folded, per compaction transaction (each at most)."
    )
    compaction_max_batches: int = Field(50, ge=1, description="Compaction transactions per round (the rest next round).")
    vacuum_mode: VacuumMode = Field(
        "auto",
        description="Vacuum and analyze uep's tables by autovacuum's rules: 'auto' only while the server's "
        "autovacuum is off, 'on' always, 'off' never (uep_reporter.vacuuming).",
    )
    vacuum_interval_s: float = Field(10.0, gt=0, description="Seconds between vacuum rounds.")
    vacuum_max_tables: int = Field(8, ge=1, description="Tables vacuumed or analyzed per round, the most overdue first.")
    leaderboard_reconcile_s: float = Field(
        30.0, gt=0, description="Seconds between backstop passes recording missed leaderboard scores."
    )
