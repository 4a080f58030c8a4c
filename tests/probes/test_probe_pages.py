"""The counterfactual and bias-card pages in a real Chromium, on a phone (390 px) and a desktop (1,280 px).

Both pages come from the demo judged by the baselines. On both screens neither page scrolls
sideways, every judge has a card whose rates and intervals lie inside the screen, no table is cut
off, and the page loads nothing from elsewhere. The phone's pages are saved to ``test-artifacts/``.
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
)

from medrewardbench.data import load_benchmark
from medrewardbench.evaluation.store import Store
from medrewardbench.probes.bias import bias_figures, make_bias_pairs
from medrewardbench.probes.counterfactual import counterfactual_figures, make_pairs
from medrewardbench.probes.pairs import derived_benchmark, load_probe_data, run_probe
from medrewardbench.probes.pairs_page import render_bias_page, render_counterfactual_page

pytestmark = pytest.mark.slow
JUDGES = ["baseline:longer", "baseline:first", "baseline:random"]


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("probe-pages")
    demo = load_benchmark("demo")
    cf_cases, cf_tally = make_pairs(demo)
    cf = derived_benchmark("counterfactual", demo, cf_cases)
    bias_cases, bias_tally = make_bias_pairs(demo)
    bias = derived_benchmark("bias", demo, bias_cases)
    for derived in (cf, bias):
        run_probe(derived, JUDGES, root)
    with Store.in_dir(root) as store:
        cf_figures = counterfactual_figures(load_probe_data(store, cf.data_hash()), n_resamples=200)
        bias_cards = bias_figures(load_probe_data(store, bias.data_hash()), n_resamples=200)
    render_counterfactual_page(
        cf_figures, root / "probe-counterfactual.html", data_name=cf.name, source=cf.source, tally=cf_tally.as_dict()
    )
    render_bias_page(
        bias_cards, root / "probe-bias.html", data_name=bias.name, source=bias.source, tally=bias_tally.as_dict()
    )
    with serve_directory(root) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser
    assert browser.errors == [], browser.errors
    assert browser.foreign == [], browser.foreign


def _reads(page: Any, screen: Screen) -> None:
    assert sideways_overflow(page) == 0, f"the page is wider than the {screen}"
    assert clipped_tables(page) == []
    assert count_shown(page, "section.card") == len(JUDGES)
    assert outside_viewport(page, "section.card td") == []
    assert outside_viewport(page, "section.card h3") == []


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_counterfactual_page_reads_on_a_phone_and_a_desktop(pages: str, browser: Browser, screen: Screen) -> None:
    page = browser.page(screen, pages)
    page.goto(pages + "probe-counterfactual.html", wait_until="load")
    _reads(page, screen)
    cards = page.locator("section.card")
    longer = cards.filter(has_text="baseline:longer")
    assert "fails the harmless-variant control" in longer.inner_text()
    first = cards.filter(has_text="baseline:first").inner_text()
    assert "50% (45%–55%)" in first and "passes the harmless-variant control" in first
    assert "critical-miss rate (weighted)" in first
    assert page.locator("#made").is_visible()
    if screen.touch:
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot_stitched(page, Path(ARTIFACTS) / "probe-counterfactual-phone.png")


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_bias_page_reads_on_a_phone_and_a_desktop(pages: str, browser: Browser, screen: Screen) -> None:
    page = browser.page(screen, pages)
    page.goto(pages + "probe-bias.html", wait_until="load")
    _reads(page, screen)
    summary = page.locator("table.summary tbody tr")
    assert summary.count() == len(JUDGES)
    assert outside_viewport(page, "table.summary td") == []
    first = page.locator("section.card").filter(has_text="baseline:first").inner_text()
    assert "position: flips when the order is swapped" in first and "100% (90%–100%)" in first
    assert "not measurable" in first  # self-preference without generator metadata
    if screen.touch:
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot_stitched(page, Path(ARTIFACTS) / "probe-bias-phone.png")
