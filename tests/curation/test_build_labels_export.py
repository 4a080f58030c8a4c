"""Labels in (label rows or an annotate export), the labelled set out (canonical or reference) with its card."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.curation import api_options, imported_project, project_store, write_jsonl

from medrewardbench.curation.export import export_dataset, label_provenance
from medrewardbench.curation.generators import load_answer_template
from medrewardbench.curation.labels import attach_labels
from medrewardbench.curation.project import open_project
from medrewardbench.curation.store import BuildError
from medrewardbench.data import load_benchmark
from medrewardbench.data.canonical import canonical_files
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError
from medrewardbench.testing.openai_server import OpenAIServer


def label_rows(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Three doctors: dr_a and dr_b agree on everything, dr_c disagrees on overall; dr_b skips accuracy on v6."""
    rows = []
    for pair in pairs:
        for annotator, overall in (("dr_a", "A"), ("dr_b", 1), ("dr_c", "B")):
            labels: dict[str, Any] = {dim: overall for dim in DIMENSIONS}
            labels["overall"] = overall
            if annotator == "dr_c":
                labels = {"overall": "B", "accuracy": "A"}
            if annotator == "dr_b" and pair["id"] == "v6":
                labels.pop("accuracy")
            rows.append(
                {"id": pair["id"], "annotator": annotator, "labels": labels, "order_shown": "swapped", "seconds": 12.5}
            )
    return rows


