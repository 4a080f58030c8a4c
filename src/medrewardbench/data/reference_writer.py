"""Write cases in the reference Med-RewardBench layout (the one :mod:`.reference` reads).

```
ROOT/pair_gt_all/{organ}.jsonl            {"question_id": ..., "human_answer": {dimension: "A"|"B"}}
ROOT/pair_gt_all/parquet/{organ}.parquet  image {bytes, path}, question, answer1_text, answer2_text,
                                          question_id, dataset, modality_type, question_type,
                                          image_id, body_part, department, modality
```
"A" is ``response_1`` (``answer1_text``). One file pair per organ system; ``modality_type`` is the
organ, as in the published data. A case's ``question_id`` is its id, except for cases that came
from the reference layout (id ``{organ}/{question_id}``), which keep their original question id, so
reading the written layout back gives the same case ids. A case without labels gets no row in
the labels file (the reader reports it as a case without expert labels); a dimension without a
label is left out of ``human_answer``.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from medrewardbench.cases import Case
from medrewardbench.data.reference import GT_DIR, PARQUET_DIR
from medrewardbench.dimensions import DIMENSIONS

_SAFE_STEM = re.compile(r"[^A-Za-z0-9_.-]+")


def reference_question_id(case: Case) -> str:
    """The question id a case is written under.

    Args:
        case: the case.

    Returns:
        The original reference question id for a case read from the reference layout, else the case id.
    """
    original = case.metadata.get("question_id")
    if original is not None and case.case_id == f"{case.organ_system}/{original}":
        return str(original)
    return case.case_id


def write_reference(cases: Iterable[Case], root: str | Path) -> list[Path]:
    """Write cases in the reference layout under ``root``.

    Args:
        cases: the cases; every one needs an image (the layout has no way to say "none").
        root: the dataset root (``pair_gt_all/`` is created inside it).

    Returns:
        The files written, labels files first.

    Raises:
        ValueError: a case without an image, an organ name that is not a safe file name, or two
            cases of one organ with the same question id.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    gt = Path(root) / GT_DIR
    (gt / PARQUET_DIR).mkdir(parents=True, exist_ok=True)
    by_organ: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        organ = case.organ_system
        if not organ or _SAFE_STEM.search(organ) or organ.startswith("."):
            raise ValueError(f"case {case.case_id!r}: organ system {organ!r} cannot be a file name")
        if case.image.kind == "none":
            raise ValueError(f"case {case.case_id!r} has no image; the reference layout needs one per case")
        by_organ[organ].append(case)
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema(
        [
            ("image", image_type),
            ("question", pa.string()),
            ("answer1_text", pa.string()),
            ("answer2_text", pa.string()),
            ("question_id", pa.string()),
            ("dataset", pa.string()),
            ("modality_type", pa.string()),
            ("question_type", pa.string()),
            ("image_id", pa.string()),
            ("body_part", pa.string()),
            ("department", pa.string()),
            ("modality", pa.string()),
        ]
    )
    written: list[Path] = []
    parquet_files: list[Path] = []
    for organ in sorted(by_organ):
        rows: list[dict[str, Any]] = []
        labels: list[str] = []
        seen: set[str] = set()
        for case in by_organ[organ]:
            qid = reference_question_id(case)
            if qid in seen:
                raise ValueError(f"organ {organ!r}: two cases with question id {qid!r}")
            seen.add(qid)
            image_name = case.image.location if case.image.kind == "bytes" else os.path.basename(case.image.location)
            image_id = case.metadata.get("image_id")
            rows.append(
                {
                    "image": {"bytes": case.image.raw_bytes(), "path": image_name or None},
                    "question": case.question,
                    "answer1_text": case.response_1,
                    "answer2_text": case.response_2,
                    "question_id": qid,
                    "dataset": case.source_dataset,
                    "modality_type": organ,
                    "question_type": case.question_type,
                    "image_id": None if image_id is None else str(image_id),
                    "body_part": case.body_part,
                    "department": case.department,
                    "modality": case.modality,
                }
            )
            answer = {dim: "A" if case.labels[dim] == 1 else "B" for dim in DIMENSIONS if dim in case.labels}
            if answer:
                labels.append(json.dumps({"question_id": qid, "human_answer": answer}, ensure_ascii=False))
        labels_path = gt / f"{organ}.jsonl"
        _write_text(labels_path, "".join(line + "\n" for line in labels))
        written.append(labels_path)
        parquet_path = gt / PARQUET_DIR / f"{organ}.parquet"
        tmp = parquet_path.with_name(f".{parquet_path.name}.tmp")
        try:
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
            os.replace(tmp, parquet_path)
        finally:
            tmp.unlink(missing_ok=True)
        parquet_files.append(parquet_path)
    return written + parquet_files


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
