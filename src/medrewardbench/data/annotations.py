"""Per-annotator labels in the canonical format, and the majority vote that turns them into labels.

A canonical row may carry ``annotations``: a list of objects

``{"annotator": "dr_a", "labels": {"overall": 1, ...}, "order_shown": "swapped", "seconds": 41.5}``

``annotator`` is a non-empty string, unique within the row; ``labels`` uses the same values as
the row's ``labels`` (1/2 or "A"/"B", in source order: 1 = A = response_1, whatever order the
annotator saw); ``order_shown`` is ``"original"`` (response_1 shown first), ``"swapped"`` or
absent; ``seconds`` is a non-negative number or absent. In parquet the list is a JSON string.

The rules that tie ``annotations`` to ``labels``:

* When the row has no ``labels``, its labels are the **strict majority** per dimension of its
  annotations (more than half of the annotations that label that dimension). A dimension whose
  votes have no strict majority stays unlabelled and is reported as a warning.
* When the row has ``labels``, a label that contradicts the strict majority of the row's own
  annotations is a validation problem. A label on a dimension without a strict majority (an
  adjudicated tie) is accepted, and a dimension the row leaves out stays unlabelled.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar, cast

from medrewardbench.cases import Annotation, Case
from medrewardbench.dimensions import DIMENSIONS, Winner
from medrewardbench.errors import DataProblem


class ProblemCollector(Protocol):
    """Where problems go (the canonical loader's ``ProblemSink`` is one)."""

    problems: list[DataProblem]

    def add(self, message: str, row: int | None = None, field: str | None = None, case_id: str | None = None) -> None:
        """Record one problem."""


LabelParser = Callable[[object, str], dict[str, Winner]]
"""Reads one labels object given the value and its field name, reporting its own problems."""

ANNOTATION_FIELDS: frozenset[str] = frozenset(("annotator", "labels", "order_shown", "seconds"))
ORDERS_SHOWN: tuple[str, ...] = ("original", "swapped")

__all__ = [
    "ANNOTATION_FIELDS",
    "annotation_votes",
    "annotations_to_records",
    "majority_labels",
    "parse_annotations",
    "resolve_labels",
    "strict_majority",
    "undecided_warnings",
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
        if not isinstance(annotator, str) or not annotator.strip():
            sink.add("'annotator' must be a non-empty string", row, f"{where}.annotator", case_id)
            continue
        if annotator in seen:
            sink.add(
                f"annotator {annotator!r} appears twice (first at {field}[{seen[annotator]}])",
                row,
                f"{where}.annotator",
                case_id,
            )
            continue
        seen[annotator] = index
        labels = parse_labels(item.get("labels"), f"{where}.labels")
        order = item.get("order_shown")
        if not _missing(order) and order not in ORDERS_SHOWN:
            sink.add(f"'order_shown' must be 'original', 'swapped' or null, got {order!r}", row, where, case_id)
            order = None
        seconds = item.get("seconds")
        if _missing(seconds):
            seconds = None
        elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
            sink.add(f"'seconds' must be a number >= 0 or null, got {seconds!r}", row, f"{where}.seconds", case_id)
            seconds = None
        shown = cast("Literal['original', 'swapped'] | None", None if _missing(order) else order)
        found.append(
            Annotation(
                annotator=annotator,
                labels=labels,
                order_shown=shown,
                seconds=None if seconds is None else float(seconds),
            )
        )
    return tuple(found) if len(sink.problems) == before else ()


def resolve_labels(
    labels: Mapping[str, Winner],
    annotations: Sequence[Annotation],
    sink: ProblemCollector,
    row: int,
    case_id: str | None = None,
) -> dict[str, Winner]:
    """The labels of a row given its own ``labels`` and its ``annotations`` (see the module docstring).

    Args:
        labels: the row's parsed ``labels`` (empty when absent).
        annotations: the row's parsed annotations.
        sink: where a contradiction is reported.
        row: the 1-based row, for problems.
        case_id: the case, for problems.

    Returns:
        The labels to use, in :data:`DIMENSIONS` order.
    """
    if not annotations:
        return dict(labels)
    majority, _ = majority_labels(annotations)
    if not labels:
        return majority
    votes = annotation_votes(annotations)
    for dim, winner in labels.items():
        expected = majority.get(dim)
        if expected is not None and expected != winner:
            count = votes[dim].count(expected)
            sink.add(
                f"label {winner} contradicts the majority of this row's annotations "
                f"({count} of {len(votes[dim])} annotators chose {expected})",
                row,
                f"labels.{dim}",
                case_id,
            )
    return dict(labels)


def undecided_warnings(case: Case, file: str, row: int | None) -> list[DataProblem]:
    """Warnings for the dimensions a case's annotations leave without a strict majority or label.

    Args:
        case: a case read with its annotations.
        file: the file, for the warning.
        row: the 1-based row, for the warning.

    Returns:
        One warning per unlabelled dimension whose votes have no strict majority.
    """
    if not case.annotations:
        return []
    out: list[DataProblem] = []
    for dim, votes in annotation_votes(case.annotations).items():
        if dim in case.labels or strict_majority(votes) is not None:
            continue
        tally = ", ".join(f"{value}: {count}" for value, count in sorted(Counter(votes).items()))
        out.append(
            DataProblem(
                file,
                f"no strict majority among the annotations ({tally}); the dimension stays unlabelled",
                row=row,
                field=f"labels.{dim}",
                case_id=case.case_id,
            )
        )
    return out


def annotations_to_records(annotations: Iterable[Annotation]) -> list[dict[str, Any]]:
    """Annotations as canonical ``annotations`` objects (labels as 1/2 in source order).

    Args:
        annotations: the annotations of one case.

    Returns:
        One object per annotation; ``order_shown`` and ``seconds`` are left out when unknown.
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
        out.append(record)
    return out
