"""Report files from real stores: Markdown numbers, the spreadsheet layout, self-contained HTML, CSV, JSON."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from helpers.runs import PLANTED, PLANTED_REASON, RunsFixture, make_cases

import medrewardbench
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.data.provenance import UNKNOWN_LABELS
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import StoreError
from medrewardbench.evaluation.runner import run_judge
from medrewardbench.evaluation.store import Store
from medrewardbench.judges import build_judge
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.loading import analyze_paths
from medrewardbench.metrics.results import Analysis
from medrewardbench.report.format import METRIC, estimate
from medrewardbench.report.html import render_html
from medrewardbench.report.markdown import render_markdown
from medrewardbench.report.render import CSV_COLUMNS, FILE_NAMES, ReportSettings, read_analysis_json, render_report
from medrewardbench.report.xlsx import SUMMARY_SHEETS, sheet_names

N_RESAMPLES = 300


@pytest.fixture(scope="module")
def report(runs_fixture: RunsFixture, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("report")
    written = render_report([runs_fixture.run_dir], out, settings=ReportSettings(n_resamples=N_RESAMPLES))
    return {"out": out, "written": written, "analysis": read_analysis_json(written["json"])}


def test_every_format_is_written(report: dict[str, Any]) -> None:
    written = report["written"]
    assert set(written) == {"md", "csv", "pairwise_csv", "json", "xlsx", "html"}
    for key, path in written.items():
        assert path == report["out"] / FILE_NAMES[key]
        assert path.stat().st_size > 500


def test_json_is_the_analysis(report: dict[str, Any], runs_fixture: RunsFixture) -> None:
    again = analyze_paths([runs_fixture.run_dir], n_resamples=N_RESAMPLES)
    document = json.loads(report["written"]["json"].read_text("utf-8"))
    assert document == json.loads(json.dumps(again.to_json()))
    assert report["analysis"] == Analysis.from_json(again.to_json())
    assert report["analysis"].dataset.name == "cases"


def test_reports_are_reproducible(runs_fixture: RunsFixture, report: dict[str, Any], tmp_path: Path) -> None:
    again = render_report(
        [runs_fixture.run_dir],
        tmp_path,
        formats=("md", "json", "csv", "html"),
        settings=ReportSettings(n_resamples=N_RESAMPLES),
    )
    for key, path in again.items():
        assert path.read_bytes() == report["written"][key].read_bytes(), key


def test_markdown_has_the_numbers(report: dict[str, Any]) -> None:
    md = report["written"]["md"].read_text("utf-8")
    analysis = report["analysis"]
    for row in analysis.leaderboard:
        if row.label == "test:broken":
            continue
        line = next(line for line in md.splitlines() if line.startswith(f"| {row.rank} | "))
        assert row.label in line
        assert estimate(row.score) in line
        assert f"| {row.tier} |" in line
    assert "| 1 | 1 | test:oracle | 100.0 [100.0, 100.0] |" in md
    # a judge that never answered is listed apart, unranked, with its most frequent failure reason
    assert "test:broken | 0.0 [0.0, 0.0]" not in md
    apart = md.split("### Judges that never answered", 1)[1].split("\n## ", 1)[0]
    assert "| test:broken | 100.0 | scripted failure: server said no (48) |" in apart
    assert "· 7 judges (1 never answered) ·" in md
    assert "baseline:first *(baseline)*" in md
    random_run = analysis.run("baseline:random")
    assert estimate(random_run.accuracy["creativity"]) in md
    assert "## How to read" in md and "## Position bias" in md and "## Length bias" in md
    assert "### test:oracle — by organ system" in md
    assert "| brain | 8 |" in md and "| macro (mean) |" in md
    assert "scripted failure: server said no (48)" in md
    assert render_markdown(analysis) == render_markdown(analysis)


def test_markdown_escapes_labels(report: dict[str, Any]) -> None:
    document = report["analysis"].to_json()
    odd = "hf:org/my_model|v*2"
    for item in (*document["leaderboard"], *document["runs"]):
        if item["label"] == "test:planted":
            item["label"] = odd
    md = render_markdown(Analysis.from_json(document))
    assert odd not in md
    table_lines = [line for line in md.splitlines() if line.startswith("|") and "my" in line]
    assert len(table_lines) >= 5
    assert all("hf:org/my\\_model\\|v\\*2" in line for line in table_lines)
    assert "### hf:org/my\\_model|v\\*2 — by organ system" in md


def test_spreadsheet_has_the_reference_layout(report: dict[str, Any]) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    analysis = report["analysis"]
    workbook = openpyxl.load_workbook(report["written"]["xlsx"])
    labels = [row.label for row in analysis.leaderboard if row.label != "test:broken"]
    judge_sheets = sheet_names(labels)
    # the judge that never answered has no sheet of its own: it is listed apart, with its reason
    summary = ["never_answered", "pairwise", "position_length", "about"]
    assert workbook.sheetnames == ["leaderboard", *judge_sheets, *summary]
    apart = [[c.value for c in row] for row in workbook["never_answered"].iter_rows()]
    assert apart[0] == ["judge", "run_id", "rate", "reason"]
    assert apart[1][0] == "test:broken" and apart[1][2] == 1.0
    assert apart[1][3] == "scripted failure: server said no (48)"
    leaderboard = [c.value for c in next(workbook["leaderboard"].iter_cols(min_col=3, max_col=3))]
    assert "test:broken" not in leaderboard
    assert workbook.properties.title == "cases report"
    assert "baseline_random" in judge_sheets and "test_oracle-twin" in judge_sheets
    expected_header = ["modality", "model", *[f"{d}_acc" for d in DIMENSIONS], "all_acc", "n_cases"]
    for label, name in zip(labels, judge_sheets, strict=True):
        sheet = workbook[name]
        rows = list(sheet.iter_rows(values_only=True))
        assert list(rows[0]) == expected_header
        assert [r[0] for r in rows[1:]] == ["brain", "chest", "heart", "all", "macro"]
        assert all(r[1] == label for r in rows[1:])
        run = analysis.run(label)
        organ = run.groups["organ_system"]
        for r in rows[1:4]:
            for j, d in enumerate(DIMENSIONS):
                assert r[2 + j] == pytest.approx(organ.groups[r[0]][d].point)
                assert 0.0 <= r[2 + j] <= 1.0  # fractions, not percentages
            assert r[-1] == 8
        assert rows[4][2 + DIMENSIONS.index("overall")] == pytest.approx(run.accuracy["overall"].point)
        assert rows[4][-1] == 24
    board = list(workbook["leaderboard"].iter_rows(values_only=True))
    assert board[0][:6] == ("rank", "tier", "judge", "run_id", "baseline", "score")
    assert [r[2] for r in board[1:]] == labels
    assert board[1][5] == 1.0
    pairwise = list(workbook["pairwise"].iter_rows(values_only=True))
    n = len(labels) + 1  # the sheet holds every pair, as analysis.json does
    assert len(pairwise) - 1 == n * (n - 1) // 2 * (len(DIMENSIONS) + 1)
    position = list(workbook["position_length"].iter_rows(values_only=True))
    first = next(r for r in position if r[0] == "baseline:first")
    assert first[position[0].index("first_position_rate")] == 1.0


def test_sheet_names_are_valid_and_unique() -> None:
    long = "hf:some-organisation/a-very-long-model-name-that-goes-on"
    names = sheet_names([long, long, "a/b:c*d?[e]", "Leaderboard", "x" * 40, "'quoted'"])
    assert all(len(n) <= 31 for n in names)
    assert len({n.lower() for n in names} | {s.lower() for s in SUMMARY_SHEETS}) == len(names) + len(SUMMARY_SHEETS)
    assert not any(ch in n for n in names for ch in "[]:*?/\\")
    assert names[2] == "a_b_c_d__e_"
    assert names[3] != "Leaderboard" and names[3].startswith("Leaderboard")
    assert names[5] == "quoted"
    ports = sheet_names(["api:a-long-model-name-here @127.0.0.1:18001", "api:a-long-model-name-here @127.0.0.1:18002"])
    assert ports[0].endswith("18001") and ports[1].endswith("18002"), "cut in the middle, the ports stay"


def test_html_is_self_contained_and_escapes_judge_output(report: dict[str, Any]) -> None:
    html = report["written"]["html"].read_text("utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"url\(\s*['\"]?\s*(https?:)?//", html, re.IGNORECASE)
    assert "<link" not in html.lower()
    # two inline scripts (filters and image viewer; the case viewer) and the case viewer's JSON, loading
    # nothing; the planted script is escaped in the page and in the JSON
    assert html.lower().count("<script") == 3 and html.count("<script>\n") == 2
    assert html.count('<script type="application/json" id="viewer-data" data-encoding="json">') == 1
    assert not re.search(r"<script[^>]*\bsrc=", html, re.IGNORECASE)
    data = html.split('data-encoding="json">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and "\\u003cscript>alert('pwned')\\u003c/script>" in data
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;b&gt;bold?&lt;/b&gt;" in html  # case text is escaped too
    assert "HTTP 500 &lt;html&gt;oops&lt;/html&gt;" in html
    assert html.count('src="data:image/jpeg;base64,') >= 10
    assert html.count('class="chart') >= 1 + 6 + 7 + 2
    assert 'id="leaderboard"' in html and 'table class="leaderboard"' in html
    size = report["written"]["html"].stat().st_size
    assert 20_000 < size < 2_000_000


def test_html_shows_each_case_once_and_indexes_it_per_judge(report: dict[str, Any]) -> None:
    html = report["written"]["html"].read_text("utf-8")
    anchors = re.findall(r'<article class="case" id="([^"]+)"', html)
    assert anchors and len(anchors) == len(set(anchors))
    assert len(anchors) == 24  # the broken judge got every case wrong
    for anchor in anchors:
        assert f'href="#{anchor}"' in html
    assert "<strong>test:oracle</strong>: 0 cases" in html
    assert "<strong>test:broken</strong>: 24 cases" in html


def test_html_without_a_loadable_source_says_so(tmp_path: Path) -> None:
    benchmark = Benchmark(name="in-memory", source="memory:in-memory", cases=tuple(make_cases(6)))
    with Store.in_dir(tmp_path / "runs") as store:
        run_judge(build_judge("baseline:first"), benchmark, store)
    written = render_report(
        [tmp_path / "runs"], tmp_path / "out", formats=("html",), settings=ReportSettings(n_resamples=50)
    )
    html = written["html"].read_text("utf-8")
    assert "could not be loaded" in html and "memory:in-memory" in html
    assert "data:image" not in html
    assert "image not shown" in html
    assert set(written) == {"html"}


def test_html_notes_a_case_that_changed_since_it_was_judged(runs_fixture: RunsFixture, tmp_path: Path) -> None:
    data_file = runs_fixture.data_file
    original = data_file.read_text("utf-8")
    stamp = data_file.stat()  # the shared fixture is put back as it was, its time stamps too: loaders check them
    try:
        data_file.write_text(original.replace("What does image 3 show?", "What does image 3 REALLY show?"), "utf-8")
        written = render_report(
            [runs_fixture.run_dir],
            tmp_path,
            formats=("html",),
            settings=ReportSettings(n_resamples=50, judges=["test:broken"]),
        )
    finally:
        data_file.write_text(original, "utf-8")
        os.utime(data_file, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    html = written["html"].read_text("utf-8")
    case_3 = html[html.index('id="case-c003"') :]
    case_3 = case_3[: case_3.index("</article>")]
    assert "has changed in the data source" in case_3
    case_4 = html[html.index('id="case-c004"') :]
    assert "has changed" not in case_4[: case_4.index("</article>")]


def test_csv_long_format(report: dict[str, Any]) -> None:
    with report["written"]["csv"].open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == CSV_COLUMNS
    analysis = report["analysis"]
    for run in analysis.runs:
        score = next(
            r
            for r in rows
            if r["run_id"] == run.run_id
            and r["metric"] == "accuracy"
            and r["dimension"] == "all"
            and not r["group"]
            and not r["order"]
        )
        assert float(score["point"]) == pytest.approx(run.score.point)
        assert float(score["low"]) == pytest.approx(run.score.low)
        organ = [
            r
            for r in rows
            if r["run_id"] == run.run_id
            and r["group_field"] == "organ_system"
            and r["metric"] == "accuracy"
            and r["dimension"] == "overall"
        ]
        assert sorted(r["group"] for r in organ) == ["brain", "chest", "heart"]
    broken = [r for r in rows if r["judge"] == "test:broken" and r["metric"] == "answered_accuracy"]
    assert broken and all(r["point"] == "" for r in broken)
    with report["written"]["pairwise_csv"].open(encoding="utf-8") as fh:
        pairs = list(csv.DictReader(fh))
    n = len(analysis.leaderboard)
    assert len(pairs) == n * (n - 1) // 2 * (len(DIMENSIONS) + 1)
    assert {"a", "b", "p_case", "p_case_holm", "cases_a_better", "p_bootstrap_holm", "significant"} <= set(pairs[0])
    assert not any("mcnemar" in key for key in pairs[0])


def test_selecting_judges_and_bad_requests(runs_fixture: RunsFixture, tmp_path: Path) -> None:
    written = render_report(
        [runs_fixture.run_dir],
        tmp_path,
        formats=("json",),
        settings=ReportSettings(n_resamples=50, judges=["baseline:first", "test:oracle"]),
    )
    analysis = read_analysis_json(written["json"])
    assert [r.label for r in analysis.leaderboard] == ["test:oracle", "baseline:first"]
    with pytest.raises(StoreError, match="no run of 'nope:model'"):
        render_report([runs_fixture.run_dir], tmp_path, settings=ReportSettings(judges=["nope:model"]))
    with pytest.raises(ValueError, match="unknown report format"):
        render_report([runs_fixture.run_dir], tmp_path, formats=("pdf",))
    with pytest.raises(StoreError, match="data fingerprints differ"):
        render_report([runs_fixture.run_dir, runs_fixture.other_dir], tmp_path, formats=("md",))


def test_a_single_judge_report_renders(runs_fixture: RunsFixture) -> None:
    from medrewardbench.metrics.analysis import load_runs

    runs = [r for r in load_runs([runs_fixture.run_dir]) if r.judge_spec == "baseline:random"]
    analysis = analyze(runs, n_resamples=50)
    html = render_html(analysis)
    assert "Only one judge" in html
    assert "baseline:random" in render_markdown(analysis)
    assert PLANTED not in html


# ------------------------------------------------------------------------ labels, wording, the HTML additions


def test_every_report_states_where_the_labels_come_from_and_never_calls_them_experts(
    report: dict[str, Any],
) -> None:
    banner = UNKNOWN_LABELS.banner()
    md = report["written"]["md"].read_text("utf-8")
    html = report["written"]["html"].read_text("utf-8")
    assert banner.replace("(", "\\(") in md.replace("(", "\\(") or banner in md
    assert banner in html and 'class="labels-banner caution"' in html
    assert report["analysis"].dataset.labels == UNKNOWN_LABELS
    assert json.loads(report["written"]["json"].read_text())["dataset"]["labels"]["kind"] == "unknown"
    for text in (md, html):
        assert "expert" not in text.lower(), "labels of unknown provenance are never the experts'"
        assert "Labelled winner" in text or "labelled winner" in text


def test_the_metric_is_agreement_with_the_labels_and_accuracy_stays_a_dimension(report: dict[str, Any]) -> None:
    md = report["written"]["md"].read_text("utf-8")
    html = report["written"]["html"].read_text("utf-8")
    assert f"{METRIC.capitalize()} [95 % CI]" in md and "| Judge | Accuracy | Relevance |" in md
    assert "Accuracy per dimension" not in html and "Agreement with the labels on each dimension" in html
    assert html.count(f">{METRIC}, %</text>") >= 1 + 6 + 1  # the value axis of the score, dimension and length charts
    assert "Strict accuracy" not in html and "Strict agreement" in html


def test_how_to_read_uses_the_report_s_own_first_row(report: dict[str, Any]) -> None:
    top = report["analysis"].leaderboard[0]
    md = report["written"]["md"].read_text("utf-8")
    html = report["written"]["html"].read_text("utf-8")
    assert f"- `{estimate(top.score)}`, the score of {top.label} (first row below)" in md
    assert f"<strong>{estimate(top.score)}</strong>, the score of {top.label} (first row" in html
    assert "71.2 [68.0, 74.3]" not in md + html


def _articles(html: str) -> list[str]:
    return [part.split("</article>")[0] for part in html.split('<article class="case"')[1:]]


def test_html_configuration_table_and_every_judge_s_picks_in_both_orders(report: dict[str, Any]) -> None:
    html = report["written"]["html"].read_text("utf-8")
    analysis = report["analysis"]
    config = html[html.index('<table class="configuration">') :].split("</table>")[0]
    assert config.count("<tr data-judge=") == len(analysis.runs)
    for run in analysis.runs:
        assert f"<code>{run.run_id}</code>" in config
    assert medrewardbench.__version__ in config and re.search(r"\d{4}-\d\d-\d\d", config)
    for article in _articles(html):
        rows = re.findall(r'<tr class="(missed|right)" data-judge=', article)
        assert len(rows) == len(analysis.runs), "every judge's picks, not only those that missed the case"
        assert "missed" in rows
        body = article.split("<tbody>")[1]
        assert body.count('<span class="pick') == len(analysis.runs) * 2 * 6  # both orders, six dimensions


def test_html_shows_word_counts_images_full_size_and_the_judge_s_reason(report: dict[str, Any]) -> None:
    html = report["written"]["html"].read_text("utf-8")
    article = next(a for a in _articles(html) if 'id="case-c001"' in a)
    case = next(c for c in make_cases(24) if c.case_id == "c001")
    assert f"{len(case.response_1.split())} words" in article and f"{len(case.response_2.split())} words" in article
    assert 'class="zoomable"' in article and "48 × 48 px" in article
    escaped_reason = "Answer &lt;b&gt;A&lt;/b&gt; names the lesion 1"
    assert "Judge's reason" in article and escaped_reason in article
    assert PLANTED_REASON not in html, "the reason is escaped"
    assert 'id="image-viewer"' in html


def test_html_heatmap_cells_carry_n_and_small_groups_are_muted(runs_fixture: RunsFixture, tmp_path: Path) -> None:
    written = render_report(
        [runs_fixture.run_dir], tmp_path, formats=("html",), settings=ReportSettings(n_resamples=50)
    )
    html = written["html"].read_text("utf-8")
    heatmap = html[html.index('id="organs"') : html.index('id="agreement"')]
    assert "n 16" in heatmap  # 8 cases per organ system x 2 orders
    assert 'class="cell small-n"' in heatmap and 'stroke-dasharray="3 2"' in heatmap  # 16 < 20: muted
    assert "fewer than 20 judgments are pale" in heatmap


def test_html_pairwise_matrix_prints_p_values(report: dict[str, Any]) -> None:
    html = report["written"]["html"].read_text("utf-8")
    matrix = html[html.index('<table class="matrix">') :].split("</table>")[0]
    n = len(report["analysis"].leaderboard) - 1  # the judge that never answered is not compared
    assert matrix.count('<span class="p">p ') == n * (n - 1) // 2
    assert '<span class="p">p &lt;0.0033</span>' in matrix  # 300 resamples cannot resolve less


def test_html_filters_are_inline_and_cover_organ_judge_and_dimension(report: dict[str, Any]) -> None:
    html = report["written"]["html"].read_text("utf-8")
    for kind in ("organ", "judge", "dim"):
        assert f'<select data-filter="{kind}">' in html
    assert html.count('data-dim="overall"') >= 1 + 2 * len(report["analysis"].runs)
    article = _articles(html)[0]
    assert re.match(r' id="[^"]+" data-organ="o\d" data-judge="j\d+( j\d+)*"', article)
