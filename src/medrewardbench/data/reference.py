"""The reference Med-RewardBench layout, as published on the Hugging Face Hub.

```
pair_gt_all/{organ}.jsonl            {"question_id": ..., "human_answer": {"accuracy": "A"|"B", ...}}
pair_gt_all/parquet/{organ}.parquet  image (Image struct {bytes, path}), question, answer1_text,
                                     answer2_text, question_id, dataset, modality_type, question_type,
                                     image_id, body_part
```
"A" means ``answer1_text`` (our ``response_1``), "B" means ``answer2_text`` (``response_2``).
Labels join cases on ``question_id`` within one organ; the case id is ``"{organ}/{question_id}"``.
Parquet files are read one batch of rows at a time, and only the columns used.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from medrewardbench.cases import Case
from medrewardbench.data.benchmark import (
    ORPHAN_LABELS,
    UNLABELED,
    CaseLocation,
    IdTracker,
    LoadResult,
    normalize_organ,
    unknown_organs_problem,
)
from medrewardbench.data.canonical import ProblemSink, case_id_problem, image_ref_from_value, json_lines, parse_labels
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.data.jsonio import MAX_JSON_DEPTH, too_deep
from medrewardbench.dimensions import Winner
from medrewardbench.errors import DataError, DataProblem
from medrewardbench.images.files import FileRefused, check_regular_file

logger = logging.getLogger(__name__)

GT_DIR = "pair_gt_all"
PARQUET_DIR = "parquet"
REFERENCE_NAME = "Med-RewardBench"
REQUIRED_COLUMNS: tuple[str, ...] = ("question_id", "image", "question", "answer1_text", "answer2_text")
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "dataset",
    "modality_type",
    "question_type",
    "image_id",
    "body_part",
    "department",
    "modality",
)
_BATCH_ROWS = 64


def is_reference_layout(path: Path) -> bool:
    """Whether a directory holds the reference layout (it contains ``pair_gt_all/`` or is it).

    Args:
        path: a directory.

    Returns:
        True for a reference-layout directory.
    """
    return path.is_dir() and (path.name == GT_DIR or (path / GT_DIR).is_dir())


def gt_directory(root: Path) -> Path:
    """The ``pair_gt_all`` directory of a reference-layout root.

    Args:
        root: a directory containing ``pair_gt_all/``, or ``pair_gt_all`` itself.

    Returns:
        The ``pair_gt_all`` directory.
    """
    return root if root.name == GT_DIR and not (root / GT_DIR).is_dir() else root / GT_DIR


def available_organs(root: Path) -> list[str]:
    """The organ systems a reference-layout directory has files for (labels or parquet).

    Args:
        root: a directory containing ``pair_gt_all/``, or ``pair_gt_all`` itself.

    Returns:
        Sorted organ names (file stems).
    """
    gt = gt_directory(root)
    stems = {p.stem for p in gt.glob("*.jsonl")} | {p.stem for p in (gt / PARQUET_DIR).glob("*.parquet")}
    return sorted(stems)


def _question_id(value: object) -> str | None:
    """question_id as a join key: ints and integral floats agree with their text form."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float):
        if value != value:  # NaN
            return None
        if value.is_integer():
            value = int(value)
    text = str(value).strip()
    return text or None


def _optional_text(value: object) -> str | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    text = str(value).strip()
    return text or None


class _LabelRow:
    """One labels-file row, kept until its organ's parquet file has been read."""

    __slots__ = ("clean", "labels", "row", "used")

    def __init__(self, row: int, labels: dict[str, Winner], clean: bool = True) -> None:
        self.row = row
        self.labels = labels
        self.clean = clean
        """No problem was reported for this row (so that an empty result deserves a warning)."""
        self.used = False
        """A parquet row has this question id (else the labels have no case)."""


@dataclass
class _OrganLabels:
    by_question: dict[str, _LabelRow] = field(default_factory=dict)


