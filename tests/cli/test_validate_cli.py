"""A clean ``validate`` prints what the source holds: cases, organ systems, label coverage, images, DICOM."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.images import png_bytes
from typer.testing import CliRunner

from medrewardbench.cli import app

runner = CliRunner()


def test_validate_summarises_the_demo() -> None:
    result = runner.invoke(app, ["validate", "demo"], env={"COLUMNS": "200"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "ok: demo has no problems" in text
    assert "34 cases of medrewardbench-demo, 9 organ systems: abdomen 4, brain 8," in text
    assert "labelled cases per dimension: accuracy 34/34, relevance 34/34" in text
    assert "images: 34 of 34 decoded, 22 DICOM" in text
    assert "Labels: illustrative" in text


def test_validate_counts_partial_labels_and_cases_without_images(tmp_path: Path) -> None:
    (tmp_path / "scan.png").write_bytes(png_bytes())
    rows = [
        {"id": "a", "image": "scan.png", "question": "q", "response_1": "x", "response_2": "y",
         "labels": {"overall": 1, "accuracy": 2}, "organ_system": "chest"},
        {"id": "b", "image": None, "question": "q", "response_1": "x", "response_2": "y",
         "labels": {"overall": 2}, "organ_system": "brain"},
    ]  # fmt: skip
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = runner.invoke(app, ["validate", str(data)], env={"COLUMNS": "200"}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.output
    assert "2 cases of cases, 2 organ systems: brain 1, chest 1" in text
    assert "accuracy 1/2 (50 %)" in text and "overall 2/2" in text and "creativity 0/2 (0 %)" in text
    assert "images: 1 of 1 decoded, 0 DICOM (1 cases without an image)" in text
    assert "Labels: unknown provenance" in text
