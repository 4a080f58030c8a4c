"""Export a project: the labelled set that ``medrewardbench eval`` reads.

Formats:

* ``canonical`` (``.jsonl``, ``.json`` or ``.parquet``): one row per case to label, in the order
  of the input file, with the input's id, texts and metadata, the image embedded (a builtin
  image stays a builtin reference), ``annotations`` (each annotator's labels in source order,
  the order they were shown, the seconds they spent), and ``labels``: the strict majority per
  dimension, or the admin's adjudication where the annotators left no strict majority. An
  adjudication that contradicts a strict majority (the votes changed after it) is not used and
  is reported. Comments and "cannot judge" reasons go to ``metadata.annotation_comments``. An
  annotator who could not judge a case appears with empty labels.
* ``reference``: ``pair_gt_all/{organ}.jsonl`` + ``pair_gt_all/parquet/{organ}.parquet``, the
  published layout, with the same labels (see :mod:`medrewardbench.data.reference_writer`).
* ``questions`` (screening projects): the questions file again, each with
  ``metadata.screening`` = the decision (strict majority of accept/reject, or the adjudication,
  else ``undecided``) and every annotator's vote, reasons and comment.

Quality-control items are not labels: **gold** pairs are left out (their labels came from
elsewhere; the dashboard reports each annotator's accuracy on them), and a **repeat** does not add
a second vote (the first showing is the annotator's label; the repeat only measures position
consistency). ``only_complete`` keeps the items that every assigned annotator has submitted.
"""

from __future__ import annotations

import base64
import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from sqlalchemy import select

from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.db import Adjudication, Assignment, ImageBlob, Item, Submission, User
from medrewardbench.annotate.service import Project
from medrewardbench.cases import Annotation, Case, ImageRef
from medrewardbench.data.annotations import majority_labels, strict_majority
from medrewardbench.dimensions import DIMENSIONS, Winner

FORMATS: tuple[str, ...] = ("canonical", "reference", "questions")


@dataclass
class ExportSummary:
    """What an export wrote."""

    paths: list[Path]
    items: int
    labelled: int
    """Items with at least one label."""
    undecided: int
    """(item, dimension) pairs with votes but neither a strict majority nor an adjudication."""
    warnings: list[str] = field(default_factory=list)


def _rows(
    project: Project, kind: str
) -> tuple[
    list[Item],
    dict[int, ImageBlob],
    dict[int, list[tuple[str, Assignment, Submission | None]]],
    dict[int, dict[str, str]],
]:
    with project.db.read() as s:
        items = list(s.scalars(select(Item).where(Item.role == "primary", Item.kind == kind).order_by(Item.id)).all())
        image_ids = {item.image_id for item in items if item.image_id is not None}
        images = (
            {blob.id: blob for blob in s.scalars(select(ImageBlob).where(ImageBlob.id.in_(image_ids))).all()}
            if image_ids
            else {}
        )
        found = s.execute(
            select(Assignment, Submission, User.name)
            .outerjoin(Submission, Submission.assignment_id == Assignment.id)
            .join(User, User.id == Assignment.user_id)
            .where(Assignment.purpose == "primary")
            .order_by(User.name)
        ).all()
        adjudications = s.scalars(select(Adjudication)).all()
        s.expunge_all()
    per_item: dict[int, list[tuple[str, Assignment, Submission | None]]] = defaultdict(list)
    for assignment, submission, name in found:
        per_item[assignment.item_id].append((name, assignment, submission))
    decided: dict[int, dict[str, str]] = defaultdict(dict)
    for adj in adjudications:
        decided[adj.item_id][adj.dimension] = adj.value
    return items, images, per_item, decided


def _image_ref(blob: ImageBlob | None) -> ImageRef:
    if blob is None:
        return ImageRef.empty()
    if blob.builtin:
        return ImageRef.builtin(blob.builtin)
    return ImageRef.from_bytes(blob.data, blob.name)


