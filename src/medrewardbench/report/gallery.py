"""The cases judges got wrong: assembled from the stores and the data source, and shown in the HTML report.

:func:`build_case_gallery` picks the cases (at most ``per_judge`` wrongly judged cases of each
judge, the ones missed by most judges first), reads their judgments and texts through
:func:`~medrewardbench.metrics.loading.load_judged_cases` and assembles a :class:`CaseGallery`:
each case with its labels, image and every judge's picks in both orders.
:func:`gallery_context` turns it into the fields of the HTML template.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.evaluation.store import StoredJudgment
from medrewardbench.images import dicom_display, is_dicom, load_image
from medrewardbench.metrics.analysis import LoadedRun, case_difficulty_order, judge_labels, select_wrong_cases
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.loading import load_judged_cases

IMAGE_MAX_SIDE = 1536
"""Longest side of an embedded image: shown as a thumbnail, opened at this size (images are never enlarged)."""
RAW_OUTPUT_LIMIT = 6000
"""Characters of a judge's raw output shown per request; the rest is cut with a note."""
RATIONALE_LIMIT = 400
"""Characters of a judge's stated reason shown beside its verdict."""


@dataclass(frozen=True)
class OrderOutcome:
    """What a judge answered for a case in one presentation order (verdicts in source order)."""

    order: str
    verdicts: Mapping[str, int | None]
    """dimension -> 1 or 2, None where the judge gave no verdict."""
    raw_output: str | None
    failure: str | None
    rationale: str | None = None
    """the judge's own reason for its verdict, when its answer gave one"""


@dataclass(frozen=True)
class JudgePicks:
    """One judge's picks on a case, in every order it was judged in."""

    judge: str
    outcomes: tuple[OrderOutcome, ...]
    wrong: bool = True
    """whether the judge missed the labelled winner (on the gallery's dimension) in at least one order"""


@dataclass(frozen=True)
class ImageView:
    """A case's image as the report embeds it: one JPEG, shown small, opened full size."""

    uri: str
    width: int
    height: int
    caption: str
    """what the image is: modality, DICOM window, size in pixels"""


@dataclass(frozen=True)
class DoctorsView:
    """What the annotators and adjudicators said about a case, as its card shows it."""

    votes: Mapping[str, tuple[int, int]]
    """dimension -> (votes for response 1, votes for response 2), for the dimensions anyone labelled."""
    sources: Mapping[str, str]
    """dimension -> where its label came from: ``majority``, ``adjudication`` or ``given``."""
    undecided: tuple[str, ...]
    """dimensions with votes but neither a strict majority nor an adjudication (unlabelled)."""
    notes: tuple[tuple[str, str, str], ...] = ()
    """(who, what, text): ``comment``, ``cannot judge`` (the reason) or ``adjudicated DIM: response N`` (the note)."""

    @classmethod
    def of(cls, case: Case) -> DoctorsView | None:
        """The view of a case's annotations and adjudications, or None when it has neither.

        Args:
            case: the case as loaded from its data source.

        Returns:
            The view.
        """
        if not case.annotations and not case.adjudications:
            return None
        votes: dict[str, tuple[int, int]] = {}
        for dim in DIMENSIONS:
            picks = [a.labels[dim] for a in case.annotations if dim in a.labels]
            if picks:
                votes[dim] = (picks.count(1), picks.count(2))
        undecided = tuple(
            dim for dim, (one, two) in votes.items() if dim not in case.labels and 2 * max(one, two) <= one + two
        )
        notes: list[tuple[str, str, str]] = []
        for annotation in case.annotations:
            if annotation.cannot_judge:
                notes.append(
                    (annotation.annotator, "cannot judge", annotation.cannot_judge_reason or "(no reason given)")
                )
            if annotation.comment:
                notes.append((annotation.annotator, "comment", annotation.comment))
        for adjudication in case.adjudications:
            what = f"adjudicated {adjudication.dimension}: response {adjudication.label}"
            notes.append((adjudication.by, what, adjudication.note or ""))
        sources = {dim: case.label_source(dim) or "given" for dim in case.labels}
        return cls(votes, sources, undecided, tuple(notes))


@dataclass(frozen=True)
class CaseView:
    """A case as the report shows it; texts and image are None when the source is unavailable."""

    case_id: str
    organ_system: str
    labels: Mapping[str, int]
    question: str | None = None
    response_1: str | None = None
    response_2: str | None = None
    image: ImageView | None = None
    notes: tuple[str, ...] = ()
    picks: tuple[JudgePicks, ...] = ()
    """every judge's picks, the ones that missed the case marked ``wrong``"""
    doctors: DoctorsView | None = None
    """how the annotators voted, their notes and the adjudications; None when the data has none"""


