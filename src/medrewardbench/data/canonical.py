"""The project's own data format: one case per row, in JSONL, JSON or parquet.

Each row is an object with these fields:

``id`` (string, required, unique across the source), ``image`` (a path string relative to the
file's directory; ``{"path": ...}``; ``{"bytes": <base64 in JSON/JSONL, raw binary in parquet>,
"path": <optional original name>}``; ``{"builtin": "pydicom:CT_small.dcm" | "skimage:retina"}``;
or null for no image; DICOM files are allowed), ``question``, ``response_1``, ``response_2``
(required non-empty strings), ``labels`` (optional object mapping a dimension to ``1``/``2`` or
``"A"``/``"B"``, where 1 = A = response_1), ``organ_system`` (string, default ``"unknown"``),
optional strings ``department``, ``modality``, ``source_dataset``, ``question_type``,
``body_part``, and ``metadata`` (an object; a JSON string in parquet). ``annotations`` (optional)
lists per-annotator labels; without ``labels`` the row's labels are their strict majority (see
:mod:`medrewardbench.data.annotations`).

Readers never stop at the first problem: they return every :class:`DataProblem` found, each
naming the file, the 1-based row and the field.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.annotations import (
    annotations_to_records,
    parse_annotations,
    resolve_labels,
    undecided_warnings,
)
from medrewardbench.data.benchmark import CaseLocation, LoadResult
from medrewardbench.dimensions import DIMENSIONS, Winner, normalize_dimension
from medrewardbench.errors import DataProblem

logger = logging.getLogger(__name__)

CANONICAL_SUFFIXES: tuple[str, ...] = (".jsonl", ".json", ".parquet")
"""File suffixes read as canonical data."""

REQUIRED_TEXT_FIELDS: tuple[str, ...] = ("question", "response_1", "response_2")
OPTIONAL_TEXT_FIELDS: tuple[str, ...] = (
    "department",
    "modality",
    "source_dataset",
    "question_type",
    "body_part",
)
KNOWN_FIELDS: frozenset[str] = frozenset(
    ("id", "image", "labels", "annotations", "organ_system", "metadata", *REQUIRED_TEXT_FIELDS, *OPTIONAL_TEXT_FIELDS)
)
BUILTIN_PREFIXES: tuple[str, ...] = ("pydicom", "skimage")
_IMAGE_KEYS = frozenset(("path", "bytes", "builtin"))
_PARQUET_BATCH_ROWS = 256


class ProblemSink:
    """Collects :class:`DataProblem` records for one file, filling in the file name."""

    def __init__(self, file: str, problems: list[DataProblem] | None = None):
        self.file = file
        self.problems: list[DataProblem] = [] if problems is None else problems

    def add(self, message: str, row: int | None = None, field: str | None = None, case_id: str | None = None) -> None:
        """Record one problem.

        Args:
            message: what is wrong, and where useful what was expected.
            row: 1-based row, None for a file-level problem.
            field: the field concerned, if any.
            case_id: the case concerned, if known.
        """
        self.problems.append(DataProblem(self.file, message, row=row, field=field, case_id=case_id))


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def parse_winner(value: object) -> Winner | None:
    """Turn a label value into a source-order winner.

    Args:
        value: ``1``/``2``, ``"1"``/``"2"`` or ``"A"``/``"B"`` (any case; A = response_1).

    Returns:
        1 or 2, or None when the value is none of those.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return 1 if value == 1 else 2 if value == 2 else None
    if isinstance(value, str):
        text = value.strip().upper()
        if text in ("A", "1"):
            return 1
        if text in ("B", "2"):
            return 2
    return None


