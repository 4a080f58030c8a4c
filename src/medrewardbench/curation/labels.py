"""``build labels``: attach what the annotators and adjudicators said to the project's pairs.

The file (JSONL, JSON or parquet) holds rows of either shape, mixed as you like:

* a **label row**: ``{"id": PAIR_ID, "annotator": "dr_a", "labels": {"overall": "A", ...},
  "order_shown": "swapped", "seconds": 41.5, "comment": "...", "cannot_judge": false,
  "cannot_judge_reason": null}``; ``labels`` maps a dimension to ``1``/``2`` or ``"A"``/``"B"``
  **in source order** (1 = A = the pair's ``response_1``, whatever order the annotator saw), as
  the canonical format's labels do; the other fields are optional and mean what they mean in the
  canonical ``annotations`` (:mod:`medrewardbench.data.annotations`). Empty ``labels`` record an
  annotator who could not judge the pair.
* a **canonical row** with ``annotations`` and/or ``adjudications`` (what ``medrewardbench
  annotate export --format canonical`` writes): each annotation becomes a label row of the row's
  id, with its comment and reason, and the row's ``adjudications`` become the pair's (a canonical
  row states a case whole: a pair's adjudications are replaced by those of its latest canonical
  row, none when it has none). The row's ``labels`` and ``label_sources``, when present, must
  agree with its annotations and adjudications, and its ``response_1`` and ``response_2``, when
  present, must equal the pair's, so that labels given to another sampling of the pairs are
  refused rather than attached to the wrong answers.

Every id must name a pair of the project (``build pairs``). An (id, annotator) given twice in the
file is an error; one already in the project is replaced (an annotator may correct a label).
Every problem is reported at once, each naming the file, the row and the field, and then nothing
is attached (one transaction).

When a **dataset card** (``dataset.json``, as ``annotate export`` writes) lies beside the file and
lists it, its ``labels.annotation_projects`` (the annotation project's name, guidelines version
and quality control) are kept in the project, and ``build export`` writes them into its own card.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from medrewardbench.cases import Adjudication, Annotation
from medrewardbench.curation.store import BuildError, BuildStore
from medrewardbench.data.annotations import (
    ANNOTATION_FIELDS,
    parse_adjudications,
    parse_annotation,
    parse_annotations,
    parse_label_sources,
    resolve_labels,
)
from medrewardbench.data.canonical import ProblemSink, parse_labels
from medrewardbench.data.questions import iter_question_rows
from medrewardbench.data.release import annotation_projects_beside, merge_annotation_projects
from medrewardbench.errors import DataError, DataProblem

__all__ = ["ANNOTATION_PROJECTS_KEY", "LABEL_ROW_FIELDS", "LabelsSummary", "attach_labels"]

LABEL_ROW_FIELDS: frozenset[str] = frozenset(("id", *ANNOTATION_FIELDS))
"""The fields of a label row."""
ANNOTATION_PROJECTS_KEY = "annotation_projects"
"""The project's meta key holding the annotation projects its labels came from (card entries)."""
_CANONICAL_MARKERS = ("annotations", "adjudications", "response_1", "response_2")
_ADJUDICATIONS = ""
"""The key under which a file's canonical row of a pair is remembered (no annotator is named so)."""
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
    adjudications: int = 0
    comments: int = 0
    annotation_projects: list[str] = field(default_factory=list)
    """The annotation projects named by the card beside the file."""


class _Entry(NamedTuple):
    row: int
    pair_id: str
    annotation: Annotation | None
    """None for the entry that carries a canonical row's adjudications."""
    adjudications: tuple[Adjudication, ...] = ()
    texts: tuple[Any, Any] | None = None
    """(response_1, response_2) to check against the pair, or None."""


def _pair_id(record: Mapping[str, Any], row: int, sink: ProblemSink) -> str | None:
    pair_id = record.get("id")
    if not isinstance(pair_id, str) or not pair_id.strip():
        sink.add("missing id (the pair's id, a non-empty string)", row, "id")
        return None
    return pair_id


def _label_row(record: Mapping[str, Any], row: int, sink: ProblemSink) -> list[_Entry]:
    pair_id = _pair_id(record, row, sink)
    if pair_id is None:
        return []
    before = len(sink.problems)
    unknown = sorted(str(k) for k in record if k not in LABEL_ROW_FIELDS)
    if unknown:
        sink.add(
            f"unknown field(s) {', '.join(unknown)}; a label row has {', '.join(sorted(LABEL_ROW_FIELDS))}",
            row,
            unknown[0],
            pair_id,
        )
    annotation = parse_annotation(
        record, sink, row, lambda value, where: parse_labels(value, sink, row, pair_id, where), pair_id
    )
    if len(sink.problems) > before or annotation is None:
        return []
    return [_Entry(row, pair_id, annotation)]


