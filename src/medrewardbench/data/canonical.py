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
lists per-annotator labels with their comments and "cannot judge" reasons, ``adjudications``
(optional) the decisions on dimensions they left without a strict majority, and ``label_sources``
(optional) where each label came from; without ``labels`` the row's labels are the annotations'
strict majority, else the adjudication (see :mod:`medrewardbench.data.annotations`).

Ids are printable text (no control characters, line breaks or NUL) of at most
:data:`MAX_ID_LENGTH` characters. Image paths must resolve, after symbolic links, inside the data
file's directory unless the :class:`~medrewardbench.data.image_policy.ImagePolicy` allows more, and must
name regular files. JSON keys may not repeat within one object, and values may not nest deeper
than :data:`~medrewardbench.data.jsonio.MAX_JSON_DEPTH` levels; a UTF-8 byte-order mark is
accepted at the start of a file.

Readers never stop at the first problem: they return every :class:`DataProblem` found, each
naming the file, the 1-based row and the field.

Why one module of this size: the project's own format: each field is read and written in JSONL, JSON
and parquet, with its checks, side by side, so that a field is added in one place.
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
    adjudications_to_records,
    annotations_to_records,
    parse_adjudications,
    parse_annotations,
    parse_label_sources,
    resolve_labels,
    undecided_warnings,
)
from medrewardbench.data.benchmark import NULL_LABEL, UNLABELED, CaseLocation, IdTracker, LoadResult
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.data.jsonio import BOM, MAX_JSON_DEPTH, JSONTextError, brief, parse_json, too_deep
from medrewardbench.data.provenance import CARD_FILENAME
from medrewardbench.dimensions import DIMENSIONS, Winner, normalize_dimension, parse_winner
from medrewardbench.errors import DataProblem
from medrewardbench.images import files as image_files
from medrewardbench.images.files import FileRefused, check_regular_file, describe_oserror, open_regular_file

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
    (
        "id",
        "image",
        "labels",
        "annotations",
        "adjudications",
        "label_sources",
        "organ_system",
        "metadata",
        *REQUIRED_TEXT_FIELDS,
        *OPTIONAL_TEXT_FIELDS,
    )
)
BUILTIN_PREFIXES: tuple[str, ...] = ("pydicom", "skimage")
_IMAGE_KEYS = frozenset(("path", "bytes", "builtin"))
_PARQUET_BATCH_ROWS = 256
MAX_ID_LENGTH = 512
"""Longest case id accepted, in characters."""
DATASET_CARD_FILENAME = CARD_FILENAME
"""A data set's card (name, where its labels come from; :mod:`medrewardbench.data.provenance`), written
next to the data by ``build export``; never read as cases."""


class ProblemSink:
    """Collects :class:`DataProblem` records for one file, filling in the file name.

    Args:
        file: the file name written into every problem.
        problems: a list to append to (shared with the caller); a new one when None.
    """

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


def case_id_problem(case_id: str) -> str | None:
    """Why a case id cannot be used, or None when it is fine.

    Ids are printed in reports and terminals and stored as keys: they must be printable
    (``str.isprintable``: no control characters, line breaks, NUL or invisible format characters)
    and at most :data:`MAX_ID_LENGTH` characters long.

    Args:
        case_id: the id.

    Returns:
        A one-line reason, or None.
    """
    if len(case_id) > MAX_ID_LENGTH:
        return f"id is {len(case_id)} characters long; at most {MAX_ID_LENGTH} are allowed"
    if not case_id.isprintable():
        position, char = next((i, c) for i, c in enumerate(case_id) if not c.isprintable())
        return (
            f"id must be printable text; it holds the control or invisible character {char!r} "
            f"at position {position + 1}"
        )
    return None


