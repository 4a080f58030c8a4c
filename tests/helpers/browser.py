"""A real headless Chromium for the screen tests: a phone and a desktop, and what to measure on a page.

Debian's chromium (``/usr/bin/chromium``) through the Python playwright package, never a browser
that playwright downloads; :func:`sync_playwright_or_skip` skips a test, saying why, when either is
missing. Every request to a host other than the page's own is recorded and aborted (the report and
the app load nothing from elsewhere).

The measures read the page as laid out (bounding boxes, ``scrollWidth``) through
``page.evaluate``, which the app's Content-Security-Policy allows; ``page.wait_for_function`` with a
string does not, hence :func:`wait_until`.
"""

from __future__ import annotations

import functools
import http.server
import io
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TOUCH_TARGET_PX = 44
"""The smallest height a finger can hit reliably (WCAG 2.5.5, Apple's Human Interface Guidelines)."""


@dataclass(frozen=True)
class Screen:
    name: str
    width: int
    height: int
    touch: bool

    def __str__(self) -> str:
        return self.name


PHONE = Screen("phone", 390, 844, touch=True)
DESKTOP = Screen("desktop", 1280, 800, touch=False)
SCREENS = (PHONE, DESKTOP)


def sync_playwright_or_skip() -> Any:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    return sync_playwright


@dataclass
class Browser:
    """One Chromium; :meth:`page` opens a tab on a phone or a desktop and records its errors."""

    browser: Any
    errors: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    def page(self, screen: Screen, own: str) -> Any:
        """A new tab (in its own context: no shared cookies) that may load only URLs starting with ``own``."""
        context = self.browser.new_context(
            viewport={"width": screen.width, "height": screen.height},
            is_mobile=screen.touch,
            has_touch=screen.touch,
            device_scale_factor=1,
        )
        page = context.new_page()
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

        def route(r: Any) -> None:
            if r.request.url.startswith((own, "data:")):
                r.continue_()
            else:
                self.foreign.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        return page


@contextmanager
def chromium() -> Iterator[Browser]:
    sync_playwright = sync_playwright_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        try:
            yield Browser(browser)
        finally:
            browser.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve a folder on 127.0.0.1 (a free port) in a thread; yields its base URL, ending in ``/``."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def wait_until(page: Any, expression: str, timeout: float = 10.0) -> None:
    """Poll an expression (page.wait_for_function evaluates strings, which the app's CSP forbids)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        time.sleep(0.05)


# ------------------------------------------------------------------------------------------------
# Measures: each returns what is wrong, as readable strings, so a failing assert says where
# ------------------------------------------------------------------------------------------------

_DESCRIBE = """
const describe = (el) => {
  const r = el.getBoundingClientRect();
  const text = (el.innerText || el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 40);
  return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.getAttribute('class') ? '.' + el.getAttribute('class').trim().split(/\\s+/).join('.') : '') +
    ' "' + text + '" x ' + Math.round(r.left) + '..' + Math.round(r.right) + ', height ' + Math.round(r.height);
};
const shown = (el) => {
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== 'hidden';
};
"""


def sideways_overflow(page: Any) -> int:
    """How many CSS pixels the page is wider than the viewport (0: no sideways scrolling)."""
    return int(page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth"))


def outside_viewport(page: Any, selector: str) -> list[str]:
    """The shown elements matching ``selector`` that do not lie wholly inside the viewport's width."""
    found: list[str] = page.evaluate(
        "(selector) => {"
        + _DESCRIBE
        + """
        const width = document.documentElement.clientWidth;
        return [...document.querySelectorAll(selector)].filter(shown).filter((el) => {
          const r = el.getBoundingClientRect();
          return r.left < -0.5 || r.right > width + 0.5;
        }).map(describe);
      }""",
        selector,
    )
    return found


def count_shown(page: Any, selector: str) -> int:
    """How many elements matching ``selector`` take up room on the page."""
    script = "(selector) => {" + _DESCRIBE + "return [...document.querySelectorAll(selector)].filter(shown).length; }"
    return int(page.evaluate(script, selector))


def too_small_to_tap(page: Any, selector: str, minimum: int = TOUCH_TARGET_PX) -> list[str]:
    """The shown elements matching ``selector`` less than ``minimum`` CSS pixels high."""
    found: list[str] = page.evaluate(
        "([selector, minimum]) => {"
        + _DESCRIBE
        + """
        return [...document.querySelectorAll(selector)].filter(shown)
          .filter((el) => el.getBoundingClientRect().height < minimum - 0.5).map(describe);
      }""",
        [selector, minimum],
    )
    return found


def clipped_tables(page: Any) -> list[str]:
    """Tables whose right edge lies beyond what shows, without a box that scrolls and says so.

    A table is fine when its right edge is inside the viewport, or inside its nearest scrolling
    ancestor; a table wider than that box is fine only when the box is a named region a keyboard
    can focus (``role="region"``, ``aria-label``, ``tabindex="0"``) with a shown ``.scroll-hint``
    just before it, and the box itself ends inside the viewport.
    """
    found: list[str] = page.evaluate(
        "() => {"
        + _DESCRIBE
        + """
        const width = document.documentElement.clientWidth;
        const problems = [];
        for (const table of document.querySelectorAll('table')) {
          if (!shown(table)) continue;
          const right = table.getBoundingClientRect().right;
          let box = table.parentElement;
          const scrolling = (el) => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(el).overflowX);
          while (box && box !== document.body && !scrolling(box)) {
            box = box.parentElement;
          }
          if (!box || box === document.body) {
            if (right > width + 0.5) problems.push('not in a scrolling box, cut at the viewport: ' + describe(table));
            continue;
          }
          const edge = box.getBoundingClientRect().right;
          if (edge > width + 0.5) problems.push('its scrolling box ends beyond the viewport: ' + describe(box));
          if (right <= edge + 0.5) continue;
          const hint = box.previousElementSibling;
          const named = box.getAttribute('role') === 'region' && (box.getAttribute('aria-label') || '').length > 0;
          const announced = named && box.getAttribute('tabindex') === '0' &&
            hint && hint.classList.contains('scroll-hint') && shown(hint);
          if (!announced) problems.push('scrolls sideways without saying so: ' + describe(table));
        }
        return problems;
      }"""
    )
    return found


def screenshot_stitched(page: Any, path: Path, selector: str | None = None) -> None:
    """A screenshot of the whole page (or of one element), put together from viewport-sized shots.

    Playwright's ``full_page`` and element screenshots resize the emulated screen to fit, and a
    phone then stops matching ``(hover: none)``: they would show the desktop's keyboard legend.
    """
    from PIL import Image

    width, height, top, bottom = page.evaluate(
        """(selector) => {
        const el = selector ? document.querySelector(selector) : document.documentElement;
        const r = el.getBoundingClientRect();
        const top = selector ? r.top + scrollY : 0;
        const bottom = selector ? r.bottom + scrollY : document.documentElement.scrollHeight;
        return [innerWidth, innerHeight, Math.floor(top), Math.ceil(bottom)];
      }""",
        selector,
    )
    canvas = Image.new("RGB", (width, bottom - top), "white")
    y = top
    while y < bottom:
        page.evaluate("(y) => window.scrollTo(0, y)", y)
        actual = int(page.evaluate("() => Math.round(scrollY)"))
        shot = Image.open(io.BytesIO(page.screenshot()))
        piece = shot.crop((0, y - actual, width, min(height, y - actual + bottom - y)))
        canvas.paste(piece, (0, y - top))
        y += piece.height
        if piece.height == 0:
            break
    page.evaluate("() => window.scrollTo(0, 0)")
    path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(path, optimize=True)
