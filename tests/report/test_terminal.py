"""Terminal tables fit the terminal's width: columns left out by priority, long names cut in the middle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.cli.support import console
from medrewardbench.report.terminal import fit_table

BASELINES = ("baseline:longer", "baseline:shorter", "baseline:first", "baseline:second", "baseline:random")
BOX = set("│┃┏┗┡└┌├┝┯╇")


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("five-baselines")
    args = ["eval", "--out", str(out)]
    for spec in BASELINES:
        args += ["--judge", spec]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def width(request: pytest.FixtureRequest) -> Iterator[int]:
    old = console.width
    console.width = request.param
    yield request.param
    console.width = old


def table_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if BOX & set(line)]


@pytest.mark.parametrize("width", [80, 100, 200], indirect=True)
@pytest.mark.parametrize("command", ["eval", "leaderboard", "report", "compare"])
def test_every_table_fits_the_terminal_and_names_stay_on_one_line(
    demo_runs: Path, width: int, command: str, tmp_path: Path
) -> None:
    args = {
        "eval": ["eval", "--out", str(demo_runs), *(a for spec in BASELINES for a in ("--judge", spec))],
        "leaderboard": ["leaderboard", str(demo_runs)],
        "report": ["report", str(demo_runs), "--out", str(tmp_path), "--format", "md", "--bootstrap", "200"],
        "compare": ["compare", "baseline:longer", "baseline:random", "--results", str(demo_runs), "--bootstrap", "200"],
    }[command]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = table_lines(result.output)
    assert lines, result.output
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    if command != "compare":
        for spec in BASELINES:
            assert any(spec in line for line in lines), f"{spec} is cut or wrapped at {width} columns"
    if command in ("eval", "leaderboard") and width < 160:
        assert "left out to fit" in result.output and "report" in result.output, (
            "says what was left out, and where it is"
        )
    if width == 200 and command == "eval":
        assert "left out to fit" not in result.output


def test_long_judge_names_are_cut_in_the_middle_and_stay_apart() -> None:
    table = Table()
    for header in ("#", "judge", "score [95% CI]", "stands in for an annotator?", "fail", "kappa", "1st-pos"):
        table.add_column(header)
    names = [f"api:organisation/a-very-long-model-name-{n}-Instruct-AWQ @127.0.0.1:1800{n}" for n in (1, 2)]
    for rank, name in enumerate(names, 1):
        table.add_row(str(rank), name, "69.6 [59.1, 80.1]", "cannot", "0.0", "0.31", "50.0")
    out = Console(width=80, record=True, emoji=False)
    out.print(fit_table(table, 80))
    text = out.export_text()
    lines = table_lines(text)
    assert max(len(line) for line in lines) <= 80
    shown = [line for line in lines if "…" in line]
    assert len(shown) == 2 and "18001" in shown[0] and "18002" in shown[1], text
    assert "69.6 [59.1, 80.1]" in text and "stands in?" in text, "score and verdict kept, the header abbreviated"
    note = "left out to fit: fail, kappa, 1st-pos (in the `report` files, or widen the terminal)"
    assert note in " ".join(text.split()), text


def test_a_table_that_fits_is_left_as_it_is() -> None:
    table = Table("#", "judge")
    table.add_row("1", "baseline:longer")
    assert fit_table(table, 80) is table
    assert fit_table(table, None) is table


def test_columns_sets_the_width_of_piped_output() -> None:
    import os
    import subprocess
    import sys

    code = "from medrewardbench.cli.support import console; print(console.width)"
    widths = {}
    for columns in ("100", None):
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        if columns is not None:
            env["COLUMNS"] = columns
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        widths[columns] = int(done.stdout.strip())
    assert widths == {"100": 100, None: 160}, "piped output: COLUMNS when set, else a wide 160"


@pytest.mark.parametrize("width", [200], indirect=True)
@pytest.mark.parametrize("command", ["eval", "leaderboard"])
def test_every_leaderboard_column_is_explained_under_the_table(demo_runs: Path, width: int, command: str) -> None:
    args = {
        "eval": ["eval", "--out", str(demo_runs), *(a for spec in BASELINES for a in ("--judge", spec))],
        "leaderboard": ["leaderboard", str(demo_runs)],
    }[command]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    header = next(line for line in table_lines(result.output) if "score" in line)
    shown = {cell.strip() for cell in header.strip("┃│ ").replace("┃", "│").split("│")} - {"#", "judge", "tier"}
    legend = " ".join(result.output.split())  # the caption wraps
    for column in shown:
        name = column.split(" [")[0]
        if name in ("acc", "rel", "comp", "crea", "resp", "overall"):
            continue  # the dimensions, named together ("acc ... overall = the six dimensions") where shortened
        name = {"stands in?": "stands in", "macro over organs": "macro"}.get(name, name)
        assert f"{name} =" in legend, f"{column!r} is not explained:\n{result.output}"