def parse_labels(
    value: object,
    sink: ProblemSink,
    row: int,
    case_id: str | None = None,
    field: str = "labels",
    warnings: ProblemSink | None = None,
) -> dict[str, Winner]:
    """Read a labels object, reporting unknown dimensions and values that are not a winner.

    Args:
        value: an object dimension -> winner, a JSON string of one, or None.
        sink: where problems go.
        row: the 1-based row, for problems.
        case_id: the case, for problems.
        field: the field name, for problems (``"labels"``, ``"human_answer"``).
        warnings: where a dimension labelled ``null`` is reported (kind ``"null_label"``); None
            ignores such dimensions silently.

    Returns:
        dimension -> 1|2 in :data:`DIMENSIONS` order, with the valid labels only.
    """
    if _is_missing(value):
        return {}
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except JSONTextError as exc:
            sink.add(f"not a JSON object: {exc}", row, field, case_id)
            return {}
        if too_deep(value, MAX_JSON_DEPTH - 1):
            sink.add(f"nested more than {MAX_JSON_DEPTH} levels deep", row, field, case_id)
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
            if warnings is not None:
                warnings.problems.append(
                    DataProblem(
                        warnings.file,
                        f"dimension {dim!r} is labelled null: it is not counted for this case",
                        row=row,
                        field=f"{field}.{key}",
                        case_id=case_id,
                        kind=NULL_LABEL,
                    )
                )
            continue
        winner = parse_winner(raw)
        if winner is None:
            sink.add(
                f"label must be 'A' or 'B' (or 1/2; A = response_1, B = response_2), got {brief(raw)}",
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
    path = os.path.expanduser(location)
    if not os.path.isabs(path):
        path = os.path.join(os.path.abspath(base_dir), path)
    return os.path.normpath(path)


def _path_ref(
    location: str,
    base_dir: Path,
    policy: ImagePolicy | None,
    sink: ProblemSink,
    row: int,
    case_id: str | None,
    field: str,
) -> ImageRef | None:
    path = resolve_image_path(base_dir, location)
    rules = policy if policy is not None else ImagePolicy().with_roots(base_dir)
    reason = rules.check(path, image_files.MAX_IMAGE_BYTES, image_files.MAX_IMAGE_BYTES_ENV)
    if reason is not None:
        sink.add(reason, row, field, case_id)
        return None
    return ImageRef.from_path(path)


def image_ref_from_value(
    value: object,
    base_dir: Path,
    sink: ProblemSink,
    row: int,
    case_id: str | None = None,
    field: str = "image",
    policy: ImagePolicy | None = None,
) -> ImageRef | None:
    """Read an image specification (see the module docstring) into an :class:`ImageRef`.

    The Hugging Face ``Image`` struct ``{"bytes": ..., "path": ...}`` is one of the accepted forms.
    Nothing is decoded here: images are read lazily, and checked by validation. Image paths are
    checked with ``stat`` only: they must resolve inside the directories the policy allows and
    name a regular file no larger than :data:`medrewardbench.images.files.MAX_IMAGE_BYTES`.

    Args:
        value: the row's image value.
        base_dir: the data file's directory, for relative paths.
        sink: where problems go.
        row: the 1-based row, for problems.
        case_id: the case, for problems.
        field: the field name, for problems.
        policy: which image paths are allowed; None allows paths inside ``base_dir`` only.

    Returns:
        The reference, or None when the value is invalid (a problem was recorded).
    """
    if value is None:
        return ImageRef.empty()
    if isinstance(value, str):
        if not value.strip():
            sink.add("empty image path; use null for a case without image", row, field, case_id)
            return None
        return _path_ref(value, base_dir, policy, sink, row, case_id, field)
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
        return _path_ref(path, base_dir, policy, sink, row, case_id, f"{field}.path")
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
            value = parse_json(value)
        except JSONTextError as exc:
            sink.add(f"not a JSON object: {exc}", row, field, case_id)
            return None
        if too_deep(value, MAX_JSON_DEPTH - 1):
            sink.add(f"nested more than {MAX_JSON_DEPTH} levels deep", row, field, case_id)
            return None
    if not isinstance(value, Mapping):
        sink.add(f"must be an object, got {type(value).__name__}", row, field, case_id)
        return None
    return dict(value)


def _too_deep_field(record: Mapping[str, Any]) -> str | None:
    """The first top-level field of a row whose value nests deeper than the row may."""
    if not too_deep(record, MAX_JSON_DEPTH):
        return None
    for key, value in record.items():
        if too_deep(value, MAX_JSON_DEPTH - 1):
            return str(key)
    return None


def case_from_record(
    record: object,
    row: int,
    base_dir: Path,
    sink: ProblemSink,
    policy: ImagePolicy | None = None,
    warnings: ProblemSink | None = None,
) -> Case | None:
    """Build one case from one canonical row, reporting every problem in it.

    Args:
        record: the row (should be a mapping).
        row: its 1-based row number.
        base_dir: the data file's directory, for relative image paths.
        sink: where problems go.
        policy: which image paths are allowed; None allows paths inside ``base_dir`` only.
        warnings: where the warnings about a valid row go (a case without expert labels, a
            dimension labelled null); None drops them.

    Returns:
        The case, or None when the row has any problem.
    """
    if not isinstance(record, Mapping):
        sink.add(f"row must be an object, got {type(record).__name__}", row)
        return None
    deep = _too_deep_field(record)
    if deep is not None:
        sink.add(f"nested more than {MAX_JSON_DEPTH} levels deep", row, deep)
        return None
    before = len(sink.problems)
    raw_id = record.get("id")
    case_id: str | None = None
    if _is_missing(raw_id) or (isinstance(raw_id, str) and not raw_id.strip()):
        sink.add("missing id", row, "id")
    elif not isinstance(raw_id, str):
        sink.add(f"id must be a string, got {type(raw_id).__name__} {brief(raw_id)}", row, "id")
    elif case_id_problem(raw_id) is not None:
        sink.add(str(case_id_problem(raw_id)), row, "id")
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
    image = image_ref_from_value(record.get("image"), base_dir, sink, row, case_id, policy=policy)
    row_warnings = ProblemSink(sink.file)
    labels = parse_labels(record.get("labels"), sink, row, case_id, warnings=row_warnings)
    annotations = parse_annotations(
        record.get("annotations"),
        sink,
        row,
        lambda value, field: parse_labels(value, sink, row, case_id, field, warnings=row_warnings),
        case_id,
    )
    adjudications = parse_adjudications(record.get("adjudications"), sink, row, case_id)
    sources = parse_label_sources(record.get("label_sources"), sink, row, case_id)
    resolved = resolve_labels(labels, annotations, sink, row, case_id, adjudications, sources)
    labels = resolved.labels
    metadata = _object(record.get("metadata"), sink, row, case_id, "metadata")
    if len(sink.problems) > before or case_id is None or image is None or metadata is None:
        return None
    if not labels:
        row_warnings.problems.append(
            DataProblem(
                sink.file, "case without expert labels", row=row, field="labels", case_id=case_id, kind=UNLABELED
            )
        )
    if warnings is not None:
        warnings.problems.extend(row_warnings.problems)
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
        adjudications=adjudications,
        label_sources=resolved.sources if (annotations or adjudications or sources is not None) else {},
    )


