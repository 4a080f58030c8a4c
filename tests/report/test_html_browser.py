"""The HTML report in a real headless Chromium: it loads without errors and its charts render.

Uses Debian's chromium (``/usr/bin/chromium``) through the Python playwright package; the test
is skipped, saying why, only when that browser or playwright is not installed. The page is served
from a 127.0.0.1 http.server and every request to any other host is recorded (and aborted), so a
report that reached for the network would fail. A full-page screenshot is saved to
``test-artifacts/report.png`` for people to look at.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.browser import ARTIFACTS, CHROMIUM, LAUNCH_ARGS
from helpers.runs import RunsFixture

from medrewardbench.metrics.results import CANNOT, VERDICTS
from medrewardbench.report.render import ReportSettings, render_report


@pytest.fixture(scope="module")
def report_dir(runs_fixture: RunsFixture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser-report")
    render_report([runs_fixture.run_dir], out, formats=("html",))
    return out


def _serve(directory: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/report.html"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def served(report_dir: Path) -> Iterator[str]:
    yield from _serve(report_dir)


@pytest.fixture(scope="module")
def served_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The demo (34 cases, three illustrative raters, organ systems of one to eight cases) with the baselines."""
    from medrewardbench.data import load_benchmark
    from medrewardbench.evaluation.job import evaluate
    from medrewardbench.judges.baselines import BASELINE_NAMES

    root = tmp_path_factory.mktemp("browser-demo")
    evaluate(load_benchmark("demo"), [f"baseline:{name}" for name in BASELINE_NAMES], root / "results")
    render_report([root / "results"], root / "report", formats=("html",), settings=ReportSettings(n_resamples=200))
    yield from _serve(root / "report")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _playwright() -> Any:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    return sync_playwright


@pytest.fixture(scope="module")
def browser(served: str, served_demo: str) -> Iterator[Any]:
    """One headless Chromium for the module's tests; each test opens its pages in a fresh context.

    Both reports are built first: a running sync Playwright holds an event loop in this thread, and
    building a report evaluates with ``asyncio.run``.
    """
    sync_playwright = _playwright()
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def test_report_renders_in_headless_chromium(served: str, browser: Any) -> None:
    console_errors: list[str] = []
    page_errors: list[str] = []
    foreign_requests: list[str] = []
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: page_errors.append(str(e)))

        def route(r: Any) -> None:
            url = r.request.url
            if url.startswith(("http://127.0.0.1", "data:")):
                r.continue_()
            else:
                foreign_requests.append(url)
                r.abort()

        page.route("**/*", route)
        response = page.goto(served, wait_until="load")
        assert response is not None and response.ok

        table = page.locator("table.leaderboard")
        assert table.count() == 1
        box = table.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100
        assert table.locator("tbody tr").count() == 6  # test:broken never answered: listed apart
        assert "test:oracle" in table.inner_text()
        assert "test:broken" not in table.inner_text()
        apart = page.locator("table.failed")
        assert "test:broken" in apart.inner_text() and "scripted failure" in apart.inner_text()
        assert page.title() == "cases report" and page.locator("h1").inner_text() == "cases report"

        svgs = page.locator("svg.chart")
        n_svgs = svgs.count()
        # forest + 6 dimension bars + one heatmap per judge + position + length (+ legend)
        assert n_svgs >= 1 + 6 + 7 + 2
        for i in range(n_svgs):
            svg_box = svgs.nth(i).bounding_box()
            assert svg_box is not None and svg_box["width"] > 50 and svg_box["height"] > 20, i
        heatmap_cells = page.locator("svg.heatmap rect")
        assert heatmap_cells.count() >= 6 * 5 * 6

        images = page.locator("article.case img")
        assert images.count() > 0
        natural = images.first.evaluate("img => img.naturalWidth")
        assert natural > 0, "embedded thumbnail did not decode"

        # raw outputs are folded away per case; a click on the summary shows them
        planted_case = page.locator("article.case", has_text="test:planted").first
        raw_block = planted_case.locator("details.raws pre.raw").first
        assert not raw_block.is_visible()
        planted_case.locator("details.raws summary").click()
        assert raw_block.is_visible()
        raw_box = raw_block.bounding_box()
        assert raw_box is not None and raw_box["height"] > 10

        # the planted markup in a judge's output is text, never an element
        assert page.locator("article.case script").count() == 0
        assert page.locator("pre.raw img").count() == 0
        raw_texts = page.locator("pre.raw").all_text_contents()
        assert any("<script>alert('pwned')</script>" in text for text in raw_texts)

        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    finally:
        for context in browser.contexts:  # the browser stays open for the module's next test
            context.close()
    assert console_errors == []
    assert page_errors == []
    assert foreign_requests == []
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_filters_and_the_image_viewer_work_offline_in_chromium(served: str, browser: Any) -> None:
    """Organ system, judge and dimension filters hide what does not match; an image opens full size."""
    page_errors: list[str] = []
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        page.goto(served, wait_until="load")
        bar = page.locator("#filters")
        assert bar.is_visible(), "the script shows the filter bar"
        cases = page.locator("article.case")
        total = cases.count()
        assert total == 24

        def visible(locator: Any) -> int:
            return sum(1 for i in range(locator.count()) if locator.nth(i).is_visible())

        page.select_option("select[data-filter='judge']", label="test:planted")
        assert visible(cases) == 12  # the planted judge misses the odd cases
        assert page.locator("#filter-count").inner_text() == "12 of 24 cases shown"
        assert visible(page.locator("table.leaderboard tbody tr")) == 1
        assert visible(page.locator(".heatmaps figure")) == 1
        first = cases.filter(has=page.locator("tr.missed")).first
        assert visible(first.locator("table.verdicts tbody tr")) == 1, "only the chosen judge's picks"

        page.select_option("select[data-filter='organ']", label="chest")
        assert visible(cases) == 4  # odd cases of chest: c001, c007, c013, c019
        page.select_option("select[data-filter='dim']", label="overall")
        dimension_headers = page.locator("#dimensions thead th[data-dim]")
        assert visible(dimension_headers) == 1 and "Overall" in dimension_headers.nth(5).inner_text()
        assert visible(page.locator("#dimensions .charts figure")) == 1

        page.click("#filter-reset")
        assert visible(cases) == 24 and page.locator("#filter-count").inner_text() == ""

        viewer = page.locator("#image-viewer")
        assert not viewer.is_visible()
        cases.first.locator("img.zoomable").click()
        assert viewer.is_visible()
        assert viewer.locator("img").evaluate("img => img.naturalWidth") == 48
        assert "48 × 48 px" in viewer.locator("figcaption").inner_text()
        page.keyboard.press("Escape")
        assert not viewer.is_visible()

        ARTIFACTS.mkdir(exist_ok=True)
        page.select_option("select[data-filter='judge']", label="test:planted")
        page.screenshot(path=str(ARTIFACTS / "report-filtered.png"), full_page=False)
    finally:
        for context in browser.contexts:  # the browser stays open for the module's next test
            context.close()
    assert page_errors == []


