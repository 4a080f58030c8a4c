"""The report's Probes section, from real probe files: the four probe commands on the demo, then ``report``.

An eval of two baselines on the first 6 demo cases; ``probe grounding``, ``probe counterfactual``
and ``probe bias`` into the same folder; ``probe harm`` on the same 6 cases with a doctor's
``severe`` flag on response 2 of every other case (the flags leave the data's fingerprint alone,
so its runs are the same). ``report`` then shows a Probes section in the parent data's report
(Markdown and HTML) whose figures are those of the JSON files, and none in the derived data sets'
reports. The HTML is read in Chromium on a phone and a desktop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.report.probes import ProbeFileError, find_probe_files, load_probe_section

runner = CliRunner()
JUDGES = ("baseline:longer", "baseline:shorter")
pytestmark = pytest.mark.slow


def _cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _flagged_demo(path: Path) -> Path:
    from medrewardbench.data import load_benchmark, write_canonical

    cases = load_benchmark("demo", limit=6).cases
    flagged = [
        replace(case, annotations=(replace(case.annotations[0], harm={2: "severe"}), *case.annotations[1:]))
        if i % 2 == 0
        else case
        for i, case in enumerate(cases)
    ]
    return write_canonical(flagged, path)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("probe-report")
    out = root / "results"
    judges = [arg for spec in JUDGES for arg in ("--judge", spec)]
    common = ["--out", str(out), "--bootstrap", "200", "-q", *judges]
    _cli("eval", "--data", "demo", "--limit", "6", "--out", str(out), "-q", *judges)
    _cli("probe", "grounding", "--data", "demo", "--limit", "6", *common)
    _cli("probe", "counterfactual", "--data", "demo", "--limit", "6", *common)
    _cli("probe", "bias", "--data", "demo", "--limit", "6", *common)
    _cli("probe", "harm", "--data", str(_flagged_demo(root / "flagged.jsonl")), "--out", str(out), "-q", *judges)
    _cli("report", str(out), "--format", "md,html", "--bootstrap", "200")
    return out


def _parent_report(results: Path) -> Path:
    parent = _json(results, "grounding")["data"]["data_hash"]
    (folder,) = [p for p in results.iterdir() if p.is_dir() and p.name.endswith("-" + parent[:8])]
    return folder


def _parent_hash(results: Path) -> str:
    return str(_json(results, "grounding")["data"]["data_hash"])[:12]


def _json(results: Path, probe: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((results / f"probe-{probe}.json").read_text("utf-8"))
    return document


def _shown(rate: dict[str, Any]) -> str:
    return f"{100 * rate['point']:.1f} [{100 * rate['low']:.1f}, {100 * rate['high']:.1f}]"


def _expected(results: Path) -> dict[str, dict[str, str]]:
    """Each judge's line as the JSON files say it should read."""
    grounding = {j["judge"]: j for j in _json(results, "grounding")["judges"]}
    counterfactual = {j["judge"]: j for j in _json(results, "counterfactual")["judges"]}
    bias = {c["judge"]: {r["bias"]: r for r in c["rows"]} for c in _json(results, "bias")["cards"]}
    harm = {j["judge"]: j for j in _json(results, "harm")["judges"]}
    lines = {}
    for spec in JUDGES:
        controls = grounding[spec]["controls"]
        worst = max(controls, key=lambda name: controls[name]["flip_rate"]["point"])
        cf = counterfactual[spec]
        over = _shown(cf["over_penalisation"]["all"]) + (" (fails the control)" if cf["control_fails"] else "")
        cues = (("authority", "authority"), ("image_mention", "image mention"), ("confident", "confident"))
        cues += (("markdown", "markdown"),)
        lines[spec] = {
            "grounding": f"{grounding[spec]['flag']}; {_shown(controls[worst]['flip_rate'])} ({worst})",
            "detection": _shown(cf["detection"]["all"]),
            "critical_miss": _shown(cf["critical_miss"]),
            "doctor": f"{_shown(harm[spec]['critical_miss_rate'])} on {harm[spec]['pairs']} pairs",
            "over": over,
            "position": _shown(bias[spec]["position"]["rate"]),
            "longer": _shown(bias[spec]["length"]["rate"]),
            "cues": " · ".join(f"{shown} {100 * bias[spec][name]['effect']:+.0f}" for name, shown in cues),
        }
    return lines


def test_the_markdown_report_has_a_line_per_judge_with_the_figures_of_the_probe_files(results: Path) -> None:
    text = (_parent_report(results) / "report.md").read_text("utf-8")
    section = text.split("## Probes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| baseline")]
    assert len(rows) == len(JUDGES)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[1:] == list(_expected(results)[cells[0]].values()), cells
    harm = {j["judge"]: j for j in _json(results, "harm")["judges"]}
    assert harm["baseline:longer"]["pairs"] == 3  # the flags reached the probe: every other case of 6
    # the flags leave the fingerprint alone: harm records the parent data's, by which the report matches it
    assert _json(results, "harm")["data"]["data_hash"] == _json(results, "grounding")["data"]["data_hash"]
    links = re.findall(r"\]\(([^)]+)\)", section)
    assert links == ["../probe-grounding.html", "../probe-counterfactual.html", "../probe-bias.html"]
    assert all((_parent_report(results) / link).resolve().is_file() for link in links)


