"""Builders of real fixture datasets in temporary directories (reference layout, canonical files).

Everything here writes real files: PNG bytes made with Pillow (:mod:`helpers.images`), a DICOM file
made with pydicom, an Image-struct parquet written with pyarrow. Tests import these builders
(``from helpers.data import build_reference_layout``) or use this plugin's fixtures
``reference_dir`` and ``canonical_file``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.images import png_bytes, write_png
from medrewardbench.dimensions import DIMENSIONS

REFERENCE_COLUMNS: tuple[str, ...] = (
    "image",
    "question",
    "answer1_text",
    "answer2_text",
    "question_id",
    "dataset",
    "modality_type",
    "question_type",
    "image_id",
    "body_part",
)

DEFAULT_ORGANS: Mapping[str, int] = {"brain": 2, "chest": 3}


def write_dicom(path: Path, size: tuple[int, int] = (16, 12)) -> Path:
    """Write a small, valid CT DICOM file built from scratch with pydicom (same bytes every time).

    Args:
        path: where to write (parents created).
        size: (columns, rows).

    Returns:
        The path.
    """
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import UID, CTImageStorage, ExplicitVRLittleEndian

    columns, rows = size
    pixels = (np.arange(rows * columns, dtype=np.uint16).reshape(rows, columns) * 16) % 4096
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = UID("1.2.826.0.1.3680043.8.498.10000000000000000000000000001")
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID = CTImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Modality = "CT"
    ds.PatientName = "Fixture^Phantom"
    ds.RescaleSlope = 1
    ds.RescaleIntercept = -1024
    ds.WindowCenter = 40
    ds.WindowWidth = 400
    ds.set_pixel_data(pixels, "MONOCHROME2", 12, generate_instance_uid=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)
    return path


def reference_rows(organ: str, count: int, start_id: int = 0) -> list[dict[str, Any]]:
    """Rows for one organ's reference parquet file (image as an Image struct with PNG bytes).

    Args:
        organ: the organ name (written to ``modality_type``).
        count: how many rows.
        start_id: the first question_id.

    Returns:
        Rows with every reference column.
    """
    rows = []
    for index in range(count):
        qid = start_id + index
        rows.append(
            {
                "image": {"bytes": png_bytes((10 * index % 256, 80, 160)), "path": f"{organ}_{qid}.png"},
                "question": f"What does this {organ} image show? (#{qid})",
                "answer1_text": f"Answer one for {organ} {qid}.",
                "answer2_text": f"A longer second answer for {organ} {qid}, with more words.",
                "question_id": qid,
                "dataset": "FixtureSet",
                "modality_type": organ,
                "question_type": "open",
                "image_id": f"img-{organ}-{qid}",
                "body_part": organ.title(),
            }
        )
    return rows


def reference_label_rows(question_ids: Iterable[int | str]) -> list[dict[str, Any]]:
    """Label rows in the reference form: ``{"question_id", "human_answer": {dim: "A"|"B"}}``.

    Even question ids prefer answer1 ("A") on every dimension, odd ones answer2 ("B").
    """
    out = []
    for qid in question_ids:
        letter = "A" if int(qid) % 2 == 0 else "B"
        out.append({"question_id": qid, "human_answer": {dim: letter for dim in DIMENSIONS}})
    return out


def write_reference_parquet(path: Path, rows: Sequence[Mapping[str, Any]], row_group_size: int = 2) -> Path:
    """Write a reference parquet file whose ``image`` column is a Hugging Face Image struct.

    Args:
        path: the file (parents created).
        rows: rows with the reference columns; missing columns are left out of the file.
        row_group_size: small by default so that readers must stream several row groups.

    Returns:
        The path.
    """
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    present = [name for name in REFERENCE_COLUMNS if any(name in row for row in rows)] or ["question_id"]
    fields = []
    for name in present:
        if name == "image":
            fields.append(pa.field(name, image_type))
        elif name == "question_id":
            fields.append(pa.field(name, pa.int64()))
        else:
            fields.append(pa.field(name, pa.string()))
    schema = pa.schema(fields)
    table = pa.Table.from_pylist([{name: row.get(name) for name in present} for row in rows], schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    """Write rows as JSON lines (a row that is a ``str`` is written verbatim, to plant bad lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def build_reference_layout(
    root: Path,
    organs: Mapping[str, int] = DEFAULT_ORGANS,
    *,
    unlabeled: Mapping[str, Sequence[int]] | None = None,
    orphan_labels: Mapping[str, Sequence[int]] | None = None,
) -> Path:
    """Build a reference-layout dataset: ``root/pair_gt_all/{organ}.jsonl`` and ``parquet/{organ}.parquet``.

    Args:
        root: the dataset root (created).
        organs: organ -> number of cases (question ids 0..n-1).
        unlabeled: organ -> question ids to leave without labels.
        orphan_labels: organ -> extra question ids that get labels but no case.

    Returns:
        ``root``.
    """
    gt = root / "pair_gt_all"
    for organ, count in organs.items():
        rows = reference_rows(organ, count)
        write_reference_parquet(gt / "parquet" / f"{organ}.parquet", rows)
        skip = set((unlabeled or {}).get(organ, ()))
        ids = [row["question_id"] for row in rows if row["question_id"] not in skip]
        ids += list((orphan_labels or {}).get(organ, ()))
        write_jsonl(gt / f"{organ}.jsonl", reference_label_rows(ids))
    return root


def canonical_rows(image_dir_name: str = "images") -> list[dict[str, Any]]:
    """Canonical rows covering every image form; the files they name are made by :func:`build_canonical_set`.

    Returns:
        Five valid rows: a relative PNG path, a ``{"path"}`` DICOM, embedded base64 PNG bytes,
        a builtin image, and no image; labels mix 1/2 and "A"/"B".
    """
    return [
        {
            "id": "c1",
            "image": f"{image_dir_name}/green.png",
            "question": "Is there a lesion?",
            "response_1": "Yes, in the upper left.",
            "response_2": "No lesion is visible.",
            "labels": {"accuracy": 1, "overall": "A", "relevance": "B"},
            "organ_system": "chest",
            "department": "radiology",
            "modality": "X-ray",
            "source_dataset": "Fixture",
            "question_type": "closed",
            "body_part": "Chest",
            "metadata": {"difficulty": "easy", "rank": 3},
        },
        {
            "id": "c2",
            "image": {"path": f"{image_dir_name}/ct.dcm"},
            "question": "Which window shows the bone best?",
            "response_1": "The bone window.",
            "response_2": "The lung window, clearly.",
            "labels": {"Accuracy": 2, "Comprehensiveness": "b"},
            "organ_system": "abdomen",
            "modality": "CT",
        },
        {
            "id": "c3",
            "image": {"bytes": base64.b64encode(png_bytes((5, 5, 250))).decode("ascii"), "path": "blue.png"},
            "question": "Describe the colour.",
            "response_1": "Blue.",
            "response_2": "Red.",
            "labels": {"accuracy": "1"},
            "organ_system": "eye",
        },
        {
            "id": "c4",
            "image": {"builtin": "pydicom:CT_small.dcm"},
            "question": "What is the modality?",
            "response_1": "CT.",
            "response_2": "MRI.",
            "organ_system": "brain",
        },
        {
            "id": "c5",
            "image": None,
            "question": "A question without an image?",
            "response_1": "First.",
            "response_2": "Second.",
            "labels": {"overall": 2},
        },
    ]


def build_canonical_set(root: Path, name: str = "cases.jsonl", rows: Sequence[Any] | None = None) -> Path:
    """Write a canonical JSONL file with its image files (a PNG and a pydicom-built DICOM).

    Args:
        root: the directory (created); images go to ``root/images``.
        name: the data file's name.
        rows: the rows to write (default :func:`canonical_rows`).

    Returns:
        The data file's path.
    """
    write_png(root / "images" / "green.png")
    write_dicom(root / "images" / "ct.dcm")
    return write_jsonl(root / name, canonical_rows() if rows is None else rows)


def write_canonical_parquet_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write canonical rows to parquet as a third-party tool would (types inferred by pyarrow).

    Image bytes given as base64 text in ``rows`` are written as raw binary.
    """
    converted = []
    for row in rows:
        row = dict(row)
        image = row.get("image")
        if isinstance(image, str):
            row["image"] = {"path": image, "bytes": None}
        elif isinstance(image, dict):
            data = image.get("bytes")
            row["image"] = {
                "path": image.get("path"),
                "bytes": base64.b64decode(data) if isinstance(data, str) else data,
                "builtin": image.get("builtin"),
            }
        if "labels" in row:
            row["labels"] = json.dumps(row["labels"])
        if "metadata" in row:
            row["metadata"] = json.dumps(row["metadata"])
        converted.append(row)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(converted), path)
    return path


def build_fake_hf_cache(
    hub_cache: Path,
    repo_id: str,
    commit: str,
    refs: Sequence[str] = ("main",),
    organs: Mapping[str, int] = DEFAULT_ORGANS,
) -> Path:
    """Lay out a dataset in a Hugging Face Hub cache exactly as ``snapshot_download`` leaves it.

    ``datasets--OWNER--NAME/blobs/<sha256>`` holds the file contents, ``snapshots/<commit>/...``
    symbolic links to them, and ``refs/<ref>`` the commit hash.

    Args:
        hub_cache: the Hub cache directory (``$HF_HOME/hub``).
        repo_id: ``OWNER/NAME``.
        commit: a 40-hex commit hash.
        refs: branch or tag names that point to ``commit``.
        organs: organ -> number of cases, as for :func:`build_reference_layout`.

    Returns:
        The snapshot directory.
    """
    import hashlib
    import os
    import shutil
    import tempfile

    repo_dir = hub_cache / ("datasets--" + repo_id.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / commit
    blobs = repo_dir / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        staged = build_reference_layout(Path(scratch), organs)
        for file in sorted(p for p in staged.rglob("*") if p.is_file()):
            relative = file.relative_to(staged)
            blob = blobs / hashlib.sha256(file.read_bytes()).hexdigest()
            shutil.copyfile(file, blob)
            link = snapshot / relative
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(blob, link.parent))
    (repo_dir / "refs").mkdir(exist_ok=True)
    for ref in refs:
        ref_file = repo_dir / "refs" / ref
        ref_file.parent.mkdir(parents=True, exist_ok=True)
        ref_file.write_text(commit)
    return snapshot


@pytest.fixture
def reference_dir(tmp_path: Path) -> Path:
    """A clean reference-layout dataset: organs brain (2 cases) and chest (3 cases), all labeled."""
    return build_reference_layout(tmp_path / "mrb")


@pytest.fixture
def canonical_file(tmp_path: Path) -> Path:
    """A clean canonical JSONL file with a PNG, a DICOM, embedded bytes, a builtin and no image."""
    return build_canonical_set(tmp_path / "canon")
