"""A stop ends the retries of its evaluation's items on the real stack; a retry of the evaluation runs them.

The model is an OpenAI-compatible endpoint served by this test process (``http.server``): its first answer is
a 503 asking to wait 60 s (``Retry-After``), every later one a 200 with the text ``42``. The inference service
retries a 503 after the wait it asked for (``uep_inference.backends.openai_compatible.check_status``); the
stop, seen by every inference replica as the evaluation's EvaluationCompleted (``uep_inference.ended``), ends
that wait at once, and the item ends with the 503's error — not called again, not dead-lettered.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sqlalchemy import text

from .helpers import submit
from .lifecycle_helpers import counts, wait_for, wait_status


class FlakyEndpoint:
    """``POST /v1/chat/completions``: the first request gets 503 + ``Retry-After: 60``, later ones 200."""

    def __init__(self) -> None:
        self.requests = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the name http.server dispatches to
                self.rfile.read(int(self.headers["content-length"]))
                endpoint.requests += 1
                if endpoint.requests == 1:
                    status, headers, body = 503, {"Retry-After": "60"}, {"error": "overloaded"}
                else:
                    status, headers, body = 200, {}, {"choices": [{"message": {"content": "42"}}]}
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in {"content-type": "application/json", "content-length": str(len(data)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _register_openai_model(db, endpoint: str) -> str:
    name = f"flaky-openai-{uuid.uuid4().hex[:8]}"
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO models (id, name, version, description, backend, endpoint, decoding_defaults, "
                "supports_logprobs, max_in_flight) VALUES (:id, :n, '1', 'registered by a test', 'openai_compatible', "
                ":ep, '{}', false, 1)"
            ),
            {"id": uuid.uuid4(), "n": name, "ep": endpoint},
        )
    return name


def _item_error(db, evaluation_id: str) -> dict | None:
    with db.connect() as c:
        return c.execute(text("SELECT error FROM sample_results WHERE evaluation_id = :e"), {"e": evaluation_id}).scalar()


def test_stop_ends_the_retries_of_an_item_and_retry_runs_it(gateway, db):
    ep = FlakyEndpoint()
    try:
        model = _register_openai_model(db, ep.url)
        evaluation_id = submit(gateway, benchmark="gsm8k", model=model, sample_limit=1, max_in_flight=1)
        wait_for("the first call", lambda: ep.requests >= 1, 30)
        r = gateway.post(f"/v1/evaluations/{evaluation_id}/stop")
        assert r.status_code == 200, r.text
        # the item ends with the 503 well before the 60 s the endpoint asked for, without a second call
        wait_for("the item's result", lambda: counts(db, evaluation_id)["results"] == 1, 40)
        error = _item_error(db, evaluation_id)
        assert error["type"] == "openai_unavailable" and "HTTP 503" in error["message"]
        assert error["message"].endswith("(no further attempt: the evaluation was stopped)")
        assert ep.requests == 1
        letters = gateway.get("/v1/dead-letters", params={"evaluation_id": evaluation_id}).json()["items"]
        assert letters == []  # an item cut short by its evaluation's end is not a model failure

        # a retry dispatches the item again, after the end: it runs (and the endpoint now answers)
        r = gateway.post(f"/v1/evaluations/{evaluation_id}/retry")
        assert r.status_code == 202, r.text
        final = wait_status(gateway, evaluation_id, ("completed", "failed"), 40)
        assert final["status"] == "completed" and ep.requests == 2
        with db.connect() as c:
            output = c.execute(text("SELECT output FROM sample_results WHERE evaluation_id = :e"), {"e": evaluation_id}).scalar()
        assert output == "42"
    finally:
        ep.close()
