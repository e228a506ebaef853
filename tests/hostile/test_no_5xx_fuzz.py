"""Property-based fuzzing of the whole REST API on the real stack: no request, however malformed, answers 5xx,
and every answer conforms to the published contract.

Schemathesis loads the gateway's own ``/openapi.json``; for every operation, Hypothesis draws a bounded
number of requests from schemathesis's strategies — schema-conforming (positive) and schema-violating
(negative) bodies, path, query and header parameters — and each answer is checked with schemathesis's
``not_a_server_error``, ``status_code_conformance`` (the status is documented), ``content_type_conformance``
(its content type is documented) and ``response_schema_conformance`` (the body matches the documented
schema: errors are the shared ``Error`` shape). Every operation is run and every failure collected, then
reported together.

Two passes, each acting for a tenant of its own (``X-UEP-Tenant: fuzz``) so that what they may change —
that tenant's caps, annotators, keys — leaves the other tests' tenant and the site's settings alone:

- **admin**: the stack's bootstrap key (admin of ``default``, a site admin, here naming tenant ``fuzz``
  and so acting as its admin). ``X-UEP-Site-Admin`` is removed from every generated case: the fuzz never
  acts across tenants (site-wide changes answer 403).
- **viewer**: viewer keys of ``fuzz`` (most writes answer 403). The viewer's read rate in the test stack is
  low (``tests/conftest.py``), so the cases rotate over several keys.

Bounded for 2 CPU cores: ``UEP_FUZZ_MAX_EXAMPLES`` (default 25) cases per operation in the admin pass and
``UEP_FUZZ_VIEWER_EXAMPLES`` (default 6) in the viewer pass, each half positive and half negative; a 10 s
deadline per case; a fixed seed (``derandomize``) so that a run repeats; the operations are shared among
``UEP_FUZZ_WORKERS`` (default 3) processes, so that drawing cases overlaps the gateway's answers.

(Schemathesis's own pytest integration, ``schemathesis.pytest.from_fixture``, needs the schema from a
fixture — the stack starts in one — and breaks on pytest 9, which has no ``Item._nodeid``; hence the
strategies are driven here directly.)
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    FailureGroup,
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import text

from uep_common.admin import create_api_key

FUZZ_TENANT = "fuzz"
FUZZ_MAX_EXAMPLES = int(os.environ.get("UEP_FUZZ_MAX_EXAMPLES", "25"))
VIEWER_MAX_EXAMPLES = int(os.environ.get("UEP_FUZZ_VIEWER_EXAMPLES", "6"))
WORKERS = int(os.environ.get("UEP_FUZZ_WORKERS", "3"))
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
SITE_HEADER = "x-uep-site-admin"


def _run_operation(
    operation, mode: GenerationMode, base_url: str, keys, max_examples: int, statuses: Counter
) -> tuple[int, list[str]]:
    """Send up to ``max_examples`` generated requests of ``mode`` to ``operation``, each with the next key of
    ``keys``; returns (cases sent, failures as ``"METHOD /path (mode): what"``). ``statuses`` counts the
    answers' status codes."""
    sent, failures = 0, []

    @settings(
        max_examples=max_examples,
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
        if case.headers:
            for name in [n for n in case.headers if n.lower() == SITE_HEADER]:
                del case.headers[name]
        headers = {"Authorization": f"Bearer {next(keys)}"}
        response = case.call(base_url=base_url, headers=headers, timeout=30)
        statuses[response.status_code] += 1
        case.validate_response(response, checks=CHECKS, headers=headers)

    try:
        run()
    except Unsatisfiable:
        pass  # no request of this mode exists (negative mode of an operation without parameters or body)
    except (Exception, FailureGroup) as exc:  # noqa: BLE001 - every operation runs; each failure is reported below
        failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {str(exc)[:2000]}")
    return sent, failures


def _fuzz_share(base_url: str, share: int, keys: list[str], examples: int) -> tuple[int, list[str], Counter]:
    """One worker process: fuzz every ``WORKERS``-th operation from ``share`` with ``examples`` cases in all
    (half positive, half negative), rotating over ``keys``; returns (cases, failures, status counts)."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()][share::WORKERS]
    per_mode = {MODES[0]: examples - examples // 2, MODES[1]: max(1, examples // 2)}
    cycle = itertools.cycle(keys)
    total, failures, statuses = 0, [], Counter()
    for operation in operations:
        for mode in MODES:
            sent, failed = _run_operation(operation, mode, base_url, cycle, per_mode[mode], statuses)
            total += sent
            failures += failed
    return total, failures, statuses


def _fuzz(base_url: str, keys: list[str], examples: int, label: str) -> list[str]:
    """Fuzz every operation of the gateway's schema in ``WORKERS`` processes (Hypothesis is not thread-safe;
    processes also let drawing cases overlap the gateway's answers); returns the failures."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    count = len(list(schema.get_all_operations()))
    assert count >= 60  # the whole API, not an empty document
    started = time.monotonic()
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("fork")) as pool:
        shares = range(WORKERS)
        results = list(pool.map(_fuzz_share, [base_url] * WORKERS, shares, [keys] * WORKERS, [examples] * WORKERS))
    total = sum(r[0] for r in results)
    failures = [f for r in results for f in r[1]]
    statuses = sum((r[2] for r in results), Counter())
    print(
        f"\nschemathesis ({label}): {count} operations, {total} requests in {time.monotonic() - started:.0f} s, "
        f"{len(failures)} failing; statuses {dict(sorted(statuses.items()))}"
    )
    assert total >= count  # every operation got requests
    return failures


def _fuzz_tenant(db) -> None:
    with db.begin() as c:
        c.execute(
            text("INSERT INTO tenants (id, slug, name) VALUES (gen_random_uuid(), :s, 'fuzzing') ON CONFLICT (slug) DO NOTHING"),
            {"s": FUZZ_TENANT},
        )


def test_no_operation_answers_5xx_or_off_contract_as_admin(stack, db, admin_key):
    _fuzz_tenant(db)
    failures = _fuzz(stack.gateway_url, [admin_key], FUZZ_MAX_EXAMPLES, "admin")
    assert failures == [], "\n\n".join(failures)


def test_no_operation_answers_5xx_or_off_contract_as_viewer(stack, db):
    _fuzz_tenant(db)
    keys = [create_api_key(stack.database_url, FUZZ_TENANT, "viewer", name=f"fuzz viewer {i}") for i in range(6)]
    failures = _fuzz(stack.gateway_url, keys, VIEWER_MAX_EXAMPLES, "viewer")
    assert failures == [], "\n\n".join(failures)