def iter_rows(
    rows: Iterable[tuple[int, object]],
    file: str,
    base_dir: Path,
    sink: LoadResult,
    policy: ImagePolicy | None = None,
    ids: IdTracker | None = None,
) -> Iterator[tuple[Case, CaseLocation, list[DataProblem]]]:
    """The cases of numbered canonical rows, one at a time; repeated ids are errors.

    Problems go to ``sink.errors`` and the images of rows left out to ``sink.rejected_images``; each
    case comes with its own warnings (no expert labels, dimensions labelled null, undecided
    majorities), which the caller keeps or drops with the case.

    Args:
        rows: (1-based row number, row) pairs.
        file: the file name to put in problems and locations.
        base_dir: the directory that relative image paths are relative to.
        sink: where problems and rejected images go (its ``cases`` are not touched).
        policy: which image paths are allowed; None allows paths inside ``base_dir`` only.
        ids: finds repeated ids (scope: this file); None tracks every id exactly.

    Yields:
        ``(case, location, warnings)`` for every valid row whose id is new in the file.
    """
    errors = ProblemSink(file, sink.errors)
    tracker = ids if ids is not None else IdTracker()
    wanted = tracker.wanted
    for row, record in rows:
        if wanted is not None and (not isinstance(record, Mapping) or record.get("id") not in wanted):
            continue  # a caller looking for a few cases: the other rows are not even checked
        row_warnings = ProblemSink(file)
        case = case_from_record(record, row, base_dir, errors, policy, row_warnings)
        raw_id = record.get("id") if isinstance(record, Mapping) else None
        location = CaseLocation(file, row)
        duplicate = False
        if isinstance(raw_id, str) and raw_id.strip():
            first = tracker.first(file, raw_id, location)
            if first is not None:
                errors.add(f"duplicate id {raw_id!r} (first at row {first.row})", row, "id", raw_id)
                duplicate = True
        if case is not None and not duplicate:
            yield case, location, [*row_warnings.problems, *undecided_warnings(case, file, row)]
        elif isinstance(record, Mapping) and _too_deep_field(record) is None:
            scratch = ProblemSink(file)  # its problems were reported already
            image = image_ref_from_value(record.get("image"), base_dir, scratch, row, policy=policy)
            sink.reject_image(image, location, raw_id if isinstance(raw_id, str) else None)


