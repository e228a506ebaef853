"""``uep-scheduler``: the scheduler service process (health on port 8091 by default)."""

from faststream.asgi import AsgiFastStream

from uep_common.runtime.outbox import OutboxRelay
from uep_common.runtime.service import ServiceRuntime, build_app, serve
from uep_common.runtime.wakeups import WaitingListener
from uep_scheduler.instruments import sample_database
from uep_scheduler.lifecycle import install as install_lifecycle
from uep_scheduler.service import Scheduler, register
from uep_scheduler.settings import SchedulerSettings

DEFAULT_PORT = 8091


def create_app() -> tuple[AsgiFastStream, SchedulerSettings]:
    """Build the scheduler's FastStream ASGI app (with its outbox relay and reconcile loop)."""
    settings = SchedulerSettings()
    runtime = ServiceRuntime(settings, use_db=True)
    assert runtime.sessionmaker is not None  # use_db=True
    relay = OutboxRelay.from_settings(runtime.sessionmaker, runtime.broker, settings)
    scheduler = Scheduler(runtime.sessionmaker, relay, settings)
    register(runtime.broker, settings, scheduler)
    lifecycle = install_lifecycle(runtime, relay)  # dead-letter consumer; instance registry, interrupt on restart
    lifecycle.exhaust_interval = scheduler.tick  # parked leases exist only while evaluations run
    listener = WaitingListener(settings.database_url, scheduler.request_admission)  # admission on the gateway's NOTIFY

    async def start_loops() -> None:
        relay.start()
        await lifecycle.start()  # before the dispatch loop: interrupt what was running when no other replica lives
        scheduler.start()
        listener.start()

    async def stop_loops() -> None:
        await listener.stop()
        await scheduler.stop()
        await lifecycle.stop()
        await relay.stop()

    samplers = [sample_database(runtime.sessionmaker)]  # queue depths, leases, AIMD limits, outbox, budgets
    return build_app(runtime, on_startup=[start_loops], on_shutdown=[stop_loops], samplers=samplers), settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
