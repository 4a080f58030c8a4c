"""The grounding page on a phone (390 px) and a desktop (1,280 px), in a real Chromium.

The page is the demo's with the five baselines and every control. On both screens the page never
scrolls sideways, every judge's flag lies inside the screen, and no table is cut off (a table wider
than the screen scrolls inside a box that says so), also with the per-judge details opened.
Screenshots go to ``test-artifacts/grounding-<screen>.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.browser import (
    ARTIFACTS,
    SCREENS,
    Browser,
    Screen,
    chromium,
    clipped_tables,
    count_shown,
    outside_viewport,
    serve_directory,
    sideways_overflow,
)

from medrewardbench.data import load_benchmark
from medrewardbench.evaluation.store import Store
from medrewardbench.judges.registry import BASELINE_SPECS
from medrewardbench.probes.derive import run_probe
from medrewardbench.probes.grounding import control_benchmarks, grounding_document
from medrewardbench.probes.grounding_page import write_grounding_html

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("grounding-page")
    parent = load_benchmark("demo")
    variants, sets = control_benchmarks(parent)
    runs = run_probe(parent, variants, list(BASELINE_SPECS), root)
    with Store.in_dir(root) as store:
        document = grounding_document(store, runs, sets, n_resamples=200)
    write_grounding_html(document, root / "probe-grounding.html")
    with serve_directory(root) as base:
        yield base + "probe-grounding.html"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser
    assert browser.errors == [], browser.errors
    assert browser.foreign == [], browser.foreign


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_grounding_page_fits_the_screen(page_url: str, browser: Browser, screen: Screen) -> None:
    page = browser.page(screen, page_url.rsplit("/", 1)[0])
    page.goto(page_url)
    assert count_shown(page, "table.grounding tbody tr") == len(BASELINE_SPECS)
    # nothing moves, but 34 demo cases are too few to clear a judge (the interval is never [0, 0])
    assert count_shown(page, "td.flag-unknown") == len(BASELINE_SPECS)
    assert sideways_overflow(page) == 0
    assert outside_viewport(page, "td.verdict, td.judge, h1, h2") == []
    assert clipped_tables(page) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(Path(ARTIFACTS) / f"grounding-{screen}.png"), full_page=False)
    page.locator("table.grounding").screenshot(path=str(Path(ARTIFACTS) / f"grounding-judges-{screen}.png"))
    for summary in page.query_selector_all("details > summary"):
        summary.click()
    page.wait_for_timeout(100)
    assert count_shown(page, "#by-dimension table") == 2 * len(BASELINE_SPECS)
    assert sideways_overflow(page) == 0
    assert clipped_tables(page) == []
    page.context.close()
