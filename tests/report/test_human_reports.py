"""The human ceiling in every report and leaderboard, from real stores made by ``evaluate``; and
nowhere when the data has no per-annotator labels."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.runs import make_cases
from rich.console import Console
from typer.testing import CliRunner

from medrewardbench.cases import Annotation, Case
from medrewardbench.cli import app
from medrewardbench.data import load_benchmark, write_canonical
from medrewardbench.dimensions import DIMENSIONS, Winner
from medrewardbench.evaluation.job import evaluate
from medrewardbench.metrics.results import HUMAN_LABEL, TOO_FEW, Analysis
from medrewardbench.report.format import estimate, points, ratio
from medrewardbench.report.render import ReportSettings, render_report
from medrewardbench.report.terminal import leaderboard_table
from medrewardbench.report.xlsx import HUMAN_COLUMNS, STAND_IN_COLUMNS

N_RESAMPLES = 200
JUDGES = ("baseline:longer", "baseline:random")
RATERS = ("dr-adeyemi", "dr-lindqvist", "dr-moreau")
runner = CliRunner()


def with_panel(case: Case, index: int) -> Case:
    """Three annotators whose majority is the label; one of them dissents on some dimensions."""
    panel = []
    for r, name in enumerate(RATERS):
        labels: dict[str, Winner] = {}
        for d, dim in enumerate(DIMENSIONS):
            label = case.labels[dim]
            dissents = (index + d) % 5 == r
            labels[dim] = (2 if label == 1 else 1) if dissents else label
        panel.append(Annotation(name, labels))
    return replace(case, annotations=tuple(panel))


def evaluated(root: Path, annotated: bool) -> dict[str, Any]:
    cases = [with_panel(c, i) if annotated else c for i, c in enumerate(make_cases(18))]
    data = write_canonical(cases, root / "cases.jsonl", embed_images=True)
    result = evaluate(load_benchmark(str(data)), JUDGES, root / "results")
    written = render_report([root / "results"], root / "report", settings=ReportSettings(n_resamples=N_RESAMPLES))
    return {"result": result, "written": written, "results": root / "results"}


@pytest.fixture(scope="module")
def annotated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return evaluated(tmp_path_factory.mktemp("annotated"), annotated=True)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return evaluated(tmp_path_factory.mktemp("bare"), annotated=False)


def analysis_of(report: dict[str, Any]) -> Analysis:
    return Analysis.from_json(json.loads(report["written"]["json"].read_text("utf-8")))


def test_the_stored_runs_carry_the_annotations_the_report_needs(annotated: dict[str, Any]) -> None:
    # the report did not reload the data: the store kept the per-annotator labels
    human = analysis_of(annotated).human
    assert human is not None and human.annotators == RATERS and human.n_cases == 18
    assert human.n_annotations == 18 * len(RATERS)
    assert [j.label for j in human.judges] == list(JUDGES)
    assert set(human.by_group) == {"brain", "chest", "heart"}
    assert human.human.pooled.has_interval and human.agreement.fleiss_kappa.pooled.has_interval


def test_markdown_shows_the_row_apart_and_the_tables(annotated: dict[str, Any]) -> None:
    analysis = analysis_of(annotated)
    assert analysis.human is not None
    md = annotated["written"]["md"].read_text("utf-8")
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    board = rows[: rows.index(next(r for r in rows if "human (leave-one-out)" in r)) + 1]
    human_row = board[-1]
    assert human_row.startswith("| – | not a judge | *human (leave-one-out)* |")
    assert human_row.endswith(f"| {estimate(analysis.human.human.pooled)} | 1.00 | – |")
    # every judge row carries its vs-annotators figure, its ratio to the human row and its verdict;
    # the human row comes after the ranked judges
    for row in analysis.leaderboard:
        line = next(r for r in board if f"| {row.label} *(baseline)* |" in r)
        assert line.startswith(f"| {row.rank} |")
        assert line.endswith(f"| {estimate(row.vs_annotators)} | {ratio(row.normalised)} | {row.verdict} |")
        assert board.index(line) < board.index(human_row)
    section = md[md.index("## Human ceiling") :]
    assert "### Agreement between annotators\n" in section and "### Each annotator against the others" in section
    for organ in ("brain", "chest", "heart"):
        assert f"\n| {organ} | 6 |" in section
    for name in RATERS:
        assert f"\n| {name} | 18 |" in section


def test_html_explains_the_ceiling_and_marks_the_row(annotated: dict[str, Any]) -> None:
    html = annotated["written"]["html"].read_text("utf-8")
    assert '<a href="#human-ceiling">Human ceiling</a>' in html and '<section id="human-ceiling">' in html
    leaderboard = html[html.index('<section id="leaderboard">') : html.index('<section id="dimensions">')]
    assert '<tr class="human">' in leaderboard and "not a judge" in leaderboard
    assert leaderboard.index("baseline:random") < leaderboard.index('<tr class="human">')
    section = html[html.index('<section id="human-ceiling">') : html.index('<section id="position">')]
    assert "How well can a judge do here?" in section and "the data cannot tell the judge from an annotator" in section
    assert "Krippendorff" in section and "heart" in section and "<svg" in section


def test_the_spreadsheet_has_the_row_and_a_human_ceiling_sheet(annotated: dict[str, Any]) -> None:
    import openpyxl

    analysis = analysis_of(annotated)
    assert analysis.human is not None
    book = openpyxl.load_workbook(annotated["written"]["xlsx"])
    assert "human_ceiling" in book.sheetnames
    rows = list(book["leaderboard"].iter_rows(values_only=True))
    header = list(rows[0])
    column = header.index("vs_annotators")
    human_row = rows[-1]
    assert human_row[header.index("judge")] == HUMAN_LABEL and human_row[header.index("rank")] is None
    assert "not a judge" in human_row[header.index("run_id")]
    assert human_row[column] == pytest.approx(analysis.human.human.pooled.point)
    for row in rows[1 : 1 + len(JUDGES)]:
        judge = analysis.human.judge(row[header.index("judge")])
        assert judge is not None and row[column] == pytest.approx(judge.agreement.pooled.point)
    sheet = list(book["human_ceiling"].iter_rows(values_only=True))
    assert list(sheet[0]) == list(HUMAN_COLUMNS)
    kappas = {(r[5], r[3]): r[6] for r in sheet[1:] if r[2] == "annotator_fleiss_kappa"}
    assert kappas[(None, "all")] == pytest.approx(analysis.human.agreement.fleiss_kappa.pooled.point)
    assert kappas[("chest", "overall")] == pytest.approx(analysis.human.by_group["chest"].fleiss_kappa["overall"].point)


def test_csv_rows_cover_the_ceiling(annotated: dict[str, Any]) -> None:
    with annotated["written"]["csv"].open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    human = [r for r in rows if r["label"] == HUMAN_LABEL]
    assert {r["metric"] for r in human} == {"vs_annotators"} and len(human) == len(DIMENSIONS) + 1
    gaps = [r for r in rows if r["metric"] == "gap_to_human" and r["dimension"] == "all"]
    assert sorted(r["label"] for r in gaps) == sorted(JUDGES) and all(r["run_id"] for r in gaps)
    per_organ = {r["group"] for r in rows if r["metric"] == "annotator_krippendorff_alpha" and r["group"]}
    assert per_organ == {"brain", "chest", "heart"}
    assert {r["label"] for r in rows if r["metric"] == "annotator_vs_others"} == set(RATERS)


def test_the_leaderboard_command_shows_the_row_unranked(annotated: dict[str, Any]) -> None:
    result = runner.invoke(app, ["leaderboard", str(annotated["results"]), "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    human = next(line for line in lines if "human (leave-one-out)" in line)
    assert "not a judge" in human and human.split("│")[1].strip() == "–"
    assert lines.index(human) > max(i for i, line in enumerate(lines) if "baseline:" in line)
    assert "vs annot." in result.output


def test_eval_prints_and_writes_the_human_row(annotated: dict[str, Any]) -> None:
    result = annotated["result"]
    console = Console(record=True, width=200)
    console.print(leaderboard_table(result.leaderboard, human=result.analysis.human))
    text = console.export_text()
    assert "human (leave-one-out)" in text and "not a judge" in text and "vs annot." in text
    metrics = json.loads((annotated["results"] / "metrics.json").read_text("utf-8"))
    assert metrics["human"]["label"] == HUMAN_LABEL and metrics["human"]["annotators"] == list(RATERS)
    assert all("vs_annotators" in row for row in metrics["leaderboard"])


def test_without_annotations_there_is_no_human_row_anywhere(bare: dict[str, Any]) -> None:
    import openpyxl

    written = bare["written"]
    assert analysis_of(bare).human is None
    assert json.loads(written["json"].read_text("utf-8"))["human"] is None
    for key in ("md", "html", "csv"):
        text = written[key].read_text("utf-8")
        assert "leave-one-out" not in text and "vs_annotators" not in text, key
    assert "Human ceiling" not in written["html"].read_text("utf-8")
    for key in ("md", "html"):
        text = written[key].read_text("utf-8")
        assert "stand in for an annotator" not in text.lower() and "÷ human" not in text, key
        assert "Too few cases to rank" in text, key  # the banner does not need annotators
    book = openpyxl.load_workbook(written["xlsx"])
    assert "human_ceiling" not in book.sheetnames and "stand_in" not in book.sheetnames
    assert "vs_annotators" not in [c.value for c in book["leaderboard"][1]]
    result = runner.invoke(app, ["leaderboard", str(bare["results"]), "--bootstrap", "200"])
    assert result.exit_code == 0 and "leave-one-out" not in result.output and "vs annot." not in result.output
    metrics = json.loads((bare["results"] / "metrics.json").read_text("utf-8"))
    assert "human" not in metrics and all("vs_annotators" not in row for row in metrics["leaderboard"])


def test_every_report_says_whether_a_judge_can_stand_in_for_an_annotator(annotated: dict[str, Any]) -> None:
    import openpyxl

    analysis = analysis_of(annotated)
    human = analysis.human
    assert human is not None and [v.label for v in human.verdicts] == list(JUDGES)
    # 18 cases: fewer than the 30 per annotator the t-test needs, on every dimension and pooled
    for found in human.verdicts:
        assert {t.verdict for _, t in found.tests.columns()} == {TOO_FEW}
        assert "at least 30 cases" in found.tests.pooled.reason
    assert all(row.verdict == TOO_FEW for row in analysis.leaderboard)
    document = json.loads(annotated["written"]["json"].read_text("utf-8"))
    assert document["human"]["alt_test"]["epsilon"] == 0.1 and document["settings"]["epsilon"] == 0.1
    assert [v["verdict"] for v in document["human"]["alt_test"]["verdicts"]] == [TOO_FEW, TOO_FEW]
    assert document["leaderboard"][0]["normalised"]["point"] == pytest.approx(
        document["leaderboard"][0]["vs_annotators"]["point"] / document["human"]["human"]["all"]["point"], abs=1e-5
    )
    md = annotated["written"]["md"].read_text("utf-8")
    section = md[md.index("## Can a judge stand in for an annotator?") :]
    method = section.split("\n\n")[1]
    assert method.count(". ") == 1 and "ε = 0.1" in method and "Benjamini–Yekutieli" in method  # two sentences
    assert f"| baseline:longer *(baseline)* | **{TOO_FEW}** |" in section
    html = annotated["written"]["html"].read_text("utf-8")
    assert '<a href="#stand-in">' in html and '<section id="stand-in">' in html
    stand_in = html[html.index('<section id="stand-in">') : html.index('<section id="position">')]
    assert "Calderon, Reichart and Dror" in stand_in and stand_in.count('class="verdict unknown"') == len(JUDGES)
    leaderboard = html[html.index('<section id="leaderboard">') : html.index('<section id="configuration">')]
    assert "Stands in for an annotator?" in leaderboard and "÷ human [CI]" in leaderboard
    book = openpyxl.load_workbook(annotated["written"]["xlsx"])
    header = [c.value for c in book["leaderboard"][1]]
    assert {"normalised", "normalised_low", "normalised_high", "stands_in"} <= set(header)
    rows = list(book["stand_in"].iter_rows(values_only=True))
    assert list(rows[0]) == list(STAND_IN_COLUMNS) and len(rows) == 1 + len(JUDGES) * (len(DIMENSIONS) + 1)
    assert {r[3] for r in rows[1:]} == {TOO_FEW}
    with annotated["written"]["csv"].open(encoding="utf-8") as fh:
        metrics = {r["metric"] for r in csv.DictReader(fh)}
    assert {"normalised_to_human", "stand_in_winning_rate", "stand_in_advantage", "detectable_vs_human"} <= metrics


def test_a_small_data_set_says_so_at_the_top_of_every_report(annotated: dict[str, Any]) -> None:
    analysis = analysis_of(annotated)
    sensitivity = analysis.sensitivity
    assert sensitivity is not None and sensitivity.too_small_to_rank and sensitivity.n_cases.pooled == 18
    shown = points(sensitivity.largest)
    md = annotated["written"]["md"].read_text("utf-8")
    top = md[: md.index("## How to read")]
    assert f"Too few cases to rank: with 18 cases, differences under {shown} points cannot be detected" in top
    # every table that ranks or sets judges beside the human row says what its n can detect
    assert "With 18 cases, differences under " in md[md.index("## Leaderboard") : md.index("## Per dimension")]
    assert "*detectable (from chance / between judges)*" in md
    assert "gaps to the human row under" in md[md.index("## Human ceiling") :]
    assert "score differences under" in md[md.index("## Pairwise differences") :]
    html = annotated["written"]["html"].read_text("utf-8")
    header = html[: html.index('<section id="how-to-read"')]
    assert 'id="small-sample"' in header and f"differences under {shown} points" in header
    assert html.count('class="muted mde"') >= 5
    result = runner.invoke(app, ["leaderboard", str(annotated["results"]), "--bootstrap", "200"])
    assert result.exit_code == 0 and "Too few cases to rank: with 18 cases" in result.output
    assert "stands in" in result.output and TOO_FEW in " ".join(result.output.split())


def test_epsilon_is_settable_and_written(annotated: dict[str, Any], tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["report", str(annotated["results"]), "--out", str(tmp_path), "--format", "json", "--bootstrap", "100"]
        + ["--epsilon", "0.25"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "analysis.json").read_text("utf-8"))
    assert document["settings"]["epsilon"] == 0.25 and document["human"]["alt_test"]["epsilon"] == 0.25
    result = runner.invoke(app, ["leaderboard", str(annotated["results"]), "--epsilon", "1.5"])
    assert result.exit_code == 2 and "--epsilon" in result.output


def test_compare_prints_both_judges_verdicts(annotated: dict[str, Any]) -> None:
    result = runner.invoke(
        app,
        ["compare", *JUDGES, "--results", str(annotated["results"]), "--bootstrap", "200", "--epsilon", "0.2"],
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Can the judge stand in for an annotator? (alt-test, ε = 0.2)" in text
    assert text.count(TOO_FEW) >= 2 * (len(DIMENSIONS) + 1)
    assert "Too few cases to rank" in text and "points between these two judges" in text
