"""report, leaderboard and compare on stored runs, without calling any judge."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.api import API_KEY_ENV
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import CANNOT, VERDICTS
from medrewardbench.testing.openai_server import OpenAIServer

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


def test_report_and_leaderboard_take_a_title(results: Path, tmp_path: Path) -> None:
    code, output = cli("report", str(results), "--out", str(tmp_path), "--bootstrap", "100", "--title", "Chest study")
    assert code == 0, output
    assert "Leaderboard: Chest study (95% intervals" in output
    assert (tmp_path / "report.md").read_text().startswith("# Chest study\n")
    html = (tmp_path / "report.html").read_text()
    assert "<title>Chest study</title>" in html and "<h1>Chest study</h1>" in html
    code, output = cli("report", str(results), "--out", str(tmp_path / "default"), "--bootstrap", "100", "-f", "md")
    assert code == 0, output
    assert (tmp_path / "default" / "report.md").read_text().startswith("# Med-RewardBench demo report\n")
    assert 'id="viewer-data"' in html
    code, output = cli("report", str(results), "-o", str(tmp_path / "lean"), "--bootstrap", "100", "--no-viewer")
    assert code == 0, output
    assert 'id="viewer-data"' not in (tmp_path / "lean" / "report.html").read_text()
    code, output = cli("leaderboard", str(results), "--bootstrap", "100", "--title", "Chest study")
    assert code == 0, output
    assert "Leaderboard: Chest study (95% intervals" in output


def test_the_leaderboard_lists_a_judge_that_never_answered_apart(tmp_path: Path) -> None:
    from helpers.runs import build_runs

    fixture = build_runs(tmp_path / "runs")
    code, output = cli("leaderboard", str(fixture.run_dir), "--bootstrap", "100")
    assert code == 0, output
    [line] = [line for line in output.splitlines() if "test:broken" in line]
    assert "failed" in line and "never answered: scripted failure" in line
    assert "0.0 [0.0, 0.0]" not in line


def test_compare_prints_paired_tests_per_dimension(results: Path) -> None:
    code, output = cli(
        "compare", "baseline:longer", "baseline:shorter", "--results", str(results), "--bootstrap", "300"
    )
    assert code == 0, output
    for dim in ("accuracy", "overall", "comprehensiveness"):
        assert dim in output
    assert "p case test" in output and "McNemar" not in output
    row = next(line for line in output.splitlines() if "comprehensiveness" in line)
    assert "100.0" in row and "0.0" in row  # the longer answer always wins comprehensiveness on the demo


def test_a_quick_eval_on_other_data_warns_and_reports_show_each_data_set(results: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    shutil.copytree(results, mixed)
    code, output = cli("eval", "--judge", "baseline:first", "--limit", "5", "--out", str(mixed), "--quiet")
    assert code == 0, output
    assert "also holds runs made on other data" in output and "34 cases" in output
    code, output = cli("leaderboard", str(mixed), "--bootstrap", "200")
    assert code == 0, output
    assert output.count("Leaderboard: medrewardbench-demo") == 2
    assert "34 cases, data" in output and "5 cases, data" in output
    assert output.count("Labels: illustrative") == 2
    code, output = cli("report", str(mixed), "--bootstrap", "200", "--format", "md,json")
    assert code == 0, output
    folders = sorted(p.name for p in mixed.iterdir() if (p / "report.md").is_file())
    assert len(folders) == 2 and all(f.startswith("medrewardbench-demo-") for f in folders)
    cases = sorted(json.loads((mixed / f / "analysis.json").read_text())["dataset"]["n_cases"] for f in folders)
    assert cases == [5, 34]
    small = json.loads((mixed / "metrics.json").read_text())["datasets"][0]["data_hash"]
    code, output = cli("report", str(mixed), "--data", small[:10], "--out", str(tmp_path / "one"), "--format", "json")
    assert code == 0, output
    assert json.loads((tmp_path / "one" / "analysis.json").read_text())["dataset"]["n_cases"] == 5
    code, output = cli("leaderboard", str(mixed), "--data", "nope", "--bootstrap", "200")
    assert code == 2 and "matches no data set" in output and small[:12] in output


def test_leaderboard_takes_judges_by_spec_or_run_id(results: Path) -> None:
    run_id = next(
        r["run_id"]
        for r in json.loads((results / "metrics.json").read_text())["runs"]
        if r["judge"] == "baseline:first"
    )
    code, output = cli(
        "leaderboard", str(results), "--judge", "baseline:longer", "--judge", run_id, "--bootstrap", "200"
    )
    assert code == 0, output
    rows = [line for line in output.splitlines() if "baseline:" in line and "│" in line]
    assert len(rows) == 2 and "baseline:longer" in rows[0] and "baseline:first" in rows[1]
    code, output = cli("leaderboard", str(results), "--judge", "api:nothing", "--bootstrap", "200")
    assert code == 2 and "no run of 'api:nothing'" in output


def test_two_runs_of_one_spec_are_named_by_what_differs_and_compare_refuses_the_bare_spec(
    results: Path, tmp_path: Path
) -> None:
    seeds = tmp_path / "seeds"
    shutil.copytree(results, seeds)
    code, output = cli("eval", "--judge", "baseline:random", "--seed", "1", "--out", str(seeds), "--quiet")
    assert code == 0, output
    code, output = cli("leaderboard", str(seeds), "--bootstrap", "200")
    assert code == 0, output
    assert "baseline:random (seed 0)" in output and "baseline:random (seed 1)" in output
    code, output = cli("compare", "baseline:random", "baseline:longer", "--results", str(seeds), "--bootstrap", "200")
    assert code == 2
    run_ids = [
        r["run_id"] for r in json.loads((seeds / "metrics.json").read_text())["runs"] if r["judge"] == "baseline:random"
    ]
    flat = output.replace("\n", "")
    assert "'baseline:random' names 2 runs" in flat and all(run_id in flat for run_id in run_ids)
    assert "(seed 0)" in flat and "(seed 1)" in flat and "name one by its run id" in flat
    code, output = cli("compare", run_ids[1], "baseline:longer", "--results", str(seeds), "--bootstrap", "200")
    assert code == 0, output
    assert "baseline:random" in output and "p case test" in output


def test_report_and_eval_take_by_with_or_without_the_metadata_prefix(tmp_path: Path) -> None:
    rows = [
        {"id": f"c{i}", "question": "q?", "response_1": "a" * (i + 1), "response_2": "b", "labels": {"overall": 1},
         "organ_system": "chest", "metadata": {"site": "north" if i % 2 else "south"}}
        for i in range(6)
    ]  # fmt: skip
    data = tmp_path / "cases.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out"
    for flag in ("site", "metadata.site"):
        code, output = cli("eval", "--data", str(data), "--judge", "baseline:longer", "--by", flag, "--out", str(out))
        assert code == 0, output
        assert "(%) by site" in output and "north" in output and "south" in output
    code, output = cli("eval", "--data", str(data), "--judge", "baseline:longer", "--by", "hospital", "--out", str(out))
    assert code == 2 and "no case has a value for 'hospital'" in output and "site" in output
    code, output = cli("report", str(out), "--by", "metadata.site", "--format", "json", "--bootstrap", "200")
    assert code == 0, output
    assert set(json.loads((out / "analysis.json").read_text())["runs"][0]["groups"]) == {"organ_system", "site"}
    code, output = cli("report", str(out), "--by", "hospital", "--format", "json", "--bootstrap", "200")
    assert code == 2 and "'hospital'" in output


def test_the_demo_s_illustrative_labels_are_stated_in_every_report_file(results: Path, tmp_path: Path) -> None:
    code, output = cli("report", str(results), "--out", str(tmp_path), "--bootstrap", "200")
    assert code == 0, output
    assert "Labels: illustrative" in output
    notice = "illustrative, written by the medrewardbench authors for the demo, not by medical experts"
    assert notice in (tmp_path / "report.md").read_text()
    assert notice in (tmp_path / "report.html").read_text()
    labels = json.loads((tmp_path / "analysis.json").read_text())["dataset"]["labels"]
    assert labels["kind"] == "illustrative" and labels["text"] == notice
    html = (tmp_path / "report.html").read_text()
    assert "agree with the medical experts" not in html and "Experts&#39; winner" not in html


def test_the_demo_report_marks_organ_cells_on_fewer_than_four_cases_and_decides_every_baseline(
    results: Path, tmp_path: Path
) -> None:
    code, output = cli("report", str(results), "--out", str(tmp_path), "--format", "md,html,json", "--bootstrap", "200")
    assert code == 0, output
    analysis = json.loads((tmp_path / "analysis.json").read_text())
    sizes = analysis["dataset"]["groups"]["organ_system"]
    small = {organ for organ, n in sizes.items() if n < 4}
    assert small and set(sizes) - small  # the demo has both
    md = (tmp_path / "report.md").read_text()
    organ_tables = md[md.index("## Organ systems × dimensions") : md.index("## Agreement beyond chance")]
    organ_rows = [
        line
        for line in organ_tables.splitlines()
        if line.startswith("| ") and line.split(" | ")[0][2:].replace("\\", "") in sizes
    ]
    assert len(organ_rows) == 5 * len(sizes)
    for line in organ_rows:
        cells = [c.strip() for c in line.strip("| ").split(" | ")]
        organ, marked = cells[0].replace("\\", ""), [c.endswith("n<4") for c in cells[2:8]]
        assert all(marked) if organ in small else not any(marked), line
        assert cells[8].endswith("n<4") == (organ in small), line  # the pooled cell rests on the same cases
    html = (tmp_path / "report.html").read_text()
    assert html.count('class="cell small-n few-cases"') == len(small) * len(DIMENSIONS) * 5
    # the demo's illustrative raters: every baseline gets a verdict on every column
    verdicts = analysis["human"]["alt_test"]["verdicts"]
    assert len(verdicts) == 5 and all(t["verdict"] in VERDICTS for v in verdicts for t in v["tests"].values())
    shorter = next(v for v in verdicts if v["label"] == "baseline:shorter")
    assert shorter["verdict"] == CANNOT and "worse than 3 of 3 annotators" in shorter["tests"]["all"]["reason"]
    assert "Too few cases to rank: with 34 cases" in output.replace("\n", " ")
    # the annotators' agreement per organ system marks its small organs too
    by_organ = md[md.index("### Agreement between annotators by organ system") :]
    for organ in sizes:
        assert (f"| {organ} (n<4) |" in by_organ.replace("\\", "")) == (organ in small), organ


def test_two_servers_of_one_model_read_apart_in_every_format(openai_server: OpenAIServer, tmp_path: Path) -> None:
    with OpenAIServer() as second:
        out = tmp_path / "two-ports"
        for server in (openai_server, second):
            code, output = cli(
                "eval", "--judge", "api:tiny-qwen", "--limit", "3", "--base-url", server.base_url,
                "--api-key-env", API_KEY_ENV, "--max-retries", "0", "--out", str(out), "--quiet",
            )  # fmt: skip
            assert code == 0, output
        labels = [f"api:tiny-qwen @127.0.0.1:{server.port}" for server in (openai_server, second)]
        code, output = cli("leaderboard", str(out), "--bootstrap", "200")
        assert code == 0 and all(label in output for label in labels), output
        code, output = cli(
            "report", str(out), "--out", str(tmp_path / "r"), "--format", "md,html,xlsx", "--bootstrap", "200"
        )
        assert code == 0, output
        for name in ("report.md", "report.html"):
            text = (tmp_path / "r" / name).read_text("utf-8")
            assert all(label in text for label in labels), name


def test_report_takes_the_risk_and_recalibration_settings(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "selective"
    code, output = cli(
        "report", str(results), "--out", str(out), "--format", "json,md", "--bootstrap", "200",
        "--risk", "0.2", "--risk-delta", "0.05", "--recalibrate", "isotonic",
    )  # fmt: skip
    assert code == 0, output
    section = json.loads((out / "analysis.json").read_text())["selective"]
    assert (section["alpha"], section["delta"], section["recalibration"]) == (0.2, 0.05, "isotonic")
    assert all(j["recalibrated"] is not None for j in section["judges"] if j["source"] != "none")
    assert "Coverage at risk 20 %" in (out / "report.md").read_text()
    code, output = cli("report", str(results), "--out", str(out), "--format", "json", "--recalibrate", "platt")
    assert code == 2 and "--recalibrate 'platt'" in output
