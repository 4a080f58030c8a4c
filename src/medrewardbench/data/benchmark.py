"""The :class:`Benchmark` (a loaded, validated set of cases) and the loaders' common result type."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError, DataProblem

logger = logging.getLogger(__name__)

UNLABELED = "unlabeled"
"""Kind of the warning about a case without expert labels."""
NULL_LABEL = "null_label"
"""Kind of the warning about a dimension whose label is null."""
ORPHAN_LABELS = "orphan_labels"
"""Kind of the warning about labels whose question has no case."""

_KIND_SUMMARIES: dict[str, str] = {
    UNLABELED: "case(s) without expert labels",
    NULL_LABEL: "dimension label(s) given as null (not counted)",
    ORPHAN_LABELS: "label row(s) without a case",
}


def group_field_name(name: str) -> str:
    """A grouping field as cases hold it: ``metadata.site`` is the metadata key ``site``.

    Args:
        name: the field as a user writes it.

    Returns:
        The name without a ``metadata.`` prefix, stripped.
    """
    name = name.strip()
    return name[len("metadata.") :] if name.startswith("metadata.") else name


def normalize_organ(name: str) -> str:
    """Normalize an organ-system name for comparison (case, spaces and dashes are ignored).

    Args:
        name: an organ-system name as a user or a file writes it, e.g. ``"Lower limb"``.

    Returns:
        The lower-case name with spaces and dashes turned into underscores, e.g. ``"lower_limb"``.
    """
    return name.strip().lower().replace(" ", "_").replace("-", "_")


def unknown_organs_problem(source: str, requested: Sequence[str], available: Sequence[str]) -> DataProblem:
    """The problem reported when a user asks for organ systems a source does not have.

    Args:
        source: the data source, for the message.
        requested: the names the user asked for that matched nothing.
        available: the organ systems the source does have.

    Returns:
        A file-level :class:`DataProblem` that lists the available organ systems.
    """
    wanted = ", ".join(repr(name) for name in requested)
    have = ", ".join(sorted(available)) or "(none)"
    return DataProblem(
        file=source,
        field="organs",
        message=f"unknown organ system(s) {wanted}; available: {have}",
    )


def nothing_to_measure(source: str, cases: Sequence[Case]) -> DataProblem | None:
    """The problem of a selection of cases on which no accuracy can be measured, if it is one.

    Args:
        source: the data source, for the problem's file.
        cases: the cases (after any organ selection and limit).

    Returns:
        A problem when there is no case, or no case carries an expert label; else None.
    """
    if not cases:
        return DataProblem(source, "no cases in the data: nothing can be measured")
    if not any(case.is_labeled for case in cases):
        return DataProblem(
            source,
            f"none of the {len(cases)} case(s) carries an expert label: nothing can be measured",
            field="labels",
        )
    return None


def summarize_warnings(warnings: Sequence[DataProblem], max_lines: int = 10) -> list[str]:
    """Warnings as a few lines: problems that come in numbers are counted, the rest listed.

    Warnings with a kind (cases without labels, null labels, labels without a case) become one
    line per kind when there is more than one of them, e.g.
    ``"12 case(s) without expert labels (first: cases.jsonl, row 4 (case c4))"``.

    Args:
        warnings: the warnings, in order.
        max_lines: the most lines returned (one per counted kind at least); a last line says
            how many more there are.

    Returns:
        Lines to print (not escaped for a terminal).
    """
    by_kind: dict[str, list[DataProblem]] = {}
    lines: list[str] = []
    rest: list[DataProblem] = []
    for warning in warnings:
        if warning.kind in _KIND_SUMMARIES:
            by_kind.setdefault(warning.kind, []).append(warning)
        else:
            rest.append(warning)
    for kind, found in by_kind.items():
        if len(found) == 1:
            rest.insert(0, found[0])
            continue
        first = found[0]
        where = first.file + (f", row {first.row}" if first.row is not None else "")
        where += f" (case {first.case_id})" if first.case_id is not None else ""
        lines.append(f"{len(found)} {_KIND_SUMMARIES[kind]} (first: {where})")
    room = max(max_lines - len(lines), 0)
    if len(rest) > room:
        room = max(room - 1, 0)  # keep a line to say how many more there are
    lines.extend(str(problem) for problem in rest[:room])
    if len(rest) > room:
        lines.append(f"... and {len(rest) - room} more warning(s)")
    return lines


@dataclass(frozen=True)
class Benchmark:
    """A loaded set of cases, in a deterministic order, with the warnings found while loading.

    Attributes:
        name: a short human-readable name (``"demo"``, ``"Med-RewardBench"``, a file stem).
        source: the source string it was loaded from (``"demo"``, ``"hf:owner/name"``, a path).
        cases: the cases, in source order (organ files sorted by name, rows in file order).
        warnings: problems that did not stop loading: cases without expert labels, labels without
            a case, and (with ``strict=False``) every error whose rows were skipped.
        labels: where the labels come from (a dataset card, ``eval --labels``, or the source's
            default; :mod:`medrewardbench.data.provenance`).
    """

    name: str
    source: str
    cases: tuple[Case, ...]
    warnings: tuple[DataProblem, ...] = ()
    labels: LabelProvenance = UNKNOWN_LABELS

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    @cached_property
    def _data_hash(self) -> str:
        digest = hashlib.sha256()
        for case in self.cases:
            labels = [[dim, case.labels[dim]] for dim in DIMENSIONS if dim in case.labels]
            record = [case.case_id, case.content_hash(), labels]
            digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
            digest.update(b"\n")
        return digest.hexdigest()

    def data_hash(self) -> str:
        """The data fingerprint: a SHA-256 over, in case order, each case's id, content and labels.

        Reports compare it to refuse mixing results computed on different data. It reads every
        image's bytes once (cached afterwards).

        Returns:
            A 64-character hex digest.

        Raises:
            ImageError: an image cannot be read.
        """
        return self._data_hash

    def organ_systems(self) -> tuple[str, ...]:
        """The distinct organ systems of the cases.

        Returns:
            Sorted organ-system names.
        """
        return tuple(sorted({case.organ_system for case in self.cases}))

    def case_ids(self) -> tuple[str, ...]:
        """The case ids in order.

        Returns:
            One id per case.
        """
        return tuple(case.case_id for case in self.cases)

    def labeled(self) -> Benchmark:
        """The cases that carry at least one expert label.

        Returns:
            A new benchmark with the unlabeled cases left out (warnings kept).
        """
        return Benchmark(
            self.name, self.source, tuple(c for c in self.cases if c.is_labeled), self.warnings, self.labels
        )

    def select(self, organs: Sequence[str] | None = None, limit: int | None = None) -> Benchmark:
        """Keep the cases of some organ systems and/or the first ``limit`` of them.

        The order is the benchmark's own order, which every loader makes deterministic, so the same
        ``limit`` always keeps the same cases.

        Args:
            organs: organ systems to keep (compared ignoring case, spaces and dashes); None keeps all.
            limit: how many cases to keep at most, after the organ selection; None keeps all.

        Returns:
            A new benchmark. Warnings about cases that were left out are dropped.

        Raises:
            DataError: an organ system that no case has (the message lists the available ones).
            ValueError: a negative limit.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        cases = self.cases
        wanted: set[str] | None = None
        if organs:
            wanted = {normalize_organ(name) for name in organs}
            available = {normalize_organ(case.organ_system) for case in cases}
            unknown = [name for name in organs if normalize_organ(name) not in available]
            if unknown:
                raise DataError([unknown_organs_problem(self.source, unknown, self.organ_systems())])
            cases = tuple(case for case in cases if normalize_organ(case.organ_system) in wanted)
        if limit is not None:
            cases = cases[:limit]
        all_ids = {case.case_id for case in self.cases}
        kept_ids = {case.case_id for case in cases}

        def keep(problem: DataProblem) -> bool:
            if problem.case_id is None:
                return True
            if problem.case_id in kept_ids:
                return True
            if problem.case_id in all_ids:
                return False
            # A problem about an id that is no case (labels without a case): keep it with its organ.
            return wanted is None or normalize_organ(problem.case_id.split("/", 1)[0]) in wanted

        warnings = tuple(problem for problem in self.warnings if keep(problem))
        return Benchmark(self.name, self.source, cases, warnings, self.labels)

    def group_fields(self) -> tuple[str, ...]:
        """The fields at least one case has a value for, that metrics can group by.

        Returns:
            Sorted names: case attributes (``organ_system``, ``department``, ``modality``...) and
            scalar ``metadata`` keys.
        """
        found: set[str] = set()
        for case in self.cases:
            found.update(name for name, value in case.grouping_metadata().items() if value != "unknown")
        return tuple(sorted(found))

    def resolve_group_fields(self, fields: Sequence[str]) -> list[str]:
        """Check ``--by`` fields against the cases: ``metadata.site`` and ``site`` name the same field.

        Args:
            fields: field names as given (a ``metadata.`` prefix is dropped).

        Returns:
            The field names as the cases hold them, each once, in the given order.

        Raises:
            DataError: a field no case has a value for (the message lists the fields there are).
        """
        names = list(dict.fromkeys(group_field_name(f) for f in fields))
        available = self.group_fields()
        missing = [name for name in names if name not in available and name != "organ_system"]
        if missing:
            shown = ", ".join(repr(name) for name in missing)
            raise DataError(
                [
                    DataProblem(
                        "--by",
                        f"no case has a value for {shown}; fields with values: {', '.join(available) or '(none)'}",
                    )
                ]
            )
        return names

    def with_labels(self, labels: LabelProvenance) -> Benchmark:
        """The same cases with another label provenance (``eval --labels``).

        Args:
            labels: where the labels come from.

        Returns:
            A new benchmark.
        """
        return dataclasses.replace(self, labels=labels)


