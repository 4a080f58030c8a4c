"""Validation of a data source: every problem at once, each naming its file, row and field."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from medrewardbench.cases import ImageRef
from medrewardbench.data.benchmark import CaseLocation, nothing_to_measure
from medrewardbench.data.provenance import LabelProvenance
from medrewardbench.data.sources import collect_source
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError, DataProblem, ImageError
from medrewardbench.images import is_dicom, load_image

logger = logging.getLogger(__name__)


def check_image(image: ImageRef, location: CaseLocation, case_id: str | None = None) -> DataProblem | None:
    """Decode an image and report why it cannot be read.

    Args:
        image: the image reference.
        location: where the row that names it is.
        case_id: the case, if known.

    Returns:
        None when the image decodes (or there is none), else the problem with the reason.
    """
    if image.kind == "none":
        return None
    try:
        load_image(image)
    except ImageError as exc:
        reason = str(exc)
    except ImportError:
        raise
    except Exception as exc:  # a decoder may fail in any way: report it, never crash
        reason = f"{type(exc).__name__}: {exc}"
    else:
        return None
    return DataProblem(
        location.file,
        f"unreadable image ({image.describe()}): {reason}",
        row=location.row,
        field="image",
        case_id=case_id,
    )


@dataclass(frozen=True)
class SourceSummary:
    """What a source holds, for the summary a clean ``validate`` prints.

    Attributes:
        name: the data set's name.
        cases: cases read.
        organ_systems: organ system -> cases.
        labelled: dimension -> cases with a label on it.
        images: cases with an image.
        decoded: of those, images that decoded.
        dicom: of those, DICOM images.
        labels: where the labels come from.
    """

    name: str
    cases: int
    organ_systems: Mapping[str, int]
    labelled: Mapping[str, int]
    images: int
    decoded: int
    dicom: int
    labels: LabelProvenance


@dataclass(frozen=True)
class ValidationReport:
    """Every problem of a source (errors, then warnings), and a summary of what it holds."""

    errors: list[DataProblem]
    """What makes rows or the source unusable: ``validate`` exits 1 when there is any."""
    warnings: list[DataProblem]
    """What is usable but worth knowing: cases without labels, dimensions labelled null, dimensions
    the annotators left undecided, superseded adjudications, labels without a case."""
    summary: SourceSummary | None
    """None when the source could not be opened at all"""

    @property
    def problems(self) -> list[DataProblem]:
        """Errors and warnings together, sorted by file and row."""
        return sorted([*self.errors, *self.warnings], key=_place)


def _place(problem: DataProblem) -> tuple[str, int]:
    return problem.file, problem.row if problem.row is not None else 0


def check_source(
    source: str,
    organs: Sequence[str] | None = None,
    *,
    check_images: bool = True,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> ValidationReport:
    """Check a data source like :func:`validate_source`, and summarise what it holds.

    Args:
        source: as for :func:`medrewardbench.data.load_benchmark`.
        organs: restrict to these organ systems.
        check_images: decode every image (the slow part); on by default.
        allow_external_images: accept image paths outside the data's directory.
        image_roots: further directories image paths may point into.

    Returns:
        The errors and the warnings (each sorted by file and row) and the summary of the cases read.
    """
    try:
        result = collect_source(source, organs, allow_external_images=allow_external_images, image_roots=image_roots)
    except DataError as exc:
        return ValidationReport(list(exc.problems), [], None)
    problems = list(result.errors)
    empty = nothing_to_measure(source, result.cases)
    if empty is not None and not (result.errors and not result.cases):
        problems.append(empty)
    images: list[tuple[ImageRef, CaseLocation, str | None]] = [
        (case.image, location, case.case_id) for case, location in zip(result.cases, result.locations, strict=True)
    ]
    images += result.rejected_images
    decoded = dicom = 0
    if check_images and images:
        workers = min(8, os.cpu_count() or 1, len(images))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            checked = list(pool.map(lambda item: _check_and_kind(*item), images))
        for problem, is_dicom_image in checked[: len(result.cases)]:
            if problem is None and is_dicom_image is not None:
                decoded += 1
                dicom += int(is_dicom_image)
        problems.extend(problem for problem, _ in checked if problem is not None)
    problems.sort(key=_place)
    warnings = sorted(result.warnings, key=_place)
    logger.info("%s: %d problem(s) and %d warning(s) found", source, len(problems), len(warnings))
    summary = SourceSummary(
        name=result.name,
        cases=len(result.cases),
        organ_systems=dict(sorted(Counter(case.organ_system for case in result.cases).items())),
        labelled={d: sum(1 for case in result.cases if d in case.labels) for d in DIMENSIONS},
        images=sum(1 for case in result.cases if case.image.kind != "none"),
        decoded=decoded,
        dicom=dicom,
        labels=result.labels,
    )
    return ValidationReport(problems, warnings, summary)


def _check_and_kind(
    image: ImageRef, location: CaseLocation, case_id: str | None
) -> tuple[DataProblem | None, bool | None]:
    """:func:`check_image`, and whether the image is DICOM (None when there is no image or it failed)."""
    problem = check_image(image, location, case_id)
    if problem is not None or image.kind == "none":
        return problem, None
    try:
        return None, is_dicom(image)
    except ImageError:
        return None, False


def validate_source(
    source: str,
    organs: Sequence[str] | None = None,
    *,
    check_images: bool = True,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> list[DataProblem]:
    """Check a data source and report every problem found, without stopping at the first.

    Images are checked on every row that names one, including rows left out for other problems.
    Reported: missing, duplicate and unprintable ids, missing required fields and wrong types,
    labels that are not A/B (or 1/2), unknown dimension names, duplicate JSON keys, nesting too
    deep, unreadable images (each image is decoded), image paths outside the data or naming
    something other than a regular file, mismatched organ files, a source with no case or no
    labelled case, and (as warnings) cases without labels, dimensions labelled null and labels
    without cases. A source that cannot be opened at all (unknown kind, not cached) gives the
    problems that say why.

    Args:
        source: as for :func:`medrewardbench.data.load_benchmark`.
        organs: restrict to these organ systems.
        check_images: decode every image (the slow part); on by default.
        allow_external_images: accept image paths outside the data's directory.
        image_roots: further directories image paths may point into.

    Returns:
        The problems, sorted by file and row; empty when the source is clean.
    """
    return check_source(
        source,
        organs,
        check_images=check_images,
        allow_external_images=allow_external_images,
        image_roots=image_roots,
    ).problems
