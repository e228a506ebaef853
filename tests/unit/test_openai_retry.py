"""The OpenAI-compatible backend over real HTTP: rate limits and server errors are retried after the endpoint's
``Retry-After`` (bounded), a rate limit that persists reaches the scheduler's AIMD as ``rate_limited``, every
stop string is honoured; and the end of an evaluation cuts its item's retries short.

The endpoint is a ``http.server`` in the test process answering a script of responses (the real protocol,
no transport stub). Expected values are by hand from RFC 9110 §10.2.3 (``Retry-After``: seconds or an
HTTP-date) and OpenAI's API reference (``stop``: at most 4 strings, the text ends before the first).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from uep_common.contract.events import ModelTarget
from uep_inference.backends import Backends
from uep_inference.backends.openai_compatible import MAX_STOP, retry_after_seconds, truncate_at_stop
from uep_inference.ended import EndedEvaluations, ItemWatch
from uep_inference.service import NOT_CALLED, TRANSIENT, call_model
from uep_inference.settings import InferenceSettings
from uep_scheduler.capacity import OVERLOAD_ERRORS

Reply = tuple[int, dict[str, str], dict]
"""(status, headers, JSON body) of one scripted answer."""


def _ok(text: str = "4") -> Reply:
    return 200, {}, {"choices": [{"message": {"content": text}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


class Endpoint:
    """A local OpenAI-compatible HTTP server answering ``script`` in order (the last answer repeats); records
    each request's JSON body and arrival time; ``on_request`` runs in the server thread after each one."""

    def __init__(self, script: list[Reply], on_request: Callable[[int], None] | None = None) -> None:
        self.script, self.on_request = script, on_request
        self.bodies: list[dict] = []
        self.times: list[float] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the name http.server dispatches to
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                n = len(endpoint.bodies)
                endpoint.bodies.append(body)
                endpoint.times.append(time.monotonic())
                status, headers, answer = endpoint.script[min(n, len(endpoint.script) - 1)]
                data = json.dumps(answer).encode()
                self.send_response(status)
                for k, v in {"content-type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                if endpoint.on_request is not None:
                    endpoint.on_request(n)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Endpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def backends() -> Backends:
    """One instance of every backend; each test closes it (``_call``)."""
    return Backends(InferenceSettings())


def _target(url: str) -> ModelTarget:
    return ModelTarget(model_id=uuid.UUID(int=1), name="m", backend="openai_compatible", endpoint=url)


async def _call(endpoint: Endpoint, backends: Backends, **kw) -> object:
    args = {"max_attempts": 3, "backoff_s": 0.0} | kw
    try:
        return await call_model(_target(endpoint.url), "2+2?", 8, [], True, backends, 5.0, None, **args)
    finally:
        await backends.close()


async def test_a_429_with_retry_after_is_retried_after_the_wait_and_succeeds(backends):
    with Endpoint([(429, {"Retry-After": "1"}, {"error": "rate limited"}), _ok()]) as ep:
        call = await _call(ep, backends)
    assert call.error is None and call.generation.text == "4" and call.attempts == 2
    assert call.throttled is True  # carried on OutputGenerated and ScoreComputed: the scheduler's AIMD halves the limit
    assert len(ep.bodies) == 2
    assert ep.times[1] - ep.times[0] >= 0.9  # Retry-After: 1 honoured (the jittered backoff alone is 0 here)


async def test_a_retry_after_date_is_honoured_and_a_long_one_is_bounded(backends):
    later = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)  # an HTTP-date an hour ahead
    with Endpoint([(503, {"Retry-After": later}, {"error": "down"}), _ok("5")]) as ep:
        call = await _call(ep, backends, max_retry_after_s=0.2)  # unbounded, the retry would wait an hour
    assert call.error is None and call.generation.text == "5" and call.attempts == 2


async def test_a_persistent_rate_limit_fails_as_rate_limited_which_the_aimd_counts(backends):
    with Endpoint([(429, {"Retry-After": "0"}, {"error": "rate limited"})]) as ep:
        call = await _call(ep, backends)
    assert len(ep.bodies) == 3 and call.attempts == 3
    assert call.error.type == "rate_limited" and call.error.message.endswith("(after 3 attempts)")
    assert "rate_limited" in TRANSIENT and "rate_limited" in OVERLOAD_ERRORS  # the scheduler halves the model's limit


async def test_server_errors_are_transient_and_client_errors_are_not(backends):
    with Endpoint([(502, {}, {"error": "bad gateway"}), (500, {}, {"error": "oops"}), _ok()]) as ep:
        call = await _call(ep, Backends(InferenceSettings()))
    assert call.error is None and call.attempts == 3
    with Endpoint([(400, {}, {"error": "bad request"})]) as ep:
        call = await _call(ep, backends)
    assert len(ep.bodies) == 1 and call.error.type == "openai_http_error" and "HTTP 400" in call.error.message


