"""``build labels``: attach per-annotator labels to the project's pairs.

The file (JSONL, JSON or parquet) holds rows of either shape, mixed as you like:

* a **label row**: ``{"id": PAIR_ID, "annotator": "dr_a", "labels": {"overall": "A", ...},
  "order_shown": "swapped", "seconds": 41.5}``; ``labels`` maps a dimension to ``1``/``2`` or
  ``"A"``/``"B"`` **in source order** (1 = A = the pair's ``response_1``, whatever order the
  annotator saw), as the canonical format's labels do; ``order_shown`` (``original``, ``swapped``)
  and ``seconds`` (a number >= 0) are optional. Empty ``labels`` record an annotator who could not
  judge the pair.
* a **canonical row** with ``annotations`` (what ``medrewardbench annotate export --format
  canonical`` writes): each annotation becomes a label row of the row's id. Its ``response_1`` and
  ``response_2``, when present, must equal the pair's, so that labels given to another sampling
  of the pairs are refused rather than attached to the wrong answers.

Every id must name a pair of the project (``build pairs``). An (id, annotator) given twice in the
file is an error; one already in the project is replaced (an annotator may correct a label).
Every problem is reported at once, each naming the file, the row and the field, and then nothing
is attached (one transaction).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.build.store import BuildError, BuildStore
from medrewardbench.data.annotations import ANNOTATION_FIELDS, ORDERS_SHOWN, parse_annotations
from medrewardbench.data.canonical import ProblemSink, parse_labels
from medrewardbench.data.questions import iter_question_rows
from medrewardbench.errors import DataError, DataProblem

__all__ = ["LABEL_ROW_FIELDS", "LabelsSummary", "attach_labels"]

LABEL_ROW_FIELDS: frozenset[str] = frozenset(("id", *ANNOTATION_FIELDS))
"""The fields of a label row."""
_CANONICAL_MARKERS = ("annotations", "response_1", "response_2")
_CHUNK = 500


@dataclass
class LabelsSummary:
    """What ``build labels`` attached."""

    path: Path
    rows: int = 0
    labels: int = 0
    annotators: set[str] = field(default_factory=set)
    pairs: int = 0
    """Different pairs the file labelled."""


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


_Entry = tuple[int, str, str, dict[str, int], "str | None", "float | None", "tuple[Any, Any] | None"]
"""(row, pair id, annotator, labels, order_shown, seconds, (response_1, response_2) to check or None)."""


def _label_row(record: Mapping[str, Any], row: int, sink: ProblemSink) -> list[_Entry]:
    before = len(sink.problems)
    pair_id = record.get("id")
    if not isinstance(pair_id, str) or not pair_id.strip():
        sink.add("missing id (the pair's id, a non-empty string)", row, "id")
        return []
    unknown = sorted(str(k) for k in record if k not in LABEL_ROW_FIELDS)
    if unknown:
        sink.add(
            f"unknown field(s) {', '.join(unknown)}; a label row has {', '.join(sorted(LABEL_ROW_FIELDS))}",
            row,
            unknown[0],
            pair_id,
        )
    annotator = record.get("annotator")
    if not isinstance(annotator, str) or not annotator.strip():
        sink.add("'annotator' must be a non-empty string", row, "annotator", pair_id)
    labels = parse_labels(record.get("labels"), sink, row, pair_id)
    order = record.get("order_shown")
    if _missing(order):
        order = None
    elif order not in ORDERS_SHOWN:
        sink.add(f"must be 'original', 'swapped' or null, got {order!r}", row, "order_shown", pair_id)
    seconds = record.get("seconds")
    if _missing(seconds):
        seconds = None
    elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        sink.add(f"must be a number >= 0 or null, got {seconds!r}", row, "seconds", pair_id)
    if len(sink.problems) > before or not isinstance(annotator, str):
        return []
    return [
        (
            row,
            pair_id,
            annotator,
            {k: int(v) for k, v in labels.items()},
            order if isinstance(order, str) else None,
            None if seconds is None else float(seconds),
            None,
        )
    ]


def _canonical_row(record: Mapping[str, Any], row: int, sink: ProblemSink) -> list[_Entry]:
    pair_id = record.get("id")
    if not isinstance(pair_id, str) or not pair_id.strip():
        sink.add("missing id (the pair's id, a non-empty string)", row, "id")
        return []
    before = len(sink.problems)
    annotations = parse_annotations(
        record.get("annotations"),
        sink,
        row,
        lambda value, where: parse_labels(value, sink, row, pair_id, where),
        pair_id,
    )
    if len(sink.problems) > before:
        return []
    if not annotations:
        sink.add("a canonical row needs 'annotations' to attach", row, "annotations", pair_id)
        return []
    texts = None
    if "response_1" in record or "response_2" in record:
        texts = (record.get("response_1"), record.get("response_2"))
    return [
        (row, pair_id, a.annotator, {k: int(v) for k, v in a.labels.items()}, a.order_shown, a.seconds, texts)
        for a in annotations
    ]


def _attach_chunk(
    store: BuildStore, entries: Sequence[_Entry], sink: ProblemSink
) -> list[tuple[str, str, dict[str, int], str | None, float | None, str]]:
    known = store.pair_texts(sorted({e[1] for e in entries}))
    seen = store.label_file_rows([(e[1], e[2]) for e in entries])
    rows = []
    for row, pair_id, annotator, labels, order, seconds, texts in entries:
        if pair_id not in known:
            sink.add(f"no pair {pair_id!r} in this project (ids are those 'build pairs' wrote)", row, "id", pair_id)
            continue
        if texts is not None and tuple(texts) != known[pair_id]:
            sink.add(
                "the responses differ from this project's pair with the same id (labels of another sampling?)",
                row,
                "response_1" if texts[0] != known[pair_id][0] else "response_2",
                pair_id,
            )
            continue
        key = (pair_id, annotator)
        if key in seen:
            sink.add(
                f"annotator {annotator!r} labels pair {pair_id!r} twice (first at row {seen[key]})",
                row,
                "annotator",
                pair_id,
            )
            continue
        seen[key] = row
        rows.append((pair_id, annotator, labels, order, seconds, str(sink.file)))
    store.remember_label_file_rows([(pair_id, annotator, row) for (pair_id, annotator), row in seen.items()])
    return rows


def attach_labels(store: BuildStore, path: str | Path) -> LabelsSummary:
    """Attach a file's labels to the project's pairs (rules in the module docstring).

    Args:
        store: the project's store (the caller holds the project's lock).
        path: the labels file.

    Returns:
        What was attached.

    Raises:
        BuildError: the project has no pairs.
        DataError: any problem in the file (every one); nothing was attached.
    """
    file = Path(path)
    if store.count_pairs() == 0:
        raise BuildError("the project has no pairs to label; run 'build pairs' first")
    if not file.exists():
        raise DataError([DataProblem(str(file), "no such file")])
    problems: list[DataProblem] = []
    sink = ProblemSink(str(file), problems)
    summary = LabelsSummary(file)
    pending: list[_Entry] = []
    with store.transaction():
        # one (pair, annotator) per file; the keys seen so far wait in a temporary table, not in memory
        store.start_label_file()
        for row, record in iter_question_rows(file, sink, json_key="labels"):
            summary.rows += 1
            if not isinstance(record, Mapping):
                sink.add(f"row must be an object, got {type(record).__name__}", row)
                continue
            canonical = any(marker in record for marker in _CANONICAL_MARKERS)
            pending.extend(_canonical_row(record, row, sink) if canonical else _label_row(record, row, sink))
            if len(pending) >= _CHUNK:
                rows = _attach_chunk(store, pending, sink)
                summary.labels += store.upsert_labels(rows)
                summary.annotators.update(r[1] for r in rows)
                pending = []
        if pending:
            rows = _attach_chunk(store, pending, sink)
            summary.labels += store.upsert_labels(rows)
            summary.annotators.update(r[1] for r in rows)
        summary.pairs = store.label_file_pairs()
        if not problems and summary.rows == 0:
            sink.add("the file holds no labels")
        if problems:
            raise DataError(problems)  # the transaction rolls back: nothing is attached
    return summary
