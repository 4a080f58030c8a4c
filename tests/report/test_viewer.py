"""The per-case viewer: every case and every judge's request, rendered a page at a time, on a phone and a desktop."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.browser import (
    SCREENS,
    Browser,
    Screen,
    chromium,
    serve_directory,
    sideways_overflow,
    too_small_to_tap,
    wait_until,
)

from medrewardbench.judges.baselines import BASELINE_NAMES
from medrewardbench.metrics.loading import analyze_dataset, find_datasets
from medrewardbench.prompts import load_template
from medrewardbench.report import viewer as viewer_module
from medrewardbench.report.html import write_html
from medrewardbench.report.viewer import PAGE_SIZE, _template, viewer_data, viewer_json, viewer_payload


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from medrewardbench.data import load_benchmark
    from medrewardbench.evaluation.job import evaluate

    root = tmp_path_factory.mktemp("viewer")
    evaluate(load_benchmark("demo"), [f"baseline:{name}" for name in BASELINE_NAMES], root / "results")
    [dataset] = find_datasets([root / "results"])
    data = viewer_data(dataset.runs)
    # the baselines send no prompt: give the first judge the shipped pairwise template to see one rebuilt
    data["judges"][0]["template"] = _template({"template": "pairwise"})
    analysis = analyze_dataset(dataset, n_resamples=100)
    write_html(analysis, root / "report" / "report.html", viewer=data)
    limit = viewer_module.COMPRESS_ABOVE
    viewer_module.COMPRESS_ABOVE = 0  # as a large report embeds it: gzip in base64
    try:
        write_html(analysis, root / "report" / "report-gzip.html", viewer=data)
    finally:
        viewer_module.COMPRESS_ABOVE = limit
    return {"root": root, "data": data}


def test_every_case_and_every_judge_is_in_the_document(demo: dict[str, Any]) -> None:
    data = demo["data"]
    assert len(data["cases"]) == 34 and len(data["judges"]) == len(BASELINE_NAMES)
    case = data["cases"][0]
    assert len(case["labels"]) == 6 and len(case["j"]) == len(BASELINE_NAMES)
    assert all(len(per_judge) == 2 for per_judge in case["j"])  # both orders
    verdicts, raw, failure = case["j"][0][0]
    assert len(verdicts) == 6 and set(verdicts) <= {0, 1, 2} and failure is None
    # each image is embedded once, keyed by its content: fewer images than cases that have one
    keys = [c["img"] for c in data["cases"] if c["img"]]
    assert set(keys) == set(data["images"]) and len(data["images"]) <= len(keys)
    assert all(uri.startswith("data:image/jpeg;base64,") for uri in data["images"].values())
    assert data["judges"][1]["template"]["note"].startswith("this judge sends no prompt")


def test_a_template_that_cannot_be_loaded_says_so() -> None:
    missing = _template({"template": "/nowhere/custom.txt"})
    assert missing["note"].startswith("the prompt cannot be reconstructed: template '/nowhere/custom.txt'")
    assert "user" not in missing


def test_the_embedded_json_cannot_close_its_script() -> None:
    text = viewer_json({"cases": [{"q": "</script><!-- x"}]})
    assert "</script>" not in text and "<!--" not in text
    assert json.loads(text) == {"cases": [{"q": "</script><!-- x"}]}


def test_a_large_document_is_embedded_gzipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import base64
    import gzip

    document = {"cases": [{"q": "</script>" * 10}]}
    assert viewer_payload(document) == ("json", viewer_json(document))
    monkeypatch.setattr(viewer_module, "COMPRESS_ABOVE", 10)
    encoding, text = viewer_payload(document)
    assert encoding == "gzip" and "<" not in text
    assert json.loads(gzip.decompress(base64.b64decode(text))) == document


def test_the_browser_unpacks_a_gzipped_viewer(demo: dict[str, Any], browser: Browser) -> None:
    with serve_directory(Path(demo["root"]) / "report") as base:
        page = browser.page(SCREENS[1], base)
        page.goto(base + "report-gzip.html", wait_until="load")
        assert page.locator("#viewer-data").get_attribute("data-encoding") == "gzip"
        page.locator("#viewer details.v-open > summary").click()
        wait_until(page, "document.querySelectorAll('article.v-case').length > 0")
        assert page.locator("article.v-case").count() == PAGE_SIZE
        page.context.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser
    assert browser.errors == [], browser.errors


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_the_viewer_pages_filters_and_puts_two_judges_side_by_side(
    demo: dict[str, Any], browser: Browser, screen: Screen
) -> None:
    with serve_directory(Path(demo["root"]) / "report") as base:
        page = browser.page(screen, base)
        page.goto(base + "report.html", wait_until="load")
        assert page.locator("article.v-case").count() == 0, "nothing is rendered before the viewer is opened"
        page.locator("#viewer details.v-open > summary").click()
        wait_until(page, "document.querySelectorAll('article.v-case').length > 0")
        assert page.locator("article.v-case").count() == PAGE_SIZE
        assert "cases 1–25 of 34" in page.locator(".v-status").first.inner_text()
        assert sideways_overflow(page) == 0, f"the viewer is wider than the {screen}"
        if screen.touch:
            assert too_small_to_tap(page, ".v-pager button, #viewer details.v-open > summary") == []

        # the prompt the first judge received, rebuilt as the judges render it
        first = page.locator("article.v-case").first
        first.locator("details.v-request").first.locator("summary").click()
        shown = first.locator("details.v-request").first.locator("pre").nth(1).inner_text()
        case = demo["data"]["cases"][0]
        expected = load_template("pairwise").render_user_text(case["q"], case["r1"], case["r2"])
        assert shown.strip() == expected.strip()

        page.locator(".v-next").first.click()
        assert page.locator("article.v-case").count() == 34 - PAGE_SIZE
        page.select_option("select[name=v-judge-b]", "1")
        assert page.locator("article.v-case").first.locator(".v-judge").count() == 2
        assert sideways_overflow(page) == 0, "two judges side by side still fit"

        organs = {c["organ"] for c in demo["data"]["cases"]}
        organ = sorted(organs)[0]
        page.select_option("select[name=v-organ]", organ)
        expected_n = sum(1 for c in demo["data"]["cases"] if c["organ"] == organ)
        assert page.locator("article.v-case").count() == min(expected_n, PAGE_SIZE)

        page.select_option("select[name=v-organ]", "")
        longer = [j["label"] for j in demo["data"]["judges"]].index("baseline:longer")
        page.select_option("select[name=v-judge-a]", str(longer))
        page.select_option("select[name=v-agreement]", "wrong")
        status = page.locator(".v-status").first.inner_text()
        n_wrong = int(re.search(r"of (\d+)", status).group(1))  # type: ignore[union-attr]
        assert 0 < n_wrong < 34
        page.context.close()


def test_a_report_too_large_for_the_viewer_leaves_it_out(
    demo: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    [dataset] = find_datasets([Path(demo["root"]) / "results"])
    assert viewer_module.fits(dataset.runs)
    monkeypatch.setattr(viewer_module, "MAX_CELLS", 34 * len(BASELINE_NAMES) - 1)
    assert not viewer_module.fits(dataset.runs)
    from medrewardbench.report.render import ReportSettings, render_report

    written = render_report(
        [Path(demo["root"]) / "results"],
        tmp_path,
        formats=("html",),
        settings=ReportSettings(n_resamples=100),
    )
    assert 'id="viewer-data"' not in written["html"].read_text("utf-8")