def test_only_the_parent_datas_report_has_the_section(results: Path) -> None:
    reports = sorted(results.glob("*/report.md"))
    assert len(reports) > 4  # the parent, the grounding controls, the pair probes' derived sets
    with_probes = [p.parent.name for p in reports if "## Probes" in p.read_text("utf-8")]
    assert with_probes == [_parent_report(results).name]


def test_a_results_folder_without_probe_files_has_no_section(results: Path, tmp_path: Path) -> None:
    import shutil

    (tmp_path / "results").mkdir()
    shutil.copy(results / "medrewardbench.sqlite", tmp_path / "results" / "medrewardbench.sqlite")
    folder = str(tmp_path / "results")
    _cli("report", folder, "--format", "md,html", "--bootstrap", "100", "--data", _parent_hash(results))
    assert "## Probes" not in (tmp_path / "results" / "report.md").read_text("utf-8")
    assert 'id="probes"' not in (tmp_path / "results" / "report.html").read_text("utf-8")
    assert find_probe_files([tmp_path / "results"]) == {}


def test_a_probe_file_of_other_data_is_left_out(results: Path) -> None:
    files = find_probe_files([results])
    assert set(files) == {"grounding", "counterfactual", "bias", "harm"}
    assert load_probe_section(files, "0" * 64, list(JUDGES), results) is None
    parent = _json(results, "grounding")["data"]["data_hash"]
    section = load_probe_section(files, parent, ["baseline:longer", "baseline:unknown"], results)
    assert section is not None and [j.judge for j in section.judges] == ["baseline:longer"]
    assert section.pages == {p: f"probe-{p}.html" for p in ("grounding", "counterfactual", "bias")}


def test_a_bad_field_is_an_error_naming_the_file_and_the_field(results: Path, tmp_path: Path) -> None:
    document = _json(results, "counterfactual")
    document["judges"][1]["critical_miss"] = {"point": "half"}
    (tmp_path / "probe-counterfactual.json").write_text(json.dumps(document), "utf-8")
    parent = _json(results, "grounding")["data"]["data_hash"]
    with pytest.raises(ProbeFileError, match=r"probe-counterfactual.json, field 'judges\[1\].critical_miss.point'"):
        load_probe_section(find_probe_files([tmp_path]), parent, list(JUDGES), tmp_path)
    (tmp_path / "probe-counterfactual.json").write_text("{", "utf-8")
    with pytest.raises(ProbeFileError, match="probe-counterfactual.json: not a JSON document"):
        load_probe_section(find_probe_files([tmp_path]), parent, list(JUDGES), tmp_path)


@pytest.fixture(scope="module")
def served(results: Path) -> Iterator[str]:
    from helpers.browser import serve_directory

    with serve_directory(results) as base:
        yield base + _parent_report(results).name + "/report.html"


@pytest.mark.parametrize("width", [390, 1280])
def test_the_section_reads_on_a_phone_and_a_desktop(served: str, results: Path, width: int) -> None:
    from helpers.browser import (
        ARTIFACTS,
        SCREENS,
        chromium,
        clipped_tables,
        outside_viewport,
        screenshot_stitched,
        sideways_overflow,
    )

    (screen,) = [s for s in SCREENS if s.width == width]
    with chromium() as browser:
        page = browser.page(screen, served.rsplit("/", 2)[0])
        page.goto(served, wait_until="load")
        assert page.locator('nav.toc a[href="#probes"]').count() == 1
        section = page.locator("#probes")
        section.scroll_into_view_if_needed()
        assert section.is_visible()
        rows = page.locator("#probes table.probes tbody tr")
        assert rows.count() == len(JUDGES)
        expected = _expected(results)
        for i in range(rows.count()):
            cells = rows.nth(i).locator("td")
            judge = cells.nth(0).inner_text().strip()
            texts = [text.replace("\xa0", " ") for text in cells.all_text_contents()]
            assert texts[3] == expected[judge]["critical_miss"]
            assert texts[4] == expected[judge]["doctor"]
            assert texts[:8] == [judge, *list(expected[judge].values())[:7]]
        assert outside_viewport(page, "#probes td") == []
        assert sideways_overflow(page) == 0, f"the report is wider than {width} px"
        assert clipped_tables(page) == []
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot_stitched(page, ARTIFACTS / f"report-probes-{width}.png", "#probes")
        link = page.locator("#probes a", has_text="bias card")
        link.click()
        page.wait_for_load_state("load")
        assert page.url.endswith("/probe-bias.html")
        page.context.close()
    assert browser.errors == [], browser.errors


def test_report_stops_on_a_bad_probe_file_with_status_2_naming_it(results: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copy(results / "medrewardbench.sqlite", tmp_path / "medrewardbench.sqlite")
    document = _json(results, "bias")
    del document["cards"][0]["rows"][0]["bias"]
    (tmp_path / "probe-bias.json").write_text(json.dumps(document), "utf-8")
    args = ["report", str(tmp_path), "--format", "md", "--bootstrap", "100", "--data", _parent_hash(results)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "probe-bias.json, field 'cards[0].rows[0].bias': expected a field 'bias'" in " ".join(result.output.split())
