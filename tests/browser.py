"""A real browser for the page tests: Debian's headless ``chromium`` driven by Playwright for Python.

Playwright is launched with the system binary (``executable_path``), so nothing downloads a browser; the setup
(scripts/bootstrap.sh) installs ``chromium`` where it is missing. Every page opened through :func:`open_page`
records its console errors and uncaught exceptions, which the tests assert are empty, and refuses any request that
leaves the machine (a page that fetched a script from a CDN would fail offline, so it fails here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlparse

import pytest

#: Hosts a page may load from: the page's own server on the loopback (file:// pages need none).
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


def chromium_path() -> str:
    """The system Chromium: $ZKCONSUMER_CHROMIUM, else Debian's ``chromium`` (Ubuntu's ``chromium-browser``)."""
    for candidate in (os.environ.get("ZKCONSUMER_CHROMIUM"), shutil.which("chromium"),
                      shutil.which("chromium-browser")):
        if candidate:
            return candidate
    pytest.fail("no chromium on PATH: `make setup` installs Debian's chromium (scripts/bootstrap.sh)")


@dataclass
class PageLog:
    """What a page said that a user would not see: console errors, uncaught exceptions, refused requests."""

    errors: list[str] = field(default_factory=list)
    remote: list[str] = field(default_factory=list)


@contextlib.contextmanager
def chromium() -> Iterator:
    """A headless Chromium (the system one) for the length of the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: Chromium's sandbox refuses to run as root, which CI machines and containers often are
        browser = p.chromium.launch(executable_path=chromium_path(), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def open_page(browser, url: str, width: int = 1280, height: int = 900) -> Iterator[tuple[object, PageLog]]:
    """A new page at ``url`` and its log; requests to anything but the loopback or a file are aborted and
    listed in ``log.remote``."""
    log = PageLog()
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.on("console", lambda m: log.errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: log.errors.append(f"exception: {e}"))

    def route(r) -> None:
        parsed = urlparse(r.request.url)
        if parsed.scheme in ("file", "data", "blob") or parsed.hostname in LOCAL_HOSTS:
            r.continue_()
        else:
            log.remote.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    try:
        page.goto(url)
        yield page, log
    finally:
        context.close()


class _References(HTMLParser):
    """Every ``src`` / ``href`` of a tag that the browser would load (scripts, stylesheets, fonts, images, frames)."""

    LOADED = {"script", "link", "img", "iframe", "source", "audio", "video", "embed", "object"}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.LOADED:
            self.urls += [v for k, v in attrs if k in ("src", "href", "data") and v]


def remote_references(page: str) -> list[str]:
    """The URLs a page's tags would fetch from another machine. Read from the tags, not the text: an embedded
    plotly.js holds URL strings in its code that it never loads."""
    parser = _References()
    parser.feed(page)
    return [u for u in parser.urls if u.startswith(("http://", "https://", "//"))]
