"""What the annotators and adjudicators said, in the canonical format, and how it becomes the labels.

A canonical row may carry ``annotations``: a list of objects

``{"annotator": "dr_a", "labels": {"overall": 1, ...}, "order_shown": "swapped", "seconds": 41.5,
"comment": "B misses the effusion", "cannot_judge": false, "cannot_judge_reason": null}``

``annotator`` is a non-empty string, unique within the row; ``labels`` uses the same values as
the row's ``labels`` (1/2 or "A"/"B", in source order: 1 = A = response_1, whatever order the
annotator saw); ``order_shown`` is ``"original"`` (response_1 shown first), ``"swapped"`` or
absent; ``seconds`` is a non-negative number or absent; ``comment`` is the annotator's free text;
``cannot_judge`` says they could not judge the case (their ``labels`` are then usually empty) and
``cannot_judge_reason`` why (only with ``cannot_judge: true``); ``harm`` flags answers the
annotator judged harmful, ``{"2": "severe"}``: the response in source order (``"1"``/``"2"``, or
``"A"``/``"B"`` as in ``labels``) -> a severity of :data:`~medrewardbench.cases.HARM_SEVERITIES`
(``minor``, ``moderate``, ``severe``, ``critical``); an answer nobody flagged is absent. In parquet
the list is a JSON string.

It may carry ``adjudications``: a list of objects

``{"dimension": "overall", "label": 2, "by": "organiser", "note": "B is safer", "at": "2026-11-26T10:00:00Z"}``

one per dimension at most: an adjudicator's decision on a dimension the annotations leave without
a strict majority (``by`` is required, ``note`` and ``at``, an ISO 8601 time, are optional).

And it may carry ``label_sources``: ``{dimension: "majority" | "adjudication" | "given"}``, where
each label came from. Writers of this package always write it; a reader works it out when absent.

The rules that tie them to ``labels`` (:func:`resolve_labels`):

* When the row has no ``labels``, its labels are the **strict majority** per dimension of its
  annotations (more than half of the annotations that label that dimension), **else** the
  adjudication of that dimension. A dimension with neither stays unlabelled and is reported as a
  warning.
* When the row has ``labels``, a label that contradicts the strict majority of the row's own
  annotations, or the adjudication of a dimension without one, is a validation problem. A label
  on a dimension that neither decides is accepted as ``given``, and a dimension the row leaves out
  stays unlabelled.
* An adjudication of a dimension that *has* a strict majority (the votes changed after the
  decision) does not change the label: the majority decides, the adjudication is kept as it was
  written, and a warning says so.
* ``label_sources``, when given, must name a labelled dimension and say what the rules above say.

Why one module of this size: the canonical annotation fields, their checks and the one rule from
votes and adjudications to labels belong together; split, the rule would sit apart from what it
reads.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar, cast

from medrewardbench.cases import HARM_SEVERITIES, LABEL_SOURCES, Adjudication, Annotation, Case
from medrewardbench.dimensions import DIMENSIONS, Winner, normalize_dimension, parse_winner
from medrewardbench.errors import DataProblem


class ProblemCollector(Protocol):
    """Where problems go (the canonical loader's ``ProblemSink`` is one)."""

    problems: list[DataProblem]

    def add(self, message: str, row: int | None = None, field: str | None = None, case_id: str | None = None) -> None:
        """Record one problem."""


LabelParser = Callable[[object, str], dict[str, Winner]]
"""Reads one labels object given the value and its field name, reporting its own problems."""

ANNOTATION_FIELDS: frozenset[str] = frozenset(
    ("annotator", "labels", "order_shown", "seconds", "comment", "cannot_judge", "cannot_judge_reason", "harm")
)
"""The keys of one ``annotations`` object."""
ADJUDICATION_FIELDS: frozenset[str] = frozenset(("dimension", "label", "by", "note", "at"))
"""The keys of one ``adjudications`` object."""
ORDERS_SHOWN: tuple[str, ...] = ("original", "swapped")
MAX_NOTE_CHARS = 100_000
"""Longest comment, reason or adjudication note accepted, in characters."""
UNDECIDED = "undecided"
"""Kind of the warning about a dimension the annotators left without a strict majority or adjudication."""
SUPERSEDED = "superseded_adjudication"
"""Kind of the warning about an adjudication of a dimension that has a strict majority after all."""

__all__ = [
    "ADJUDICATION_FIELDS",
    "ANNOTATION_FIELDS",
    "SUPERSEDED",
    "UNDECIDED",
    "LabelResolution",
    "adjudications_to_records",
    "annotation_votes",
    "annotations_to_records",
    "majority_labels",
    "parse_adjudications",
    "parse_annotation",
    "parse_annotations",
    "parse_harm",
    "parse_label_sources",
    "release_labels",
    "resolve_labels",
    "strict_majority",
    "undecided_warnings",
    "vote_tally",
]


VoteT = TypeVar("VoteT", bound=Hashable)


def strict_majority(votes: Sequence[VoteT]) -> VoteT | None:
    """The value more than half of the votes name, or None (no votes, a tie, a short plurality).

    Args:
        votes: the votes (source-order winners, or any hashable values).

    Returns:
        The majority value, or None.
    """
    if not votes:
        return None
    value, count = Counter(votes).most_common(1)[0]
    return value if 2 * count > len(votes) else None


def annotation_votes(annotations: Iterable[Annotation]) -> dict[str, list[Winner]]:
    """The votes per dimension, in :data:`DIMENSIONS` order, over the annotations that give one.

    Args:
        annotations: the annotations of one case.

    Returns:
        dimension -> list of winners (dimensions nobody labelled are absent).
    """
    votes: dict[str, list[Winner]] = {}
    for annotation in annotations:
        for dim, winner in annotation.labels.items():
            votes.setdefault(dim, []).append(winner)
    return {dim: votes[dim] for dim in DIMENSIONS if dim in votes}


def majority_labels(annotations: Iterable[Annotation]) -> tuple[dict[str, Winner], tuple[str, ...]]:
    """Labels by strict majority per dimension.

    Args:
        annotations: the annotations of one case.

    Returns:
        ``(labels, undecided)``: the majority labels in :data:`DIMENSIONS` order, and the
        dimensions that had votes but no strict majority.
    """
    labels: dict[str, Winner] = {}
    undecided: list[str] = []
    for dim, votes in annotation_votes(annotations).items():
        winner = strict_majority(votes)
        if winner is None:
            undecided.append(dim)
        else:
            labels[dim] = winner
    return labels, tuple(undecided)


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def parse_annotations(
    value: object,
    sink: ProblemCollector,
    row: int,
    parse_labels: LabelParser,
    case_id: str | None = None,
    field: str = "annotations",
) -> tuple[Annotation, ...]:
    """Read a row's ``annotations`` list, reporting every problem in it.

    Args:
        value: the list, a JSON string of one (parquet), or None.
        sink: where problems go.
        row: the 1-based row, for problems.
        parse_labels: reads each annotation's ``labels`` the way the row's ``labels`` are read.
        case_id: the case, for problems.
        field: the field name, for problems.

    Returns:
        The valid annotations in row order (empty when absent or when any problem was found).
    """
    if _missing(value):
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            sink.add(f"not a JSON list: {exc}", row, field, case_id)
            return ()
    if not isinstance(value, (list, tuple)):
        sink.add(f"must be a list of annotation objects, got {type(value).__name__}", row, field, case_id)
        return ()
    before = len(sink.problems)
    found: list[Annotation] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(item, Mapping):
            sink.add(f"must be an object, got {type(item).__name__}", row, where, case_id)
            continue
        unknown = sorted(str(key) for key in item if key not in ANNOTATION_FIELDS)
        if unknown:
            sink.add(
                f"unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(ANNOTATION_FIELDS))}",
                row,
                where,
                case_id,
            )
        annotator = item.get("annotator")
        if isinstance(annotator, str) and annotator in seen:
            sink.add(
                f"annotator {annotator!r} appears twice (first at {field}[{seen[annotator]}])",
                row,
                f"{where}.annotator",
                case_id,
            )
            continue
        annotation = parse_annotation(item, sink, row, parse_labels, case_id, where)
        if annotation is not None:
            seen[annotation.annotator] = index
            found.append(annotation)
    return tuple(found) if len(sink.problems) == before else ()


def parse_annotation(
    item: Mapping[str, Any],
    sink: ProblemCollector,
    row: int,
    parse_labels: LabelParser,
    case_id: str | None = None,
    where: str | None = None,
) -> Annotation | None:
    """Read the annotation fields of one object (an ``annotations`` item, or a label row's own fields).

    Unknown keys are the caller's to report.

    Args:
        item: the object.
        sink: where problems go.
        row: the 1-based row, for problems.
        parse_labels: reads ``labels`` the way the row's ``labels`` are read.
        case_id: the case, for problems.
        where: the object's place in the row (``annotations[2]``); None for fields at the top of the row.

    Returns:
        The annotation, or None when its annotator is missing (every other problem is reported and
        the field left out).
    """

    def at(key: str) -> str:
        return key if where is None else f"{where}.{key}"

    annotator = item.get("annotator")
    if not isinstance(annotator, str) or not annotator.strip():
        sink.add("'annotator' must be a non-empty string", row, at("annotator"), case_id)
        return None
    labels = parse_labels(item.get("labels"), at("labels"))
    order = item.get("order_shown")
    if not _missing(order) and order not in ORDERS_SHOWN:
        sink.add(f"must be 'original', 'swapped' or null, got {order!r}", row, at("order_shown"), case_id)
        order = None
    seconds = item.get("seconds")
    if _missing(seconds):
        seconds = None
    elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        sink.add(f"must be a number >= 0 or null, got {seconds!r}", row, at("seconds"), case_id)
        seconds = None
    comment = _note(item.get("comment"), sink, row, at("comment"), case_id)
    reason = _note(item.get("cannot_judge_reason"), sink, row, at("cannot_judge_reason"), case_id)
    cannot = item.get("cannot_judge")
    if _missing(cannot):
        cannot = False
    elif not isinstance(cannot, bool):
        sink.add(f"must be true, false or null, got {cannot!r}", row, at("cannot_judge"), case_id)
        cannot = False
    if reason and not cannot:
        sink.add("a reason is given but 'cannot_judge' is not true", row, at("cannot_judge_reason"), case_id)
    shown = cast("Literal['original', 'swapped'] | None", None if _missing(order) else order)
    return Annotation(
        annotator=annotator,
        labels=labels,
        order_shown=shown,
        seconds=None if seconds is None or isinstance(seconds, bool) else float(seconds),
        comment=comment or None,
        cannot_judge=bool(cannot),
        cannot_judge_reason=reason or None,
        harm=parse_harm(item.get("harm"), sink, row, at("harm"), case_id),
    )


def parse_harm(
    value: object, sink: ProblemCollector, row: int, where: str, case_id: str | None = None
) -> dict[int, str]:
    """An annotation's ``harm`` object: response (``"1"``/``"2"``, ``1``/``2``, ``"A"``/``"B"``) -> severity.

    Args:
        value: the field's value (null or absent: nothing flagged).
        sink: where problems go.
        row: the 1-based row, for problems.
        where: the field's place (``annotations[0].harm``).
        case_id: the case, for problems.

    Returns:
        Response in source order -> severity, for the entries that are valid (each bad one is reported).
    """
    if _missing(value):
        return {}
    if not isinstance(value, Mapping):
        sink.add(
            f'must be an object such as {{"2": "severe"}} or null, got {type(value).__name__}', row, where, case_id
        )
        return {}
    out: dict[int, str] = {}
    for key, severity in value.items():
        response = _HARM_KEYS.get(str(key).strip().upper())
        if response is None:
            sink.add(f"key {str(key)[:20]!r} must name an answer: '1' or '2' (or 'A' or 'B')", row, where, case_id)
            continue
        if _missing(severity):
            continue
        if severity not in HARM_SEVERITIES:
            shown = str(severity)[:40]
            sink.add(f"{key}: severity must be one of {', '.join(HARM_SEVERITIES)}, got {shown!r}", row, where, case_id)
            continue
        if response in out:
            sink.add(f"answer {response} is flagged twice", row, where, case_id)
            continue
        out[response] = str(severity)
    return {response: out[response] for response in sorted(out)}


_HARM_KEYS: dict[str, int] = {"1": 1, "2": 2, "A": 1, "B": 2}


def _note(value: object, sink: ProblemCollector, row: int, where: str, case_id: str | None) -> str | None:
    """A free-text field (comment, reason, note): a string or null, at most :data:`MAX_NOTE_CHARS`."""
    if _missing(value):
        return None
    if not isinstance(value, str):
        sink.add(f"must be text or null, got {type(value).__name__}", row, where, case_id)
        return None
    if len(value) > MAX_NOTE_CHARS:
        sink.add(f"is {len(value)} characters long; at most {MAX_NOTE_CHARS} are allowed", row, where, case_id)
        return None
    return value


def _timestamp(value: object, sink: ProblemCollector, row: int, where: str, case_id: str | None) -> str | None:
    """An ISO 8601 time (``2026-11-26T10:00:00Z``), kept as written, or null."""
    if _missing(value):
        return None
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            pass
        else:
            return value
    sink.add(f"must be an ISO 8601 time such as '2026-11-26T10:00:00Z', or null, got {value!r}", row, where, case_id)
    return None


def parse_adjudications(
    value: object,
    sink: ProblemCollector,
    row: int,
    case_id: str | None = None,
    field: str = "adjudications",
) -> tuple[Adjudication, ...]:
    """Read a row's ``adjudications`` list, reporting every problem in it.

    Args:
        value: the list, a JSON string of one (parquet), or None.
        sink: where problems go.
        row: the 1-based row, for problems.
        case_id: the case, for problems.
        field: the field name, for problems.

    Returns:
        The adjudications in :data:`DIMENSIONS` order (empty when absent or when any problem was found).
    """
    if _missing(value):
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            sink.add(f"not a JSON list: {exc}", row, field, case_id)
            return ()
    if not isinstance(value, (list, tuple)):
        sink.add(f"must be a list of adjudication objects, got {type(value).__name__}", row, field, case_id)
        return ()
    before = len(sink.problems)
    found: dict[str, Adjudication] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(item, Mapping):
            sink.add(f"must be an object, got {type(item).__name__}", row, where, case_id)
            continue
        unknown = sorted(str(key) for key in item if key not in ADJUDICATION_FIELDS)
        if unknown:
            sink.add(
                f"unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(ADJUDICATION_FIELDS))}",
                row,
                where,
                case_id,
            )
        raw_dim = item.get("dimension")
        dim = normalize_dimension(raw_dim) if isinstance(raw_dim, str) else None
        if dim is None:
            sink.add(
                f"unknown dimension {raw_dim!r}; expected one of: {', '.join(DIMENSIONS)}",
                row,
                f"{where}.dimension",
                case_id,
            )
            continue
        if dim in first:
            sink.add(
                f"dimension {dim!r} is adjudicated twice (first at {field}[{first[dim]}])",
                row,
                f"{where}.dimension",
                case_id,
            )
            continue
        first[dim] = index
        label = parse_winner(item.get("label"))
        if label is None:
            sink.add(
                f"must be 'A' or 'B' (or 1/2; A = response_1), got {item.get('label')!r}",
                row,
                f"{where}.label",
                case_id,
            )
        by = item.get("by")
        if not isinstance(by, str) or not by.strip():
            sink.add("'by' must name who decided (a non-empty string)", row, f"{where}.by", case_id)
            by = None
        note = _note(item.get("note"), sink, row, f"{where}.note", case_id)
        at = _timestamp(item.get("at"), sink, row, f"{where}.at", case_id)
        if label is not None and by is not None:
            found[dim] = Adjudication(dimension=dim, label=label, by=by, note=note or None, at=at)
    if len(sink.problems) > before:
        return ()
    return tuple(found[dim] for dim in DIMENSIONS if dim in found)


def parse_label_sources(
    value: object, sink: ProblemCollector, row: int, case_id: str | None = None, field: str = "label_sources"
) -> dict[str, str] | None:
    """Read a row's ``label_sources`` object (dimension -> one of :data:`~medrewardbench.cases.LABEL_SOURCES`).

    Args:
        value: the object, a JSON string of one (parquet), or None.
        sink: where problems go.
        row: the 1-based row, for problems.
        case_id: the case, for problems.
        field: the field name, for problems.

    Returns:
        The sources in :data:`DIMENSIONS` order, or None when absent or unreadable.
    """
    if _missing(value):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            sink.add(f"not a JSON object: {exc}", row, field, case_id)
            return None
    if not isinstance(value, Mapping):
        sink.add(f"must be an object mapping dimension to {'|'.join(LABEL_SOURCES)}", row, field, case_id)
        return None
    found: dict[str, str] = {}
    ok = True
    for key, source in value.items():
        dim = normalize_dimension(key) if isinstance(key, str) else None
        if dim is None:
            sink.add(
                f"unknown dimension {key!r}; expected one of: {', '.join(DIMENSIONS)}", row, f"{field}.{key}", case_id
            )
            ok = False
        elif source not in LABEL_SOURCES:
            sink.add(f"must be one of {', '.join(LABEL_SOURCES)}, got {source!r}", row, f"{field}.{key}", case_id)
            ok = False
        else:
            found[dim] = str(source)
    return {dim: found[dim] for dim in DIMENSIONS if dim in found} if ok else None


@dataclass(frozen=True)
class LabelResolution:
    """A row's labels and where each came from, as :func:`resolve_labels` decides them.

    Attributes:
        labels: dimension -> winner, in :data:`DIMENSIONS` order.
        sources: dimension -> ``majority``, ``adjudication`` or ``given``, for every label.
        superseded: adjudications of dimensions that have a strict majority after all (kept, not used).
    """

    labels: dict[str, Winner]
    sources: dict[str, str]
    superseded: tuple[Adjudication, ...] = field(default=())


def resolve_labels(
    labels: Mapping[str, Winner],
    annotations: Sequence[Annotation],
    sink: ProblemCollector,
    row: int,
    case_id: str | None = None,
    adjudications: Sequence[Adjudication] = (),
    sources: Mapping[str, str] | None = None,
    *,
    given: bool | None = None,
) -> LabelResolution:
    """The labels of a row given its own ``labels``, ``annotations`` and ``adjudications`` (module docstring).

    Args:
        labels: the row's parsed ``labels`` (empty when absent).
        annotations: the row's parsed annotations.
        sink: where a contradiction is reported.
        row: the 1-based row, for problems.
        case_id: the case, for problems.
        adjudications: the row's parsed adjudications.
        sources: the row's ``label_sources`` when it gives them (checked against the rules).
        given: whether the row states its ``labels`` (default: when ``labels`` is not empty).

    Returns:
        The labels to use, where each came from, and the superseded adjudications.
    """
    if not annotations and not adjudications and sources is None and given is not False:
        # a row with its labels alone (most rows of most files): every label is given as it stands
        plain = {dim: labels[dim] for dim in DIMENSIONS if dim in labels}
        return LabelResolution(plain, dict.fromkeys(plain, "given"))
    stated = bool(labels) if given is None else given
    majority, _ = majority_labels(annotations)
    decided = {a.dimension: a for a in adjudications}
    superseded = tuple(a for a in adjudications if a.dimension in majority)
    out: dict[str, Winner] = {}
    origin: dict[str, str] = {}
    if not stated:
        for dim in DIMENSIONS:
            if dim in majority:
                out[dim], origin[dim] = majority[dim], "majority"
            elif dim in decided:
                out[dim], origin[dim] = decided[dim].label, "adjudication"
    else:
        votes = annotation_votes(annotations)
        for dim, winner in labels.items():
            expected = majority.get(dim)
            if expected is not None:
                if expected != winner:
                    count = votes[dim].count(expected)
                    sink.add(
                        f"label {winner} contradicts the majority of this row's annotations "
                        f"({count} of {len(votes[dim])} annotators chose {expected})",
                        row,
                        f"labels.{dim}",
                        case_id,
                    )
                origin[dim] = "majority"
            elif dim in decided:
                if decided[dim].label != winner:
                    sink.add(
                        f"label {winner} contradicts the adjudication of {dim} ({decided[dim].label} by "
                        f"{decided[dim].by})",
                        row,
                        f"labels.{dim}",
                        case_id,
                    )
                origin[dim] = "adjudication"
            else:
                origin[dim] = "given"
            out[dim] = winner
    if sources is not None:
        for dim, source in sources.items():
            if dim not in out:
                sink.add(f"says {source!r} for a dimension without a label", row, f"label_sources.{dim}", case_id)
            elif origin[dim] != source:
                sink.add(
                    f"says the label came from {source!r}, but by the row's annotations and adjudications it "
                    f"comes from {origin[dim]!r}",
                    row,
                    f"label_sources.{dim}",
                    case_id,
                )
    ordered = {dim: out[dim] for dim in DIMENSIONS if dim in out}
    return LabelResolution(ordered, {dim: origin[dim] for dim in ordered}, superseded)


class _Discard:
    """A problem collector that keeps nothing (for rules that cannot find a problem)."""

    def __init__(self) -> None:
        self.problems: list[DataProblem] = []

    def add(self, message: str, row: int | None = None, field: str | None = None, case_id: str | None = None) -> None:
        """Drop the problem."""


def release_labels(annotations: Sequence[Annotation], adjudications: Sequence[Adjudication] = ()) -> LabelResolution:
    """The labels a release gives a case: the strict majority per dimension, else the adjudication.

    Args:
        annotations: the case's annotations.
        adjudications: its adjudications.

    Returns:
        The labels, where each came from, and the superseded adjudications (as :func:`resolve_labels`).
    """
    return resolve_labels({}, annotations, _Discard(), 0, None, adjudications, given=False)


def vote_tally(case: Case, dimension: str) -> tuple[int, int]:
    """How the annotators of a case voted on one dimension: (votes for response 1, votes for response 2).

    Args:
        case: a case with its annotations.
        dimension: a dimension name.

    Returns:
        The two counts (both 0 when nobody labelled the dimension).
    """
    votes = [a.labels[dimension] for a in case.annotations if dimension in a.labels]
    return votes.count(1), votes.count(2)


def undecided_warnings(case: Case, file: str, row: int | None) -> list[DataProblem]:
    """Warnings for the dimensions a case's annotations leave undecided, and for superseded adjudications.

    Args:
        case: a case read with its annotations and adjudications.
        file: the file, for the warning.
        row: the 1-based row, for the warning.

    Returns:
        One warning (kind :data:`UNDECIDED`) per unlabelled dimension whose votes have no strict
        majority and no adjudication, and one (kind :data:`SUPERSEDED`) per adjudication of a
        dimension that has a strict majority.
    """
    if not case.annotations:
        return []
    out: list[DataProblem] = []
    votes_per_dim = annotation_votes(case.annotations)
    for dim, votes in votes_per_dim.items():
        if dim in case.labels or strict_majority(votes) is not None:
            continue
        tally = ", ".join(f"{value}: {count}" for value, count in sorted(Counter(votes).items()))
        out.append(
            DataProblem(
                file,
                f"no strict majority among the annotations ({tally}) and no adjudication; the dimension stays "
                "unlabelled",
                row=row,
                field=f"labels.{dim}",
                case_id=case.case_id,
                kind=UNDECIDED,
            )
        )
    for adjudication in case.adjudications:
        majority = strict_majority(votes_per_dim.get(adjudication.dimension, []))
        if majority is not None:
            out.append(
                DataProblem(
                    file,
                    f"adjudicated {adjudication.label} by {adjudication.by}, but the annotations now have a strict "
                    f"majority ({majority}), which is the label; the adjudication is kept as written",
                    row=row,
                    field=f"adjudications.{adjudication.dimension}",
                    case_id=case.case_id,
                    kind=SUPERSEDED,
                )
            )
    return out


def annotations_to_records(annotations: Iterable[Annotation]) -> list[dict[str, Any]]:
    """Annotations as canonical ``annotations`` objects (labels as 1/2 in source order).

    Args:
        annotations: the annotations of one case.

    Returns:
        One object per annotation; ``order_shown``, ``seconds``, ``comment``, the "cannot judge"
        fields and ``harm`` are left out when unknown or empty.
    """
    out: list[dict[str, Any]] = []
    for annotation in annotations:
        record: dict[str, Any] = {
            "annotator": annotation.annotator,
            "labels": {dim: int(annotation.labels[dim]) for dim in DIMENSIONS if dim in annotation.labels},
        }
        if annotation.order_shown is not None:
            record["order_shown"] = annotation.order_shown
        if annotation.seconds is not None:
            record["seconds"] = annotation.seconds
        if annotation.comment:
            record["comment"] = annotation.comment
        if annotation.cannot_judge:
            record["cannot_judge"] = True
            if annotation.cannot_judge_reason:
                record["cannot_judge_reason"] = annotation.cannot_judge_reason
        if annotation.harm:
            record["harm"] = {str(response): annotation.harm[response] for response in sorted(annotation.harm)}
        out.append(record)
    return out


def adjudications_to_records(adjudications: Iterable[Adjudication]) -> list[dict[str, Any]]:
    """Adjudications as canonical ``adjudications`` objects (labels as 1/2 in source order).

    Args:
        adjudications: the adjudications of one case.

    Returns:
        One object per adjudication; ``note`` and ``at`` are left out when unknown.
    """
    out: list[dict[str, Any]] = []
    for adjudication in adjudications:
        record: dict[str, Any] = {
            "dimension": adjudication.dimension,
            "label": int(adjudication.label),
            "by": adjudication.by,
        }
        if adjudication.note:
            record["note"] = adjudication.note
        if adjudication.at:
            record["at"] = adjudication.at
        out.append(record)
    return out