def parse_labels(
    value: object,
    sink: ProblemSink,
    row: int,
    case_id: str | None = None,
    field: str = "labels",
) -> dict[str, Winner]:
    """Read a labels object, reporting unknown dimensions and values that are not a winner.

    Args:
        value: an object dimension -> winner, a JSON string of one, or None.
        sink: where problems go.
        row: the 1-based row, for problems.
        case_id: the case, for problems.
        field: the field name, for problems (``"labels"``, ``"human_answer"``).

    Returns:
        dimension -> 1|2 in :data:`DIMENSIONS` order, with the valid labels only.
    """
    if _is_missing(value):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            sink.add(f"not a JSON object: {exc}", row, field, case_id)
            return {}
    if not isinstance(value, Mapping):
        sink.add(
            f"must be an object mapping dimension to 1|2 or 'A'|'B', got {type(value).__name__}",
            row,
            field,
            case_id,
        )
        return {}
    found: dict[str, Winner] = {}
    for key, raw in value.items():
        dim = normalize_dimension(key) if isinstance(key, str) else None
        if dim is None:
            sink.add(
                f"unknown dimension {key!r}; expected one of: {', '.join(DIMENSIONS)}",
                row,
                f"{field}.{key}",
                case_id,
            )
            continue
        if _is_missing(raw):
            continue
        winner = parse_winner(raw)
        if winner is None:
            sink.add(
                f"label must be 'A' or 'B' (or 1/2; A = response_1, B = response_2), got {raw!r}",
                row,
                f"{field}.{key}",
                case_id,
            )
            continue
        if dim in found:
            sink.add(f"dimension {dim!r} is given twice", row, f"{field}.{key}", case_id)
            continue
        found[dim] = winner
    return {dim: found[dim] for dim in DIMENSIONS if dim in found}


def resolve_image_path(base_dir: Path, location: str) -> str:
    """Resolve an image path written in a data file against the file's directory.

    Args:
        base_dir: the directory of the data file.
        location: the path as written (absolute, or relative to ``base_dir``).

    Returns:
        A normalized absolute path string (symbolic links are not resolved).
    """
    path = Path(location).expanduser()
    if not path.is_absolute():
        path = base_dir.absolute() / path
    return os.path.normpath(path)


def image_ref_from_value(
    value: object,
    base_dir: Path,
    sink: ProblemSink,
    row: int,
    case_id: str | None = None,
    field: str = "image",
) -> ImageRef | None:
    """Read an image specification (see the module docstring) into an :class:`ImageRef`.

    The Hugging Face ``Image`` struct ``{"bytes": ..., "path": ...}`` is one of the accepted forms.
    Nothing is decoded here: images are read lazily, and checked by validation.

    Args:
        value: the row's image value.
        base_dir: the data file's directory, for relative paths.
        sink: where problems go.
        row: the 1-based row, for problems.
        case_id: the case, for problems.
        field: the field name, for problems.

    Returns:
        The reference, or None when the value is invalid (a problem was recorded).
    """
    if value is None:
        return ImageRef.empty()
    if isinstance(value, str):
        if not value.strip():
            sink.add("empty image path; use null for a case without image", row, field, case_id)
            return None
        return ImageRef.from_path(resolve_image_path(base_dir, value))
    if not isinstance(value, Mapping):
        sink.add(
            f"must be a path string, an object with 'path', 'bytes' or 'builtin', or null; got {type(value).__name__}",
            row,
            field,
            case_id,
        )
        return None
    unknown = sorted(str(key) for key in value if key not in _IMAGE_KEYS)
    if unknown:
        sink.add(
            f"unknown image key(s) {', '.join(unknown)}; expected 'path', 'bytes' or 'builtin'",
            row,
            field,
            case_id,
        )
        return None
    data = value.get("bytes")
    path = value.get("path")
    builtin = value.get("builtin")
    if path is not None and not isinstance(path, str):
        sink.add(f"'path' must be a string, got {type(path).__name__}", row, f"{field}.path", case_id)
        return None
    if data is not None and builtin is not None:
        sink.add("give either 'bytes' or 'builtin', not both", row, field, case_id)
        return None
    if data is not None:
        return _bytes_ref(data, path or "", sink, row, case_id, field)
    if builtin is not None:
        if (
            not isinstance(builtin, str)
            or ":" not in builtin
            or builtin.split(":", 1)[0] not in BUILTIN_PREFIXES
            or not builtin.split(":", 1)[1]
        ):
            sink.add(
                f"'builtin' must look like 'pydicom:CT_small.dcm' or 'skimage:retina', got {builtin!r}",
                row,
                f"{field}.builtin",
                case_id,
            )
            return None
        return ImageRef.builtin(builtin)
    if path is not None:
        if not path.strip():
            sink.add("empty image path; use null for a case without image", row, f"{field}.path", case_id)
            return None
        return ImageRef.from_path(resolve_image_path(base_dir, path))
    return ImageRef.empty()


