"""validate_source: every problem at once, each naming file, row and field; strict loading agrees."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.data import (
    build_canonical_set,
    build_reference_layout,
    canonical_rows,
    reference_label_rows,
    reference_rows,
    write_jsonl,
    write_reference_parquet,
)

from medrewardbench.data import load_benchmark, validate_source
from medrewardbench.errors import DataError, DataProblem


def _find(problems: list[DataProblem], text: str) -> DataProblem:
    matches = [p for p in problems if p.message.startswith(text)]
    assert len(matches) == 1, f"expected one problem starting {text!r}, got {[str(p) for p in problems]}"
    return matches[0]


def _where(problem: DataProblem) -> tuple[str, int | None, str | None]:
    return Path(problem.file).name, problem.row, problem.field


def test_clean_sources_have_no_problems(reference_dir: Path, canonical_file: Path) -> None:
    assert validate_source(str(reference_dir)) == []
    # the canonical fixture's case c4 has no labels: the one warning, as the README promises
    assert [(p.row, p.case_id, p.message) for p in validate_source(str(canonical_file))] == [
        (4, "c4", "case without expert labels")
    ]


# --------------------------------------------------------------------------- canonical


BAD_CANONICAL_LINES = [
    # 1: fine
    None,
    # 2: missing id
    {"question": "q", "response_1": "a", "response_2": "b"},
    # 3: duplicate of c1
    {"id": "c1", "question": "q", "response_1": "a", "response_2": "b"},
    # 4: label value not A/B, unknown dimension
    {"id": "d4", "question": "q", "response_1": "a", "response_2": "b", "labels": {"accuracy": "C", "empathy": 1}},
    # 5: missing required field, wrong type
    {"id": "d5", "question": 5, "response_1": "a"},
    # 6: unreadable image (a text file with a .png name)
    {"id": "d6", "image": "images/broken.png", "question": "q", "response_1": "a", "response_2": "b"},
    # 7: image file that does not exist
    {"id": "d7", "image": {"path": "images/absent.png"}, "question": "q", "response_1": "a", "response_2": "b"},
    # 8: invalid base64
    {"id": "d8", "image": {"bytes": "***"}, "question": "q", "response_1": "a", "response_2": "b"},
    # 9: not JSON
    "{not json",
    # 10: unknown field, empty response, id of the wrong type
    {"id": 10, "question": "q", "response_1": "a", "response_2": " ", "answer": "x"},
    # 11: bad builtin name, metadata not an object
    {
        "id": "d11",
        "image": {"builtin": "nowhere"},
        "question": "q",
        "response_1": "a",
        "response_2": "b",
        "metadata": [1],
    },
    # 12: labels not an object
    {"id": "d12", "question": "q", "response_1": "a", "response_2": "b", "labels": ["A"]},
    # 13: a row left out for its label still has its image checked
    {
        "id": "d13",
        "image": "images/broken.png",
        "question": "q",
        "response_1": "a",
        "response_2": "b",
        "labels": {"overall": "Z"},
    },
]


@pytest.fixture
def bad_canonical(tmp_path: Path) -> Path:
    rows = [canonical_rows()[0] if row is None else row for row in BAD_CANONICAL_LINES]
    path = build_canonical_set(tmp_path / "bad", rows=rows)
    (path.parent / "images" / "broken.png").write_text("this is not an image")
    return path


def test_every_canonical_problem_is_reported_with_file_row_and_field(bad_canonical: Path) -> None:
    problems = validate_source(str(bad_canonical))

    expected = {
        "missing id": (2, "id"),
        "duplicate id 'c1' (first at row 1)": (3, "id"),
        "label must be 'A' or 'B' (or 1/2; A = response_1, B = response_2), got 'C'": (4, "labels.accuracy"),
        "unknown dimension 'empathy'": (4, "labels.empathy"),
        "missing required field": (5, "response_2"),
        "must be a string, got int": (5, "question"),
        "'bytes' is not valid base64": (8, "image.bytes"),
        "invalid JSON": (9, None),
        "unknown field; put extra information under 'metadata'": (10, "answer"),
        "must not be empty": (10, "response_2"),
        "id must be a string, got int 10": (10, "id"),
        "'builtin' must look like": (11, "image.builtin"),
        "must be an object, got list": (11, "metadata"),
        "must be an object mapping dimension to 1|2": (12, "labels"),
        "label must be 'A' or 'B' (or 1/2; A = response_1, B = response_2), got 'Z'": (13, "labels.overall"),
    }
    for text, (row, field) in expected.items():
        problem = _find(problems, text)
        assert _where(problem) == ("cases.jsonl", row, field), str(problem)
        assert f"cases.jsonl, row {row}" in str(problem)
        if field is not None:
            assert f"field {field!r}" in str(problem)

    for row, case_id, name in ((6, "d6", "broken.png"), (7, "d7", "absent.png"), (13, "d13", "broken.png")):
        (image_problem,) = [p for p in problems if p.row == row and p.field == "image"]
        assert _where(image_problem) == ("cases.jsonl", row, "image")
        assert image_problem.case_id == case_id
        assert image_problem.message.startswith("unreadable image (path image")
        assert name in image_problem.message
    # rows 6 and 7 make valid cases without labels: warned about
    assert [(p.row, p.case_id) for p in problems if p.kind == "unlabeled"] == [(6, "d6"), (7, "d7")]
    assert len(problems) == len(expected) + 3 + 2
    assert [p.row for p in problems] == sorted(p.row or 0 for p in problems)


def test_strict_loading_raises_with_the_same_problems_except_images(bad_canonical: Path) -> None:
    reported = validate_source(str(bad_canonical))

    with pytest.raises(DataError) as caught:
        load_benchmark(str(bad_canonical))

    raised = {str(p) for p in caught.value.problems}
    errors = [p for p in reported if p.kind != "unlabeled"]  # warnings do not stop loading
    assert raised == {str(p) for p in errors if p.field != "image" or "unreadable image" not in p.message}
    assert "row 4 (case d4), field 'labels.accuracy'" in str(caught.value)


def test_duplicate_ids_across_canonical_files(tmp_path: Path) -> None:
    rows = canonical_rows()
    build_canonical_set(tmp_path / "set", name="a.jsonl", rows=rows[:2])
    write_jsonl(tmp_path / "set" / "b.jsonl", [rows[2], {**rows[3], "id": "c1"}])

    problems = validate_source(str(tmp_path / "set"))

    assert len(problems) == 1
    assert _where(problems[0]) == ("b.jsonl", 2, "id")
    assert "duplicate id 'c1'" in problems[0].message and "a.jsonl, row 1" in problems[0].message


@pytest.mark.parametrize("small_pass", [100_000, 0], ids=["set", "numpy"])
def test_duplicate_ids_found_alike_by_the_small_and_the_large_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_pass: int
) -> None:
    """A small source finds its repeated ids with a set, a large one with numpy: the same problems."""
    from medrewardbench.data import benchmark

    monkeypatch.setattr(benchmark, "_SMALL_ID_PASS", small_pass)
    rows = canonical_rows()
    build_canonical_set(tmp_path / "set", name="a.jsonl", rows=rows[:2])
    write_jsonl(tmp_path / "set" / "b.jsonl", [rows[2], {**rows[3], "id": "c1"}, {**rows[3], "id": "c1"}])

    problems = validate_source(str(tmp_path / "set"))

    assert [_where(p) for p in problems] == [("b.jsonl", 2, "id"), ("b.jsonl", 3, "id")]
    assert all("duplicate id 'c1'" in p.message for p in problems)
    assert "a.jsonl, row 1" in problems[0].message
    tracker = benchmark.IdTracker.hashing()
    for key in ("x", "y", "x", "z", "y", "x"):
        tracker.first("", key, benchmark.CaseLocation("f", 1))
    assert tracker.repeated() == frozenset({hash("x"), hash("y")})


def test_unreadable_embedded_and_dicom_images(tmp_path: Path) -> None:
    import base64

    rows = canonical_rows()
    rows[2] = {**rows[2], "image": {"bytes": base64.b64encode(b"\x89PNG but cut short").decode(), "path": "x.png"}}
    path = build_canonical_set(tmp_path, rows=rows)
    (tmp_path / "images" / "ct.dcm").write_bytes(b"\x00" * 128 + b"DICM" + b"\x01\x02")

    problems = [p for p in validate_source(str(path)) if p.kind != "unlabeled"]

    assert [(p.row, p.field, p.case_id) for p in problems] == [(2, "image", "c2"), (3, "image", "c3")]
    assert all(p.message.startswith("unreadable image") for p in problems)
    assert "ct.dcm" in problems[0].message and "x.png" in problems[1].message


# --------------------------------------------------------------------------- reference layout


def test_every_reference_problem_is_reported(tmp_path: Path) -> None:
    root = build_reference_layout(tmp_path / "mrb", {"brain": 2, "chest": 3}, unlabeled={"brain": [1]})
    gt = root / "pair_gt_all"
    # labels: bad letter, unknown dimension, missing question_id, duplicate question_id, orphan
    write_jsonl(
        gt / "chest.jsonl",
        [
            {"question_id": 0, "human_answer": {"accuracy": "C", "overall": "A"}},
            {"question_id": 1, "human_answer": {"bedside_manner": "A"}},
            {"human_answer": {"overall": "A"}},
            {"question_id": 1, "human_answer": {"overall": "B"}},
            {"question_id": 2, "human_answer": {"overall": "B"}},
            {"question_id": 42, "human_answer": {"overall": "B"}},
            "[1, 2",
        ],
    )
    # parquet: a row without question text, a corrupt image, a duplicate question_id, a wrong organ
    rows = reference_rows("lung", 4)
    rows[1]["question"] = None
    rows[2]["image"] = {"bytes": b"not an image at all", "path": "bad.png"}
    rows[3]["question_id"] = 0
    rows[3]["modality_type"] = "heart"
    write_reference_parquet(gt / "parquet" / "lung.parquet", rows)
    write_jsonl(gt / "lung.jsonl", reference_label_rows([0, 1, 2]))
    # organ files without their partner
    write_jsonl(gt / "eye.jsonl", reference_label_rows([0]))
    write_reference_parquet(gt / "parquet" / "heart.parquet", reference_rows("heart", 1))

    problems = validate_source(str(root))

    expected = {
        "label must be 'A' or 'B'": ("chest.jsonl", 1, "human_answer.accuracy"),
        "unknown dimension 'bedside_manner'": ("chest.jsonl", 2, "human_answer.bedside_manner"),
        "missing question_id": ("chest.jsonl", 3, "question_id"),
        "duplicate question_id '1' (first at row 2)": ("chest.jsonl", 4, "question_id"),
        "labels without a case: question_id '42'": ("chest.jsonl", 6, "question_id"),
        "invalid JSON": ("chest.jsonl", 7, None),
        "case without expert labels: question_id '1' is not in brain.jsonl": ("brain.parquet", 2, "question_id"),
        "missing required field": ("lung.parquet", 2, "question"),
        "unreadable image (embedded image 'bad.png')": ("lung.parquet", 3, "image"),
        "duplicate question_id '0' (first at row 1)": ("lung.parquet", 4, "question_id"),
        "mismatched organ files: modality_type 'heart' in 1 row(s)": ("lung.parquet", 4, "modality_type"),
        "mismatched organ files: no parquet file parquet/eye.parquet": ("eye.jsonl", None, None),
        "mismatched organ files: no labels file heart.jsonl": ("heart.parquet", None, None),
    }
    for text, where in expected.items():
        assert _where(_find(problems, text)) == where
    assert len(problems) == len(expected), "\n".join(str(p) for p in problems)
    assert "pair_gt_all/parquet/lung.parquet, row 3 (case lung/2), field 'image'" in str(
        _find(problems, "unreadable image")
    )


def test_strict_reference_loading_raises_errors_but_not_label_coverage_warnings(tmp_path: Path) -> None:
    root = build_reference_layout(tmp_path / "mrb", unlabeled={"chest": [0]}, orphan_labels={"chest": [5]})
    gt = root / "pair_gt_all"
    write_jsonl(gt / "eye.jsonl", reference_label_rows([0]))

    with pytest.raises(DataError) as caught:
        load_benchmark(str(root))
    assert [p.message for p in caught.value.problems] == [
        "mismatched organ files: no parquet file parquet/eye.parquet for these labels"
    ]

    (gt / "eye.jsonl").unlink()
    bench = load_benchmark(str(root))
    assert sorted(w.message.split(":")[0] for w in bench.warnings) == [
        "case without expert labels",
        "labels without a case",
    ]
    assert len(validate_source(str(root))) == 2


def test_missing_parquet_columns_are_one_file_problem(tmp_path: Path) -> None:
    gt = tmp_path / "pair_gt_all"
    rows = [{k: v for k, v in row.items() if k != "answer2_text"} for row in reference_rows("brain", 2)]
    write_reference_parquet(gt / "parquet" / "brain.parquet", rows)
    write_jsonl(gt / "brain.jsonl", reference_label_rows([0, 1]))

    problems = validate_source(str(gt))

    assert len(problems) == 1
    assert _where(problems[0]) == ("brain.parquet", None, None)
    assert "missing required column(s): answer2_text" in problems[0].message


def test_validate_organ_selection_and_unusable_sources(reference_dir: Path, tmp_path: Path) -> None:
    (reference_dir / "pair_gt_all" / "brain.jsonl").write_text('{"question_id": 0, "human_answer": 3}\n')
    assert validate_source(str(reference_dir), organs=["chest"]) == []
    assert len(validate_source(str(reference_dir), organs=["brain"])) >= 1

    unknown_organ = validate_source(str(reference_dir), organs=["liver"])
    assert len(unknown_organ) == 1 and "available: brain, chest" in unknown_organ[0].message

    missing = validate_source(str(tmp_path / "nowhere"))
    assert len(missing) == 1 and "no such file or directory" in missing[0].message


def test_validate_parquet_canonical_rows(tmp_path: Path) -> None:
    from helpers.data import write_canonical_parquet_rows

    rows = canonical_rows()
    rows[0] = {**rows[0], "labels": {"overall": "X"}}
    build_canonical_set(tmp_path, name="unused.jsonl")
    path = write_canonical_parquet_rows(tmp_path / "cases.parquet", rows)

    problems = validate_source(str(path))

    assert [(_where(p), p.case_id) for p in problems] == [
        (("cases.parquet", 1, "labels.overall"), "c1"),
        (("cases.parquet", 4, "labels"), "c4"),  # c4 has no labels: a warning
    ]
