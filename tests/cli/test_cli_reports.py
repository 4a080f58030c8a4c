"""report, leaderboard and compare on stored runs, without calling any judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medrewardbench.cli import app

runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results")
    code, output = cli("eval", "--out", str(out), "--quiet")
    assert code == 0, output
    return out


def test_report_writes_every_format_and_prints_the_interval_leaderboard(results: Path, tmp_path: Path) -> None:
    code, output = cli("report", str(results), "--out", str(tmp_path), "--bootstrap", "300")
    assert code == 0, output
    names = {p.name for p in tmp_path.iterdir()}
    assert {"report.md", "report.html", "report.xlsx", "analysis.json", "analysis.csv"} <= names
    assert "score [95% CI]" in output and "baseline:longer" in output
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    assert analysis["settings"]["n_resamples"] == 300
    assert len(analysis["leaderboard"]) == 5
    md = (tmp_path / "report.md").read_text()
    assert "baseline:shorter" in md.replace("\\", "")


def test_report_formats_are_selectable(results: Path, tmp_path: Path) -> None:
    code, output = cli("report", str(results), "--out", str(tmp_path), "--format", "md", "--bootstrap", "200")
    assert code == 0, output
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]
    code, output = cli("report", str(results), "--out", str(tmp_path), "--format", "pdf")
    assert code == 2 and "pdf" in output


def test_leaderboard_ranks_runs_with_tiers(results: Path) -> None:
    code, output = cli("leaderboard", str(results), "--bootstrap", "300")
    assert code == 0, output
    lines = [line for line in output.splitlines() if "baseline:" in line]
    assert len(lines) == 5
    assert "baseline:longer" in lines[0] and "baseline:shorter" in lines[-1]


def test_compare_prints_paired_tests_per_dimension(results: Path) -> None:
    code, output = cli(
        "compare", "baseline:longer", "baseline:shorter", "--results", str(results), "--bootstrap", "300"
    )
    assert code == 0, output
    for dim in ("accuracy", "overall", "comprehensiveness"):
        assert dim in output
    assert "McNemar" in output
    row = next(line for line in output.splitlines() if "comprehensiveness" in line)
    assert "100.0" in row and "0.0" in row  # the longer answer always wins comprehensiveness on the demo


def test_reports_refuse_to_mix_runs_on_different_data(results: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    code, output = cli("eval", "--judge", "baseline:first", "--limit", "5", "--out", str(other), "--quiet")
    assert code == 0, output
    code, output = cli("leaderboard", str(results), str(other), "--bootstrap", "200")
    assert code == 2
    assert "fingerprint" in output and "baseline-first" in output
