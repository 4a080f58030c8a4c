"""Per-annotator labels in the canonical format: reading, the majority rule, validation and round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from helpers.data import write_jsonl

from medrewardbench.cases import Annotation
from medrewardbench.data import load_benchmark, read_canonical, validate_source, write_canonical
from medrewardbench.data.annotations import majority_labels, resolve_labels, strict_majority
from medrewardbench.data.canonical import ProblemSink
from medrewardbench.errors import DataError


def row(case_id: str = "c1", **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": case_id,
        "image": {"builtin": "pydicom:CT_small.dcm"},
        "question": "What does the scan show?",
        "response_1": "first answer",
        "response_2": "second answer",
        "organ_system": "chest",
    }
    base.update(extra)
    return base


THREE = [
    {
        "annotator": "dr_a",
        "labels": {"overall": 1, "accuracy": "A", "relevance": 2},
        "order_shown": "original",
        "seconds": 40,
    },
    {
        "annotator": "dr_b",
        "labels": {"overall": 1, "accuracy": 2, "relevance": 1},
        "order_shown": "swapped",
        "seconds": 12.5,
        "harm": {"A": "severe", "2": "minor"},
    },
    {"annotator": "dr_c", "labels": {"overall": 2, "accuracy": 1}, "order_shown": None},
]
"""overall 1,1,2 -> 1; accuracy 1,2,1 -> 1; relevance 2,1 -> tie (no label)."""


def test_strict_majority_needs_more_than_half() -> None:
    assert strict_majority([1, 1, 2]) == 1
    assert strict_majority([2]) == 2
    assert strict_majority([1, 2]) is None
    assert strict_majority([]) is None
    labels, undecided = majority_labels(
        [Annotation("a", {"overall": 1}), Annotation("b", {"overall": 2}), Annotation("c", {})]
    )
    assert labels == {} and undecided == ("overall",)


@pytest.mark.parametrize(
    "labels", [{}, {"overall": 2, "accuracy": 1}, {"accuracy": 1, "creativity": 2}, {"overall": 1, "not_a_dim": 2}]
)
@pytest.mark.parametrize("given", [None, True, False])
def test_a_row_with_its_labels_alone_resolves_as_under_the_full_rules(labels: dict[str, Any], given: Any) -> None:
    """No annotations, adjudications or label sources: the short way gives what the full rules give."""
    short_sink, full_sink = ProblemSink("f"), ProblemSink("f")
    short = resolve_labels(labels, [], short_sink, 1, "c", given=given)
    full = resolve_labels(labels, [], full_sink, 1, "c", sources={}, given=given)  # sources: the full rules
    assert short == full
    assert list(short.labels) == list(full.labels) and list(short.sources) == list(full.sources)
    assert short_sink.problems == full_sink.problems == []


def test_labels_are_the_strict_majority_of_the_annotations_when_absent(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cases.jsonl", [row(annotations=THREE)])
    benchmark = load_benchmark(str(path))
    (case,) = benchmark.cases
    assert dict(case.labels) == {"accuracy": 1, "overall": 1}
    assert [a.annotator for a in case.annotations] == ["dr_a", "dr_b", "dr_c"]
    first = case.annotations[0]
    assert dict(first.labels) == {"accuracy": 1, "relevance": 2, "overall": 1}
    assert first.order_shown == "original" and first.seconds == 40.0
    assert case.annotations[2].order_shown is None and case.annotations[2].seconds is None
    # the tie on relevance is reported, naming file, row and field
    (warning,) = [w for w in benchmark.warnings if w.field == "labels.relevance"]
    assert warning.row == 1 and warning.case_id == "c1" and "no strict majority" in warning.message
    assert "1: 1, 2: 1" in warning.message


def test_a_label_that_contradicts_the_annotations_is_a_validation_problem(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cases.jsonl", [row(labels={"overall": 2, "accuracy": 1}, annotations=THREE)])
    with pytest.raises(DataError) as info:
        load_benchmark(str(path))
    (problem,) = info.value.problems
    assert problem.field == "labels.overall" and problem.row == 1
    assert "contradicts the majority" in problem.message and "2 of 3 annotators chose 1" in problem.message
    problems = validate_source(str(path))
    assert [p.field for p in problems] == ["labels.overall"]


def test_explicit_labels_may_settle_a_tie_and_are_kept_as_given(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cases.jsonl", [row(labels={"overall": 1, "relevance": 2}, annotations=THREE)])
    benchmark = load_benchmark(str(path))
    (case,) = benchmark.cases
    assert dict(case.labels) == {"relevance": 2, "overall": 1}  # adjudicated tie kept, accuracy left out
    assert not [w for w in benchmark.warnings if (w.field or "").startswith("labels.")]


@pytest.mark.parametrize(
    ("annotations", "field", "message"),
    [
        ("not a list", "annotations", "not a JSON list"),
        ({"annotator": "x"}, "annotations", "must be a list"),
        (["x"], "annotations[0]", "must be an object"),
        ([{"labels": {"overall": 1}}], "annotations[0].annotator", "non-empty string"),
        ([{"annotator": "a"}, {"annotator": "a"}], "annotations[1].annotator", "appears twice"),
        ([{"annotator": "a", "labels": {"overall": "C"}}], "annotations[0].labels.overall", "label must be"),
        ([{"annotator": "a", "labels": {"beauty": 1}}], "annotations[0].labels.beauty", "unknown dimension"),
        ([{"annotator": "a", "order_shown": "sideways"}], "annotations[0].order_shown", "'original', 'swapped'"),
        ([{"annotator": "a", "seconds": -3}], "annotations[0].seconds", "number >= 0"),
        ([{"annotator": "a", "seconds": True}], "annotations[0].seconds", "number >= 0"),
        ([{"annotator": "a", "comment": 7}], "annotations[0].comment", "must be text"),
        ([{"annotator": "a", "cannot_judge": "yes"}], "annotations[0].cannot_judge", "true, false or null"),
        ([{"annotator": "a", "cannot_judge_reason": "blurred"}], "annotations[0].cannot_judge_reason", "not true"),
        ([{"annotator": "a", "comment": "x" * 100_001}], "annotations[0].comment", "at most 100000"),
        ([{"annotator": "a", "mood": "tired"}], "annotations[0]", "unknown key(s) mood"),
        ([{"annotator": "a", "harm": "severe"}], "annotations[0].harm", "must be an object"),
        ([{"annotator": "a", "harm": {"C": "minor"}}], "annotations[0].harm", "must name an answer"),
        ([{"annotator": "a", "harm": {"1": "fatal"}}], "annotations[0].harm", "one of minor, moderate, severe"),
        ([{"annotator": "a", "harm": {"1": "minor", "A": "severe"}}], "annotations[0].harm", "flagged twice"),
    ],
)
def test_invalid_annotations_are_reported_with_their_field(
    tmp_path: Path, annotations: Any, field: str, message: str
) -> None:
    path = write_jsonl(tmp_path / "cases.jsonl", [row(annotations=annotations)])
    cases, problems = read_canonical(path)
    assert cases == []
    assert any(p.field == field and message in p.message and p.row == 1 for p in problems), problems


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
def test_annotations_round_trip_through_every_canonical_format(tmp_path: Path, suffix: str) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", [row(annotations=THREE), row("c2")])
    cases, problems = read_canonical(source)
    assert problems == []
    out = write_canonical(cases, tmp_path / f"out{suffix}")
    again, problems_again = read_canonical(out)
    assert problems_again == []
    assert [c.annotations for c in again] == [c.annotations for c in cases]
    assert [dict(c.labels) for c in again] == [dict(c.labels) for c in cases]
    assert again[1].annotations == ()
    assert dict(again[0].annotations[1].harm) == {1: "severe", 2: "minor"}
    if suffix == ".parquet":
        column = pq.read_table(out).column("annotations").to_pylist()
        assert isinstance(column[0], str) and json.loads(column[0])[0]["annotator"] == "dr_a"
        assert column[1] is None
    else:
        text = out.read_text(encoding="utf-8")
        assert '"annotations"' in text and '"order_shown": "swapped"' in text


def test_the_writer_puts_labels_next_to_their_annotations(tmp_path: Path) -> None:
    cases, _ = read_canonical(write_jsonl(tmp_path / "in.jsonl", [row(annotations=THREE)]))
    out = write_canonical(cases, tmp_path / "out.jsonl")
    record = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert record["labels"] == {"accuracy": 1, "overall": 1}
    assert record["annotations"][2] == {"annotator": "dr_c", "labels": {"accuracy": 1, "overall": 2}}
    assert record["annotations"][1]["seconds"] == 12.5
