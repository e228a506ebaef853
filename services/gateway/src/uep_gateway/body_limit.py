"""Request body limit as a pure ASGI middleware: bytes are counted as they arrive, so a chunked body (no
``Content-Length``) is stopped as soon as it passes the limit, not after it has been read and parsed.

Starlette has no body-size limit of its own; this is the usual wrapper around ``receive``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """Raised from ``receive`` to the application once the body has passed its limit (``limit`` bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body larger than {limit} bytes")
        self.limit = limit


def _too_large_response(limit: int) -> tuple[Message, Message]:
    body = json.dumps(
        {"detail": [{"loc": ["body"], "msg": f"request body larger than {limit} bytes", "type": "too_large"}]}
    ).encode()
    start = {
        "type": "http.response.start",
        "status": 413,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ],
    }
    return start, {"type": "http.response.body", "body": body, "more_body": False}


class BodyLimitMiddleware:
    """Answer 413 (``{"detail": [{"loc": ["body"], "msg": ..., "type": "too_large"}]}``) to an HTTP request
    whose body is larger than ``limit_for(scope)`` bytes.

    A declared ``Content-Length`` over the limit (or not a number) is refused before the body is read. Any
    other body is counted message by message (``http.request``); once past the limit the application's next
    ``receive`` raises :class:`BodyTooLarge`, whatever the application answers is dropped, and the 413 is
    sent instead (unless the application had already started its response, which is then left as it is).
    The 413 carries ``Connection: close``: the rest of the body is not read.
    """

    def __init__(self, app: ASGIApp, limit_for: Callable[[Scope], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request under the body limit (see the class docstring); other scopes pass through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and (not value.isdigit() or int(value) > limit):
                for message in _too_large_response(limit):
                    await send(message)
                return
        received = 0
        exceeded = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            if exceeded:
                raise BodyTooLarge(limit)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise BodyTooLarge(limit)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return  # the application's answer to a body it could not read whole; the 413 goes instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not exceeded:
                raise
        if exceeded and not started:
            for message in _too_large_response(limit):
                await send(message)
