"""A thin client of the platform's REST API: one :class:`Api` per command, errors as one line.

Every non-2xx answer becomes :class:`ApiError` whose message names the status, the field (the ``loc`` of
the API's error body, e.g. ``body.sample_limit``) and the reason, so the command line prints one clear line
instead of a traceback. Connection failures are an ``ApiError`` with status 0.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

from uep_cli.config import Credentials


def _import_httpx_without_its_cli() -> None:
    """Import httpx without ``httpx._main``, its own command line, which its ``__init__`` imports whenever click,
    rich and pygments are installed (they are, with typer): three packages this client never uses, about half of
    ``uep status``'s start-up. A ``None`` in :data:`sys.modules` makes that import fail, which httpx takes as
    "the optional command line is not installed"; the entry is removed again afterwards."""
    if "httpx" in sys.modules:
        return
    sys.modules["httpx._main"] = None  # type: ignore[assignment]
    try:
        import httpx  # noqa: F401
    finally:
        del sys.modules["httpx._main"]


_import_httpx_without_its_cli()
import httpx  # noqa: E402


class ApiError(Exception):
    """A refused request (``status`` ≥ 400) or an unreachable gateway (``status`` 0); ``str()`` is one line."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


def error_line(status: int, body: Any, fallback: str) -> str:
    """One line for an error answer: ``"422 body.sample_limit: Input should be … (greater_than_equal)"``.

    ``body``: the decoded JSON error (the API's ``{"detail": [{"loc", "msg", "type"}]}`` or FastAPI's
    ``{"detail": "text"}``), or None; ``fallback``: the raw text when the body is not JSON.
    """
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        parts = []
        for d in detail[:3]:
            loc = ".".join(str(x) for x in d.get("loc", []))
            kind = f" ({d['type']})" if d.get("type") else ""
            parts.append(f"{loc}: {d.get('msg', '')}{kind}" if loc else f"{d.get('msg', '')}{kind}")
        more = f" (+{len(detail) - 3} more)" if len(detail) > 3 else ""
        return f"{status} " + "; ".join(parts) + more
    if isinstance(detail, str):
        return f"{status} {detail}"
    text = " ".join(fallback.split())[:300]
    return f"{status} {text}" if text else f"{status} (no body)"


def tls_context(url: str, environ: Mapping[str, str]) -> ssl.SSLContext | None:
    """The TLS context for a client of the gateway at ``url``: None (httpx's default, which loads the CA bundle)
    unless no connection can use TLS, i.e. ``url`` is ``http://`` and no proxy variable of ``environ`` names an
    ``https://`` proxy (the client follows no redirects). Then a context that trusts no certificate: it spares
    loading the CA bundle (tens of milliseconds of every command's start-up) and would refuse, never trust, any
    TLS connection."""
    if not url.lower().startswith("http://"):
        return None
    proxies = (v for k, v in environ.items() if k.lower() in ("http_proxy", "https_proxy", "all_proxy"))
    if any(v.strip().lower().startswith("https://") for v in proxies):
        return None
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies hostnames and certificates, against no CA


class Api:
    """HTTP calls to one gateway with one set of credentials. Use as a context manager.

    ``timeout``: seconds per request (connect, read, write).
    """

    def __init__(self, creds: Credentials, timeout: float = 30.0) -> None:
        self.creds = creds
        context = tls_context(creds.url, os.environ)
        self._client = httpx.Client(
            base_url=creds.url, headers=creds.headers(), timeout=timeout, verify=True if context is None else context
        )

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send one request; the answer when it is 2xx. Raises :class:`ApiError` otherwise."""
        try:
            r = self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, f"cannot reach {self.creds.url}: {exc.__class__.__name__}: {exc}") from None
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                body = None
            raise ApiError(r.status_code, error_line(r.status_code, body, r.text), body)
        return r

    def get(self, path: str, **params: Any) -> Any:
        """``GET path`` with the non-None ``params`` as the query; the decoded JSON body."""
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    def post(self, path: str, json: Any = None, **kwargs: Any) -> Any:
        """``POST path`` with a JSON body; the decoded JSON body (None when empty)."""
        r = self.request("POST", path, json=json, **kwargs)
        return r.json() if r.content else None

    def download(self, path: str, out: BinaryIO, **params: Any) -> int:
        """Stream ``GET path`` (the non-None ``params`` as the query) into ``out``; the bytes written. Raises
        :class:`ApiError` on a non-2xx answer (nothing is written then)."""
        query = {k: v for k, v in params.items() if v is not None}
        try:
            with self._client.stream("GET", path, params=query) as r:
                if r.status_code >= 400:
                    r.read()
                    try:
                        body = r.json()
                    except ValueError:
                        body = None
                    raise ApiError(r.status_code, error_line(r.status_code, body, r.text), body)
                written = 0
                for chunk in r.iter_bytes():
                    out.write(chunk)
                    written += len(chunk)
                return written
        except httpx.HTTPError as exc:
            raise ApiError(0, f"cannot reach {self.creds.url}: {exc.__class__.__name__}: {exc}") from None

    def pages(self, path: str, limit: int, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item of a keyset-paginated list (``{"items", "next_cursor"}``), page by page of ``limit``."""
        cursor: str | None = None
        while True:
            page = self.get(path, limit=limit, cursor=cursor, **params)
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return
