"""From a doctor's click to a released set, without loss, by both documented paths (README "A worked example").

Three doctors label a build project's six pairs in the annotation app: comments, a "cannot judge"
with its reason (which leaves a 1-1 split), a 2-1 vote, and an admin's adjudication of one split
dimension; gold pairs and repeats give the quality control something to measure. Then:

* path A: ``annotate export --format canonical`` then ``eval --data`` on it;
* path B: the same export, ``build labels``, ``build export``, then ``eval --data``.

Both releases must hold the same labels (majority, else adjudication), annotations (with comments
and reasons), adjudications and label sources, and both cards the same provenance, project,
guidelines version and QC summary; ``validate`` exits 0 on both (the split is a warning); attaching
the release again changes nothing; ``eval`` reports the labels as the expert majority, not unknown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.annotate import make_project, write_cases
from sqlalchemy import select
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data import load_benchmark
from medrewardbench.dimensions import DIMENSIONS

runner = CliRunner()
DOCTORS = ("dr_a", "dr_b", "dr_c")


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args), env={"COLUMNS": "240"}, catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.output


def plan(pair_ids: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """(pair, doctor) -> what the doctor says, labels in source order."""
    p0, p1, p2, *rest = pair_ids
    says: dict[tuple[str, str], dict[str, Any]] = {}
    for doctor in DOCTORS:
        says[(p0, doctor)] = {"labels": dict.fromkeys(DIMENSIONS, 1)}
        for pid in rest:
            says[(pid, doctor)] = {"labels": dict.fromkeys(DIMENSIONS, 2)}
    says[(p0, "dr_a")]["comment"] = "A names the lesion; B does not"
    # p1: one for A, one for B, and dr_c cannot judge: a 1-1 split on every dimension
    says[(p1, "dr_a")] = {"labels": dict.fromkeys(DIMENSIONS, 1)}
    says[(p1, "dr_b")] = {
        "labels": dict.fromkeys(DIMENSIONS, 2),
        "comment": "A misses the effusion",
        "harm": {1: "severe"},  # and flags response 1 as harmful
    }
    says[(p1, "dr_c")] = {"labels": {}, "cannot_judge": True, "reason": "the image is too dark to read"}
    # p2: 2-1 on overall, the minority says why
    for doctor in DOCTORS:
        says[(p2, doctor)] = {"labels": dict.fromkeys(DIMENSIONS, 1)}
    says[(p2, "dr_c")] = {"labels": {**dict.fromkeys(DIMENSIONS, 1), "overall": 2}, "comment": "B is safer overall"}
    return says


def label_in_the_app(project: Any, says: dict[tuple[str, str], dict[str, Any]], gold_ids: set[str]) -> None:
    """Every doctor answers every assignment of their queue (primary, gold and repeats) through the service."""
    from helpers.annotate import as_user

    from medrewardbench.annotate.db import Assignment, Item, User
    from medrewardbench.annotate.service import PairAnswer

    for doctor in DOCTORS:
        me = as_user(project, doctor)
        with project.db.read() as s:
            rows = s.execute(
                select(Assignment.public_id, Assignment.order_shown, Assignment.purpose, Item.external_id)
                .join(Item, Item.id == Assignment.item_id)
                .join(User, User.id == Assignment.user_id)
                .where(User.name == doctor)
                .order_by(Assignment.sort_key)
            ).all()
        for public_id, order, purpose, external in rows:
            if external in gold_ids:
                wanted = {"labels": dict.fromkeys(DIMENSIONS, 1 if doctor != "dr_c" else 2)}  # dr_c misses gold
            else:
                wanted = says[(external, doctor)]
            swapped = order == "swapped"
            choices = {dim: ("A" if (winner == 1) != swapped else "B") for dim, winner in wanted["labels"].items()}
            if purpose == "repeat" and doctor == "dr_b":  # dr_b changes her mind on a repeat's overall
                choices["overall"] = "A" if choices.get("overall") == "B" else "B"
            harm = {("A" if (response == 1) != swapped else "B"): v for response, v in wanted.get("harm", {}).items()}
            project.submit_pair(
                me,
                public_id,
                PairAnswer(
                    choices,
                    cannot_judge=bool(wanted.get("cannot_judge")),
                    cannot_judge_reason=wanted.get("reason", ""),
                    comment=wanted.get("comment", ""),
                    seconds=20.0,
                    harm=harm,
                ),
            )


def same_release(a: Any, b: Any) -> None:
    """Two loaded releases hold the same cases, labels, annotations, adjudications and label sources."""
    assert a.case_ids() == b.case_ids()
    for x, y in zip(a.cases, b.cases, strict=True):
        assert (x.question, x.response_1, x.response_2) == (y.question, y.response_1, y.response_2), x.case_id
        assert dict(x.labels) == dict(y.labels), x.case_id
        assert dict(x.label_sources) == dict(y.label_sources), x.case_id
        assert x.adjudications == y.adjudications, x.case_id
        assert sorted(x.annotations, key=lambda n: n.annotator) == sorted(y.annotations, key=lambda n: n.annotator), (
            x.case_id
        )


def test_both_documented_paths_give_the_same_lossless_release_with_provenance(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    pytest.importorskip("sqlalchemy")
    from medrewardbench.annotate.service import Identity

    build_project, pairs = paired
    pair_ids = [p["id"] for p in pairs]
    gold = [{**pairs[0], "id": f"gold-{i}", "labels": dict.fromkeys(DIMENSIONS, 1)} for i in range(2)]
    gold_file = write_cases(tmp_path / "gold", gold, name="gold.jsonl")
    project = make_project(
        tmp_path / "study",
        tmp_path / "pairs.jsonl",
        annotators=DOCTORS,
        per_case=3,
        gold=str(gold_file),
        repeat_share=0.5,
        name="chest-study",
    )
    try:
        project.set_guidelines(Identity.command_line(), project.guidelines() + "\n- Judge the image first.\n")
        label_in_the_app(project, plan(pair_ids), {g["id"] for g in gold})
        from medrewardbench.annotate.export import labelled_cases

        split = next(c for c in labelled_cases(project)[0] if c.case_id == pair_ids[1])
        assert dict(split.labels) == {}  # 1-1 everywhere until the admin decides
        from medrewardbench.annotate.stats import dashboard

        pending = next(p for p in dashboard(project).pending if p.question == pairs[1]["question"])
        project.adjudicate(Identity.command_line(), pending.public_id, {"overall": "2"}, "B names the effusion")
    finally:
        project.close()

    # path A: the app's export, evaluated as it is
    app_export = tmp_path / "app" / "labelled.jsonl"
    out = cli("annotate", "export", str(tmp_path / "study"), "--format", "canonical", "--out", str(app_export))
    assert "1 label(s) adjudicated" in out and "dataset.json" in out
    app_card = json.loads((app_export.parent / "dataset.json").read_text())
    released_a = load_benchmark(str(app_export))
    assert released_a.labels.kind == "expert_majority" and released_a.labels.raters is None  # 2-3 per case
    assert "expert majority of 2-3 annotators, adjudicated where they had none" in released_a.labels.text()

    by_id = {c.case_id: c for c in released_a.cases}
    split = by_id[pair_ids[1]]
    assert dict(split.labels) == {"overall": 2} and dict(split.label_sources) == {"overall": "adjudication"}
    (decision,) = split.adjudications
    assert (decision.dimension, decision.label, decision.note) == ("overall", 2, "B names the effusion")
    assert decision.by.startswith("cli:") and decision.at is not None
    notes = {a.annotator: a for a in split.annotations}
    assert notes["dr_c"].cannot_judge and notes["dr_c"].cannot_judge_reason == "the image is too dark to read"
    assert notes["dr_b"].comment == "A misses the effusion" and notes["dr_b"].order_shown in ("original", "swapped")
    assert dict(notes["dr_b"].harm) == {1: "severe"} and not notes["dr_a"].harm
    assert all(a.seconds == 20.0 for a in split.annotations)
    two_one = by_id[pair_ids[2]]
    assert two_one.labels["overall"] == 1 and two_one.label_sources["overall"] == "majority"
    assert {a.annotator: a.comment for a in two_one.annotations if a.comment} == {"dr_c": "B is safer overall"}
    assert "gold-0" not in by_id  # gold pairs measure the doctors; they are not labels

    labels_card = app_card["labels"]
    assert app_card["name"] == "chest-study" and app_card["files"] == ["labelled.jsonl"]
    assert labels_card["kind"] == "expert_majority" and labels_card["annotators"] == list(DOCTORS)
    assert labels_card["adjudicated_dimensions"] == 1 and labels_card["undecided_dimensions"] == 5
    assert labels_card["comments"] == 3 and labels_card["cannot_judge"] == 1
    assert labels_card["harm_flags"] == {"minor": 0, "moderate": 0, "severe": 1, "critical": 0}
    (entry,) = labels_card["annotation_projects"]
    assert entry["project"] == "chest-study" and entry["per_case"] == 3
    assert entry["guidelines"]["version"] == 2 and len(entry["guidelines"]["sha256"]) == 64
    assert entry["qc"]["gold"]["items"] == 2 and entry["qc"]["gold"]["per_annotator"]["dr_c"]["accuracy"] == 0.0
    assert entry["qc"]["gold"]["per_annotator"]["dr_a"]["accuracy"] == 1.0
    repeats = entry["qc"]["repeats"]["per_annotator"]
    assert repeats["dr_a"]["consistency"] == 1.0 and repeats["dr_b"]["compared"] > 0
    assert repeats["dr_b"]["consistency"] < 1.0

    # validate: the split dimensions are warnings, counted; the release is usable (exit 0)
    out = cli("validate", str(app_export))
    assert "ok:" in out and "5 dimension(s) without a strict majority or an adjudication" in out

    # path B: the same export through the build project
    out = cli("build", "labels", str(build_project), str(app_export))
    assert "1 adjudication(s)" in out and "chest-study" in out
    release = tmp_path / "release" / "chest-set.jsonl"
    out = cli("build", "export", str(build_project), "--format", "canonical", "--out", str(release))
    assert "1 label(s) adjudicated" in out
    released_b = load_benchmark(str(release))
    same_release(released_a, released_b)
    build_card = json.loads((release.parent / "dataset.json").read_text())
    for key in ("provenance", "kind", "raters", "annotators", "annotations_per_case", "label_sources"):
        assert build_card["labels"][key] == labels_card[key], key
    for key in ("undecided_dimensions", "adjudicated_dimensions", "comments", "cannot_judge", "harm_flags"):
        assert build_card["labels"][key] == labels_card[key], key
    assert build_card["labels"]["annotation_projects"] == labels_card["annotation_projects"]
    assert "construction" in build_card  # and the build's own story
    assert "ok:" in cli("validate", str(release))

    # import again: the release attached to the project a second time gives the same release
    again = tmp_path / "again" / "chest-set.jsonl"
    cli("build", "labels", str(build_project), str(release))
    cli("build", "export", str(build_project), "--format", "canonical", "--out", str(again))
    same_release(released_b, load_benchmark(str(again)))

    # eval on either release: the labels are the doctors' majority, not "unknown provenance"
    judges = ("--judge", "baseline:longer", "--judge", "baseline:first")
    for data, results in ((app_export, tmp_path / "results-a"), (release, tmp_path / "results-b")):
        cli("eval", "--data", str(data), *judges, "--out", str(results), "--quiet")
        board = cli("leaderboard", str(results))
        assert "expert majority of 2-3 annotators" in board and "unknown provenance" not in board

    # the report's case cards: how the doctors voted, what they wrote, what was adjudicated or left open
    cli("report", str(tmp_path / "results-b"), "--format", "html")
    page = (tmp_path / "results-b" / "report.html").read_text()
    assert "Doctors&#39; votes" in page or "Doctors' votes" in page
    assert "1–1 adjudicated" in page and "1–1 undecided" in page and ">2–1<" in page and ">3–0<" in page
    assert "the image is too dark to read" in page and "A misses the effusion" in page
    assert "adjudicated overall: response 2" in page and "B names the effusion" in page