def _bytes_ref(
    data: object, name: str, sink: ProblemSink, row: int, case_id: str | None, field: str
) -> ImageRef | None:
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    elif isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as exc:
            sink.add(f"'bytes' is not valid base64: {exc}", row, f"{field}.bytes", case_id)
            return None
    else:
        sink.add(
            f"'bytes' must be base64 text (binary in parquet), got {type(data).__name__}",
            row,
            f"{field}.bytes",
            case_id,
        )
        return None
    if not raw:
        sink.add("'bytes' is empty", row, f"{field}.bytes", case_id)
        return None
    return ImageRef.from_bytes(raw, name=name)


def _text(
    record: Mapping[str, Any], key: str, sink: ProblemSink, row: int, case_id: str | None, required: bool
) -> str | None:
    value = record.get(key)
    if _is_missing(value):
        if required:
            sink.add("missing required field", row, key, case_id)
        return None
    if not isinstance(value, str):
        sink.add(f"must be a string, got {type(value).__name__}", row, key, case_id)
        return None
    if required and not value.strip():
        sink.add("must not be empty", row, key, case_id)
        return None
    return value if value.strip() else None


def _object(value: object, sink: ProblemSink, row: int, case_id: str | None, field: str) -> dict[str, Any] | None:
    if _is_missing(value):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            sink.add(f"not a JSON object: {exc}", row, field, case_id)
            return None
    if not isinstance(value, Mapping):
        sink.add(f"must be an object, got {type(value).__name__}", row, field, case_id)
        return None
    return dict(value)


def case_from_record(record: object, row: int, base_dir: Path, sink: ProblemSink) -> Case | None:
    """Build one case from one canonical row, reporting every problem in it.

    Args:
        record: the row (should be a mapping).
        row: its 1-based row number.
        base_dir: the data file's directory, for relative image paths.
        sink: where problems go.

    Returns:
        The case, or None when the row has any problem.
    """
    if not isinstance(record, Mapping):
        sink.add(f"row must be an object, got {type(record).__name__}", row)
        return None
    before = len(sink.problems)
    raw_id = record.get("id")
    case_id: str | None = None
    if _is_missing(raw_id) or (isinstance(raw_id, str) and not raw_id.strip()):
        sink.add("missing id", row, "id")
    elif not isinstance(raw_id, str):
        sink.add(f"id must be a string, got {type(raw_id).__name__} {raw_id!r}", row, "id")
    else:
        case_id = raw_id
    for key in record:
        if key not in KNOWN_FIELDS and not str(key).startswith("__"):
            sink.add(
                "unknown field; put extra information under 'metadata' "
                f"(known fields: {', '.join(sorted(KNOWN_FIELDS))})",
                row,
                str(key),
                case_id,
            )
    texts = {key: _text(record, key, sink, row, case_id, required=True) for key in REQUIRED_TEXT_FIELDS}
    optional = {key: _text(record, key, sink, row, case_id, required=False) for key in OPTIONAL_TEXT_FIELDS}
    organ = _text(record, "organ_system", sink, row, case_id, required=False) or "unknown"
    image = image_ref_from_value(record.get("image"), base_dir, sink, row, case_id)
    labels = parse_labels(record.get("labels"), sink, row, case_id)
    annotations = parse_annotations(
        record.get("annotations"),
        sink,
        row,
        lambda value, field: parse_labels(value, sink, row, case_id, field),
        case_id,
    )
    labels = resolve_labels(labels, annotations, sink, row, case_id)
    metadata = _object(record.get("metadata"), sink, row, case_id, "metadata")
    if len(sink.problems) > before or case_id is None or image is None or metadata is None:
        return None
    return Case(
        case_id=case_id,
        image=image,
        question=texts["question"] or "",
        response_1=texts["response_1"] or "",
        response_2=texts["response_2"] or "",
        labels=labels,
        organ_system=organ.strip(),
        department=optional["department"],
        modality=optional["modality"],
        source_dataset=optional["source_dataset"],
        question_type=optional["question_type"],
        body_part=optional["body_part"],
        metadata=metadata,
        annotations=annotations,
    )


