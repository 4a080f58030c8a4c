"""A labelled set as a folder the Hugging Face Hub takes as a dataset repository, and reading it back.

``build export --format hub --out DIR`` writes::

    DIR/README.md                          the dataset card: YAML header the Hub reads, then prose
    DIR/dataset.json                       the project's own card (labels' provenance, construction)
    DIR/data/test-00000-of-00001.parquet   the cases (more shards for large sets)

The parquet files carry the ``datasets`` features in their schema metadata (the ``huggingface``
key), so the Hub's viewer and ``datasets.load_dataset`` show ``image`` as an ``Image`` and the
nested columns as lists and structs. One row per case:

* ``id``, ``question``, ``response_1``, ``response_2``, ``organ_system`` and the optional text fields.
* ``image``: ``Image`` (``{"bytes", "path"}``): the file's own bytes when PIL can open them; a PNG
  rendering (as judges see it) for DICOM files and for builtin images.
* ``image_original``: ``{"bytes", "path"}``: the DICOM file itself when ``image`` is its rendering
  (null otherwise); ``image_builtin``: the builtin image's name (``pydicom:CT_small.dcm``) when the
  case used one. Reading the folder back gives the case its original image again.
* ``labels``: one column per dimension, ``1`` (response_1 is better) or ``2``; ``label_sources``:
  per dimension ``majority``, ``adjudication`` or ``given``.
* ``annotations``: a list, one entry per annotator (``annotator``, ``labels`` per dimension,
  ``order_shown``, ``seconds``, ``comment``, ``cannot_judge``, ``cannot_judge_reason``);
  ``adjudications``: a list (``dimension``, ``label``, ``by``, ``note``, ``at``).
* ``metadata``: a JSON object as text.

Loading the folder with ``--data DIR`` (:func:`is_hub_folder`, :func:`iter_hub_folder`) gives the
same cases, labels, annotations and adjudications the export was made from; the README's
``configs`` say which files hold the data (``data/*.parquet`` when it names none).
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.annotations import ADJUDICATION_FIELDS, ANNOTATION_FIELDS
from medrewardbench.data.benchmark import CaseLocation, IdTracker, LoadResult
from medrewardbench.data.canonical import (
    OPTIONAL_TEXT_FIELDS,
    ProblemSink,
    case_to_record,
    iter_rows,
    parquet_rows,
)
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError, DataProblem

logger = logging.getLogger(__name__)

__all__ = [
    "HUB_DATA_DIR",
    "HUB_README",
    "HUB_SPLIT",
    "HubFolderFiles",
    "hub_data_files",
    "hub_features",
    "is_hub_folder",
    "iter_hub_folder",
    "read_front_matter",
    "write_hub_data",
]

HUB_README = "README.md"
HUB_DATA_DIR = "data"
HUB_SPLIT = "test"
"""The split name: a benchmark is a test set."""
ROWS_PER_SHARD = 1000
"""Cases per parquet file (the Hub's viewer works best with files of at most a few hundred MB)."""
_WRITE_BATCH_ROWS = 64


def _value(dtype: str) -> dict[str, str]:
    return {"dtype": dtype, "_type": "Value"}


def _per_dimension(dtype: str) -> dict[str, Any]:
    return {dim: _value(dtype) for dim in DIMENSIONS}


_ANNOTATION_TYPES: dict[str, str | dict[str, Any]] = {
    "annotator": "string",
    "labels": _per_dimension("int8"),
    "order_shown": "string",
    "seconds": "float64",
    "comment": "string",
    "cannot_judge": "bool",
    "cannot_judge_reason": "string",
    # the doctor's harm flag per answer in source order ("1"/"2" -> severity), when they gave one
    "harm": {"1": _value("string"), "2": _value("string")},
}
_ADJUDICATION_TYPES: dict[str, str | dict[str, Any]] = {
    "dimension": "string",
    "label": "int8",
    "by": "string",
    "note": "string",
    "at": "string",
}


def _struct(types: Mapping[str, str | dict[str, Any]]) -> dict[str, Any]:
    return {key: _value(kind) if isinstance(kind, str) else kind for key, kind in types.items()}


def hub_features() -> dict[str, Any]:
    """The ``datasets`` features of the folder's parquet files, as ``Features.to_dict()`` writes them.

    Lists are written as one-element Python lists, which every ``datasets`` release reads.

    Returns:
        The features, in column order.
    """
    features: dict[str, Any] = {
        "id": _value("string"),
        "image": {"_type": "Image"},
        "image_original": {"bytes": _value("binary"), "path": _value("string")},
        "image_builtin": _value("string"),
        "question": _value("string"),
        "response_1": _value("string"),
        "response_2": _value("string"),
        "labels": _per_dimension("int8"),
        "label_sources": _per_dimension("string"),
        "annotations": [_struct(_ANNOTATION_TYPES)],
        "adjudications": [_struct(_ADJUDICATION_TYPES)],
        "organ_system": _value("string"),
        **{key: _value("string") for key in OPTIONAL_TEXT_FIELDS},
        "metadata": _value("string"),
    }
    return features


def _arrow_type(feature: Any) -> Any:
    import pyarrow as pa

    if isinstance(feature, list):
        return pa.list_(_arrow_type(feature[0]))
    if feature.get("_type") == "Image":
        return pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    if feature.get("_type") == "Value":
        return {"string": pa.string(), "int8": pa.int8(), "float64": pa.float64(), "bool": pa.bool_()}.get(
            feature["dtype"], pa.binary()
        )
    return pa.struct([(key, _arrow_type(value)) for key, value in feature.items()])


def _schema() -> Any:
    import pyarrow as pa

    features = hub_features()
    schema = pa.schema([(name, _arrow_type(feature)) for name, feature in features.items()])
    return schema.with_metadata({"huggingface": json.dumps({"info": {"features": features}})})


def _check_known_fields() -> None:
    """A field added to annotations or adjudications must get a column type here, never be dropped."""
    missing = (ANNOTATION_FIELDS - set(_ANNOTATION_TYPES)) | (ADJUDICATION_FIELDS - set(_ADJUDICATION_TYPES))
    if missing:
        raise RuntimeError(f"the Hub export has no column type for {', '.join(sorted(missing))}")


def _png(image: ImageRef) -> bytes:
    from medrewardbench.images.decode import load_image
    from medrewardbench.images.pixels import encode_png

    return encode_png(load_image(image))


def _pil_opens(data: bytes, name: str) -> bool:
    """Whether the Hub's viewer (PIL) can show these bytes as they are; DICOM never."""
    import io
    import warnings

    from PIL import Image, UnidentifiedImageError

    from medrewardbench.images.dicom import looks_like_dicom

    if looks_like_dicom(data[:132], name):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as found:
                found.verify()
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        return False
    return True


def _image_columns(image: ImageRef) -> dict[str, Any]:
    """``image`` (what the Hub shows), ``image_original`` and ``image_builtin`` for one case's image."""
    none: dict[str, Any] = {"image": None, "image_original": None, "image_builtin": None}
    if image.kind == "none":
        return none
    if image.kind == "builtin":
        png_name = image.location.split(":", 1)[-1].rsplit(".", 1)[0] + ".png"
        return {**none, "image": {"bytes": _png(image), "path": png_name}, "image_builtin": image.location}
    data = image.raw_bytes()
    name = os.path.basename(image.location)
    if _pil_opens(data, name):
        return {**none, "image": {"bytes": data, "path": name or None}}
    shown = (name or "image") + ".png"
    original = {"bytes": data, "path": name or None}
    return {**none, "image": {"bytes": _png(image), "path": shown}, "image_original": original}


def _full(record: Mapping[str, Any], types: Mapping[str, Any]) -> dict[str, Any]:
    return {key: record.get(key) for key in types}


def _row(case: Case) -> dict[str, Any]:
    record = case_to_record(case, Path("."), embed_images=False, binary=True)
    row: dict[str, Any] = {"id": case.case_id, **_image_columns(case.image)}
    for key in ("question", "response_1", "response_2", "organ_system", *OPTIONAL_TEXT_FIELDS):
        row[key] = record.get(key)
    labels = record.get("labels")
    row["labels"] = {dim: labels.get(dim) for dim in DIMENSIONS} if labels else None
    sources = record.get("label_sources")
    row["label_sources"] = {dim: sources.get(dim) for dim in DIMENSIONS} if sources else None
    row["annotations"] = [
        {**_full(entry, _ANNOTATION_TYPES), "labels": {dim: entry["labels"].get(dim) for dim in DIMENSIONS}}
        for entry in record.get("annotations", [])
    ] or None
    row["adjudications"] = [_full(entry, _ADJUDICATION_TYPES) for entry in record.get("adjudications", [])] or None
    metadata = record.get("metadata")
    try:
        row["metadata"] = json.dumps(metadata, ensure_ascii=False, sort_keys=True) if metadata else None
    except TypeError as exc:
        raise ValueError(f"case {case.case_id!r}: metadata is not JSON-serialisable: {exc}") from exc
    return row


def write_hub_data(cases: Iterable[Case], out_dir: str | Path, rows_per_shard: int = ROWS_PER_SHARD) -> list[Path]:
    """Write the cases as the folder's parquet shards, ``DIR/data/test-NNNNN-of-MMMMM.parquet``.

    The shards are written into a hidden directory beside ``data/`` and moved into place at the
    end, replacing an earlier ``data/``: a crash leaves the earlier export whole.

    Args:
        cases: the cases, in the order they are to be stored.
        out_dir: the folder.
        rows_per_shard: cases per parquet file.

    Returns:
        The shards written, in order (relative names are ``data/...``).

    Raises:
        ValueError: metadata that JSON cannot hold, or ``rows_per_shard`` below 1.
        ImageError: an image that cannot be read or rendered.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    _check_known_fields()
    if rows_per_shard < 1:
        raise ValueError("rows_per_shard must be at least 1")
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{HUB_DATA_DIR}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    schema = _schema()
    written: list[Path] = []
    try:
        writer: Any = None
        in_shard = 0
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            if batch:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch.clear()

        for case in cases:
            if writer is None or in_shard >= rows_per_shard:
                if writer is not None:
                    flush()
                    writer.close()
                written.append(staging / f"shard-{len(written):05d}.parquet")
                writer = pq.ParquetWriter(written[-1], schema)
                in_shard = 0
            batch.append(_row(case))
            in_shard += 1
            if len(batch) >= _WRITE_BATCH_ROWS:
                flush()
        if writer is None:  # no cases: one empty shard, so that the folder still loads
            written.append(staging / "shard-00000.parquet")
            writer = pq.ParquetWriter(written[-1], schema)
            writer.write_table(pa.Table.from_pylist([], schema=schema))
        flush()
        writer.close()
        total = len(written)
        final: list[Path] = []
        for index, path in enumerate(written):
            target = staging / f"{HUB_SPLIT}-{index:05d}-of-{total:05d}.parquet"
            path.rename(target)
            final.append(root / HUB_DATA_DIR / target.name)
        data = root / HUB_DATA_DIR
        if data.is_dir():
            shutil.rmtree(data)
        staging.rename(data)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("wrote %d parquet shard(s) to %s", len(final), root / HUB_DATA_DIR)
    return final


def read_front_matter(readme: str | Path) -> dict[str, Any] | None:
    """The YAML header of a dataset card (between the first two ``---`` lines).

    Args:
        readme: the README.md.

    Returns:
        The header as a dict; None when the file has no header.

    Raises:
        DataError: the file cannot be read, or the header is not a YAML mapping.
    """
    import yaml

    path = Path(readme)
    try:
        text = path.read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError([DataProblem(str(path), f"cannot read the dataset card: {exc}")]) from None
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    except StopIteration:
        raise DataError([DataProblem(str(path), "the YAML header opened with '---' is never closed")]) from None
    try:
        header = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise DataError([DataProblem(str(path), f"the YAML header does not parse: {reason}")]) from None
    if header is None:
        return {}
    if not isinstance(header, dict):
        raise DataError([DataProblem(str(path), "the YAML header must be a mapping")])
    return header


@dataclass(frozen=True)
class HubFolderFiles:
    """The data files of a Hub dataset folder, and the README patterns they came from."""

    files: list[Path]
    patterns: list[str]


def _patterns(header: Mapping[str, Any] | None, readme: Path) -> list[str]:
    configs = (header or {}).get("configs")
    if configs is None:
        return [f"{HUB_DATA_DIR}/*.parquet"]
    problem = DataProblem(str(readme), "must be a list of {config_name, data_files}", field="configs")
    if not isinstance(configs, list) or not configs or not isinstance(configs[0], dict):
        raise DataError([problem])
    config = next((c for c in configs if isinstance(c, dict) and c.get("default")), configs[0])
    data_files = config.get("data_files")
    if isinstance(data_files, str):
        return [data_files]
    found: list[str] = []
    for entry in data_files if isinstance(data_files, list) else []:
        paths = entry.get("path") if isinstance(entry, dict) else entry
        found.extend([paths] if isinstance(paths, str) else [p for p in paths or [] if isinstance(p, str)])
    if not found:
        raise DataError([DataProblem(str(readme), "names no data files", field="configs[].data_files")])
    return found


def hub_data_files(root: str | Path) -> HubFolderFiles:
    """The parquet files a Hub dataset folder holds, as its README's ``configs`` name them.

    Only the first (or ``default: true``) configuration is read; its patterns are matched against
    the folder's files (``*`` matches within one directory level, as on the Hub).

    Args:
        root: the folder.

    Returns:
        The files, sorted, and the patterns.

    Raises:
        DataError: the README's header is unusable, a pattern leaves the folder, a pattern names no
            parquet file, or a named file is not parquet.
    """
    folder = Path(root)
    readme = folder / HUB_README
    header = read_front_matter(readme) if readme.is_file() else None
    patterns = _patterns(header, readme)
    files: set[Path] = set()
    for pattern in patterns:
        parts = Path(pattern).parts
        if Path(pattern).is_absolute() or ".." in parts:
            raise DataError([DataProblem(str(readme), f"data file pattern {pattern!r} leaves the folder")])
        matched = [
            path
            for path in folder.glob(pattern)
            if path.is_file() and fnmatch.fnmatch(path.relative_to(folder).as_posix(), pattern)
        ]
        if not matched:
            raise DataError([DataProblem(str(folder), f"no file matches the data file pattern {pattern!r}")])
        for path in matched:
            if path.suffix.lower() != ".parquet":
                raise DataError([DataProblem(str(path), "a Hub dataset folder is read from parquet files only")])
        files.update(matched)
    return HubFolderFiles(sorted(files), patterns)


def is_hub_folder(root: str | Path) -> bool:
    """Whether a directory is a Hub dataset folder: a README.md and parquet files under ``data/``.

    Args:
        root: the directory.

    Returns:
        True for the layout ``build export --format hub`` writes (or any Hub dataset laid out alike).
    """
    folder = Path(root)
    data = folder / HUB_DATA_DIR
    return (folder / HUB_README).is_file() and data.is_dir() and any(data.glob("*.parquet"))


def _strip_nulls(value: object) -> object:
    """A struct column's nulls (fields the row does not have) left out, recursively."""
    if isinstance(value, dict):
        return {key: _strip_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_strip_nulls(item) for item in value]
    return value


def _canonical_record(record: dict[str, Any]) -> dict[str, Any]:
    """One parquet row of the folder as a canonical row (:mod:`medrewardbench.data.canonical`)."""
    out = {key: value for key, value in record.items() if key not in {"image_original", "image_builtin"}}
    builtin = record.get("image_builtin")
    original = record.get("image_original")
    if builtin:
        out["image"] = {"builtin": builtin}
    elif isinstance(original, dict) and original.get("bytes") is not None:
        out["image"] = {"bytes": original["bytes"], "path": original.get("path")}
    for key in ("labels", "label_sources", "annotations", "adjudications"):
        value = _strip_nulls(record.get(key))
        out[key] = value or None
    if isinstance(out.get("image"), dict):
        out["image"] = {key: value for key, value in out["image"].items() if value is not None}
    return {key: value for key, value in out.items() if value is not None or key == "image"}


def iter_hub_folder(
    root: str | Path,
    sink: LoadResult,
    policy: ImagePolicy | None = None,
    ids: IdTracker | None = None,
) -> Iterator[tuple[Case, CaseLocation, list[DataProblem]]]:
    """Read a Hub dataset folder's cases, one at a time (problems go to ``sink``).

    Args:
        root: the folder.
        sink: where problems and the images of rows left out go.
        policy: image path rules (the rows embed their images, so rarely needed).
        ids: finds repeated ids (None: every id exactly).

    Yields:
        ``(case, location, warnings)`` in file order, rows in file order.
    """
    folder = Path(root)
    try:
        files = hub_data_files(folder).files
    except DataError as exc:
        sink.errors.extend(exc.problems)
        return
    rules = (policy or ImagePolicy()).with_roots(folder)
    tracker = ids if ids is not None else IdTracker()
    for path in files:
        display = str(path)
        file_sink = ProblemSink(display, sink.errors)
        rows = ((row, _canonical_record(record)) for row, record in parquet_rows(path, file_sink))
        for case, location, warnings in iter_rows(rows, display, path.parent, sink, rules, tracker):
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
