"""Export a project: the labelled set that ``medrewardbench eval`` reads, with its dataset card.

Formats:

* ``canonical`` (``.jsonl``, ``.json`` or ``.parquet``): one row per case to label, in the order
  of the input file, with the input's id, texts and metadata, the image embedded (a builtin
  image stays a builtin reference), ``annotations`` (each annotator's labels in source order,
  the order they were shown, the seconds they spent, their comment, and whether they could not
  judge the case and why), ``adjudications`` (each admin decision: dimension, label, who, note,
  when), ``labels`` (the strict majority per dimension, else the admin's adjudication) and
  ``label_sources`` (which of the two each label is). An adjudication of a dimension that has a
  strict majority after all (the votes changed after it) is kept in the file, does not change the
  label, and is reported.
* ``reference``: ``pair_gt_all/{organ}.jsonl`` + ``pair_gt_all/parquet/{organ}.parquet``, the
  published layout, with the same labels (see :mod:`medrewardbench.data.reference_writer`); the
  layout has no place for annotations, so use ``canonical`` to keep them.
* ``questions`` (screening projects): the questions file again, each with
  ``metadata.screening`` = the decision (strict majority of accept/reject, or the adjudication,
  else ``undecided``) and every annotator's vote, reasons and comment.

The two data formats write a **dataset card**, ``dataset.json``, next to the data (in the canonical
file's directory, or in the reference directory), whose ``labels`` object
(:func:`medrewardbench.data.release.labels_card`) says the labels are the expert majority of N
annotators and names this project, its guidelines version (the number of edits and a hash of the
text) and its quality control: gold accuracy and repeat consistency, overall and per annotator.
``build labels`` keeps that part of the card, so both documented paths end in the same release.

Quality-control items are not labels: **gold** pairs are left out (their labels came from
elsewhere; the card and the dashboard report each annotator's accuracy on them), and a **repeat**
does not add a second vote (the first showing is the annotator's label; the repeat only measures
position consistency). ``only_complete`` keeps the items that every assigned annotator has submitted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path
from typing import Any, Literal, cast

from sqlalchemy import func, select

from medrewardbench import __version__
from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.db import Adjudication, Assignment, AuditEntry, ImageBlob, Item, Submission, User
from medrewardbench.annotate.services.base import Identity, ProjectContext, require_admin
from medrewardbench.annotate.services.quality import compute_dashboard
from medrewardbench.cases import Adjudication as CaseAdjudication
from medrewardbench.cases import Annotation, Case, ImageRef
from medrewardbench.data.annotations import release_labels, strict_majority
from medrewardbench.data.provenance import CARD_FILENAME
from medrewardbench.data.release import ReleaseTally, labels_card, write_card
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
    card: Path | None = None
    """The dataset card written beside the data (None for ``questions``)."""
    tally: ReleaseTally = field(default_factory=ReleaseTally)


def _rows(
    project: ProjectContext, kind: str
) -> tuple[
    list[Item],
    dict[int, ImageBlob],
    dict[int, list[tuple[str, Assignment, Submission | None]]],
    dict[int, list[Adjudication]],
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
    decided: dict[int, list[Adjudication]] = defaultdict(list)
    for adj in adjudications:
        decided[adj.item_id].append(adj)
    return items, images, per_item, decided


def _image_ref(blob: ImageBlob | None) -> ImageRef:
    if blob is None:
        return ImageRef.empty()
    if blob.builtin:
        return ImageRef.builtin(blob.builtin)
    return ImageRef.from_bytes(blob.data, blob.name)


def _iso(moment: Any) -> str | None:
    if moment is None:
        return None
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    return str(aware.astimezone(timezone.utc).isoformat().replace("+00:00", "Z"))


def _annotation(name: str, assignment: Assignment, submission: Submission) -> Annotation:
    labels = {dim: cast(Winner, int(v)) for dim, v in (submission.choices or {}).items() if dim in DIMENSIONS}
    return Annotation(
        annotator=name,
        labels={dim: labels[dim] for dim in DIMENSIONS if dim in labels},
        order_shown=cast(Literal["original", "swapped"] | None, assignment.order_shown),
        seconds=round(float(submission.seconds), 3),
        comment=submission.comment or None,
        cannot_judge=bool(submission.cannot_judge),
        cannot_judge_reason=(submission.cannot_judge_reason or None) if submission.cannot_judge else None,
        harm={int(k): str(v) for k, v in sorted((submission.harm or {}).items()) if k in ("1", "2")},
    )


def _adjudications(rows: list[Adjudication]) -> tuple[CaseAdjudication, ...]:
    found = {
        row.dimension: CaseAdjudication(
            dimension=row.dimension,
            label=cast(Winner, int(row.value)),
            by=row.actor,
            note=row.note or None,
            at=_iso(row.at),
        )
        for row in rows
        if row.dimension in DIMENSIONS and row.value in ("1", "2")
    }
    return tuple(found[dim] for dim in DIMENSIONS if dim in found)


def _labelled_cases(project: ProjectContext, only_complete: bool = False) -> tuple[list[Case], ExportSummary]:
    """The project's pairs as canonical cases with annotations, adjudications and labels (callers check access).

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
        annotations = tuple(
            _annotation(name, assignment, submission) for name, assignment, submission in entries if submission
        )
        adjudications = _adjudications(decided.get(item.id, []))
        resolved = release_labels(annotations, adjudications)
        for adjudication in resolved.superseded:
            summary.warnings.append(
                f"{item.external_id}: the adjudication of {adjudication.dimension} ({adjudication.label}) was made "
                f"before the votes changed; their strict majority ({resolved.labels[adjudication.dimension]}) is "
                "the label, and the adjudication is kept in the export"
            )
        payload = dict(item.payload)
        case = Case(
            case_id=item.external_id,
            image=_image_ref(images.get(item.image_id) if item.image_id is not None else None),
            question=payload["question"],
            response_1=payload["response_1"],
            response_2=payload["response_2"],
            labels=resolved.labels,
            organ_system=payload.get("organ_system") or "unknown",
            department=payload.get("department"),
            modality=payload.get("modality"),
            source_dataset=payload.get("source_dataset"),
            question_type=payload.get("question_type"),
            body_part=payload.get("body_part"),
            metadata=dict(payload.get("metadata") or {}),
            annotations=annotations,
            adjudications=adjudications,
            label_sources=resolved.sources,
        )
        cases.append(case)
        summary.tally.add(case)
        summary.items += 1
        summary.labelled += int(bool(resolved.labels))
    summary.undecided = summary.tally.undecided
    return cases, summary