async def test_every_stop_string_is_honoured(backends):
    stops = ["\n\n", "Q:", "###", "END", "Answer:", "Human:"]  # six: the server is sent the first four
    with Endpoint([_ok("42 is it. Human: more? ### tail")]) as ep:
        call = await call_model(_target(ep.url), "p", 8, stops, True, backends, 5.0)
        await backends.close()
    assert ep.bodies[0]["stop"] == stops[:MAX_STOP]
    # the server ignored "###" here; the client cuts at the earliest of all six ("Human:" at 10)
    assert call.generation.text == "42 is it. "
    assert call.throttled is False  # answered at the first attempt


def test_truncate_at_stop_cuts_at_the_earliest_stop():
    assert truncate_at_stop("a b c", ("c", "b")) == "a "
    assert truncate_at_stop("abc", ("", "x")) == "abc"
    assert truncate_at_stop("stop", ("stop",)) == ""


def test_retry_after_values():
    now = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds(" 1.5 ", now) == 1.5
    assert retry_after_seconds("Sat, 01 Mar 2025 12:00:30 GMT", now) == 30.0  # RFC 9110 IMF-fixdate
    assert retry_after_seconds("Saturday, 01-Mar-25 12:01:00 GMT", now) == 60.0  # obsolete RFC 850 form
    assert retry_after_seconds("Sat, 01 Mar 2025 11:00:00 GMT", now) == 0.0  # in the past: no wait
    assert retry_after_seconds("-5", now) == 0.0
    assert retry_after_seconds(None, now) is None
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds("nan", now) is None


# --- the end of an evaluation cuts its items' retries short ---------------------------------------------


async def test_a_stop_during_the_backoff_ends_the_retries_and_no_new_attempt_starts(backends):
    """The endpoint fails the first call with 503 and Retry-After: 30; the evaluation ends (as the
    EvaluationCompleted of a stop, recorded from the server thread) right after that call. The item ends
    with that call's error at once, without waiting the 30 s or calling again."""
    ended, evaluation = EndedEvaluations(), uuid.uuid4()
    loop = asyncio.get_running_loop()
    published = datetime.now(UTC)

    def stop_after_first(n: int) -> None:
        if n == 0:
            loop.call_soon_threadsafe(ended.record, evaluation, "stopped", datetime.now(UTC))

    with Endpoint([(503, {"Retry-After": "30"}, {"error": "busy"}), _ok()], stop_after_first) as ep:
        call = await _call(ep, backends, watch=ItemWatch(ended, evaluation, published))
    assert len(ep.bodies) == 1 and call.attempts == 1 and call.ended == "stopped"
    assert call.error.type == "openai_unavailable"
    assert call.error.message.endswith("(no further attempt: the evaluation was stopped)")


async def test_an_item_of_an_evaluation_ended_before_its_call_is_not_called(backends):
    ended, evaluation = EndedEvaluations(), uuid.uuid4()
    published = datetime.now(UTC)
    ended.record(evaluation, "cancelled", published + timedelta(seconds=1))
    with Endpoint([_ok()]) as ep:
        call = await _call(ep, backends, watch=ItemWatch(ended, evaluation, published))
    assert ep.bodies == [] and call.attempts == 0 and call.ended == "cancelled"
    assert call.error.type == NOT_CALLED and call.generation is None


async def test_an_item_published_after_the_end_runs(backends):
    """A retried evaluation's items (or a redriven one) are published after its end: they run."""
    ended, evaluation = EndedEvaluations(), uuid.uuid4()
    end = datetime.now(UTC)
    ended.record(evaluation, "stopped", end)
    with Endpoint([_ok()]) as ep:
        call = await _call(ep, backends, watch=ItemWatch(ended, evaluation, end + timedelta(milliseconds=5)))
    assert len(ep.bodies) == 1 and call.error is None and call.ended is None


def test_ended_evaluations_keep_the_latest_end_and_a_bounded_number():
    ended = EndedEvaluations(max_entries=2)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    ended.record(a, "stopped", t0 + timedelta(seconds=10))
    ended.record(a, "cancelled", t0)  # an older end arriving late changes nothing
    assert ended.ended_since(a, t0 + timedelta(seconds=5)) == "stopped"
    assert ended.ended_since(a, t0 + timedelta(seconds=11)) is None  # published after that end
    ended.record(b, "completed", t0)
    ended.record(c, "failed", t0)  # a third: the least recently ended (a) is forgotten
    assert ended.ended_since(a, t0) is None and ended.ended_since(c, t0) == "failed"