def load_rows(
    rows: Iterable[tuple[int, object]],
    file: str,
    base_dir: Path,
    result: LoadResult,
    policy: ImagePolicy | None = None,
) -> None:
    """Add the cases of numbered canonical rows to a result; repeated ids are errors.

    Cases without expert labels and dimensions labelled null go to the result's warnings.

    Args:
        rows: (1-based row number, row) pairs.
        file: the file name to put in problems and locations.
        base_dir: the directory that relative image paths are relative to.
        result: where cases, locations, problems and warnings go.
        policy: which image paths are allowed; None allows paths inside ``base_dir`` only.
    """
    for case, location, warnings in iter_rows(rows, file, base_dir, result, policy):
        result.add(case, location)
        result.warnings.extend(warnings)


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


def json_lines(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    """The parsed rows of a JSON-lines file, reporting bad lines and I/O errors as problems.

    Blank lines are skipped; a byte-order mark at the start of the file is accepted; a key given
    twice in one object, invalid JSON or text that is not UTF-8 is a problem naming the line.

    Args:
        path: the file (checked to be a regular file before it is opened).
        sink: where problems go.

    Yields:
        (1-based line number, parsed value).
    """
    try:
        handle = open_regular_file(path)
    except FileRefused as exc:
        sink.add(str(exc))
        return
    lineno = 0
    with handle:
        try:
            for lineno, raw_line in enumerate(handle, start=1):
                try:
                    line = raw_line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    sink.add(f"not UTF-8 text: {exc}", lineno)
                    continue
                if lineno == 1 and line.startswith(BOM):
                    line = line[len(BOM) :]
                if not line.strip():
                    continue
                try:
                    value = parse_json(line)
                except JSONTextError as exc:
                    sink.add(f"invalid JSON: {exc}", lineno)
                    continue
                yield lineno, value
        except OSError as exc:
            if lineno:
                sink.add(f"cannot read the file after line {lineno}: {describe_oserror(exc)}", lineno + 1)
            else:
                sink.add(f"cannot read the file: {describe_oserror(exc)}")


def read_json_document(path: Path) -> object:
    """Read a whole JSON file (byte-order mark accepted, duplicate keys refused).

    Args:
        path: the file (checked to be a regular file before it is opened).

    Returns:
        The parsed document.

    Raises:
        JSONTextError: the file cannot be read or is not valid JSON; the message is one line
            (``"invalid JSON file: ..."``, ``"not UTF-8 text: ..."``, ``"cannot read the file: ..."``).
    """
    try:
        with open_regular_file(path) as handle:
            raw = handle.read()
    except FileRefused as exc:
        raise JSONTextError(str(exc)) from None
    except OSError as exc:
        raise JSONTextError(f"cannot read the file: {describe_oserror(exc)}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONTextError(f"not UTF-8 text: {exc}") from None
    try:
        return parse_json(text)
    except JSONTextError as exc:
        raise JSONTextError(f"invalid JSON file: {exc}") from None


def json_document_rows(path: Path, sink: ProblemSink, key: str, shape_error: str) -> Iterator[tuple[int, object]]:
    """The numbered rows of a JSON file holding a list, or an object with the list under ``key``.

    Args:
        path: the file (read whole: a JSON document is one value).
        sink: where problems go (unreadable or invalid JSON, another shape).
        key: the list to read in a JSON object.
        shape_error: the problem reported when the document has neither shape.

    Yields:
        (1-based row number, parsed row).
    """
    try:
        document = read_json_document(path)
    except JSONTextError as exc:
        sink.add(str(exc))
        return
    rows = document.get(key) if isinstance(document, dict) else document
    if not isinstance(rows, list):
        sink.add(shape_error)
        return
    yield from enumerate(rows, start=1)


def parquet_rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, dict[str, Any]]]:
    """The numbered rows of a parquet file, read in batches of 256 rows.

    Args:
        path: the file.
        sink: where an unreadable file is reported (after the rows read before the problem).

    Yields:
        (1-based row number, the row as a dict).
    """
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
        sink.add(f"unreadable parquet file: {' '.join(str(exc).split())}")


