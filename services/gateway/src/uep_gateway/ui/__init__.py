"""The web UI, served by the gateway itself: a no-build single-page app in plain ES modules.

Routes (hidden from the OpenAPI document, public in :data:`uep_gateway.access.ROUTES`; the data is protected
by the ``/v1`` API the app calls, and the shell shows a sign-in form when ``GET /v1/auth/me`` answers 401):

- ``GET /`` → 307 to ``/ui/``;
- ``GET /ui/`` and ``GET /ui/{page:path}`` → the shell (``static/index.html``); the app routes on
  ``location.pathname`` (History API), so a deep link such as ``/ui/evaluations/<id>`` loads the same shell;
- ``GET /ui/static/{asset}`` → one of the files of ``static/`` (a fixed set read at import: no path from
  the request reaches the file system), with an ``ETag`` (SHA-256 of the content) and ``Cache-Control:
  no-cache`` so that a new release is picked up on the next load and an unchanged file answers 304.

Same origin as the API: the session cookie ``uep_session`` and the CSRF rule (cookie-authenticated writes
echo the ``uep_csrf`` cookie in ``X-CSRF-Token``) work without CORS. Every answer carries a Content
Security Policy that allows only this origin's scripts and styles (no inline script), ``blob:`` images and
frames (the radar and reports fetched with the tenant header) and nothing from elsewhere: the UI works
offline, with no CDN. See docs/ui.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

STATIC = files("uep_gateway.ui") / "static"
MEDIA = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
}
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "frame-src 'self' blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class Asset:
    """One shipped file: its bytes, media type and ETag (quoted SHA-256 hex of the bytes)."""

    body: bytes
    media_type: str
    etag: str


def _load_assets() -> dict[str, Asset]:
    """Every file directly under ``static/`` whose suffix is in :data:`MEDIA`, by file name."""
    out: dict[str, Asset] = {}
    for entry in STATIC.iterdir():
        name = entry.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if entry.is_file() and suffix in MEDIA:
            body = entry.read_bytes()
            out[name] = Asset(body, MEDIA[suffix], '"' + hashlib.sha256(body).hexdigest() + '"')
    return out


ASSETS = _load_assets()
SHELL = "index.html"

router = APIRouter(include_in_schema=False)


def _answer(request: Request, asset: Asset) -> Response:
    """The asset, or 304 when the request's ``If-None-Match`` names its ETag."""
    headers = dict(SECURITY_HEADERS, ETag=asset.etag)
    if asset.etag in {t.strip() for t in request.headers.get("if-none-match", "").split(",")}:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


def _not_found(what: str) -> Response:
    return Response(
        f'{{"detail": [{{"loc": ["path", "asset"], "msg": "unknown UI file {what}", "type": "not_found"}}]}}',
        status_code=404,
        media_type="application/json",
        headers={"Cache-Control": "no-cache"},
    )


@router.get("/")
async def root() -> RedirectResponse:
    """The platform's front door: the web UI."""
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/static/{asset}")
async def asset(asset: str, request: Request) -> Response:
    """A shipped file of the UI by name (404 naming ``asset`` for any other name)."""
    found = ASSETS.get(asset)
    if found is None or asset == SHELL:
        return _not_found(repr(asset[:80]))
    return _answer(request, found)


@router.get("/ui/")
async def shell(request: Request) -> Response:
    """The single-page app's shell (the app draws the page the path names)."""
    return _answer(request, ASSETS[SHELL])


@router.get("/ui/{page:path}")
async def page(page: str, request: Request) -> Response:
    """Any page of the app: the same shell (``page`` is read by the app in the browser, never here)."""
    return _answer(request, ASSETS[SHELL])
