"""``build export --format hub``: a folder the Hub takes as a dataset, read back by ``--data`` as the same cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.curation import write_jsonl
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.curation.export import export_dataset
from medrewardbench.curation.labels import attach_labels
from medrewardbench.curation.project import open_project
from medrewardbench.curation.store import BuildError
from medrewardbench.data import load_benchmark
from medrewardbench.data.hub_folder import read_front_matter

runner = CliRunner()


def annotate_rows(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical rows as the annotation app exports them: comments, a "cannot judge", a 1-1 split adjudicated."""
    rows = []
    for index, pair in enumerate(pairs):
        row: dict[str, Any] = {
            **{k: pair[k] for k in ("id", "image", "question", "response_1", "response_2", "organ_system")},
            "annotations": [
                {"annotator": "okafor", "labels": {"overall": 1, "accuracy": 1}, "order_shown": "original",
                 "seconds": 30.0, "comment": "A names the lesion"},
                {"annotator": "lindqvist", "labels": {"overall": 2 if index == 0 else 1, "accuracy": 1},
                 "order_shown": "swapped", "seconds": 41.5},
                {"annotator": "moreau", "labels": {}, "cannot_judge": True, "cannot_judge_reason": "image too small"},
            ],
        }  # fmt: skip
        if index == 0:
            row["adjudications"] = [
                {"dimension": "overall", "label": 2, "by": "cli:chief", "note": "B is right", "at": "2026-11-26T10:00Z"}
            ]
        rows.append(row)
    return rows


@pytest.fixture
def labelled(paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> Path:
    project, pairs = paired
    with open_project(project) as store:
        attach_labels(store, write_jsonl(tmp_path / "annotate.jsonl", annotate_rows(pairs)))
    return project


def test_the_hub_folder_reads_back_as_the_canonical_release(labelled: Path, tmp_path: Path) -> None:
    with open_project(labelled) as store:
        export_dataset(store, "canonical", tmp_path / "canonical" / "set.jsonl")
        summary = export_dataset(store, "hub", tmp_path / "hub", license="cc-by-4.0", languages=["en", "de"])
    assert [p.relative_to(tmp_path / "hub").as_posix() for p in summary.paths] == [
        "data/test-00000-of-00001.parquet",
        "README.md",
    ]
    canonical = load_benchmark(str(tmp_path / "canonical" / "set.jsonl"))
    hub = load_benchmark(str(tmp_path / "hub"))
    assert hub.case_ids() == canonical.case_ids() and len(hub) == 6
    for mine, theirs in zip(hub.cases, canonical.cases, strict=True):
        assert mine.labels == theirs.labels and mine.annotations == theirs.annotations, mine.case_id
        assert mine.adjudications == theirs.adjudications and mine.label_sources == theirs.label_sources
        assert (mine.question, mine.response_1, mine.response_2, mine.metadata) == (
            theirs.question,
            theirs.response_1,
            theirs.response_2,
            theirs.metadata,
        )
        assert mine.image.raw_bytes() == theirs.image.raw_bytes()
    first = hub.cases[0]
    assert dict(first.labels)["overall"] == 2 and first.label_sources["overall"] == "adjudication"
    by_name = {a.annotator: a for a in first.annotations}
    assert by_name["okafor"].comment == "A names the lesion" and by_name["moreau"].cannot_judge_reason
    assert hub.labels.text() == canonical.labels.text()
    assert "adjudicated where they had none" in hub.labels.text()


def test_the_readme_header_is_what_the_hub_reads(labelled: Path, tmp_path: Path) -> None:
    with open_project(labelled) as store:
        export_dataset(store, "hub", tmp_path / "hub", name="Chest pairs", license="cc-by-4.0", languages=["en"])
    header = read_front_matter(tmp_path / "hub" / "README.md")
    assert header is not None
    assert header["license"] == "cc-by-4.0" and header["language"] == ["en"] and header["pretty_name"] == "Chest pairs"
    assert header["size_categories"] == ["n<1K"] and "visual-question-answering" in header["task_categories"]
    assert header["configs"] == [
        {"config_name": "default", "data_files": [{"split": "test", "path": "data/test-*.parquet"}]}
    ]
    assert header["annotations_creators"] == ["expert-generated"]
    assert header["medrewardbench"]["labels_provenance"].startswith("expert majority of 2 annotators")
    text = (tmp_path / "hub" / "README.md").read_text()
    assert "## Labels and their provenance" in text and "by an adjudication: 1" in text
    card = json.loads((tmp_path / "hub" / "dataset.json").read_text())
    assert card["format"] == "hub" and card["files"] == ["data/test-00000-of-00001.parquet"]


def test_the_parquet_has_datasets_features_and_datasets_reads_the_folder(labelled: Path, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    with open_project(labelled) as store:
        export_dataset(store, "hub", tmp_path / "hub")
    loaded = datasets.load_dataset(str(tmp_path / "hub"), split="test")  # the README's configs, offline
    assert isinstance(loaded.features["image"], datasets.Image) and len(loaded) == 6
    row = loaded[0]
    assert row["image"].size[0] > 0  # decoded to a PIL image
    assert sorted(a["annotator"] for a in row["annotations"]) == ["lindqvist", "moreau", "okafor"]
    assert row["adjudications"][0]["by"] == "cli:chief" and row["labels"]["overall"] == 2


def test_an_earlier_export_is_replaced_only_with_force_and_a_foreign_folder_never(
    labelled: Path, tmp_path: Path
) -> None:
    out = tmp_path / "hub"
    with open_project(labelled) as store:
        export_dataset(store, "hub", out)
        with pytest.raises(BuildError, match="--force replaces them"):
            export_dataset(store, "hub", out)
        export_dataset(store, "hub", out, force=True, labelled_only=True)
        foreign = tmp_path / "foreign"
        (foreign / "data").mkdir(parents=True)
        with pytest.raises(BuildError, match="not written by 'build export'"):
            export_dataset(store, "hub", foreign, force=True)
    assert len(load_benchmark(str(out))) == 6
    assert not list(out.glob(".*"))  # no staging folder or temporary file left behind


def test_the_command_line_writes_the_folder_and_checks_its_options(labelled: Path, tmp_path: Path) -> None:
    out = tmp_path / "hub"
    result = runner.invoke(
        app,
        ["build", "export", str(labelled), "--format", "hub", "--out", str(out), "--license", "cc-by-nc-4.0"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "wrote 6 case(s)" in result.output and f"medrewardbench push {out}" in " ".join(result.output.split())
    assert read_front_matter(out / "README.md")["license"] == "cc-by-nc-4.0"  # type: ignore[index]
    bad = runner.invoke(app, ["build", "export", str(labelled), "--out", str(tmp_path / "x.jsonl"), "--license", "mit"])
    assert bad.exit_code != 0 and "--license and --language apply to --format hub only" in bad.output