def _parquet_case_rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    for row, record in parquet_rows(path, sink):
        labels = record.get("labels")
        if isinstance(labels, dict):
            # a labels struct has a field for every dimension: null there means absent
            record["labels"] = {key: value for key, value in labels.items() if value is not None} or None
        yield row, record


def _rows(path: Path, sink: ProblemSink) -> Iterator[tuple[int, object]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return json_lines(path, sink)
    if suffix == ".json":
        return json_document_rows(
            path, sink, "cases", "a JSON data file must hold a list of cases or an object with a 'cases' list"
        )
    return _parquet_case_rows(path, sink)


def canonical_files(directory: Path) -> list[Path]:
    """The canonical data files of a directory (not recursive), sorted by name.

    Args:
        directory: the directory.

    Returns:
        Entries whose suffix is one of :data:`CANONICAL_SUFFIXES`, hidden files, directories and the
        data set's card (:data:`DATASET_CARD_FILENAME`) excluded. Anything else with such a name (a
        symbolic-link loop, a broken link, a named pipe) is listed, so that reading it reports the
        problem instead of skipping it silently.
    """
    return sorted(
        path
        for path in directory.iterdir()
        if path.suffix.lower() in CANONICAL_SUFFIXES
        and not path.name.startswith(".")
        and path.name != DATASET_CARD_FILENAME
        and not path.is_dir()
    )


def iter_canonical(
    path: str | Path,
    sink: LoadResult,
    policy: ImagePolicy | None = None,
    ids: IdTracker | None = None,
) -> Iterator[tuple[Case, CaseLocation, list[DataProblem]]]:
    """Read a canonical file or a directory of canonical files one case at a time.

    Ids must be unique across all files of a directory. Image paths must stay inside the
    directory of the data (see :class:`~medrewardbench.data.image_policy.ImagePolicy`).

    Args:
        path: a ``.jsonl``, ``.json`` or ``.parquet`` file, or a directory of them.
        sink: where problems and the images of rows left out go.
        policy: user settings for image paths; the data's directory is always allowed.
        ids: finds repeated ids (None: every id exactly).

    Yields:
        ``(case, location, warnings)`` in file order (files sorted by name), rows in file order.
    """
    root = Path(path)
    files = canonical_files(root) if root.is_dir() else [root]
    if not files:
        ProblemSink(str(root), sink.errors).add(
            f"no canonical data files ({', '.join(CANONICAL_SUFFIXES)}) in this directory"
        )
        return
    data_dir = root if root.is_dir() else root.parent
    rules = (policy or ImagePolicy()).with_roots(data_dir)
    tracker = ids if ids is not None else IdTracker()
    for file_path in files:
        display = str(file_path)
        file_sink = ProblemSink(display, sink.errors)
        try:
            check_regular_file(file_path)
        except FileRefused as exc:
            file_sink.add(str(exc))
            continue
        for case, location, warnings in iter_rows(
            _rows(file_path, file_sink), display, file_path.parent, sink, rules, tracker
        ):
            first = tracker.first("", case.case_id, location, hashed=False)
            if first is not None:
                sink.errors.append(
                    DataProblem(
                        location.file,
                        f"duplicate id {case.case_id!r} (first in {first.file}, row {first.row})",
                        row=location.row,
                        field="id",
                        case_id=case.case_id,
                    )
                )
                sink.reject_image(case.image, location, case.case_id)
                continue
            yield case, location, warnings


def canonical_data_files(path: str | Path) -> list[Path]:
    """The files a canonical source reads (what :func:`iter_canonical` opens), for change checks.

    Args:
        path: a canonical file or directory.

    Returns:
        The files.
    """
    root = Path(path)
    return canonical_files(root) if root.is_dir() else [root]


def load_canonical(
    path: str | Path,
    source: str | None = None,
    policy: ImagePolicy | None = None,
) -> LoadResult:
    """Read a canonical file or a directory of canonical files, collecting every problem.

    Every case is kept in the result: for small data (:func:`iter_canonical` streams).

    Args:
        path: a ``.jsonl``, ``.json`` or ``.parquet`` file, or a directory of them.
        source: the source string to record (defaults to ``str(path)``).
        policy: user settings for image paths; the data's directory is always allowed.

    Returns:
        The cases with their locations, errors and warnings (cases without expert labels,
        dimensions labelled null).
    """
    root = Path(path)
    result = LoadResult(name=root.stem if root.is_file() else root.name, source=source or str(path))
    for case, location, warnings in iter_canonical(root, result, policy):
        result.add(case, location)
        result.warnings.extend(warnings)
    result.errors.sort(key=lambda p: (p.file, p.row or 0))
    return result


def read_canonical(
    path: str | Path,
    *,
    allow_external_images: bool = False,
    image_roots: Iterable[str | Path] | None = None,
) -> tuple[list[Case], list[DataProblem]]:
    """Read canonical data (a file or a directory of files).

    Args:
        path: a ``.jsonl``, ``.json`` or ``.parquet`` file, or a directory of them.
        allow_external_images: accept image paths outside the data's directory.
        image_roots: further directories image paths may point into.

    Returns:
        The valid cases in file order, and every problem found (rows with problems are left out).
    """
    result = load_canonical(path, policy=ImagePolicy.create(allow_external_images, image_roots))
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
    if labels and case.label_sources:  # unset: a reader works them out from the annotations
        record["label_sources"] = {dim: case.label_source(dim) for dim in labels}
    if case.annotations:
        record["annotations"] = annotations_to_records(case.annotations)
    if case.adjudications:
        record["adjudications"] = adjudications_to_records(case.adjudications)
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
        ("label_sources", pa.string()),
        ("annotations", pa.string()),
        ("adjudications", pa.string()),
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
    for key in ("label_sources", "annotations", "adjudications"):
        value = row.get(key)
        row[key] = json.dumps(value, ensure_ascii=False) if value else None
    metadata = row.get("metadata")
    row["metadata"] = json.dumps(metadata, ensure_ascii=False, sort_keys=True) if metadata else None
    return row


def write_canonical(cases: Iterable[Case], path: str | Path, embed_images: bool = False) -> Path:
    """Write cases as canonical data; the format follows the suffix (``.jsonl``, ``.json``, ``.parquet``).

    Reading the file back with :func:`read_canonical` gives equal cases (with ``embed_images``, path
    images come back as embedded bytes). Path images are written relative to the output file;
    when they lie outside its directory, reading it back needs their directory allowed
    (``image_roots``) or ``allow_external_images``, unless ``embed_images`` is used. The file is
    written next to its final name and then moved into place, so a crash never leaves half a file.

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