def guidelines_version(project: ProjectContext) -> dict[str, Any]:
    """Which version of the guidelines the annotators worked to.

    Args:
        project: the open project.

    Returns:
        ``{"version": N, "sha256": ...}``: 1 plus the number of times an admin edited them (from the
        audit log), and the SHA-256 of the current text.
    """
    text = project.guidelines_text()
    with project.db.read() as s:
        edits = s.scalar(select(func.count()).select_from(AuditEntry).where(AuditEntry.action == "guidelines.update"))
    return {"version": 1 + int(edits or 0), "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def quality_control(project: ProjectContext) -> dict[str, Any]:
    """The project's quality control for the card: gold accuracy and repeat consistency.

    Args:
        project: the open project.

    Returns:
        ``{"gold": {...}, "repeats": {...}}``, each with the counts, the share and the same per annotator.
    """
    board = compute_dashboard(project)
    people = [a for a in board.annotators if a.gold_compared or a.repeat_compared or a.done]
    gold_compared = sum(a.gold_compared for a in people)
    gold_correct = sum(a.gold_correct for a in people)
    repeat_compared = sum(a.repeat_compared for a in people)
    repeat_same = sum(a.repeat_same for a in people)
    return {
        "gold": {
            "items": board.gold_items,
            "compared": gold_compared,
            "correct": gold_correct,
            "accuracy": _share(gold_correct, gold_compared),
            "per_annotator": {
                a.name: {"compared": a.gold_compared, "accuracy": _share(a.gold_correct, a.gold_compared)}
                for a in people
            },
        },
        "repeats": {
            "compared": repeat_compared,
            "same": repeat_same,
            "consistency": _share(repeat_same, repeat_compared),
            "per_annotator": {
                a.name: {"compared": a.repeat_compared, "consistency": _share(a.repeat_same, a.repeat_compared)}
                for a in people
            },
        },
    }


def annotation_project_entry(project: ProjectContext, annotators: set[str]) -> dict[str, Any]:
    """This project's entry in the card's ``labels.annotation_projects``.

    Args:
        project: the open project.
        annotators: the annotators whose labels the export holds.

    Returns:
        The project's name, the tool, the annotators per case asked for, the guidelines version,
        the annotators and the quality control.
    """
    return {
        "project": project.settings.name,
        "tool": f"medrewardbench annotate {__version__}",
        "per_case": project.settings.per_case,
        "guidelines": guidelines_version(project),
        "annotators": sorted(annotators),
        "qc": quality_control(project),
    }


def release_card(project: ProjectContext, summary: ExportSummary, fmt: str, files: list[str]) -> dict[str, Any]:
    """The dataset card of an export (see the module docstring).

    Args:
        project: the open project.
        summary: what the export holds.
        fmt: ``canonical`` or ``reference``.
        files: the data files, relative to the card's directory.

    Returns:
        The card.
    """
    entry = annotation_project_entry(project, summary.tally.annotators)
    return {
        "name": project.settings.name,
        "created_by": f"medrewardbench annotate {__version__}",
        "format": fmt,
        "files": files,
        "cases": summary.items,
        "labelled_cases": summary.labelled,
        "labels": labels_card(summary.tally, annotation_projects=[entry]),
    }


def check_export_target(fmt: str, out: str | Path, *, force: bool = False) -> None:
    """Refuse, before any work, an output that cannot be written or that holds earlier files.

    Args:
        fmt: ``canonical``, ``reference`` or ``questions``.
        out: ``--out``.
        force: files already there (an earlier export, the ``dataset.json`` beside it, a
            ``pair_gt_all/`` written by medrewardbench) may be replaced.

    Raises:
        OutputDirError: a directory where a file belongs (or the reverse), a path below a file, a
            directory that does not accept new files.
        InvalidInput: an unknown format, a suffix the format cannot write, files in the way
            without ``force``, or a ``pair_gt_all/`` that medrewardbench did not write.
    """
    from medrewardbench.data.canonical import CANONICAL_SUFFIXES
    from medrewardbench.data.reference import GT_DIR
    from medrewardbench.utils.outdir import check_output_dir, check_output_file

    path = Path(out)
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "reference":
        check_output_dir(path)
        card = path / CARD_FILENAME
        in_the_way = [path / GT_DIR, card]
        if (path / GT_DIR).exists() and not _written_by_us(card):
            raise InvalidInput(
                f"--out {path}: {path / GT_DIR} exists and was not written by medrewardbench; choose another"
            )
    else:
        suffixes = CANONICAL_SUFFIXES if fmt == "canonical" else (".jsonl",)
        if path.suffix.lower() not in suffixes:
            raise InvalidInput(f"--out {path}: a {fmt} export is a {', '.join(suffixes)} file")
        check_output_file(path)
        card = path.parent / CARD_FILENAME
        in_the_way = [path, card] if fmt == "canonical" else [path]
    if card.is_dir():
        raise InvalidInput(f"--out {path}: {card} is a directory in the way of the dataset card; choose another --out")
    existing = [str(p) for p in in_the_way if p.exists()]
    if existing and not force:
        raise InvalidInput(
            f"--out {path}: {' and '.join(existing)} exist{'s' if len(existing) == 1 else ''} already; "
            f"--force replaces {'it' if len(existing) == 1 else 'them'}"
        )


def _written_by_us(card: Path) -> bool:
    try:
        found = json.loads(card.read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and str(found.get("created_by", "")).startswith("medrewardbench")


def _export(
    project: ProjectContext,
    fmt: str,
    out: str | Path,
    *,
    only_complete: bool = False,
    accepted_only: bool = False,
    force: bool = False,
) -> ExportSummary:
    """Write a project's export (and, for the data formats, its dataset card; callers check access).

    Args:
        project: the open project.
        fmt: ``canonical``, ``reference`` or ``questions`` (see the module docstring).
        out: a file for ``canonical`` (suffix .jsonl, .json or .parquet) and ``questions``; a
            directory for ``reference``.
        only_complete: keep only items every assigned annotator has submitted.
        accepted_only: ``questions`` only: keep the accepted questions.
        force: replace the files of an earlier export (see :func:`check_export_target`).

    Returns:
        What was written.

    Raises:
        InvalidInput: an unknown format, one that does not fit the project's mode, or files in the
            way without ``force``.
        OutputDirError: an output that cannot be written; checked before any work.
    """
    from medrewardbench.data.canonical import write_canonical
    from medrewardbench.data.reference import GT_DIR
    from medrewardbench.data.reference_writer import write_reference

    path = Path(out)
    check_export_target(fmt, path, force=force)
    if fmt == "canonical":
        cases, summary = _labelled_cases(project, only_complete)
        try:
            summary.paths = [write_canonical(cases, path)]
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
        summary.card = write_card(path.parent / CARD_FILENAME, release_card(project, summary, fmt, [path.name]))
        return summary
    if fmt == "reference":
        cases, summary = _labelled_cases(project, only_complete)
        shutil.rmtree(path / GT_DIR, ignore_errors=True)  # an earlier export of ours (checked above): no stale organ
        try:
            summary.paths = write_reference(cases, path)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
        files = sorted(p.relative_to(path).as_posix() for p in summary.paths)
        summary.card = write_card(path / CARD_FILENAME, release_card(project, summary, fmt, files))
        return summary
    if fmt == "questions":
        return _export_questions(project, path, only_complete, accepted_only)
    raise InvalidInput(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


class ExportService:
    """The labelled set, for admins only: it holds every annotator's labels and comments.

    Args:
        context: the open project.
    """

    def __init__(self, context: ProjectContext):
        self.context = context

    def labelled_cases(self, actor: Identity, only_complete: bool = False) -> tuple[list[Case], ExportSummary]:
        """The project's pairs as canonical cases with annotations, adjudications and labels.

        Args:
            actor: an admin or the command line.
            only_complete: keep only items every assigned annotator has submitted.

        Returns:
            The cases in input order, and a summary (no paths).

        Raises:
            Forbidden: not an admin.
            InvalidInput: a screening project.
        """
        require_admin(actor)
        return _labelled_cases(self.context, only_complete)

    def export(
        self,
        actor: Identity,
        fmt: str,
        out: str | Path,
        *,
        only_complete: bool = False,
        accepted_only: bool = False,
        force: bool = False,
    ) -> ExportSummary:
        """Write the project's export and its dataset card (the arguments of :func:`export_project`).

        Raises:
            Forbidden: not an admin.
            InvalidInput: an unknown format, one that does not fit the project's mode, or files in
                the way without ``force``.
            OutputDirError: an output that cannot be written; checked before any work.
        """
        require_admin(actor)
        return _export(self.context, fmt, out, only_complete=only_complete, accepted_only=accepted_only, force=force)


def labelled_cases(project: ProjectContext, only_complete: bool = False) -> tuple[list[Case], ExportSummary]:
    """The command line's :meth:`ExportService.labelled_cases` (whoever reads the project directory is its admin).

    Args:
        project: a pairs project.
        only_complete: keep only items every assigned annotator has submitted.

    Returns:
        The cases in input order, and a summary (no paths).

    Raises:
        InvalidInput: a screening project.
    """
    return ExportService(project).labelled_cases(Identity.command_line(), only_complete)


def export_project(
    project: ProjectContext,
    fmt: str,
    out: str | Path,
    *,
    only_complete: bool = False,
    accepted_only: bool = False,
    force: bool = False,
) -> ExportSummary:
    """The command line's :meth:`ExportService.export`: write a project's export and its dataset card.

    Args:
        project: the open project.
        fmt: ``canonical``, ``reference`` or ``questions`` (see the module docstring).
        out: a file for ``canonical`` (suffix .jsonl, .json or .parquet) and ``questions``; a
            directory for ``reference``.
        only_complete: keep only items every assigned annotator has submitted.
        accepted_only: ``questions`` only: keep the accepted questions.
        force: replace the files of an earlier export (see :func:`check_export_target`).

    Returns:
        What was written.

    Raises:
        InvalidInput: an unknown format, one that does not fit the project's mode, or files in the
            way without ``force``.
        OutputDirError: an output that cannot be written; checked before any work.
    """
    return ExportService(project).export(
        Identity.command_line(), fmt, out, only_complete=only_complete, accepted_only=accepted_only, force=force
    )


def _export_questions(project: ProjectContext, path: Path, only_complete: bool, accepted_only: bool) -> ExportSummary:
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
        adjudicated = next((a.value for a in decided.get(item.id, []) if a.dimension == "decision"), None)
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