def labelled_cases(project: Project, only_complete: bool = False) -> tuple[list[Case], ExportSummary]:
    """The project's pairs as canonical cases with annotations and labels.

    Args:
        project: a pairs project.
        only_complete: keep only items every assigned annotator has submitted.

    Returns:
        The cases in input order, and a summary (no paths).

    Raises:
        InvalidInput: a screening project.
    """
    if not project.is_pairs:
        raise InvalidInput("this project screens questions; export it with --format questions")
    items, images, per_item, decided = _rows(project, "pair")
    summary = ExportSummary(paths=[], items=0, labelled=0, undecided=0)
    cases: list[Case] = []
    for item in items:
        entries = per_item.get(item.id, [])
        if only_complete and (not entries or any(sub is None for _, _, sub in entries)):
            continue
        annotations: list[Annotation] = []
        comments: list[dict[str, str]] = []
        for name, assignment, submission in entries:
            if submission is None:
                continue
            labels = {dim: cast(Winner, int(v)) for dim, v in (submission.choices or {}).items() if dim in DIMENSIONS}
            annotations.append(
                Annotation(
                    annotator=name,
                    labels={dim: labels[dim] for dim in DIMENSIONS if dim in labels},
                    order_shown=cast(Literal["original", "swapped"] | None, assignment.order_shown),
                    seconds=round(float(submission.seconds), 3),
                )
            )
            if submission.comment or submission.cannot_judge_reason:
                note = {"annotator": name}
                if submission.comment:
                    note["comment"] = submission.comment
                if submission.cannot_judge:
                    note["cannot_judge_reason"] = submission.cannot_judge_reason
                comments.append(note)
        labels, undecided = majority_labels(annotations)
        for dim, value in decided.get(item.id, {}).items():
            if dim not in DIMENSIONS or value not in ("1", "2"):
                continue
            if dim in labels and labels[dim] != int(value):
                summary.warnings.append(
                    f"{item.external_id}: the adjudication of {dim} ({value}) contradicts the strict majority "
                    f"({labels[dim]}) and is not used"
                )
                continue
            labels[dim] = cast(Winner, int(value))
        summary.undecided += sum(1 for dim in undecided if dim not in labels)
        payload = dict(item.payload)
        metadata = dict(payload.get("metadata") or {})
        if comments:
            metadata["annotation_comments"] = comments
        cases.append(
            Case(
                case_id=item.external_id,
                image=_image_ref(images.get(item.image_id) if item.image_id is not None else None),
                question=payload["question"],
                response_1=payload["response_1"],
                response_2=payload["response_2"],
                labels={dim: labels[dim] for dim in DIMENSIONS if dim in labels},
                organ_system=payload.get("organ_system") or "unknown",
                department=payload.get("department"),
                modality=payload.get("modality"),
                source_dataset=payload.get("source_dataset"),
                question_type=payload.get("question_type"),
                body_part=payload.get("body_part"),
                metadata=metadata,
                annotations=tuple(annotations),
            )
        )
        summary.items += 1
        summary.labelled += int(bool(labels))
    return cases, summary


def export_project(
    project: Project, fmt: str, out: str | Path, *, only_complete: bool = False, accepted_only: bool = False
) -> ExportSummary:
    """Write a project's export.

    Args:
        project: the open project.
        fmt: ``canonical``, ``reference`` or ``questions`` (see the module docstring).
        out: a file for ``canonical`` (suffix .jsonl, .json or .parquet) and ``questions``; a
            directory for ``reference``.
        only_complete: keep only items every assigned annotator has submitted.
        accepted_only: ``questions`` only: keep the accepted questions.

    Returns:
        What was written.

    Raises:
        InvalidInput: an unknown format, or one that does not fit the project's mode.
    """
    from medrewardbench.data.canonical import write_canonical
    from medrewardbench.data.reference_writer import write_reference

    path = Path(out)
    if fmt == "canonical":
        cases, summary = labelled_cases(project, only_complete)
        try:
            summary.paths = [write_canonical(cases, path)]
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
        return summary
    if fmt == "reference":
        cases, summary = labelled_cases(project, only_complete)
        try:
            summary.paths = write_reference(cases, path)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
        return summary
    if fmt == "questions":
        return _export_questions(project, path, only_complete, accepted_only)
    raise InvalidInput(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


def _export_questions(project: Project, path: Path, only_complete: bool, accepted_only: bool) -> ExportSummary:
    if project.is_pairs:
        raise InvalidInput("this project labels pairs; export it with --format canonical or reference")
    items, images, per_item, decided = _rows(project, "question")
    summary = ExportSummary(paths=[], items=0, labelled=0, undecided=0)
    lines: list[str] = []
    for item in items:
        entries = per_item.get(item.id, [])
        if only_complete and (not entries or any(sub is None for _, _, sub in entries)):
            continue
        votes = []
        for name, _assignment, submission in entries:
            if submission is None or submission.decision is None:
                continue
            vote: dict[str, Any] = {"annotator": name, "decision": submission.decision}
            if submission.reasons:
                vote["reasons"] = list(submission.reasons)
            if submission.comment:
                vote["comment"] = submission.comment
            vote["seconds"] = round(float(submission.seconds), 3)
            votes.append(vote)
        majority = strict_majority([v["decision"] for v in votes])
        adjudicated = decided.get(item.id, {}).get("decision")
        decision = majority or adjudicated or "undecided"
        if decision == "undecided" and votes:
            summary.undecided += 1
        if accepted_only and decision != "accept":
            continue
        payload = dict(item.payload)
        metadata = dict(payload.get("metadata") or {})
        metadata["screening"] = {
            "decision": decision,
            "adjudicated": majority is None and adjudicated is not None,
            "votes": votes,
        }
        blob = images.get(item.image_id) if item.image_id is not None else None
        record: dict[str, Any] = {"id": item.external_id, "image": _image_value(blob), "question": payload["question"]}
        for key in ("reference_answer", "answer_type", "organ_system", "department", "modality", "source_dataset"):
            if payload.get(key) is not None:
                record[key] = payload[key]
        record["metadata"] = metadata
        lines.append(json.dumps(record, ensure_ascii=False))
        summary.items += 1
        summary.labelled += int(bool(votes))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    summary.paths = [path]
    return summary


def _image_value(blob: ImageBlob | None) -> Any:
    if blob is None:
        return None
    if blob.builtin:
        return {"builtin": blob.builtin}
    return {"bytes": base64.b64encode(blob.data).decode("ascii"), "path": blob.name or None}