def load_rows(rows: Iterable[tuple[int, object]], file: str, base_dir: Path, result: LoadResult) -> None:
    """Add the cases of numbered canonical rows to a result; repeated ids are errors.

    Args:
        rows: (1-based row number, row) pairs.
        file: the file name to put in problems and locations.
        base_dir: the directory that relative image paths are relative to.
        result: where cases, locations and problems go.
    """
    sink = ProblemSink(file, result.errors)
    first_row: dict[str, int] = {}
    for row, record in rows:
        case = case_from_record(record, row, base_dir, sink)
        raw_id = record.get("id") if isinstance(record, Mapping) else None
        location = CaseLocation(file, row)
        duplicate = False
        if isinstance(raw_id, str) and raw_id.strip():
            duplicate = raw_id in first_row
            if duplicate:
                sink.add(f"duplicate id {raw_id!r} (first at row {first_row[raw_id]})", row, "id", raw_id)
            else:
                first_row[raw_id] = row
        if case is not None and not duplicate:
            result.add(case, location)
            result.warnings.extend(undecided_warnings(case, file, row))
        elif isinstance(record, Mapping):
            scratch = ProblemSink(file)  # its problems were reported already
            image = image_ref_from_value(record.get("image"), base_dir, scratch, row)
            result.reject_image(image, location, raw_id if isinstance(raw_id, str) else None)


def cases_from_records(
    records: Iterable[Mapping[str, Any]], file: str, base_dir: Path
) -> tuple[list[Case], list[DataProblem]]:
    """Build cases from canonical rows (already parsed), reporting every problem.

    Args:
        records: the rows, in order; row numbers start at 1.
        file: the file name to put in problems.
        base_dir: the directory that relative image paths are relative to.

    Returns:
        The valid cases (rows with problems and repeated ids are left out) and the problems.
    """
    result = LoadResult(name=file, source=file)
    load_rows(enumerate(records, start=1), file, base_dir, result)
    return result.cases, result.errors


def _jsonl_rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    with path.open("rb") as handle:
        for lineno, raw_line in enumerate(handle, start=1):
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as exc:
                sink.add(f"not UTF-8 text: {exc}", lineno)
                continue
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                sink.add(f"invalid JSON: {exc}", lineno)


def _json_rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        sink.add(f"invalid JSON file: {exc}")
        return
    rows = document.get("cases") if isinstance(document, dict) else document
    if not isinstance(rows, list):
        sink.add("a JSON data file must hold a list of cases or an object with a 'cases' list")
        return
    yield from enumerate(rows, start=1)


def _parquet_rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        row = 0
        for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS):
            for record in batch.to_pylist():
                row += 1
                yield row, record
    except (OSError, pa.ArrowException) as exc:
        sink.add(f"unreadable parquet file: {exc}")


def _rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_rows(path, sink)
    if suffix == ".json":
        return _json_rows(path, sink)
    return _parquet_rows(path, sink)


def canonical_files(directory: Path) -> list[Path]:
    """The canonical data files of a directory (not recursive), sorted by name.

    Args:
        directory: the directory.

    Returns:
        Files whose suffix is one of :data:`CANONICAL_SUFFIXES`, hidden files excluded.
    """
    return sorted(
        path
        for path in directory.iterdir()
        if path.is_file() and path.suffix.lower() in CANONICAL_SUFFIXES and not path.name.startswith(".")
    )