def test_labels_attach_and_the_canonical_export_holds_annotations_and_majority_labels(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project, pairs = paired
    with open_project(project) as store:
        summary = attach_labels(store, write_jsonl(tmp_path / "labels.jsonl", label_rows(pairs)))
        assert (summary.labels, summary.annotators, summary.pairs) == (18, {"dr_a", "dr_b", "dr_c"}, 6)
        exported = export_dataset(store, "canonical", tmp_path / "out" / "labelled.jsonl")
    assert (exported.cases, exported.labelled, exported.undecided) == (6, 6, 0)
    benchmark = load_benchmark(str(tmp_path / "out" / "labelled.jsonl"))
    assert benchmark.case_ids() == tuple(p["id"] for p in pairs)
    case = benchmark.cases[0]
    assert [a.annotator for a in case.annotations] == ["dr_a", "dr_b", "dr_c"]
    assert case.annotations[0].order_shown == "swapped" and case.annotations[0].seconds == 12.5
    assert dict(case.labels) == {dim: 1 for dim in DIMENSIONS}  # 2 of 3 chose A everywhere
    assert case.response_1 == pairs[0]["response_1"] and case.metadata["build"] == pairs[0]["metadata"]["build"]
    card = json.loads((tmp_path / "out" / "dataset.json").read_text())
    assert card["name"] == "labelled" and card["files"] == ["labelled.jsonl"] and card["cases"] == 6
    assert card["labels"]["provenance"] == "expert majority of 3 annotators" and card["labels"]["declared"] is False
    assert card["labels"]["annotators"] == ["dr_a", "dr_b", "dr_c"]
    assert card["construction"]["pool"] == ["api:gen-a", "api:gen-b"] and card["construction"]["pairs"]["seed"] == 11
    # the card sits beside the data and is never read as cases
    assert canonical_files(tmp_path / "out") == [tmp_path / "out" / "labelled.jsonl"]
    assert len(load_benchmark(str(tmp_path / "out"))) == 6


def test_a_dimension_without_a_strict_majority_stays_unlabelled_and_is_counted(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project, pairs = paired
    rows = [
        {"id": pairs[0]["id"], "annotator": "dr_a", "labels": {"overall": "A", "accuracy": "A"}},
        {"id": pairs[0]["id"], "annotator": "dr_b", "labels": {"overall": "B", "accuracy": "A"}},
    ]
    with open_project(project) as store:
        attach_labels(store, write_jsonl(tmp_path / "labels.jsonl", rows))
        exported = export_dataset(
            store, "canonical", tmp_path / "out.jsonl", labelled_only=True, provenance="two residents, adjudicated"
        )
    assert (exported.cases, exported.undecided) == (1, 1)
    [case] = load_benchmark(str(tmp_path / "out.jsonl"), strict=True).cases
    assert dict(case.labels) == {"accuracy": 1}
    card = json.loads((tmp_path / "dataset.json").read_text())
    assert card["labels"]["provenance"] == "two residents, adjudicated" and card["labels"]["declared"] is True
    assert card["labels"]["undecided_dimensions"] == 1
    assert label_provenance(2, 3) == "expert majority of 2-3 annotators"
    assert label_provenance(1, 1) == "a single expert annotator" and label_provenance(None, None) == "unlabelled"


def test_an_annotate_export_in_canonical_form_attaches_too(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project, pairs = paired
    exported_by_annotate = [
        {
            **{k: pair[k] for k in ("id", "image", "question", "response_1", "response_2", "organ_system")},
            "labels": {"overall": 2},
            "annotations": [
                {"annotator": "okafor", "labels": {"overall": 2}, "order_shown": "original", "seconds": 30.0},
                {"annotator": "lindqvist", "labels": {"overall": "B"}, "order_shown": "swapped", "seconds": 41.0},
                {"annotator": "moreau", "labels": {}},  # could not judge
            ],
        }
        for pair in pairs[:2]
    ]
    with open_project(project) as store:
        summary = attach_labels(store, write_jsonl(tmp_path / "annotate.jsonl", exported_by_annotate))
        assert summary.labels == 6 and summary.annotators == {"okafor", "lindqvist", "moreau"}
        export_dataset(store, "canonical", tmp_path / "out.jsonl", labelled_only=True)
    cases = load_benchmark(str(tmp_path / "out.jsonl")).cases
    assert [dict(c.labels) for c in cases] == [{"overall": 2}, {"overall": 2}]
    assert (
        json.loads((tmp_path / "dataset.json").read_text())["labels"]["provenance"] == "expert majority of 2 annotators"
    )


def test_every_label_problem_is_reported_and_nothing_is_attached(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project, pairs = paired
    rows: list[Any] = [
        {"id": pairs[0]["id"], "annotator": "dr_a", "labels": {"overall": "A"}},  # fine
        {"id": "nope", "annotator": "dr_a", "labels": {"overall": "A"}},  # no such pair
        {"id": pairs[0]["id"], "annotator": "dr_a", "labels": {"overall": "B"}},  # twice
        {"id": pairs[1]["id"], "annotator": "dr_a", "labels": {"overall": "C", "beauty": "A"}},  # bad value, dimension
        {"id": pairs[1]["id"], "annotator": "", "labels": {}},  # no annotator
        {"id": pairs[1]["id"], "annotator": "dr_b", "labels": {}, "order_shown": "sideways", "seconds": -1},
        {"id": pairs[2]["id"], "annotator": "dr_b", "labels": {}, "colour": "red"},  # unknown field
        {"id": pairs[2]["id"], "response_1": "something else", "response_2": pairs[2]["response_2"],
         "annotations": [{"annotator": "x", "labels": {"overall": 1}}]},  # texts of another sampling
        "not an object",
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "labels.jsonl", rows)
    with open_project(project) as store:
        with pytest.raises(DataError) as info:
            attach_labels(store, path)
        assert store.count_labels() == 0
    found = {(p.row, p.field) for p in info.value.problems}
    assert {
        (2, "id"),
        (3, "annotator"),
        (4, "labels.overall"),
        (4, "labels.beauty"),
        (5, "annotator"),
        (6, "order_shown"),
        (6, "seconds"),
        (7, "colour"),
        (8, "response_1"),
        (9, None),
    } <= found
    assert all(p.file == str(path) for p in info.value.problems)


def test_the_reference_export_is_read_back_by_the_reference_loader(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project, pairs = paired
    with open_project(project) as store:
        attach_labels(store, write_jsonl(tmp_path / "labels.jsonl", label_rows(pairs)))
        summary = export_dataset(store, "reference", tmp_path / "ref")
        again = export_dataset(store, "reference", tmp_path / "ref", force=True)  # replaces its own earlier export
    organs = {"abdomen", "brain", "eye"}
    assert {p.name for p in summary.paths} == {f"{o}.jsonl" for o in organs} | {f"{o}.parquet" for o in organs}
    assert again.cases == summary.cases == 6
    benchmark = load_benchmark(str(tmp_path / "ref"))
    assert len(benchmark) == 6 and set(benchmark.organ_systems()) == organs
    by_question = {c.question: c for c in benchmark.cases}
    first = by_question[pairs[0]["question"]]
    assert first.response_1 == pairs[0]["response_1"] and dict(first.labels) == {dim: 1 for dim in DIMENSIONS}
    card = json.loads((tmp_path / "ref" / "dataset.json").read_text())
    assert card["format"] == "reference" and "pair_gt_all/abdomen.jsonl" in card["files"]
    (tmp_path / "foreign" / "pair_gt_all").mkdir(parents=True)
    with open_project(project) as store, pytest.raises(BuildError, match="was not written by 'build export'"):
        export_dataset(store, "reference", tmp_path / "foreign")


def test_the_same_project_exports_byte_identical_files(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    project, pairs = paired
    with open_project(project) as store:
        attach_labels(store, write_jsonl(tmp_path / "labels.jsonl", label_rows(pairs)))
        for name in ("a", "b"):
            export_dataset(store, "canonical", tmp_path / name / "set.jsonl")
            export_dataset(store, "canonical", tmp_path / name / "set.parquet", force=True)  # its card replaces
            export_dataset(store, "reference", tmp_path / name / "ref")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert len(files) >= 9
    for relative in files:
        assert (tmp_path / "a" / relative).read_bytes() == (tmp_path / "b" / relative).read_bytes(), relative


def test_export_needs_pairs_and_a_known_format(answer_server: OpenAIServer, tmp_path: Path) -> None:
    project = imported_project(tmp_path)
    with open_project(project) as store:
        with pytest.raises(BuildError, match="no pairs"):
            export_dataset(store, "canonical", tmp_path / "x.jsonl")
        with pytest.raises(BuildError, match="unknown export format"):
            export_dataset(store, "xlsx", tmp_path / "x.xlsx")
    with project_store(project) as store, pytest.raises(BuildError, match="run 'build pairs' first"):
        attach_labels(store, tmp_path / "labels.jsonl")


def test_the_kept_questions_export_for_screening_in_the_annotation_app(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    from medrewardbench.curation.filtering import run_filter
    from medrewardbench.data.questions import read_questions

    answer_server.control.set_responder(lambda body: "Yes." if body["model"] == "yes-man" else "I do not know.")
    project = imported_project(tmp_path)
    with open_project(project) as store:
        run_filter(store, ["api:yes-man"], 0, options=api_options(answer_server), template=load_answer_template())
        summary = export_dataset(store, "questions", tmp_path / "kept.jsonl")
    questions = read_questions(tmp_path / "kept.jsonl")  # what 'annotate init --questions' reads
    assert summary.cases == 4 and [q.question_id for q in questions] == ["v2", "v3", "v4", "v5"]  # "yes" ones dropped
    assert questions[0].image.kind == "bytes" and questions[0].reference_answer == "no"
    assert questions[0].metadata["build"]["filter"].startswith("kept: 0 of 1")
    # a screened file in the same format imports into a new project as it is
    with open_project(tmp_path / "screened", create=True) as store:
        from medrewardbench.curation.importer import import_questions

        assert import_questions(store, str(tmp_path / "kept.jsonl")).imported == 4
