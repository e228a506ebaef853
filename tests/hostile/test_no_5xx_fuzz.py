"""Property-based fuzzing of the whole REST API on the real stack: no request, however malformed, answers 5xx.

Schemathesis loads the gateway's own ``/openapi.json``; for every operation, Hypothesis draws a small bounded
number of requests from schemathesis's strategies — schema-conforming (positive) and schema-violating
(negative) bodies, path and query parameters — and each answer is checked with schemathesis's
``not_a_server_error``. Every operation is run and every failure collected, then reported together.

The requests act for a tenant of their own (``X-UEP-Tenant: fuzz``) in pre-auth mode (the builder role),
so what they may change — that tenant's caps, annotators, dry-run retention — leaves the other tests'
tenant and the site's settings alone (site-wide changes need the admin role and answer 403 here).

Bounded for 2 CPU cores: ``UEP_FUZZ_MAX_EXAMPLES`` (default 6) cases per operation and mode, a 10 s
deadline per case, a fixed seed (``derandomize``) so that a run repeats. About 60 operations × 12 cases.

(Schemathesis's own pytest integration, ``schemathesis.pytest.from_fixture``, needs the schema from a
fixture — the stack starts in one — and breaks on pytest 9, which has no ``Item._nodeid``; hence the
strategies are driven here directly.)
"""

from __future__ import annotations

import os
from datetime import timedelta

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from sqlalchemy import text

FUZZ_TENANT = "fuzz"
FUZZ_MAX_EXAMPLES = int(os.environ.get("UEP_FUZZ_MAX_EXAMPLES", "6"))


def _run_operation(operation, mode: GenerationMode, base_url: str) -> tuple[int, list[str]]:
    """Send up to ``FUZZ_MAX_EXAMPLES`` generated requests of ``mode`` to ``operation``; returns (cases sent,
    failures as ``"METHOD /path: what"``)."""
    sent, failures = 0, []

    @settings(
        max_examples=FUZZ_MAX_EXAMPLES,
        deadline=timedelta(seconds=10),
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(case=operation.as_strategy(generation_mode=mode, headers={"X-UEP-Tenant": FUZZ_TENANT}))
    def run(case) -> None:
        nonlocal sent
        sent += 1
        response = case.call(base_url=base_url, timeout=30)
        case.validate_response(response, checks=[not_a_server_error])

    try:
        run()
    except Unsatisfiable:
        pass  # no request of this mode exists (negative mode of an operation without parameters or body)
    except Exception as exc:  # noqa: BLE001 - every operation runs; each failure is reported below
        failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {str(exc)[:2000]}")
    return sent, failures


def test_no_operation_answers_5xx(stack, db):
    with db.begin() as c:
        c.execute(
            text("INSERT INTO tenants (id, slug, name) VALUES (gen_random_uuid(), :s, 'fuzzing') ON CONFLICT (slug) DO NOTHING"),
            {"s": FUZZ_TENANT},
        )
    schema = schemathesis.openapi.from_url(f"{stack.gateway_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 40  # the whole API, not an empty document
    total, failures = 0, []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            sent, failed = _run_operation(operation, mode, stack.gateway_url)
            total += sent
            failures += failed
    print(f"schemathesis: {len(operations)} operations, {total} requests, {len(failures)} failing")
    assert total >= len(operations)  # every operation got requests
    assert failures == [], "\n\n".join(failures)
