"""Scheduler settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.runtime.outbox_retention import OutboxRetentionSettings


class SchedulerSettings(OutboxRetentionSettings):
    """Settings of the scheduler service."""

    service_name: str = "scheduler"
    max_in_flight_per_evaluation: int = Field(
        16, ge=1, description="Items of one evaluation leased and not yet scored, at most, unless it sets max_parallel."
    )
    max_in_flight_global: int = Field(
        512, ge=1, description="Items leased and not yet scored across every evaluation and model, at most."
    )
    max_evaluation_share: float = Field(
        0.5, gt=0, le=1, description="Share of max_in_flight_global one evaluation may hold (ceil(share × global))."
    )
    model_lease_factor: float = Field(
        1.0,
        gt=0,
        description="Leases per model at most this × its registered capacity (models.max_in_flight), across every "
        "evaluation and scheduler replica; > 1 keeps items queued at inference while results travel back.",
    )
    model_queue_seconds: float = Field(
        1.0,
        ge=0,
        description="Work kept queued at inference per model, in seconds of the model's recent call time: that many "
        "more leases than slots (at most 64 per slot), so a slot that frees takes the next item at once instead of "
        "idling while a score travels back and a new lease out. A new urgent evaluation waits behind at most this "
        "much queued work; tenants still share the model's calls equally (the fair queue decides every lease). "
        "0: leases = slots, an exact bound across inference replicas (uep_scheduler.capacity).",
    )
    default_model_capacity: int = Field(
        4,
        ge=0,
        le=1024,
        description="Serving capacity assumed for a model the registry gives none (models.max_in_flight null): its "
        "lease bound, its calls at once at inference and the ceiling its adaptive limit starts from and halves on "
        "overload, so an unknown endpoint under load backs off instead of timing out item after item. 0: such a "
        "model is unbounded.",
    )
    adaptive_concurrency: bool = Field(
        True, description="Additive increase / multiplicative decrease of a model's limit on transient errors."
    )
    aging_seconds: float = Field(
        30.0, gt=0, description="A runnable evaluation with no slot for this long is served next (aging)."
    )
    lease_seconds: float = Field(300.0, gt=0, description="An item not scored this long after dispatch is dispatched again.")
    outbox_claim_seconds: float = Field(
        5.0,
        gt=0,
        description="The scheduler publishes its SampleDispatched rows itself right after the pass commits; outbox "
        "relays take over a row still unpublished this long after the pass (the scheduler died in between).",
    )
    orphan_grace_seconds: float = Field(
        60.0,
        gt=0,
        description="An item whose score the scheduler saw but whose result is not stored this long after "
        "(and whose lease has expired) is dispatched again: its ScoreComputed was lost before the reporter stored it.",
    )
    orphan_sweep_seconds: float = Field(
        15.0,
        gt=0,
        description="Period of the sweep for such items (a reconcile pass); each looks only at leases released since "
        "the previous sweep, so its cost follows the throughput, not the evaluations' sizes.",
    )
    orphan_full_sweep_seconds: float = Field(
        600.0,
        gt=0,
        description="Period of a sweep over every released lease of the running evaluations (also the first after a "
        "start): the backstop of the windowed sweeps.",
    )
    refill_fraction: float = Field(
        0.25,
        ge=0,
        le=1,
        description="Released leases wake the allocator once they are this share of the leases open after the last "
        "pass (at least one): a pass costs a transaction of about fifteen statements whatever it leases, so under "
        "load passes come fewer and larger while the items still queued at inference keep the models busy. 0: "
        "every released batch wakes it.",
    )
    refill_delay_s: float = Field(
        0.5,
        gt=0,
        description="Longest wait, after a lease is released, for the pass that refills it when fewer than "
        "refill_fraction have been released.",
    )
    tick_seconds: float = Field(1.0, gt=0, description="Period of the reconcile loop (allocation, expired leases, schedules).")
    idle_tick_seconds: float = Field(
        5.0,
        gt=0,
        description="Period of the reconcile loop while no evaluation is running or pending (admissions and results "
        "wake the allocator at once either way; due cron runs start up to this late).",
    )
    scores_batch_timeout_ms: int = Field(
        1000,
        ge=1,
        description="Longest wait of one empty poll of the ScoreComputed consumer (uep_common.runtime.batch_polling.get_batch): "
        "a batch is taken as soon as scores are there, so this sets only how often an empty loop wakes.",
    )
    admit_pending_after_seconds: float = Field(
        5.0, ge=0, description="Admit a pending evaluation whose EvaluationRequested was not seen after this long."
    )
