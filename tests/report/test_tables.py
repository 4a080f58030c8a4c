"""The report's tables are built once from column lists; Markdown, HTML and the spreadsheet only write them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers.runs import RunsFixture

from medrewardbench.metrics.loading import analyze_paths
from medrewardbench.metrics.results import Analysis, Estimate, LeaderboardRow
from medrewardbench.report import tables
from medrewardbench.report.columns import (
    HTML,
    MD,
    PERCENT_FORMAT,
    XLSX,
    Column,
    Judge,
    Kind,
    PValue,
    Table,
    Tiered,
    cells,
    number_formats,
    text,
)
from medrewardbench.report.markdown import render_markdown
from medrewardbench.report.tables import report_tables
from medrewardbench.report.xlsx import write_xlsx


@pytest.fixture(scope="module")
def analysis(runs_fixture: RunsFixture) -> Analysis:
    return analyze_paths([runs_fixture.run_dir], n_resamples=100)


def test_each_kind_reads_the_same_in_markdown_and_html_and_as_numbers_in_the_spreadsheet() -> None:
    score = Estimate(0.6958, 0.6031, 0.7842, 34)
    bounded: Column[object] = Column(
        "score", "Score", lambda r: score, Kind.ESTIMATE, bounds=("score_low", "score_high")
    )
    counted: Column[object] = Column("agree", "Agree (n)", lambda r: score, Kind.COUNTED, count="n_agree")
    assert text(Kind.ESTIMATE, score) == "69.6 [60.3, 78.4]"
    assert text(Kind.SIGNED, Estimate(0.184, 0.1, 0.25)) == "+18.4 [+10.0, +25.0]"
    assert text(Kind.COUNTED, score) == "69.6 (34)"
    assert text(Kind.TIERED, Tiered(score, 2)) == "69.6 [60.3, 78.4]"
    assert text(Kind.P_VALUE, PValue(0.0001, 300)) == "<0.0033"
    assert text(Kind.TIER, None) == "–" and text(Kind.JUDGE, Judge("a")) == "a"
    assert bounded.text(None) == "–" and Column("o", "O", str, Kind.ESTIMATE, blank="not run").text(None) == "not run"
    assert cells(bounded, score) == [0.6958, 0.6031, 0.7842] and bounded.cell_keys() == [
        "score",
        "score_low",
        "score_high",
    ]
    assert cells(counted, score) == [0.6958, 34] and number_formats(counted) == [PERCENT_FORMAT, None]
    assert cells(Column("p", "P", str, Kind.PERCENT), math.nan) == [None]


def test_a_table_shows_each_format_its_columns_and_its_footer_rows() -> None:
    table: Table[int] = Table(
        "t",
        (
            Column("n", "N", lambda r: r, Kind.COUNT),
            Column("only_sheet", "Sheet", lambda r: r * 2, Kind.COUNT, frozenset({XLSX})),
        ),
        (1, 2),
        ({"n": 9},),
    )
    assert [c.key for c in table.shown(MD)] == ["n"]
    assert table.values(XLSX) == [[1, 2], [2, 4], [9, None]]
    assert table.records(HTML) == [{"n": "1"}, {"n": "2"}]


def test_the_three_formats_write_the_built_leaderboard(analysis: Analysis, tmp_path: Path) -> None:
    built = report_tables(analysis).leaderboard
    headers = [c.header for c in built.shown(MD)]
    markdown = render_markdown(analysis)
    assert "| " + " | ".join(headers) + " |" in markdown
    assert [r.label for r in built.rows] == [row.label for row in analysis.leaderboard if row.failure_rate < 1]
    openpyxl = pytest.importorskip("openpyxl")
    sheet = openpyxl.load_workbook(write_xlsx(analysis, tmp_path / "r.xlsx"))["leaderboard"]
    assert [c.value for c in sheet[1]] == [key for c in built.shown(XLSX) for key in c.cell_keys()]


def test_adding_a_metric_is_one_column(analysis: Analysis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = tables.leaderboard_columns

    def with_strict(a: Analysis) -> tuple[Column[LeaderboardRow], ...]:
        strict = Column[LeaderboardRow]("strict_accuracy", "Strict", lambda r: 0.25, Kind.PERCENT)
        return (*listed(a), strict)

    monkeypatch.setattr(tables, "leaderboard_columns", with_strict)
    header_line = next(line for line in render_markdown(analysis).splitlines() if line.startswith("| # |"))
    assert header_line.endswith("| Strict |")
    assert all(record["strict_accuracy"] == "25.0" for record in report_tables(analysis).leaderboard.records(HTML))
    openpyxl = pytest.importorskip("openpyxl")
    sheet = openpyxl.load_workbook(write_xlsx(analysis, tmp_path / "r.xlsx"))["leaderboard"]
    header = [c.value for c in sheet[1]]
    column = header.index("strict_accuracy") + 1
    assert sheet.cell(2, column).value == 0.25 and sheet.cell(2, column).number_format == PERCENT_FORMAT


@pytest.mark.parametrize(
    ("name", "title"),
    [
        (None, "Med-RewardBench report"),
        ("Med-RewardBench", "Med-RewardBench report"),
        ("medrewardbench-demo", "Med-RewardBench demo report"),
        ("chest-study", "chest-study report"),
    ],
)
def test_a_report_is_titled_by_its_data_set(name: str | None, title: str) -> None:
    assert tables.report_title(name) == title


def test_the_response_rate_and_the_agreement_when_answered_are_two_named_columns(analysis: Analysis) -> None:
    built = report_tables(analysis).leaderboard
    by_key = {c.key: c for c in built.columns}
    assert by_key["answered_acc"].header == "Agreement when answered"
    assert by_key["response_rate"].header == "Response rate"
    keys = [c.key for c in built.shown(MD)]
    assert keys.index("response_rate") + 1 == keys.index("answered_acc")
    for row in built.rows:
        assert by_key["response_rate"].value(row) == pytest.approx(1.0 - row.failure_rate)
    # the page shows the response rate in place of "Failed" (one is 100 minus the other)
    assert "failure_rate" not in [c.key for c in built.shown(HTML)]
    assert "failure_rate" in [c.key for c in built.shown(XLSX)]
    assert "| Response rate | Agreement when answered | Failed |" in render_markdown(analysis)


def test_a_judge_that_never_answered_is_listed_apart_with_its_reason(analysis: Analysis) -> None:
    built = report_tables(analysis)
    assert "test:broken" in [row.label for row in analysis.leaderboard]  # the analysis itself keeps it
    for table in (built.leaderboard, built.dimensions, built.agreement, built.position, built.length, built.failures):
        assert "test:broken" not in [row.label for row in table.rows], table.name
    assert [run.label for run in built.failed.rows] == ["test:broken"]
    [record] = built.failed.records(MD)
    assert record["rate"] == "100.0" and record["reason"] == "scripted failure: server said no (48)"
    assert tables.answering(analysis).leaderboard == tuple(r for r in analysis.leaderboard if r.failure_rate < 1)
    # with every judge answering, nothing is left out and the analysis is the same object
    answered = tables.answering(analysis)
    assert tables.answering(answered) is answered


def test_titles_reach_every_format(analysis: Analysis, tmp_path: Path) -> None:
    from medrewardbench.report.html import render_html

    assert render_markdown(analysis).startswith("# cases report\n")
    assert render_markdown(analysis, title="Chest <study>").startswith("# Chest <study>\n")
    html = render_html(analysis, title="Chest <study>")
    assert "<title>Chest &lt;study&gt;</title>" in html and "<h1>Chest &lt;study&gt;</h1>" in html
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.load_workbook(write_xlsx(analysis, tmp_path / "r.xlsx", title="Chest study"))
    assert book.properties.title == "Chest study"
    assert [c.value for c in book["about"][1]] == ["title", "Chest study"]
