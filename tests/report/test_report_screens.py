"""The HTML report on a phone (390 x 844, touch) and a desktop (1280 x 800), in a real Chromium.

The report is the demo's, with the five baselines and the demo's three raters, so the human
ceiling, the stand-in verdicts and the doctors' votes all appear. On both screens the page never
scrolls sideways, every judge's score, interval and verdict lies inside the screen, a case card
shows every judge's picks, and no table is cut off: a table wider than the screen scrolls inside
a box that says so. On the phone the table of contents is tappable (44 px). The phone's top of
the report and its first case card are saved to ``test-artifacts/`` (``report-phone.png``,
``report-case-phone.png``; ``docs/screenshots/make_screenshots.py`` copies them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
    too_small_to_tap,
)

from medrewardbench.judges.baselines import BASELINE_NAMES


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of the demo's report.html (five baselines, per-annotator labels), served on 127.0.0.1."""
    from medrewardbench.data import load_benchmark
    from medrewardbench.evaluation.job import evaluate
    from medrewardbench.report.render import ReportSettings, render_report

    root = tmp_path_factory.mktemp("report-screens")
    evaluate(load_benchmark("demo"), [f"baseline:{name}" for name in BASELINE_NAMES], root / "results")
    render_report([root / "results"], root / "report", formats=("html",), settings=ReportSettings(n_resamples=200))
    with serve_directory(root / "report") as base:
        yield base + "report.html"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser
    assert browser.errors == [], browser.errors
    assert browser.foreign == [], browser.foreign


def inside(page: Any, selector: str) -> None:
    assert count_shown(page, selector) > 0, f"nothing shown for {selector}"
    assert outside_viewport(page, selector) == [], selector


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_report_reads_on_a_phone_and_a_desktop(demo_report: str, browser: Browser, screen: Screen) -> None:
    page = browser.page(screen, demo_report.rsplit("/", 1)[0])
    page.goto(demo_report, wait_until="load")
    assert page.locator("#human-ceiling").is_visible(), "the demo's raters give the human ceiling"
    assert sideways_overflow(page) == 0, f"the report is wider than the {screen}"

    board = page.locator("table.leaderboard tbody tr")
    assert board.count() == len(BASELINE_NAMES) + 1  # and the human row
    inside(page, "table.leaderboard td.judge")
    inside(page, "table.leaderboard td:has(> strong)")  # the score with its interval
    inside(page, "table.leaderboard td.verdict")
    inside(page, "table.stand-in td.verdict")
    cells = page.locator("table.leaderboard td:has(> strong)").all_inner_texts()
    assert all("[" in text for text in cells[: len(BASELINE_NAMES)]), cells

    first_case = "article.case:first-of-type"
    inside(page, f"{first_case} table.verdicts td.judge")
    inside(page, f"{first_case} table.verdicts td[data-dim]")  # every judge's pick on every dimension
    inside(page, f"{first_case} table.verdicts tr.doctors th")  # and how the doctors voted
    assert page.locator(f"{first_case} table.verdicts td[data-dim]").count() == 6 * len(BASELINE_NAMES)

    assert clipped_tables(page) == []
    if screen.touch:
        assert too_small_to_tap(page, "nav.toc a, form.filters select, form.filters button") == []
        hints = page.locator(".scroll-hint:not([hidden])")
        assert hints.count() >= 3, "the wide tables of the human ceiling scroll, and say so"
        assert page.locator(".table-wrap.scrolls[role=region]").count() == hints.count()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-phone.png"))
        page.locator("#leaderboard").scroll_into_view_if_needed()
        screenshot_stitched(page, ARTIFACTS / "report-case-phone.png", first_case)
        for name in ("report-phone.png", "report-case-phone.png"):
            assert (ARTIFACTS / name).stat().st_size > 20_000, name
    page.context.close()


def test_a_table_that_scrolls_is_named_and_the_hint_follows_the_filters(demo_report: str, browser: Browser) -> None:
    """On a phone the configuration table scrolls: its box is a focusable region named after its section; with
    one dimension chosen in the filter, the per-dimension table fits and its hint goes away."""
    page = browser.page(SCREENS[0], demo_report.rsplit("/", 1)[0])
    page.goto(demo_report, wait_until="load")
    box = page.locator("#configuration .table-wrap")
    assert box.get_attribute("role") == "region" and box.get_attribute("tabindex") == "0"
    assert box.get_attribute("aria-label") == "Configuration (table, scrolls sideways)"
    box.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(200)
    assert "at-start" not in (box.get_attribute("class") or "")

    dims = page.locator("#dimensions .table-wrap")
    assert "scrolls" in (dims.get_attribute("class") or "")
    page.select_option("select[data-filter='dim']", "overall")
    assert "scrolls" not in (dims.get_attribute("class") or "")
    assert not page.locator("#dimensions .scroll-hint").is_visible()
    page.context.close()


def test_printing_shows_every_column(demo_report: str, browser: Browser, tmp_path: Path) -> None:
    """Print keeps no scroll box, fade or hint: a printed table is never cut at a faded edge."""
    page = browser.page(SCREENS[1], demo_report.rsplit("/", 1)[0])
    page.goto(demo_report, wait_until="load")
    page.emulate_media(media="print")
    assert count_shown(page, ".scroll-hint") == 0
    masks = page.evaluate(
        "() => [...document.querySelectorAll('.table-wrap')].map(w => getComputedStyle(w).maskImage || 'none')"
    )
    assert set(masks) == {"none"}
    page.context.close()