class CaseLocation(NamedTuple):
    """Where a case came from: the file (as shown to users) and the 1-based row in it."""

    file: str
    row: int


@dataclass
class LoadResult:
    """What a loader found: cases (with where each came from), errors and warnings.

    Loaders never raise for problems inside the data; they collect them here so that validation
    can report every problem at once. Rows with errors are left out of ``cases``.
    """

    name: str
    source: str
    cases: list[Case] = field(default_factory=list)
    locations: list[CaseLocation] = field(default_factory=list)
    errors: list[DataProblem] = field(default_factory=list)
    warnings: list[DataProblem] = field(default_factory=list)
    rejected_images: list[tuple[ImageRef, CaseLocation, str | None]] = field(default_factory=list)
    """Images of rows left out for other problems, so that validation can still check them."""
    labels: LabelProvenance = UNKNOWN_LABELS
    """Where the labels come from (set by the loader or from the dataset card)."""

    def add(self, case: Case, location: CaseLocation) -> None:
        """Append a case and where it came from."""
        self.cases.append(case)
        self.locations.append(location)

    def reject_image(self, image: ImageRef | None, location: CaseLocation, case_id: str | None) -> None:
        """Remember the image of a row that was left out (nothing to remember for no image)."""
        if image is not None and image.kind != "none":
            self.rejected_images.append((image, location, case_id))

    def extend(self, other: LoadResult) -> None:
        """Append another result's cases, errors and warnings (used for multi-file sources)."""
        self.cases.extend(other.cases)
        self.locations.extend(other.locations)
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)
        self.rejected_images.extend(other.rejected_images)

    def filter_organs(self, organs: Sequence[str] | None) -> None:
        """Keep only the cases of the given organ systems (in place).

        Args:
            organs: organ-system names; None or empty keeps everything.

        Raises:
            DataError: a name that matches no case's organ system.
        """
        if not organs:
            return
        available = sorted({case.organ_system for case in self.cases})
        available_norm = {normalize_organ(name) for name in available}
        unknown = [name for name in organs if normalize_organ(name) not in available_norm]
        if unknown:
            raise DataError([unknown_organs_problem(self.source, unknown, available)])
        wanted = {normalize_organ(name) for name in organs}
        kept = [
            (case, loc)
            for case, loc in zip(self.cases, self.locations, strict=True)
            if normalize_organ(case.organ_system) in wanted
        ]
        self.cases = [case for case, _ in kept]
        self.locations = [loc for _, loc in kept]

    def to_benchmark(self, strict: bool = True) -> Benchmark:
        """Turn the result into a :class:`Benchmark`.

        Args:
            strict: raise when any error was found; otherwise keep the good rows and turn the errors
                into warnings.

        Returns:
            The benchmark.

        Raises:
            DataError: with every error found, when ``strict`` and there is at least one.
        """
        if self.errors and strict:
            raise DataError(self.errors)
        if self.errors:
            logger.warning(
                "%s: %d problem(s) in the data; the rows concerned were skipped (strict=False)",
                self.source,
                len(self.errors),
            )
        warnings = tuple(self.errors) + tuple(self.warnings)
        if self.warnings:
            logger.info("%s: %d warning(s), e.g. %s", self.source, len(self.warnings), self.warnings[0])
        logger.info("%s: loaded %d case(s)", self.source, len(self.cases))
        return Benchmark(self.name, self.source, tuple(self.cases), warnings, self.labels)