def load_canonical(path: str | Path, source: str | None = None) -> LoadResult:
    """Read a canonical file or a directory of canonical files, collecting every problem.

    Ids must be unique across all files of a directory.

    Args:
        path: a ``.jsonl``, ``.json`` or ``.parquet`` file, or a directory of them.
        source: the source string to record (defaults to ``str(path)``).

    Returns:
        The cases with their locations, errors and (no) warnings.
    """
    root = Path(path)
    result = LoadResult(name=root.stem if root.is_file() else root.name, source=source or str(path))
    files = canonical_files(root) if root.is_dir() else [root]
    if not files:
        ProblemSink(str(root), result.errors).add(
            f"no canonical data files ({', '.join(CANONICAL_SUFFIXES)}) in this directory"
        )
        return result
    seen: dict[str, CaseLocation] = {}
    for file_path in files:
        file_result = LoadResult(name=result.name, source=result.source)
        display = str(file_path)
        sink = ProblemSink(display, file_result.errors)
        if not file_path.is_file():
            sink.add("no such file")
        else:
            load_rows(_rows(file_path, sink), display, file_path.parent, file_result)
        result.rejected_images.extend(file_result.rejected_images)
        for case, location in zip(file_result.cases, file_result.locations, strict=True):
            if case.case_id in seen:
                first = seen[case.case_id]
                result.errors.append(
                    DataProblem(
                        location.file,
                        f"duplicate id {case.case_id!r} (first in {first.file}, row {first.row})",
                        row=location.row,
                        field="id",
                        case_id=case.case_id,
                    )
                )
                result.reject_image(case.image, location, case.case_id)
                continue
            seen[case.case_id] = location
            result.add(case, location)
        result.errors.extend(file_result.errors)
        result.warnings.extend(file_result.warnings)
    result.errors.sort(key=lambda p: (p.file, p.row or 0))
    return result


def read_canonical(path: str | Path) -> tuple[list[Case], list[DataProblem]]:
    """Read canonical data (a file or a directory of files).

    Args:
        path: a ``.jsonl``, ``.json`` or ``.parquet`` file, or a directory of them.

    Returns:
        The valid cases in file order, and every problem found (rows with problems are left out).
    """
    result = load_canonical(path)
    return result.cases, result.errors


def _image_record(image: ImageRef, out_dir: Path, embed_images: bool, binary: bool) -> dict[str, Any] | str | None:
    if image.kind == "none":
        return None
    if image.kind == "builtin":
        return {"builtin": image.location}
    if image.kind == "path" and not embed_images:
        relative = os.path.relpath(os.path.abspath(image.location), out_dir)
        return {"path": relative} if binary else relative
    data = image.data if image.kind == "bytes" and image.data is not None else image.raw_bytes()
    name = image.location if image.kind == "bytes" else os.path.basename(image.location)
    encoded: bytes | str = data if binary else base64.b64encode(data).decode("ascii")
    return {"bytes": encoded, "path": name or None}


def case_to_record(case: Case, out_dir: Path, embed_images: bool = False, binary: bool = False) -> dict[str, Any]:
    """One case as a canonical row.

    Args:
        case: the case.
        out_dir: the directory of the file being written (image paths are made relative to it).
        embed_images: embed path images as bytes instead of referring to their files.
        binary: bytes stay binary (parquet) instead of base64 text (JSON/JSONL).

    Returns:
        The row; optional fields are left out when empty.
    """
    record: dict[str, Any] = {
        "id": case.case_id,
        "image": _image_record(case.image, out_dir, embed_images, binary),
        "question": case.question,
        "response_1": case.response_1,
        "response_2": case.response_2,
    }
    labels = {dim: int(case.labels[dim]) for dim in DIMENSIONS if dim in case.labels}
    if labels:
        record["labels"] = labels
    if case.annotations:
        record["annotations"] = annotations_to_records(case.annotations)
    record["organ_system"] = case.organ_system
    for key in OPTIONAL_TEXT_FIELDS:
        value = getattr(case, key)
        if value is not None:
            record[key] = value
    if case.metadata:
        record["metadata"] = dict(case.metadata)
    return record


