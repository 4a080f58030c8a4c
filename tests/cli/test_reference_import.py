"""import-reference reproduces the reference implementation's per-organ accuracy exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.data import build_reference_layout, write_jsonl
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.judges.reference_outputs import reference_normalize

ALL_A = dict.fromkeys(DIMENSIONS, "A")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '{"accuracy": "A", "relevance": "a", "comprehensiveness": "B", "creativity": "A", '
            '"responsiveness": "A", "overall": "A", "reason": "x"}',
            {**ALL_A, "comprehensiveness": "B"},
        ),
        (
            "Thinking...\naccuracy: B\nrelevance: b\ncomprehensiveness: B\ncreativity: A\nresponsiveness: B\n"
            "overall: B",
            {**dict.fromkeys(DIMENSIONS, "B"), "creativity": "A"},
        ),
        ("[[B]]", dict.fromkeys(DIMENSIONS, "B")),
        ("B", dict.fromkeys(DIMENSIONS, "B")),
        ('"A"', ALL_A),
        ("The better one is answer A.", ALL_A),
        ("This is a good answer B", None),  # the article "a" counts as a second standalone letter
        ("I cannot decide.", None),
        (
            {
                "accuracy": "A",
                "relevance": "A",
                "comprehensiveness": "A",
                "creativity": "A",
                "responsiveness": "A",
                "overall": "A",
            },
            ALL_A,
        ),
        ({"accuracy": "A"}, None),
        (None, None),
    ],
)
def test_reference_normalisation_rules(raw: object, expected: dict[str, str] | None) -> None:
    assert reference_normalize(raw) == expected


def test_import_reference_reproduces_hand_computed_per_organ_accuracy(tmp_path: Path) -> None:
    # labels: even question ids prefer answer1 ("A") on every dimension, odd ones answer2 ("B")
    data = build_reference_layout(tmp_path / "mrb", {"brain": 4, "chest": 3})
    outputs = tmp_path / "outputs"
    write_jsonl(
        outputs / "brain" / "pair_judge-x.jsonl",
        [
            {
                "question_id": 0,
                "modality_type": "brain",
                "chosen_answer": '{"accuracy": "A", "relevance": "A", "comprehensiveness": "B", "creativity": "A", '
                '"responsiveness": "A", "overall": "A"}',
            },
            {
                "question_id": 1,
                "modality_type": "brain",
                "chosen_answer": "accuracy: B\nrelevance: B\ncomprehensiveness: B\ncreativity: A\n"
                "responsiveness: B\noverall: B",
            },
            {"question_id": 2, "modality_type": "brain", "chosen_answer": "[[B]]"},
            {"question_id": 3, "modality_type": "brain", "chosen_answer": "I cannot decide."},
        ],
    )
    write_jsonl(
        outputs / "chest" / "pair_judge-x.jsonl",
        [
            {"question_id": 0, "modality_type": "chest", "chosen_answer": {**ALL_A, "reason": "normalised"}},
            # question 1 has no prediction at all
            {"question_id": 2, "modality_type": "chest", "chosen_answer": "B"},
        ],
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["import-reference", str(outputs), "--data", str(data), "--name", "judge-x", "--out", str(out)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    run = json.loads((out / "metrics.json").read_text())["runs"][0]
    assert run["judge"] == "reference:judge-x"
    by_organ = run["metrics"]["by"]["organ_system"]
    brain = {d: by_organ["brain"][d]["accuracy"] for d in DIMENSIONS}
    assert brain == {
        "accuracy": 0.5,
        "relevance": 0.5,
        "comprehensiveness": 0.25,
        "creativity": 0.25,
        "responsiveness": 0.5,
        "overall": 0.5,
    }
    for dim in DIMENSIONS:
        assert by_organ["chest"][dim]["accuracy"] == pytest.approx(1 / 3)
    assert "0.2500" in result.output and "0.3333" in result.output and "responsiveness_acc" in result.output
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert len(rows) == 7 and {r["order"] for r in rows} == {"original"}
    failures = {r["case_id"]: r["failure"] for r in rows if r["failure"]}
    assert failures == {
        "brain/3": "reference normalisation found no verdict",
        "chest/1": "no prediction in the reference outputs",
    }


def test_import_reference_rejects_malformed_output_lines(tmp_path: Path) -> None:
    data = build_reference_layout(tmp_path / "mrb", {"brain": 2})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question_id": 0, "modality_type": "brain", "chosen_answer": "A"}\nnot json\n{"question_id": 1}\n')
    result = CliRunner().invoke(app, ["import-reference", str(bad), "--data", str(data), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "bad.jsonl, row 2" in result.output and "row 3" in result.output and "modality_type" in result.output
