"""Scheduler settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.settings import CommonSettings


class SchedulerSettings(CommonSettings):
    """Settings of the scheduler service."""

    service_name: str = "scheduler"
    max_in_flight_per_evaluation: int = Field(
        16, ge=1, description="Items of one evaluation leased and not yet scored, at most."
    )
    lease_seconds: float = Field(
        300.0, gt=0, description="An item not scored this long after dispatch is dispatched again."
    )
    tick_seconds: float = Field(1.0, gt=0, description="Period of the reconcile loop (top-ups, expired leases).")
    admit_pending_after_seconds: float = Field(
        5.0, ge=0, description="Admit a pending evaluation whose EvaluationRequested was not seen after this long."
    )