@dataclass(frozen=True)
class CaseGallery:
    """The cases judges got wrong, each case once, with an index per judge."""

    cases: tuple[CaseView, ...]
    by_judge: Mapping[str, Sequence[str]]
    """judge label -> the case ids it got wrong that are shown (in display order)."""
    dimension: str = "overall"
    per_judge: int = 50
    notes: tuple[str, ...] = field(default=())


def case_image(image: ImageRef, *, modality: str | None = None, max_side: int = IMAGE_MAX_SIDE) -> ImageView:
    """Embed a case's image: a JPEG ``data:`` URI at up to ``max_side`` pixels, and what it is.

    DICOM is rendered as the loaders render it (modality LUT, then the file's VOI window); the
    caption names the DICOM modality and that window, in Hounsfield units for CT.

    Args:
        image: the image reference.
        modality: the case's modality (metadata), for images that do not carry one.
        max_side: the longest side in pixels after shrinking.

    Returns:
        The embedded image with its caption.

    Raises:
        ImageError: the image cannot be decoded.
    """
    picture = load_image(image)
    width, height = picture.size
    facts = []
    if is_dicom(image):
        display = dicom_display(image)
        facts.append(f"DICOM {display.modality or 'image'}")
        if display.monochrome:
            units = f" {display.units}" if display.units else ""
            facts.append(f"window centre {display.center:g}, width {display.width:g}{units}")
    elif modality:
        facts.append(modality)
    facts.append(f"{width} × {height} px")
    picture.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    picture.convert("RGB").save(buffer, format="JPEG", quality=85, optimize=True)
    uri = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    return ImageView(uri, picture.size[0], picture.size[1], " · ".join(facts))


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def _clip(text: str | None, limit: int = RAW_OUTPUT_LIMIT) -> tuple[str | None, int]:
    if text is None or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def _words(text: str | None) -> int | None:
    return None if text is None else len(text.split())


def _rationale(stored: StoredJudgment | None, quoted: Sequence[str]) -> str | None:
    """The judge's own reason for its verdict, when its answer gave one (the templates ask for one)."""
    if stored is None:
        return None
    reason = stored.extra.get("reason") if isinstance(stored.extra, Mapping) else None
    if isinstance(reason, str) and reason.strip():
        return reason.strip()
    if not stored.raw_output:
        return None
    from medrewardbench.parsing import parse_verdicts

    parsed = parse_verdicts(stored.raw_output, quoted=quoted)
    return parsed.reason.strip() if parsed.reason and parsed.reason.strip() else None


def gallery_from_parts(
    runs: Sequence[RunData],
    judgments: Mapping[str, Mapping[tuple[str, str], StoredJudgment]],
    cases: Mapping[str, Case] | None,
    *,
    case_hashes: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    per_judge: int = 50,
    dimension: str = "overall",
) -> CaseGallery:
    """Assemble the gallery of cases judges got wrong, with every judge's picks on each of them.

    Args:
        runs: runs on one data set (their labels decide right and wrong).
        judgments: run id -> (case id, order) -> stored judgment (for raw outputs, failures and
            the judges' reasons).
        cases: case id -> the case as loaded from the data source, or None when the source could
            not be loaded (texts and images are then left out, and ``notes`` should say why).
        case_hashes: case id -> content hash recorded at judging time; a case whose loaded
            content hashes differently gets a note.
        notes: notes about the whole section.
        per_judge: at most this many wrongly judged cases per judge select a case for the gallery.
        dimension: the dimension that decides right and wrong.

    Returns:
        The gallery: cases in the order "missed by most judges first", each with every judge's
        picks in both orders (``JudgePicks.wrong`` marks the judges that missed it).
    """
    labels = judge_labels(runs)
    selection = select_wrong_cases(runs, per_judge=per_judge, dimension=dimension)
    if not runs:
        return CaseGallery((), {}, dimension, per_judge, tuple(notes))
    first = runs[0]
    chosen = {i for indices in selection.values() for i in indices}
    order = [i for i in case_difficulty_order(runs, dimension) if i in chosen]
    by_judge = {
        label: [first.case_ids[i] for i in selection[run.run_id]] for label, run in zip(labels, runs, strict=True)
    }
    wrong_sets = {run.run_id: set(selection[run.run_id]) for run in runs}
    organ = first.groups.get("organ_system", ("unknown",) * first.n_cases)
    views = []
    for i in order:
        case_id = first.case_ids[i]
        case = cases.get(case_id) if cases is not None else None
        quoted = [case.question, case.response_1, case.response_2] if case is not None else []
        case_labels = {d: int(first.labels[i, j]) for j, d in enumerate(DIMENSIONS) if first.labels[i, j] > 0}
        picks = []
        for label, run in zip(labels, runs, strict=True):
            outcomes = []
            for order_ in run.orders:
                stored = judgments.get(run.run_id, {}).get((case_id, order_.value))
                verdict_row = run.verdicts[i, 0 if order_.value == "original" else 1]
                verdicts = {
                    d: (int(v) if v > 0 else None) for d, v in zip(DIMENSIONS, verdict_row.tolist(), strict=True)
                }
                outcomes.append(
                    OrderOutcome(
                        order=order_.value,
                        verdicts=verdicts,
                        raw_output=None if stored is None else stored.raw_output,
                        failure=None if stored is None else stored.failure,
                        rationale=_rationale(stored, quoted),
                    )
                )
            picks.append(JudgePicks(label, tuple(outcomes), wrong=i in wrong_sets[run.run_id]))
        views.append(_case_view(case_id, organ[i], case_labels, cases, case_hashes, tuple(picks)))
    return CaseGallery(tuple(views), by_judge, dimension, per_judge, tuple(notes))