def _parquet_schema() -> Any:
    import pyarrow as pa

    image = pa.struct([("bytes", pa.binary()), ("path", pa.string()), ("builtin", pa.string())])
    labels = pa.struct([(dim, pa.int8()) for dim in DIMENSIONS])
    fields = [
        ("id", pa.string()),
        ("image", image),
        ("question", pa.string()),
        ("response_1", pa.string()),
        ("response_2", pa.string()),
        ("labels", labels),
        ("annotations", pa.string()),
        ("organ_system", pa.string()),
        *[(key, pa.string()) for key in OPTIONAL_TEXT_FIELDS],
        ("metadata", pa.string()),
    ]
    return pa.schema(fields)


def _parquet_row(record: dict[str, Any]) -> dict[str, Any]:
    row = dict(record)
    image = row.get("image")
    if isinstance(image, dict):
        row["image"] = {"bytes": image.get("bytes"), "path": image.get("path"), "builtin": image.get("builtin")}
    labels = row.get("labels")
    row["labels"] = {dim: labels.get(dim) for dim in DIMENSIONS} if labels else None
    annotations = row.get("annotations")
    row["annotations"] = json.dumps(annotations, ensure_ascii=False) if annotations else None
    metadata = row.get("metadata")
    row["metadata"] = json.dumps(metadata, ensure_ascii=False, sort_keys=True) if metadata else None
    return row


def write_canonical(cases: Iterable[Case], path: str | Path, embed_images: bool = False) -> Path:
    """Write cases as canonical data; the format follows the suffix (``.jsonl``, ``.json``, ``.parquet``).

    Reading the file back with :func:`read_canonical` gives equal cases (with ``embed_images``, path
    images come back as embedded bytes). The file is written next to its final name and then
    moved into place, so a crash never leaves half a file.

    Args:
        cases: the cases; their metadata must be JSON-serialisable.
        path: the output file.
        embed_images: put the bytes of path images into the file, making it self-contained.

    Returns:
        The path written.

    Raises:
        ValueError: an unsupported suffix, or metadata that JSON cannot hold.
    """
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in CANONICAL_SUFFIXES:
        raise ValueError(f"unsupported suffix {out.suffix!r}; use one of {', '.join(CANONICAL_SUFFIXES)}")
    out_dir = out.parent.absolute()
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    binary = suffix == ".parquet"
    records = (case_to_record(case, out_dir, embed_images, binary) for case in cases)
    count = 0
    try:
        if suffix == ".parquet":
            count = _write_parquet(records, tmp)
        else:
            with tmp.open("w", encoding="utf-8") as handle:
                if suffix == ".json":
                    handle.write("[\n")
                for record in records:
                    text = _dumps(record)
                    if suffix == ".json":
                        handle.write(("," if count else "") + text + "\n")
                    else:
                        handle.write(text + "\n")
                    count += 1
                if suffix == ".json":
                    handle.write("]\n")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("wrote %d case(s) to %s", count, out)
    return out


def _dumps(record: dict[str, Any]) -> str:
    try:
        return json.dumps(record, ensure_ascii=False)
    except TypeError as exc:
        raise ValueError(f"case {record.get('id')!r}: metadata is not JSON-serialisable: {exc}") from exc


def _write_parquet(records: Iterable[dict[str, Any]], path: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema()
    count = 0
    batch: list[dict[str, Any]] = []
    with pq.ParquetWriter(path, schema) as writer:
        for record in records:
            _dumps({"id": record.get("id"), "metadata": record.get("metadata")})
            batch.append(_parquet_row(record))
            if len(batch) >= _PARQUET_BATCH_ROWS:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
                batch = []
        if batch or count == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            count += len(batch)
    return count
