"""HTML → PDF and HTML → PNG with the system's headless Chromium, driven by Playwright.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (Debian's package, installed
by ``make install``; override with ``UEP_CHROMIUM_PATH``) with networking features off. The page is loaded
with ``set_content`` (no URL is fetched: the report is self-contained).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from playwright.async_api import Page

_T = TypeVar("_T")


class PdfSettings(BaseSettings):
    """Where the headless Chromium is (``UEP_CHROMIUM_PATH``)."""

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    chromium_path: str = Field("/usr/bin/chromium", description="Chromium executable Playwright launches.")


CHROMIUM_PATH = PdfSettings().chromium_path
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class PdfUnavailable(RuntimeError):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """Chromium is missing or failed; the message says why (the report is stored without its PDF)."""


async def _with_page(html: str, action: Callable[[Page], Awaitable[_T]], width: int = 1100) -> _T:
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import async_playwright

    if not os.path.exists(CHROMIUM_PATH):
        raise PdfUnavailable(f"no Chromium at {CHROMIUM_PATH} (install Debian's chromium: make chromium)")
    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS, headless=True)
            try:
                page = await browser.new_page(viewport={"width": width, "height": 900})
                await page.route("**/*", lambda route: route.abort())  # nothing may be fetched
                await page.set_content(html, wait_until="load")
                return await action(page)
            finally:
                await browser.close()
    except PlaywrightError as exc:
        raise PdfUnavailable(f"Chromium failed: {str(exc).splitlines()[0][:300]}") from exc


async def html_to_pdf(html: str) -> bytes:
    """Render ``html`` to an A4 PDF (print media, backgrounds printed, 12 mm margins, every ``<details>`` open).

    Raises:
        PdfUnavailable: Chromium is missing or failed.
    """

    async def pdf(page: Page) -> bytes:
        await page.emulate_media(media="print")
        # paper cannot be clicked: every collapsed <details> (the failure browser) is printed open
        await page.evaluate("document.querySelectorAll('details').forEach(function (d) { d.open = true; })")
        return await page.pdf(
            format="A4", print_background=True, margin={"top": "12mm", "bottom": "12mm", "left": "10mm", "right": "10mm"}
        )

    return await _with_page(html, pdf)


async def html_to_png(html: str, width: int = 1100, full_page: bool = True) -> bytes:
    """Screenshot of ``html`` rendered at ``width`` CSS pixels (to look at the charts).

    Raises:
        PdfUnavailable: Chromium is missing or failed.
    """

    async def shot(page: Page) -> bytes:
        return await page.screenshot(full_page=full_page, type="png")

    return await _with_page(html, shot, width)