def _read_labels(path: Path, organ: str, sink: ProblemSink, warnings: ProblemSink) -> _OrganLabels:
    found = _OrganLabels()
    shared: dict[tuple[tuple[str, Winner], ...], dict[str, Winner]] = {}
    for row, record in json_lines(path, sink):
        if not isinstance(record, dict):
            sink.add(f"row must be an object, got {type(record).__name__}", row)
            continue
        if too_deep(record, MAX_JSON_DEPTH):
            sink.add(f"nested more than {MAX_JSON_DEPTH} levels deep", row)
            continue
        qid = _question_id(record.get("question_id"))
        if qid is None:
            sink.add("missing question_id", row, "question_id")
            continue
        bad_id = case_id_problem(f"{organ}/{qid}")
        if bad_id is not None:
            sink.add(bad_id, row, "question_id")
            continue
        if "human_answer" not in record or record["human_answer"] is None:
            sink.add("missing required field", row, "human_answer")
            continue
        if qid in found.by_question:
            first = found.by_question[qid].row
            sink.add(f"duplicate question_id {qid!r} (first at row {first})", row, "question_id")
            continue
        before = len(sink.problems)
        labels = parse_labels(
            record["human_answer"], sink, row, case_id=f"{organ}/{qid}", field="human_answer", warnings=warnings
        )
        # a few hundred distinct label sets at most: cases share them instead of a dict each
        labels = shared.setdefault(tuple(labels.items()), labels)
        found.by_question[qid] = _LabelRow(row, labels, clean=len(sink.problems) == before)
    return found


class _Seen:
    """What a parquet file turned out to hold: whether it could be read, and its question ids."""

    def __init__(self, labels: _OrganLabels | None) -> None:
        self.labels = labels
        self.opened = False

    def __call__(self, qid: str) -> None:
        if self.labels is not None:
            label_row = self.labels.by_question.get(qid)
            if label_row is not None:
                label_row.used = True


