"""The report's calibration and abstention section on a phone (390 px) and a desktop (1,280 px), in a real Chromium.

The demo's report with the five baselines and a cross-fitted isotonic recalibration: the section
is listed in the table of contents, its table holds a row per judge, every judge with a confidence
gets a reliability diagram and a risk-coverage curve that lie inside the screen, the page never
scrolls sideways, and the leaderboard carries the coverage at risk alpha. The phone's view of the
section is saved to ``test-artifacts/report-selective-phone.png``.
"""

from __future__ import annotations

from collections.abc import Iterator

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
    screenshot_stitched,
    serve_directory,
    sideways_overflow,
)
from helpers.runs import RunsFixture

from medrewardbench.judges.baselines import BASELINE_NAMES


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from medrewardbench.data import load_benchmark
    from medrewardbench.evaluation.job import evaluate
    from medrewardbench.metrics.selective_section import SelectiveSettings
    from medrewardbench.report.render import ReportSettings, render_report

    root = tmp_path_factory.mktemp("selective-screens")
    evaluate(load_benchmark("demo"), [f"baseline:{name}" for name in BASELINE_NAMES], root / "results")
    settings = ReportSettings(n_resamples=200, selective=SelectiveSettings(recalibration="isotonic"))
    render_report([root / "results"], root / "report", formats=("html",), settings=settings)
    with serve_directory(root / "report") as base:
        yield base + "report.html"


@pytest.fixture(scope="module")
def browser(demo_report: str, plain_report: str) -> Iterator[Browser]:
    """Chromium, started after both reports are made (the runs fixture runs an event loop of its own)."""
    with chromium() as browser:
        yield browser
    assert browser.errors == [], browser.errors
    assert browser.foreign == [], browser.foreign


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_calibration_section_reads_on_a_phone_and_a_desktop(
    demo_report: str, browser: Browser, screen: Screen
) -> None:
    page = browser.page(screen, demo_report.rsplit("/", 1)[0])
    page.goto(demo_report, wait_until="load")
    assert page.locator('nav.toc a[href="#selective"]').count() == 1
    section = page.locator("#selective")
    section.scroll_into_view_if_needed()
    assert section.is_visible()
    rows = page.locator("#selective table.selective tbody tr")
    assert rows.count() == len(BASELINE_NAMES)
    with_confidence = page.locator("#selective svg.reliability")
    assert with_confidence.count() >= 1
    assert page.locator("#selective svg.risk-coverage").count() == with_confidence.count()
    assert count_shown(page, "#selective svg") == 2 * with_confidence.count()
    assert outside_viewport(page, "#selective svg") == []
    assert outside_viewport(page, "#selective table.selective td.judge") == []
    assert "ECE recalibrated" in page.locator("#selective thead").inner_text()
    # beside the human ceiling's columns the leaderboard has no room for it: the section shows it
    assert "at risk" not in page.locator("table.leaderboard thead").text_content()
    assert "Coverage at risk 10 %" in page.locator("#selective thead").text_content()
    assert sideways_overflow(page) == 0, f"the report is wider than the {screen}"
    assert clipped_tables(page) == []
    if screen.touch:
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot_stitched(page, ARTIFACTS / "report-selective-phone.png", "#selective")
        assert (ARTIFACTS / "report-selective-phone.png").stat().st_size > 10_000
    page.context.close()


@pytest.fixture(scope="module")
def plain_report(runs_fixture: RunsFixture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Runs without per-annotator labels: the leaderboard has room for the coverage column."""
    from medrewardbench.report.render import ReportSettings, render_report

    out = tmp_path_factory.mktemp("selective-plain")
    render_report([runs_fixture.run_dir], out, formats=("html",), settings=ReportSettings(n_resamples=100))
    with serve_directory(out) as base:
        yield base + "report.html"


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_leaderboard_shows_coverage_at_risk(plain_report: str, browser: Browser, screen: Screen) -> None:
    page = browser.page(screen, plain_report.rsplit("/", 1)[0])
    page.goto(plain_report, wait_until="load")
    names = page.locator("table.leaderboard thead th").all_text_contents()
    assert "Coverage at risk 10 %" in names, names
    column = names.index("Coverage at risk 10 %") + 1
    cells = page.locator(f"table.leaderboard tbody tr td:nth-child({column})")
    assert cells.count() == page.locator("table.leaderboard tbody tr").count() > 0
    assert all(text.strip() for text in cells.all_text_contents())
    assert outside_viewport(page, f"table.leaderboard tbody td:nth-child({column})") == []
    assert sideways_overflow(page) == 0
    assert clipped_tables(page) == []
    page.context.close()
