"""The gateway's metrics and log context: requests per templated route, their duration and errors, rate-limit
refusals, ``GET /metrics``, and the tenant and evaluation of each request on its log lines.

Routes are labelled with their template (``request.scope["route"].path``, e.g.
``/v1/evaluations/{evaluation_id}``), never the raw path, so no id becomes a label value; a request that no
route matched is labelled ``<unmatched>``, one answered by a mounted app (static files) ``<mount>``.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import Request, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uep_common.runtime import logs, metrics

REQUESTS = metrics.counter(
    "uep_gateway_requests_total",
    "HTTP requests answered, by method, templated route and status code.",
    ("method", "route", "status"),
)
REQUEST_SECONDS = metrics.histogram(
    "uep_gateway_request_seconds",
    "Time from a request's arrival to the end of its answer, by method and templated route.",
    ("method", "route"),
    buckets=metrics.HTTP_BUCKETS,
)
RATE_LIMITED = metrics.counter(
    "uep_gateway_rate_limited_total", "Requests refused with 429 by a rate limit, by templated route.", ("route",)
)


def route_label(scope: Scope) -> str:
    """The templated path of the route that answered ``scope`` (see the module docstring)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return "<mount>" if "endpoint" in scope else "<unmatched>"


class HttpMetricsMiddleware:
    """ASGI middleware counting and timing every HTTP request (:data:`REQUESTS`, :data:`REQUEST_SECONDS`,
    :data:`RATE_LIMITED`); a request whose app raised counts as status 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request and record its count and duration in seconds by route and status; other
        scopes, and every request while metrics are off, pass through."""
        if scope["type"] != "http" or not metrics.enabled():
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route, method = route_label(scope), scope.get("method", "GET")
            REQUESTS.labels(method, route, str(status)).inc()
            REQUEST_SECONDS.labels(method, route).observe(time.perf_counter() - start)
            if status == 429:
                RATE_LIMITED.labels(route).inc()


async def bind_log_context(request: Request) -> None:
    """App-wide dependency (after ``authorize``): the caller's tenant and the path's ``evaluation_id`` on the
    request's log lines."""
    principal: Any = getattr(request.state, "principal", None)
    tenant = getattr(getattr(principal, "tenant", None), "id", None)
    logs.bind(request.path_params.get("evaluation_id"), tenant)


async def metrics_endpoint(request: Request) -> Response:
    """``GET /metrics``: the process's Prometheus metrics (text format, or OpenMetrics when asked)."""
    body, content_type = metrics.render(request.headers.get("accept"))
    return Response(body, media_type=content_type)