def _iter_parquet(
    path: Path,
    display: str,
    organ: str,
    sink: ProblemSink,
    result: LoadResult,
    policy: ImagePolicy,
    ids: IdTracker,
    seen: _Seen,
) -> Iterator[tuple[str, Case, CaseLocation]]:
    """Read one organ's parquet file a batch of rows at a time.

    Args:
        path: the parquet file.
        display: its name in problems.
        organ: the organ system.
        sink: where problems go.
        result: where the images of rows left out go.
        policy: which image paths are allowed.
        ids: finds repeated question ids.
        seen: told whether the file could be read and every question id it has (valid row or not).

    Yields:
        (question_id, case, location) for the valid rows.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        sink.add(f"unreadable parquet file: {' '.join(str(exc).split())}")
        return
    names = set(parquet.schema_arrow.names)
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    if missing:
        sink.add(f"missing required column(s): {', '.join(missing)}; columns present: {', '.join(sorted(names))}")
        return
    columns = [name for name in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if name in names]
    seen.opened = True
    mismatched: dict[str, tuple[int, int]] = {}  # modality_type -> (rows, first row)
    row = 0
    try:
        for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, columns=columns):
            data: dict[str, list[Any]] = {name: batch.column(name).to_pylist() for name in columns}
            for index in range(batch.num_rows):
                row += 1
                record = {name: values[index] for name, values in data.items()}
                seen_qid = _question_id(record.get("question_id"))
                if seen_qid is not None:
                    seen(seen_qid)
                modality_type = _optional_text(record.get("modality_type"))
                if modality_type is not None and normalize_organ(modality_type) != normalize_organ(organ):
                    count, first_row = mismatched.get(modality_type, (0, row))
                    mismatched[modality_type] = (count + 1, first_row)
                case = _case_from_row(record, row, path.parent, organ, sink, policy)
                if case is None:
                    scratch = ProblemSink(display)  # its problems were reported already
                    image = image_ref_from_value(record.get("image"), path.parent, scratch, row, policy=policy)
                    case_id = f"{organ}/{seen_qid}" if seen_qid is not None else None
                    result.reject_image(image, CaseLocation(display, row), case_id)
                    continue
                qid, built = case
                location = CaseLocation(display, row)
                first = ids.first(organ, qid, location)
                if first is not None:
                    sink.add(
                        f"duplicate question_id {qid!r} (first at row {first.row})",
                        row,
                        "question_id",
                        built.case_id,
                    )
                    result.reject_image(built.image, location, built.case_id)
                    continue
                yield qid, built, location
    except (OSError, pa.ArrowException) as exc:
        sink.add(f"unreadable parquet file (after row {row}): {' '.join(str(exc).split())}")
    for value, (count, first_row) in mismatched.items():
        sink.add(
            f"mismatched organ files: modality_type {value!r} in {count} row(s) "
            f"(first at row {first_row}) disagrees with the file name {organ!r}",
            first_row,
            "modality_type",
        )


def _case_from_row(
    record: dict[str, Any],
    row: int,
    parquet_dir: Path,
    organ: str,
    sink: ProblemSink,
    policy: ImagePolicy,
) -> tuple[str, Case] | None:
    before = len(sink.problems)
    qid = _question_id(record.get("question_id"))
    case_id = f"{organ}/{qid}" if qid is not None else None
    if qid is None:
        sink.add("missing question_id", row, "question_id")
    elif case_id is not None and case_id_problem(case_id) is not None:
        sink.add(str(case_id_problem(case_id)), row, "question_id")
        case_id = None
    texts: dict[str, str] = {}
    for column in ("question", "answer1_text", "answer2_text"):
        value = record.get(column)
        if value is None:
            sink.add("missing required field", row, column, case_id)
        elif not isinstance(value, str):
            sink.add(f"must be a string, got {type(value).__name__}", row, column, case_id)
        elif not value.strip():
            sink.add("must not be empty", row, column, case_id)
        else:
            texts[column] = value
    image_value = record.get("image")
    if image_value is None or (
        isinstance(image_value, dict) and image_value.get("bytes") is None and not image_value.get("path")
    ):
        sink.add("missing image", row, "image", case_id)
        image = None
    else:
        image = image_ref_from_value(image_value, parquet_dir, sink, row, case_id, policy=policy)
    if len(sink.problems) > before or qid is None or case_id is None or image is None:
        return None
    metadata: dict[str, Any] = {
        "question_id": qid,
        "labels_file": f"{GT_DIR}/{organ}.jsonl",
        "parquet_file": f"{GT_DIR}/{PARQUET_DIR}/{organ}.parquet",
    }
    image_id = _optional_text(record.get("image_id"))
    if image_id is not None:
        metadata["image_id"] = image_id
    return qid, Case(
        case_id=case_id,
        image=image,
        question=texts["question"],
        response_1=texts["answer1_text"],
        response_2=texts["answer2_text"],
        organ_system=organ,
        department=_optional_text(record.get("department")),
        modality=_optional_text(record.get("modality")),
        source_dataset=_optional_text(record.get("dataset")),
        question_type=_optional_text(record.get("question_type")),
        body_part=_optional_text(record.get("body_part")),
        metadata=metadata,
    )


def reference_files(root: str | Path, organs: Sequence[str] | None = None) -> list[Path]:
    """The labels and parquet files a reference-layout source reads, for change checks.

    Args:
        root: a directory containing ``pair_gt_all/``, or ``pair_gt_all`` itself.
        organs: the organ systems read (None: all).

    Returns:
        The files that exist.
    """
    gt = gt_directory(Path(root))
    wanted = {normalize_organ(name) for name in organs} if organs else None
    files = []
    for organ in available_organs(Path(root)):
        if wanted is not None and normalize_organ(organ) not in wanted:
            continue
        for path in (gt / f"{organ}.jsonl", gt / PARQUET_DIR / f"{organ}.parquet"):
            if path.is_file():
                files.append(path)
    return files


def iter_reference(
    root: str | Path,
    organs: Sequence[str] | None,
    result: LoadResult,
    *,
    display_root: str | None = None,
    policy: ImagePolicy | None = None,
    ids: IdTracker | None = None,
) -> Iterator[tuple[Case, CaseLocation, list[DataProblem]]]:
    """Read a reference-layout directory one case at a time (see :func:`load_reference`).

    Args:
        root: a directory containing ``pair_gt_all/``, or ``pair_gt_all`` itself.
        organs: organ systems (file stems) to read; None reads all.
        result: where problems, warnings about no single case and the images of rows left out go.
        display_root: how to name ``root`` in problems (defaults to ``str(root)``).
        policy: user settings for image paths; the data directory is always allowed.
        ids: finds repeated question ids (None: every id exactly).

    Yields:
        ``(case, location, warnings)``: organs in name order, rows in parquet order.

    Raises:
        DataError: the directory has no organ files, or an organ name is not available.
    """
    root_path = Path(root)
    gt = gt_directory(root_path)
    shown_root = display_root if display_root is not None else str(root_path)
    base = shown_root if gt == root_path else f"{shown_root}/{GT_DIR}"
    present = available_organs(root_path)
    if not present:
        raise DataError(
            [DataProblem(base, f"no organ files: expected {GT_DIR}/<organ>.jsonl and {GT_DIR}/parquet/<organ>.parquet")]
        )
    selected = present
    if organs:
        by_norm = {normalize_organ(name): name for name in present}
        unknown = [name for name in organs if normalize_organ(name) not in by_norm]
        if unknown:
            raise DataError([unknown_organs_problem(result.source, unknown, present)])
        wanted = {by_norm[normalize_organ(name)] for name in organs}
        selected = [name for name in present if name in wanted]
    rules = (policy or ImagePolicy()).with_roots(gt.parent)
    tracker = ids if ids is not None else IdTracker()
    for organ in selected:
        yield from _iter_organ(gt, organ, base, result, rules, tracker)
    logger.debug("%s: read %d organ(s): %s", result.source, len(selected), ", ".join(selected))


def load_reference(
    root: str | Path,
    organs: Sequence[str] | None = None,
    *,
    source: str | None = None,
    display_root: str | None = None,
    policy: ImagePolicy | None = None,
) -> LoadResult:
    """Read a reference-layout directory, collecting every problem.

    Cases without labels are kept (with empty labels) and reported as warnings, as are labels whose
    question_id has no case and dimensions labelled null. An organ with a labels file but no
    parquet file (or the reverse), and a parquet whose ``modality_type`` disagrees with its file
    name, are errors. Image paths must stay inside the data directory (the one that holds
    ``pair_gt_all/``) unless the policy allows more. Every case is kept in the result: for small
    data (:func:`iter_reference` streams).

    Args:
        root: a directory containing ``pair_gt_all/``, or ``pair_gt_all`` itself.
        organs: organ systems (file stems) to read; None reads all.
        source: the source string to record (defaults to ``str(root)``).
        display_root: how to name ``root`` in problems (defaults to ``str(root)``).
        policy: user settings for image paths; the data directory is always allowed.

    Returns:
        Cases in organ-name order then parquet row order, with locations, errors and warnings.

    Raises:
        DataError: the directory has no organ files, or an organ name is not available.
    """
    result = LoadResult(name=REFERENCE_NAME, source=source or str(root))
    for case, location, warnings in iter_reference(root, organs, result, display_root=display_root, policy=policy):
        result.add(case, location)
        result.warnings.extend(warnings)
    return result


def _file_state(path: Path, display: str, result: LoadResult) -> str:
    """``"ok"``, ``"missing"`` (nothing of that name), or ``"bad"`` (reported: a loop, a pipe...)."""
    if not os.path.lexists(path):
        return "missing"
    try:
        check_regular_file(path)
    except FileRefused as exc:
        result.errors.append(DataProblem(display, str(exc)))
        return "bad"
    return "ok"


def _iter_organ(
    gt: Path, organ: str, base: str, result: LoadResult, policy: ImagePolicy, ids: IdTracker
) -> Iterator[tuple[Case, CaseLocation, list[DataProblem]]]:
    labels_path = gt / f"{organ}.jsonl"
    parquet_path = gt / PARQUET_DIR / f"{organ}.parquet"
    labels_display = f"{base}/{organ}.jsonl"
    parquet_display = f"{base}/{PARQUET_DIR}/{organ}.parquet"
    labels_state = _file_state(labels_path, labels_display, result)
    parquet_state = _file_state(parquet_path, parquet_display, result)
    labels_sink = ProblemSink(labels_display, result.errors)
    label_warnings = ProblemSink(labels_display, result.warnings)
    if labels_state == "missing":
        result.errors.append(
            DataProblem(
                parquet_display,
                f"mismatched organ files: no labels file {organ}.jsonl for this parquet file",
            )
        )
    if parquet_state != "ok":
        if parquet_state == "missing":
            result.errors.append(
                DataProblem(
                    labels_display,
                    f"mismatched organ files: no parquet file {PARQUET_DIR}/{organ}.parquet for these labels",
                )
            )
        if labels_state == "ok":
            _read_labels(labels_path, organ, labels_sink, label_warnings)
        return
    labels = _read_labels(labels_path, organ, labels_sink, label_warnings) if labels_state == "ok" else None
    seen = _Seen(labels)
    parquet_sink = ProblemSink(parquet_display, result.errors)
    for qid, case, location in _iter_parquet(
        parquet_path, parquet_display, organ, parquet_sink, result, policy, ids, seen
    ):
        label_row = labels.by_question.get(qid) if labels is not None else None
        if label_row is not None:
            case = replace(case, labels=label_row.labels)
        warnings: list[DataProblem] = []
        if labels is not None and not case.labels and (label_row is None or label_row.clean):
            why = (
                f"question_id {qid!r} is not in {organ}.jsonl"
                if label_row is None
                else f"its human_answer in {organ}.jsonl, row {label_row.row}, gives no label"
            )
            warnings.append(
                DataProblem(
                    location.file,
                    f"case without expert labels: {why}",
                    row=location.row,
                    field="question_id",
                    case_id=case.case_id,
                    kind=UNLABELED,
                )
            )
        yield case, location, warnings
    if labels is None or not seen.opened:  # a parquet file that could not be read: no label is an orphan
        return
    for qid, label_row in labels.by_question.items():
        if not label_row.used:
            result.warnings.append(
                DataProblem(
                    labels_display,
                    f"labels without a case: question_id {qid!r} is not in {PARQUET_DIR}/{organ}.parquet",
                    row=label_row.row,
                    field="question_id",
                    case_id=f"{organ}/{qid}",
                    kind=ORPHAN_LABELS,
                )
            )