def test_the_stand_in_verdicts_and_the_small_sample_marks_render_in_chromium(served_demo: str, browser: Any) -> None:
    """The banner, the leaderboard's verdict column, the stand-in section (filtered by judge) and the greyed
    organ cells resting on fewer than four cases."""
    page_errors: list[str] = []
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        page.goto(served_demo, wait_until="load")
        banner = page.locator("#small-sample")
        assert banner.is_visible() and "Too few cases to rank: with 34 cases" in banner.inner_text()
        board = page.locator("table.leaderboard")
        assert "Stands in for an annotator?" in board.locator("thead").inner_text()
        verdicts = board.locator("tbody td.verdict").all_inner_texts()
        assert len(verdicts) == 5 and set(verdicts) <= set(VERDICTS)
        section = page.locator("#stand-in")
        assert section.is_visible() and "Calderon, Reichart and Dror" in section.inner_text()
        rows = section.locator("table.stand-in tbody tr")
        assert rows.count() == 5
        shorter = rows.filter(has_text="baseline:shorter")
        assert shorter.locator("td.verdict").inner_text() == CANNOT
        assert shorter.locator("td.verdict").evaluate("td => getComputedStyle(td).color") != "rgb(29, 29, 31)"

        def visible(locator: Any) -> int:
            return sum(1 for i in range(locator.count()) if locator.nth(i).is_visible())

        page.select_option("select[data-filter='judge']", label="baseline:shorter")
        assert visible(rows) == 1 and visible(section.locator("table.stand-in-dims tbody tr")) == 1
        page.click("#filter-reset")
        few = page.locator("svg.heatmap g.few-cases")
        assert few.count() > 0 and few.count() % 6 == 0
        assert few.first.locator("rect").get_attribute("fill") == "#f0f0f0"
        assert "n<4" in few.first.locator("text").all_text_contents()
        assert page.locator("p.mde").count() >= 5 and page.locator("p.mde").first.is_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        section.screenshot(path=str(ARTIFACTS / "report-stand-in.png"))
    finally:
        for context in browser.contexts:  # the browser stays open for the module's next test
            context.close()
    assert page_errors == []