def _case_view(
    case_id: str,
    organ: str,
    labels: dict[str, int],
    cases: Mapping[str, Case] | None,
    case_hashes: Mapping[str, str] | None,
    picks: tuple[JudgePicks, ...],
) -> CaseView:
    if cases is None:
        return CaseView(case_id, organ, labels, picks=picks)
    case = cases.get(case_id)
    if case is None:
        return CaseView(case_id, organ, labels, notes=("This case is no longer in the data source.",), picks=picks)
    notes: list[str] = []
    image = None
    if case.image.kind == "none":
        notes.append("This case has no image.")
    else:
        try:
            image = case_image(case.image, modality=case.modality)
        except (MedRewardBenchError, OSError, ValueError) as exc:
            notes.append(f"The image could not be loaded: {exc}")
    if case_hashes is not None and case_id in case_hashes:
        try:
            changed = case.content_hash() != case_hashes[case_id]
        except (MedRewardBenchError, OSError):
            changed = False
        if changed:
            notes.append(
                "Warning: this case has changed in the data source since it was judged; "
                "the text and image shown are the current ones."
            )
    return CaseView(
        case_id,
        organ,
        labels,
        case.question,
        case.response_1,
        case.response_2,
        image,
        tuple(notes),
        picks,
        DoctorsView.of(case),
    )


def build_case_gallery(bundles: Sequence[LoadedRun], *, per_judge: int = 50, dimension: str = "overall") -> CaseGallery:
    """The cases judges got wrong, with raw outputs, texts and images.

    Raw outputs come from the stores; texts and images are re-loaded from the runs' data source
    (``RunRecord.dataset_source``).

    If the source cannot be loaded (moved, in-memory, offline Hub), the cases are shown without
    question, answers and image, and the section says why.

    Args:
        bundles: loaded runs on one data set (a pooled run reads each of its parts' stores).
        per_judge: at most this many wrongly judged cases per judge select a case.
        dimension: the dimension that decides right and wrong.

    Returns:
        The gallery.
    """
    runs = [b.data for b in bundles]
    selection = select_wrong_cases(runs, per_judge=per_judge, dimension=dimension)
    wanted = {runs[0].case_ids[i] for indices in selection.values() for i in indices} if runs else set()
    loaded = load_judged_cases(bundles, wanted)
    return gallery_from_parts(
        runs,
        loaded.judgments,
        loaded.cases,
        case_hashes=loaded.case_hashes,
        notes=loaded.notes,
        per_judge=per_judge,
        dimension=dimension,
    )


def _verdict_cell(case_label: int | None, outcomes: Sequence[OrderOutcome], dim: str) -> dict[str, Any]:
    """One dimension of one judge: its pick per order, each marked right or wrong."""
    parts = []
    wrong = False
    for outcome in outcomes:
        verdict = outcome.verdicts.get(dim)
        if verdict is None:
            parts.append({"text": "—", "cls": "fail", "title": f"{outcome.order}: no verdict"})
            wrong = True
        elif case_label is None:
            parts.append({"text": str(verdict), "cls": "nolabel", "title": f"{outcome.order}: response {verdict}"})
        elif verdict == case_label:
            parts.append({"text": f"{verdict}✓", "cls": "ok", "title": f"{outcome.order}: response {verdict}, right"})
        else:
            parts.append({"text": f"{verdict}✗", "cls": "bad", "title": f"{outcome.order}: response {verdict}, wrong"})
            wrong = True
    return {"dim": dim, "parts": parts, "wrong": wrong}