def _canonical_row(record: Mapping[str, Any], row: int, sink: ProblemSink) -> list[_Entry]:
    pair_id = _pair_id(record, row, sink)
    if pair_id is None:
        return []
    before = len(sink.problems)
    annotations = parse_annotations(
        record.get("annotations"),
        sink,
        row,
        lambda value, where: parse_labels(value, sink, row, pair_id, where),
        pair_id,
    )
    adjudications = parse_adjudications(record.get("adjudications"), sink, row, pair_id)
    labels = parse_labels(record.get("labels"), sink, row, pair_id)
    sources = parse_label_sources(record.get("label_sources"), sink, row, pair_id)
    if len(sink.problems) > before:
        return []
    if not annotations and not adjudications:
        sink.add("a canonical row needs 'annotations' (or 'adjudications') to attach", row, "annotations", pair_id)
        return []
    resolve_labels(labels, annotations, sink, row, pair_id, adjudications, sources)
    if len(sink.problems) > before:
        return []
    texts = None
    if "response_1" in record or "response_2" in record:
        texts = (record.get("response_1"), record.get("response_2"))
    return [_Entry(row, pair_id, a, (), texts) for a in annotations] + [
        _Entry(row, pair_id, None, adjudications, texts)
    ]


@dataclass
class _Attached:
    labels: list[tuple[str, Annotation, str]] = field(default_factory=list)
    adjudications: dict[str, tuple[Adjudication, ...]] = field(default_factory=dict)


def _attach_chunk(store: BuildStore, entries: Sequence[_Entry], sink: ProblemSink) -> _Attached:
    known = store.pair_texts(sorted({e.pair_id for e in entries}))
    keys = [(e.pair_id, e.annotation.annotator if e.annotation is not None else _ADJUDICATIONS) for e in entries]
    seen = store.label_file_rows(keys)
    attached = _Attached()
    reported: set[int] = set()  # rows whose id or texts were found wrong: said once per row
    for entry, key in zip(entries, keys, strict=True):
        pair_id = entry.pair_id
        if entry.row in reported:
            continue
        if pair_id not in known:
            sink.add(
                f"no pair {pair_id!r} in this project (ids are those 'build pairs' wrote)", entry.row, "id", pair_id
            )
            reported.add(entry.row)
            continue
        if entry.texts is not None and tuple(entry.texts) != known[pair_id]:
            sink.add(
                "the responses differ from this project's pair with the same id (labels of another sampling?)",
                entry.row,
                "response_1" if entry.texts[0] != known[pair_id][0] else "response_2",
                pair_id,
            )
            reported.add(entry.row)
            continue
        if key in seen:
            if entry.annotation is None:
                message = f"pair {pair_id!r} is given twice as a canonical row (first at row {seen[key]})"
                sink.add(message, entry.row, "id", pair_id)
            else:
                sink.add(
                    f"annotator {key[1]!r} labels pair {pair_id!r} twice (first at row {seen[key]})",
                    entry.row,
                    "annotator",
                    pair_id,
                )
            continue
        seen[key] = entry.row
        if entry.annotation is None:
            attached.adjudications[pair_id] = entry.adjudications
        else:
            attached.labels.append((pair_id, entry.annotation, str(sink.file)))
    store.remember_label_file_rows([(pair_id, annotator, row) for (pair_id, annotator), row in seen.items()])
    return attached


def _store(store: BuildStore, attached: _Attached, summary: LabelsSummary, source: str) -> None:
    summary.labels += store.upsert_labels(attached.labels)
    summary.annotators.update(a.annotator for _, a, _ in attached.labels)
    summary.comments += sum(1 for _, a, _ in attached.labels if a.comment)
    for pair_id, adjudications in attached.adjudications.items():
        summary.adjudications += store.replace_adjudications(pair_id, adjudications, source)


def attach_labels(store: BuildStore, path: str | Path) -> LabelsSummary:
    """Attach a file's labels and adjudications to the project's pairs (rules in the module docstring).

    Args:
        store: the project's store (the caller holds the project's lock).
        path: the labels file.

    Returns:
        What was attached.

    Raises:
        BuildError: the project has no pairs.
        DataError: any problem in the file or the card beside it (every one); nothing was attached.
    """
    file = Path(path)
    if store.count_pairs() == 0:
        raise BuildError("the project has no pairs to label; run 'build pairs' first")
    if not file.exists():
        raise DataError([DataProblem(str(file), "no such file")])
    projects = annotation_projects_beside(file)
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
                _store(store, _attach_chunk(store, pending, sink), summary, str(file))
                pending = []
        if pending:
            _store(store, _attach_chunk(store, pending, sink), summary, str(file))
        summary.pairs = store.label_file_pairs()
        if not problems and summary.rows == 0:
            sink.add("the file holds no labels")
        if problems:
            raise DataError(problems)  # the transaction rolls back: nothing is attached
        if projects:
            known = store.get_meta(ANNOTATION_PROJECTS_KEY) or []
            store.set_meta(ANNOTATION_PROJECTS_KEY, merge_annotation_projects(known, projects), commit=False)
            summary.annotation_projects = [str(p.get("project")) for p in projects]
    return summary
