"""``annotate pick``: a judge's least confident pairs and a random slice into a new or an existing project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.annotate import case_rows, make_project, write_cases
from sqlalchemy import select
from typer.testing import CliRunner

from medrewardbench.annotate.db import AuditEntry, Item
from medrewardbench.annotate.service import Project
from medrewardbench.cli import app
from medrewardbench.data import load_benchmark
from medrewardbench.data.canonical import write_canonical

runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("results")
    code, output = cli(
        "eval", "--data", "demo", "-j", "baseline:random", "-j", "baseline:longer", "--out", str(out), "-q"
    )
    assert code == 0, output
    return out


def items(project: Path) -> dict[str, dict]:
    opened = Project.open(project)
    try:
        with opened.db.read() as s:
            return {i.external_id: dict(i.payload) for i in s.scalars(select(Item).where(Item.role == "primary"))}
    finally:
        opened.close()


def test_a_new_project_holds_the_slice_with_its_design_on_every_item(results: Path, tmp_path: Path) -> None:
    project = tmp_path / "new"
    code, out = cli(
        "annotate", "pick", str(results), "-j", "baseline:random", "-k", "4", "-r", "5", "--new", str(project)
    )
    assert code == 0, out
    held = items(project)
    assert len(held) == 9
    selections = [payload["metadata"]["selection"] for payload in held.values()]
    assert sorted(s["stratum"] for s in selections) == ["least_confident"] * 4 + ["random"] * 5
    first = selections[0]
    assert {s["design"] for s in selections} == {first["design"]}
    assert first["least_confident"] == 4 and first["random"] == 5 and first["pool_size"] == 34
    assert first["judge_spec"] == "baseline:random" and len(first["judge_fingerprint"]) > 8
    opened = Project.open(project)
    try:
        with opened.db.read() as s:
            entry = s.scalar(select(AuditEntry).where(AuditEntry.action == "selection.pick"))
            assert entry is not None
            assert sorted(entry.new["least_confident_ids"] + entry.new["random_ids"]) == sorted(held)
    finally:
        opened.close()
    # the labels the doctors would see are blind: no expert label reaches the project
    assert all("labels" not in payload for payload in held.values())


def test_picking_into_a_project_of_the_same_data_adds_the_rest_and_gives_annotators_work(
    results: Path, tmp_path: Path
) -> None:
    demo = list(load_benchmark("demo").cases)
    source = write_canonical(demo[:5], tmp_path / "pilot" / "pilot.jsonl")
    project = tmp_path / "pilot-project"
    make_project(project, source, annotators=("alice",), admin=None, per_case=1).close()
    code, out = cli(
        "annotate", "pick", str(results), "-j", "baseline:random", "-k", "10", "-r", "10", "--into", str(project)
    )
    assert code == 0, out
    held = items(project)
    picked = {cid for cid, payload in held.items() if "selection" in payload["metadata"]}
    assert len(picked) == 20
    already = len({c.case_id for c in demo[:5]} & picked)
    assert f"{20 - already} pair(s) added, {already} already there" in out
    opened = Project.open(project)
    try:
        alice = next(u for u in opened.list_users() if u.name == "alice")
        assert alice.assigned == len(held)  # the new pairs are in her queue at once
    finally:
        opened.close()
    code, out = cli(
        "annotate",
        "pick",
        str(results),
        "-j",
        "baseline:random",
        "-k",
        "10",
        "-r",
        "10",
        "--seed",
        "5",
        "--into",
        str(project),
    )
    assert code == 2 and "already holds the slice" in out


def test_a_project_of_other_data_is_refused(results: Path, tmp_path: Path) -> None:
    project = tmp_path / "other"
    make_project(project, write_cases(tmp_path / "input", case_rows(3)), annotators=(), admin=None).close()
    code, out = cli(
        "annotate", "pick", str(results), "-j", "baseline:random", "-k", "2", "-r", "2", "--into", str(project)
    )
    assert code == 2 and "holds 3 case(s) that are not in the data of run" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-k", "30", "-r", "10"], "K + R = 30 + 10 = 40 is more than the 34 cases"),
        (["-j", "nobody"], "no run of 'nobody'"),
        (["--into", "elsewhere"], "give --new PROJECT (create one) or --into PROJECT (add to one), not both"),
        (["--rank-by", "kindness"], "unknown ranking 'kindness'"),
    ],
)
def test_bad_requests_are_refused_in_one_line(results: Path, tmp_path: Path, args: list[str], message: str) -> None:
    base = [
        "annotate",
        "pick",
        str(results),
        "-j",
        "baseline:random",
        "-k",
        "2",
        "-r",
        "2",
        "--new",
        str(tmp_path / "p"),
    ]
    code, out = cli(*base, *args)
    assert code == 2 and message in " ".join(out.split()), out
    assert not (tmp_path / "p" / "annotate.json").exists()


def test_a_directory_that_already_holds_a_project_is_not_made_again(results: Path, tmp_path: Path) -> None:
    project = tmp_path / "twice"
    assert (
        cli("annotate", "pick", str(results), "-j", "baseline:random", "-k", "1", "-r", "1", "--new", str(project))[0]
        == 0
    )
    code, out = cli(
        "annotate", "pick", str(results), "-j", "baseline:random", "-k", "1", "-r", "1", "--new", str(project)
    )
    assert code == 2 and "already holds an annotation project; add to it with --into" in out


def test_plan_prints_json_and_refuses_bad_half_widths(results: Path) -> None:
    code, out = cli(
        "annotate", "plan", str(results), "-j", "baseline:random", "-k", "4", "--half-width", "0.05,0.1", "--json"
    )
    assert code == 0, out
    plan = json.loads(out)
    assert plan["least_confident"] == 4 and plan["remainder"] == 30 and plan["ppi_bound"] is True
    assert [r["half_width"] for r in plan["rows"]] == [0.05, 0.1]
    assert plan["rows"][0]["labels_only"] >= plan["rows"][1]["labels_only"]
    code, out = cli("annotate", "plan", str(results), "-j", "baseline:random", "--half-width", "2")
    assert code == 2 and "between 0 and 1" in out


def test_a_data_source_gone_since_the_run_is_named(tmp_path: Path) -> None:
    source = write_canonical(list(load_benchmark("demo").cases)[:8], tmp_path / "data" / "pairs.jsonl")
    code, out = cli("eval", "--data", str(source), "-j", "baseline:random", "--out", str(tmp_path / "r"), "-q")
    assert code == 0, out
    source.unlink()
    code, out = cli(
        "annotate",
        "pick",
        str(tmp_path / "r"),
        "-j",
        "baseline:random",
        "-k",
        "2",
        "-r",
        "2",
        "--new",
        str(tmp_path / "p"),
    )
    assert code == 2 and "data source cannot be read now" in " ".join(out.split()), out
    assert not (tmp_path / "p" / "annotate.json").exists()