def _doctors_cell(doctors: DoctorsView, dim: str, label: int | None) -> dict[str, Any]:
    """How the annotators voted on one dimension: ``2–1`` (for the labelled winner first), and what decided it."""
    if dim not in doctors.votes:
        return {"text": "–", "cls": "none", "title": "nobody labelled this dimension"}
    one, two = doctors.votes[dim]
    source = doctors.sources.get(dim)
    if label is None:
        return {
            "text": f"{one}–{two} undecided",
            "cls": "undecided",
            "title": f"{one} for response 1, {two} for response 2: no strict majority and no adjudication; unlabelled",
        }
    mine, other = (one, two) if label == 1 else (two, one)
    if source == "adjudication":
        return {
            "text": f"{mine}–{other} adjudicated",
            "cls": "adjudicated",
            "title": f"{one} for response 1, {two} for response 2; an adjudicator chose response {label}",
        }
    return {
        "text": f"{mine}–{other}",
        "cls": "majority" if source == "majority" else "given",
        "title": f"{one} for response 1, {two} for response 2",
    }


def _anchor(case_id: str) -> str:
    return "case-" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in case_id)


def gallery_context(gallery: CaseGallery, labels: Sequence[str]) -> dict[str, Any]:
    """The gallery as the HTML template's fields: each case with its texts, image and every judge's picks.

    Args:
        gallery: the cases judges got wrong.
        labels: the judges in leaderboard order (the picks are listed in it).

    Returns:
        The template's ``gallery`` fields.
    """
    rank = {label: i for i, label in enumerate(labels)}
    cases = []
    for case in gallery.cases:
        rows = []
        raws = []
        for picks in sorted(case.picks, key=lambda m: rank.get(m.judge, len(rank))):
            reasons = [
                {"order": o.order, "text": _clip(o.rationale, RATIONALE_LIMIT)[0]}
                for o in picks.outcomes
                if o.rationale
            ]
            rows.append(
                {
                    "judge": picks.judge,
                    "wrong": picks.wrong,
                    "cells": [_verdict_cell(case.labels.get(d), picks.outcomes, d) for d in DIMENSIONS],
                    "reasons": reasons,
                }
            )
            if not picks.wrong:
                continue  # raw outputs of the judges that missed the case; the others' picks are in the table
            for outcome in picks.outcomes:
                if outcome.raw_output is None and outcome.failure is None:
                    continue  # rule-based judges produce no text
                raw, cut = _clip(outcome.raw_output)
                raws.append(
                    {"judge": picks.judge, "order": outcome.order, "raw": raw, "cut": cut, "failure": outcome.failure}
                )
        missed_by = [p.judge for p in case.picks if p.wrong]
        doctors = None
        if case.doctors is not None:
            doctors = {
                "cells": [_doctors_cell(case.doctors, d, case.labels.get(d)) for d in DIMENSIONS],
                "notes": [{"who": who, "what": what, "text": text} for who, what, text in case.doctors.notes],
                "undecided": list(case.doctors.undecided),
            }
        cases.append(
            {
                "id": case.case_id,
                "anchor": _anchor(case.case_id),
                "organ": case.organ_system,
                "missed_by": missed_by,
                "labels": [case.labels.get(d) for d in DIMENSIONS],
                "question": case.question,
                "response_1": case.response_1,
                "response_2": case.response_2,
                "words_1": _words(case.response_1),
                "words_2": _words(case.response_2),
                "image": case.image,
                "notes": case.notes,
                "rows": rows,
                "has_reasons": any(row["reasons"] for row in rows),
                "raws": raws,
                "n_raw_judges": len({r["judge"] for r in raws}),
                "doctors": doctors,
                "sources": [case.doctors.sources.get(d) if case.doctors else None for d in DIMENSIONS],
            }
        )
    anchors = {c["id"]: c["anchor"] for c in cases}
    index = [
        {
            "label": label,
            "cases": [{"id": cid, "anchor": anchors[cid]} for cid in gallery.by_judge.get(label, []) if cid in anchors],
        }
        for label in labels
    ]
    return {
        "cases": cases,
        "index": index,
        "organs": sorted({c["organ"] for c in cases}),
        "dimension": gallery.dimension,
        "per_judge": gallery.per_judge,
        "notes": gallery.notes,
    }


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------
