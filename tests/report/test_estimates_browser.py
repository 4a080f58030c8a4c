"""The "Corrected estimates" section of report.html on a phone (390 px) and a desktop (1,280 px), in Chromium.

The demo judged by three baselines, the doctors' labels on a slice picked from baseline:random
(the demo's expert labels, with the design in their metadata), and ``report --labels``: the section
is listed in the table of contents and shown, the page never scrolls sideways, and a table wider
than the screen scrolls inside a box that says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from helpers.browser import SCREENS, Browser, Screen, chromium, clipped_tables, serve_directory, sideways_overflow
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data import load_benchmark
from medrewardbench.data.canonical import write_canonical
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.loading import find_datasets
from medrewardbench.metrics.selection import METADATA_KEY, pick_design


@pytest.fixture(scope="module")
def report_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("estimates-screens")
    runner = CliRunner()
    done = runner.invoke(
        app,
        [
            "eval",
            "-j",
            "baseline:random",
            "-j",
            "baseline:longer",
            "-j",
            "baseline:first",
            "--out",
            str(root / "r"),
            "-q",
        ],
    )
    assert done.exit_code == 0, done.output
    run = next(b for b in find_datasets([root / "r"])[0].runs if b.record.judge_spec == "baseline:random")
    design = pick_design(case_verdicts(run.data), least_confident=6, random=12, seed=1, data_hash=run.record.data_hash)
    demo = {case.case_id: case for case in load_benchmark("demo").cases}
    picked = [
        dataclasses.replace(demo[cid], metadata={**demo[cid].metadata, METADATA_KEY: design.case_metadata(cid)})
        for cid in (*design.least_confident_ids, *design.random_ids)
    ]
    labels = write_canonical(picked, root / "labelled.jsonl")
    done = runner.invoke(
        app,
        [
            "report",
            str(root / "r"),
            "--labels",
            str(labels),
            "--out",
            str(root / "report"),
            "--format",
            "html",
            "--bootstrap",
            "200",
        ],
    )
    assert done.exit_code == 0, done.output
    with serve_directory(root / "report") as base:
        yield base + "report.html"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser
    assert browser.errors == [], browser.errors
    assert browser.foreign == [], browser.foreign


@pytest.mark.slow
@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_section_is_listed_shown_and_fits_the_screen(report_url: str, browser: Browser, screen: Screen) -> None:
    page = browser.page(screen, report_url.rsplit("/", 1)[0])
    page.goto(report_url)
    page.wait_for_load_state("load")
    assert page.locator('nav.toc a[href="#corrected-estimates"]').count() == 1
    section = page.locator("#corrected-estimates")
    section.scroll_into_view_if_needed()
    assert section.is_visible()
    text = section.inner_text()
    assert "Corrected estimates" in text and "baseline:longer" in text and "labels only" in text
    assert "Design " in text and "6 pairs baseline:random" in text
    assert sideways_overflow(page) == 0
    assert clipped_tables(page) == []
    page.context.close()
