"""The command line, driven through typer's runner and, once, as a real console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.errors import install_command
from medrewardbench.judges import BASELINE_SPECS

runner = CliRunner()


def run_cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def demo_eval(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo-eval")
    code, output = run_cli("eval", "--out", str(out))
    assert code == 0, output
    return out, output


def test_eval_with_no_arguments_runs_every_baseline_on_the_demo(demo_eval: tuple[Path, str]) -> None:
    out, output = demo_eval
    assert {p.name for p in out.iterdir()} >= {
        "medrewardbench.sqlite",
        "judgments.jsonl",
        "metrics.json",
        "metrics.csv",
    }
    metrics = json.loads((out / "metrics.json").read_text())
    assert sorted(r["judge"] for r in metrics["runs"]) == sorted(BASELINE_SPECS)
    assert [row["rank"] for row in metrics["leaderboard"]] == list(range(1, 6))
    assert "Leaderboard" in output
    for spec in BASELINE_SPECS:
        assert spec in output
    n_cases = metrics["datasets"][0]["n_cases"]
    lines = (out / "judgments.jsonl").read_text().splitlines()
    assert len(lines) == 5 * 2 * n_cases


def test_position_baselines_score_near_half_on_the_demo(demo_eval: tuple[Path, str]) -> None:
    out, _ = demo_eval
    metrics = json.loads((out / "metrics.json").read_text())
    by_judge = {r["judge"]: r["metrics"] for r in metrics["runs"]}
    for spec in ("baseline:first", "baseline:second"):
        overall = by_judge[spec]["dimensions"]["overall"]["accuracy"]
        assert overall == pytest.approx(0.5, abs=0.001), "both orders cancel position bias exactly"
        assert by_judge[spec]["position"]["overall"]["consistency"] == 0.0
        assert 0.35 <= by_judge[spec]["by_order"]["original"]["overall"]["accuracy"] <= 0.65


def test_rerun_is_served_from_the_store_and_files_are_byte_identical(
    demo_eval: tuple[Path, str], tmp_path: Path
) -> None:
    out, _ = demo_eval
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    code, output = run_cli("eval", "--out", str(copy))
    assert code == 0
    assert "Requests judged now: 0" in output
    for name in ("judgments.jsonl", "metrics.json", "metrics.csv"):
        assert (copy / name).read_bytes() == (out / name).read_bytes()


def test_same_seed_gives_byte_identical_results_files(tmp_path: Path) -> None:
    outs = []
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        code, output = run_cli("eval", "--judge", "baseline:random", "--seed", seed, "--out", str(tmp_path / name))
        assert code == 0, output
        outs.append(tmp_path / name)
    for name in ("judgments.jsonl", "metrics.json", "metrics.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    assert (outs[0] / "judgments.jsonl").read_bytes() != (outs[2] / "judgments.jsonl").read_bytes()


def test_limit_orders_organs_and_group_by(tmp_path: Path) -> None:
    code, output = run_cli(
        "eval",
        "--judge",
        "baseline:longer",
        "--limit",
        "4",
        "--orders",
        "original",
        "--by",
        "department",
        "--out",
        str(tmp_path),
    )
    assert code == 0, output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    run = metrics["runs"][0]["metrics"]
    assert run["n_cases"] == 4 and run["orders"] == ["original"]
    assert set(run["by"]) == {"organ_system", "department"}
    assert "agreement with the labels (%) by department" in output
    assert len((tmp_path / "judgments.jsonl").read_text().splitlines()) == 4
    header = (tmp_path / "metrics.csv").read_text().splitlines()[0]
    assert header.startswith("run_id,judge,scope,group_field,group,order,dimension,n,correct")


def test_organ_selection_on_the_demo(tmp_path: Path) -> None:
    code, output = run_cli("eval", "--judge", "baseline:first", "--organs", "eye", "--out", str(tmp_path))
    assert code == 0, output
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert list(metrics["runs"][0]["metrics"]["by"]["organ_system"]) == ["eye"]
    code, output = run_cli("eval", "--judge", "baseline:first", "--organs", "spleen", "--out", str(tmp_path))
    assert code == 2 and "spleen" in output


def test_bad_judge_spec_and_bad_data_fail_clearly(tmp_path: Path) -> None:
    code, output = run_cli("eval", "--judge", "nosuch:thing", "--out", str(tmp_path))
    assert code == 2 and "unknown judge kind" in output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "x1", "question": "q", "response_1": "a", "response_2": "b", '
        '"labels": {"overall": "C"}, "image": null}\n'
    )
    code, output = run_cli("eval", "--data", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and "bad.jsonl" in output and "row 1" in output and "overall" in output


def test_validate_reports_every_problem_and_exit_codes(tmp_path: Path) -> None:
    code, output = run_cli("validate", "demo")
    assert code == 0 and "no problems" in output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "x1", "question": "q", "response_1": "a", "response_2": "b", "labels": {"overall": "C"}}\n'
        '{"id": "x1", "question": "q", "response_1": "a", "response_2": "b", "labels": {"fluency": "A"}}\n'
        '{"question": "q", "response_1": "a", "response_2": "b", "image": "missing.png"}\n'
    )
    code, output = run_cli("validate", str(bad))
    assert code == 1
    assert "row 1" in output and "row 2" in output and "row 3" in output
    assert "fluency" in output and "missing.png" in output


def test_console_script_is_installed_and_runs(tmp_path: Path) -> None:
    exe = shutil.which("medrewardbench")
    assert exe is not None
    proc = subprocess.run(
        [exe, "eval", "--judge", "baseline:second", "--limit", "3", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "baseline:second" in proc.stdout


def test_a_missing_extra_is_named_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "openai", None)  # as if the api extra were not installed
    code, output = run_cli("eval", "--judge", "api:gpt-4o", "--limit", "1", "--out", str(tmp_path))
    assert code == 2
    assert install_command("api") in output.replace("\n", "")
