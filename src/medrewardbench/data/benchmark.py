"""The :class:`Benchmark` (a loaded, validated set of cases) and the loaders' common result type.

Why one module of this size: the Benchmark is the loaders' one result type; its streaming, selection
and grouping methods share its private state.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.annotations import SUPERSEDED, UNDECIDED
from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError, DataProblem

logger = logging.getLogger(__name__)

KEEP_CASES = 4096
"""The most cases :meth:`Benchmark.fingerprinted` holds in memory (Med-RewardBench has 1,026)."""
KEEP_BYTES = 32 << 20
"""The most characters and embedded image bytes :meth:`Benchmark.fingerprinted` holds in memory."""

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
    UNDECIDED: "dimension(s) without a strict majority or an adjudication (unlabelled)",
    SUPERSEDED: "adjudication(s) of a dimension that has a strict majority (the majority is the label)",
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


def nothing_to_measure(source: str, cases: Sequence[Case] | Benchmark) -> DataProblem | None:
    """The problem of a selection of cases on which no accuracy can be measured, if it is one.

    Args:
        source: the data source, for the problem's file.
        cases: the cases (after any organ selection and limit), or a benchmark (its counts are used:
            nothing is read).

    Returns:
        A problem when there is no case, or no case carries an expert label; else None.
    """
    n_cases = len(cases)
    labeled = cases.n_labeled if isinstance(cases, Benchmark) else sum(1 for case in cases if case.is_labeled)
    if not n_cases:
        return DataProblem(source, "no cases in the data: nothing can be measured")
    if not labeled:
        return DataProblem(
            source,
            f"none of the {n_cases} case(s) carries an expert label: nothing can be measured",
            field="labels",
        )
    return None


def summarize_warnings(
    warnings: Sequence[DataProblem], max_lines: int = 10, counts: Mapping[str, int] | None = None
) -> list[str]:
    """Warnings as a few lines: problems that come in numbers are counted, the rest listed.

    Warnings with a kind (cases without labels, null labels, labels without a case) become one
    line per kind when there is more than one of them, e.g.
    ``"12 case(s) without expert labels (first: cases.jsonl, row 4 (case c4))"``.

    Args:
        warnings: the warnings, in order.
        max_lines: the most lines returned (one per counted kind at least); a last line says
            how many more there are.
        counts: every warning counted by kind (``""`` for those without one), when ``warnings``
            keeps only some of them (:attr:`Benchmark.warning_counts`).

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
        total = max(len(found), (counts or {}).get(kind, 0))
        if total == 1:
            rest.insert(0, found[0])
            continue
        first = found[0]
        where = first.file + (f", row {first.row}" if first.row is not None else "")
        where += f" (case {first.case_id})" if first.case_id is not None else ""
        lines.append(f"{total} {_KIND_SUMMARIES[kind]} (first: {where})")
    room = max(max_lines - len(lines), 0)
    # warnings listed one by one that were counted but not kept are added to the last line's count
    kept: dict[str, int] = {}
    for warning in warnings:
        kept[warning.kind or ""] = kept.get(warning.kind or "", 0) + 1
    unkept = sum(
        max(count - kept.get(kind, 0), 0) for kind, count in (counts or {}).items() if kind not in _KIND_SUMMARIES
    )
    if len(rest) > room or unkept:
        room = max(room - 1, 0)  # keep a line to say how many more there are
    lines.extend(str(problem) for problem in rest[:room])
    if len(rest) - room + unkept > 0:
        lines.append(f"... and {len(rest) - room + unkept} more warning(s)")
    return lines


CHUNK_SIZE = 256
"""Cases per chunk when a benchmark is read from its source a chunk at a time."""
WARNINGS_KEPT_PER_KIND = 100
"""Warnings of one kind kept with their details; beyond that they are only counted."""


def _warning_counts(warnings: Sequence[DataProblem]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for warning in warnings:
        counts[warning.kind or ""] = counts.get(warning.kind or "", 0) + 1
    return counts


class WarningLog:
    """Warnings as they are found: every one counted, at most :data:`WARNINGS_KEPT_PER_KIND` of a kind kept."""

    def __init__(self, keep_per_kind: int = WARNINGS_KEPT_PER_KIND) -> None:
        self.keep_per_kind = keep_per_kind
        self.kept: list[DataProblem] = []
        self.counts: dict[str, int] = {}

    def add(self, warning: DataProblem) -> None:
        """Count one warning, and keep it while its kind has room."""
        kind = warning.kind or ""
        count = self.counts.get(kind, 0)
        self.counts[kind] = count + 1
        if count < self.keep_per_kind:
            self.kept.append(warning)

    def extend(self, warnings: Iterable[DataProblem]) -> None:
        """:meth:`add` each warning."""
        for warning in warnings:
            self.add(warning)


class Benchmark:
    """A set of cases in a deterministic order, with the warnings found while loading it.

    A benchmark is read from its source whenever its cases are needed: iterate it (or
    :meth:`iter_chunks`) and the cases come one chunk at a time, so that a data set of any size is
    never held in memory whole. The loaders (:func:`~medrewardbench.data.load_benchmark`) give such
    streaming benchmarks; ``Benchmark(name, source, cases)`` wraps cases already in memory, one
    more kind of source. The count, the organ systems and the warnings are known from the first
    reading.

    Attributes:
        name: a short human-readable name (``"demo"``, ``"Med-RewardBench"``, a file stem).
        source: the source string it was loaded from (``"demo"``, ``"hf:owner/name"``, a path).
        warnings: problems that did not stop loading: cases without expert labels, labels without
            a case, and (with ``strict=False``) every error whose rows were skipped. At most
            :data:`WARNINGS_KEPT_PER_KIND` of each kind are kept; :attr:`warning_counts` counts all.
        warning_counts: warning kind (``""`` for warnings without one) -> how many were found.
        labels: where the labels come from (a dataset card, ``eval --labels``, or the source's
            default; :mod:`medrewardbench.data.provenance`).
    """

    def __init__(
        self,
        name: str,
        source: str,
        cases: Iterable[Case] = (),
        warnings: Sequence[DataProblem] = (),
        labels: LabelProvenance = UNKNOWN_LABELS,
        *,
        warning_counts: Mapping[str, int] | None = None,
    ) -> None:
        self.name = name
        self.source = source
        self.labels = labels
        self._cases: tuple[Case, ...] | None = tuple(cases)
        self._read: Callable[[], Iterator[Case]] = lambda: iter(self._cases or ())
        self.warnings: tuple[DataProblem, ...] = tuple(warnings)
        self.warning_counts: dict[str, int] = dict(warning_counts or _warning_counts(self.warnings))
        self._n_cases = len(self._cases)
        self._organs = tuple(sorted({case.organ_system for case in self._cases}))
        self._n_labeled = sum(1 for case in self._cases if case.is_labeled)
        self._hash: str | None = None
        self._contents: bytes | None = None
        self._group_fields: tuple[str, ...] | None = None
        self._prefetched: tuple[list[Case], Callable[[], bool]] | None = None

    @classmethod
    def streaming(
        cls,
        name: str,
        source: str,
        read: Callable[[], Iterator[Case]],
        *,
        n_cases: int,
        organ_systems: Iterable[str],
        n_labeled: int,
        warnings: Sequence[DataProblem] = (),
        warning_counts: Mapping[str, int] | None = None,
        labels: LabelProvenance = UNKNOWN_LABELS,
        prefetched: Sequence[Case] | None = None,
        still_current: Callable[[], bool] | None = None,
    ) -> Benchmark:
        """A benchmark read from its source each time its cases are needed.

        Args:
            name: the benchmark's name.
            source: the source string.
            read: gives a fresh iterator over the cases, in order, each time it is called.
            n_cases: how many cases ``read`` gives.
            organ_systems: their distinct organ systems.
            n_labeled: how many of them carry an expert label.
            warnings: the warnings kept from loading.
            warning_counts: every warning counted by kind.
            labels: where the labels come from.
            prefetched: the cases ``read`` gives, as the loading kept them (a small set): the first
                :meth:`fingerprinted` takes them instead of reading the source again, then drops them.
            still_current: whether the source is as it was when ``prefetched`` was read (else they
                are not used, and reading the source again says what changed).

        Returns:
            The benchmark.
        """
        benchmark = cls(name, source, (), warnings, labels, warning_counts=warning_counts)
        if prefetched is not None:
            benchmark._prefetched = (list(prefetched), still_current or (lambda: True))
        benchmark._cases = None
        benchmark._read = read
        benchmark._n_cases = n_cases
        benchmark._organs = tuple(sorted(set(organ_systems)))
        benchmark._n_labeled = n_labeled
        return benchmark

    def __repr__(self) -> str:
        kind = "in memory" if self._cases is not None else "streaming"
        return f"Benchmark({self.name!r}, {self.source!r}, {self._n_cases} cases, {kind})"

    def __len__(self) -> int:
        return self._n_cases

    def __iter__(self) -> Iterator[Case]:
        return self._read()

    @property
    def in_memory(self) -> bool:
        """Whether the cases are held in memory (else they are read from the source when needed)."""
        return self._cases is not None

    @property
    def n_labeled(self) -> int:
        """How many cases carry at least one expert label."""
        return self._n_labeled

    @property
    def cases(self) -> tuple[Case, ...]:
        """Every case, in order, in memory.

        A streaming benchmark reads them all from its source for this (each time): fine for small
        data, but code that must scale iterates the benchmark or :meth:`iter_chunks` instead.
        """
        if self._cases is not None:
            return self._cases
        return tuple(self._read())

    def iter_chunks(self, size: int = CHUNK_SIZE) -> Iterator[list[Case]]:
        """The cases in order, ``size`` at a time.

        Args:
            size: cases per chunk.

        Yields:
            Lists of at most ``size`` cases.
        """
        chunk: list[Case] = []
        for case in self._read():
            chunk.append(case)
            if len(chunk) >= size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def data_hash(self) -> str:
        """The data fingerprint: a SHA-256 over, in case order, each case's id, content and labels.

        Reports compare it to refuse mixing results computed on different data. It reads every
        case once, and every image's bytes, in one pass; the result is kept.

        Returns:
            A 64-character hex digest.

        Raises:
            ImageError: an image cannot be read.
            DataError: the source changed since it was loaded.
        """
        if self._hash is None:
            digest = DataHasher()
            contents = bytearray()
            for case in self._read():
                digest.add(case)
                if self._cases is None:
                    contents += bytes.fromhex(case.content_hash())
            self._hash = digest.hexdigest()
            self._contents = bytes(contents) if self._cases is None else None
        return self._hash

    @property
    def fingerprint_known(self) -> bool:
        """Whether :meth:`data_hash` is known already (a call to it reads nothing)."""
        return self._hash is not None

    def fingerprinted(self, keep_cases: int = KEEP_CASES, keep_bytes: int = KEEP_BYTES) -> Benchmark:
        """This benchmark with its fingerprint known, in memory when it is small.

        One reading of the source (none when the loading kept the cases: ``load_benchmark(...,
        keep=True)``) does what :meth:`data_hash` does and keeps the cases while there
        are at most ``keep_cases`` of them and their texts and embedded images take at most
        ``keep_bytes``. A benchmark that fits comes back in memory (same name, source, cases,
        warnings and labels, fingerprint known), so that planning and judging do not read the
        source again; one that does not comes back as it is, hashed, and streams as before.

        Args:
            keep_cases: the most cases kept in memory.
            keep_bytes: the most characters and embedded image bytes kept in memory.

        Returns:
            A hashed benchmark of the same cases: this one, or an in-memory copy of it.

        Raises:
            ImageError: an image cannot be read.
            DataError: the source changed since it was loaded.
        """
        if self._hash is not None or self._cases is not None:
            self.data_hash()
            return self
        reading = self.fingerprinting(keep_cases, keep_bytes)
        for _case in reading:
            pass
        return reading.result()

    def fingerprinting(self, keep_cases: int = KEEP_CASES, keep_bytes: int = KEEP_BYTES) -> Fingerprinting:
        """One reading that fingerprints the benchmark while its caller uses the cases.

        What :meth:`fingerprinted` does, a case at a time: iterating the reading gives every case in
        order, its content hash computed (its image read once); when the iteration has ended,
        :meth:`Fingerprinting.result` is what :meth:`fingerprinted` would have returned. The eval
        job judges the first cases this way while the later ones are still read and hashed.

        Args:
            keep_cases: the most cases kept in memory.
            keep_bytes: the most characters and embedded image bytes kept in memory.

        Returns:
            The reading (iterate it once).
        """
        return Fingerprinting(self, keep_cases, keep_bytes)

    def content_hash_at(self, position: int) -> str | None:
        """The content hash of the case at a position, as :meth:`data_hash` found it.

        A streaming benchmark keeps its cases' content hashes (32 bytes a case) once it has been
        hashed, so that later readings need not read the images again; an in-memory benchmark's
        cases keep their own.

        Args:
            position: the case's index.

        Returns:
            The hex digest, or None when not known.
        """
        if self._contents is None or not 0 <= position < len(self._contents) // 32:
            return None
        return self._contents[32 * position : 32 * position + 32].hex()

    def organ_systems(self) -> tuple[str, ...]:
        """The distinct organ systems of the cases.

        Returns:
            Sorted organ-system names.
        """
        return self._organs

    def case_ids(self) -> tuple[str, ...]:
        """The case ids in order (read from the source for a streaming benchmark).

        Returns:
            One id per case.
        """
        return tuple(case.case_id for case in self._read())

    def labeled(self) -> Benchmark:
        """The cases that carry at least one expert label.

        Returns:
            A new benchmark with the unlabeled cases left out (warnings kept).
        """
        if self._cases is not None:
            return Benchmark(
                self.name,
                self.source,
                tuple(c for c in self._cases if c.is_labeled),
                self.warnings,
                self.labels,
                warning_counts=self.warning_counts,
            )
        parent = self._read

        def read() -> Iterator[Case]:
            return (case for case in parent() if case.is_labeled)

        organs = {case.organ_system for case in read()}
        return Benchmark.streaming(
            self.name,
            self.source,
            read,
            n_cases=self._n_labeled,
            organ_systems=organs,
            n_labeled=self._n_labeled,
            warnings=self.warnings,
            warning_counts=self.warning_counts,
            labels=self.labels,
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
        wanted: set[str] | None = None
        if organs:
            wanted = {normalize_organ(name) for name in organs}
            available = {normalize_organ(name) for name in self._organs}
            unknown = [name for name in organs if normalize_organ(name) not in available]
            if unknown:
                raise DataError([unknown_organs_problem(self.source, unknown, self._organs)])
        parent = self._read

        def read() -> Iterator[Case]:
            kept = 0
            for case in parent():
                if wanted is not None and normalize_organ(case.organ_system) not in wanted:
                    continue
                if limit is not None and kept >= limit:
                    return
                kept += 1
                yield case

        # one pass over the parent: what is kept, and which of the warnings' cases exist at all
        asked = {problem.case_id for problem in self.warnings if problem.case_id is not None}
        all_ids: set[str] = set()
        kept_ids: set[str] = set()
        kept_organs: set[str] = set()
        n_kept = n_labeled = 0
        for case in parent():
            if case.case_id in asked:
                all_ids.add(case.case_id)
            if wanted is not None and normalize_organ(case.organ_system) not in wanted:
                continue
            if limit is not None and n_kept >= limit:
                continue
            n_kept += 1
            n_labeled += case.is_labeled
            kept_organs.add(case.organ_system)
            if case.case_id in asked:
                kept_ids.add(case.case_id)

        def keep(problem: DataProblem) -> bool:
            if problem.case_id is None or problem.case_id in kept_ids:
                return True
            if problem.case_id in all_ids:
                return False
            # A problem about an id that is no case (labels without a case): keep it with its organ.
            return wanted is None or normalize_organ(problem.case_id.split("/", 1)[0]) in wanted

        warnings = tuple(problem for problem in self.warnings if keep(problem))
        counts = dict(self.warning_counts)
        for kind, dropped in _warning_counts([p for p in self.warnings if not keep(p)]).items():
            counts[kind] -= dropped
        counts = {kind: count for kind, count in counts.items() if count > 0}
        if self._cases is not None:
            return Benchmark(self.name, self.source, tuple(read()), warnings, self.labels, warning_counts=counts)
        return Benchmark.streaming(
            self.name,
            self.source,
            read,
            n_cases=n_kept,
            organ_systems=kept_organs,
            n_labeled=n_labeled,
            warnings=warnings,
            warning_counts=counts,
            labels=self.labels,
        )

    def group_fields(self) -> tuple[str, ...]:
        """The fields at least one case has a value for, that metrics can group by.

        Returns:
            Sorted names: case attributes (``organ_system``, ``department``, ``modality``...) and
            scalar ``metadata`` keys.
        """
        if self._group_fields is None:
            found: set[str] = set()
            for case in self._read():  # one reading, a case at a time; the answer is kept
                found.update(name for name, value in case.grouping_metadata().items() if value != "unknown")
            self._group_fields = tuple(sorted(found))
        return self._group_fields

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
        if not names:
            return names  # nothing to check: the cases are not read
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
        other = copy.copy(self)
        other.labels = labels
        return other


def held_bytes(case: Case) -> int:
    """Roughly what holding a case costs beyond its objects: its texts and its embedded image."""
    image = case.image
    embedded = len(image.data) if image is not None and image.data is not None else 0
    return len(case.question) + len(case.response_1) + len(case.response_2) + embedded


class DataHasher:
    """The data fingerprint built one case at a time (what :meth:`Benchmark.data_hash` computes)."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def add(self, case: Case) -> None:
        """Add the next case (its id, content hash and labels)."""
        labels = [[dim, case.labels[dim]] for dim in DIMENSIONS if dim in case.labels]
        record = [case.case_id, case.content_hash(), labels]
        self._digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
        self._digest.update(b"\n")

    def hexdigest(self) -> str:
        """The fingerprint of the cases added so far."""
        return self._digest.hexdigest()


class Fingerprinting:
    """A benchmark read once, case by case, while its fingerprint is computed (:meth:`Benchmark.fingerprinting`)."""

    def __init__(self, benchmark: Benchmark, keep_cases: int, keep_bytes: int) -> None:
        self._benchmark = benchmark
        self._keep_cases = keep_cases
        self._keep_bytes = keep_bytes
        self._started = False
        self._result: Benchmark | None = None

    def __iter__(self) -> Iterator[Case]:
        """Every case in order, each hashed before it is given.

        Raises:
            RuntimeError: the reading was iterated before.
            ImageError: an image cannot be read.
            DataError: the source changed since it was loaded.
        """
        if self._started:
            raise RuntimeError("a fingerprinting reading is iterated once")
        self._started = True
        return self._read()

    def result(self) -> Benchmark:
        """The hashed benchmark: the one read, or an in-memory copy of it when it is small.

        Raises:
            RuntimeError: the reading has not ended yet.
        """
        if self._result is None:
            raise RuntimeError("the benchmark's fingerprint is known only once every case has been read")
        return self._result

    def _read(self) -> Iterator[Case]:
        source = self._benchmark
        digest = DataHasher()
        if source._cases is not None:  # in memory: the cases keep their own content hashes
            for case in source._cases:
                digest.add(case)
                yield case
            source._hash = digest.hexdigest()
            self._result = source
            return
        contents = bytearray()
        kept: list[Case] | None = [] if source._n_cases <= self._keep_cases else None
        size = 0
        prefetched, source._prefetched = source._prefetched, None
        reading = iter(prefetched[0]) if prefetched is not None and prefetched[1]() else source._read()
        for case in reading:
            digest.add(case)
            contents += bytes.fromhex(case.content_hash())
            if kept is not None:
                size += held_bytes(case)
                if size <= self._keep_bytes and len(kept) < self._keep_cases:
                    kept.append(case)
                else:
                    kept = None
            yield case
        source._hash = digest.hexdigest()
        source._contents = bytes(contents)
        if kept is None:
            self._result = source
            return
        held = Benchmark(
            source.name, source.source, kept, source.warnings, source.labels, warning_counts=source.warning_counts
        )
        held._hash = source._hash
        held._group_fields = source._group_fields
        self._result = held


class CaseLocation(NamedTuple):
    """Where a case came from: the file (as shown to users) and the 1-based row in it."""

    file: str
    row: int


_SMALL_ID_PASS = 100_000
"""Up to this many ids, a hashing pass finds the repeated ones with a set (no numpy import at start-up);
past it, with numpy, which holds them as 8-byte integers instead of Python objects."""


class IdTracker:
    """Finds ids given twice, in bounded memory.

    Three modes:

    * ``IdTracker()``: exact; remembers every id with where it first appeared (small data).
    * ``IdTracker.hashing()``: a first pass over large data; keeps an 8-byte hash per id and
      reports nothing. :meth:`repeated` then gives the hashes seen more than once (usually none).
    * ``IdTracker.exact_for(hashes)``: exact, but only for ids with those hashes, the few that a
      hashing pass found repeated; every other id costs nothing.
    * ``IdTracker.looking_for(ids)``: tracks nothing, and tells readers that may skip rows whose
      id is not one of ``ids`` (:func:`~medrewardbench.data.sources.find_cases`) before checking them.

    Ids are tracked per scope (a file, an organ system); the hashing pass pools the scopes, so
    anything repeated in any scope is found.
    """

    def __init__(self, only: frozenset[int] | None = None, *, hashing: bool = False) -> None:
        self._only = only
        self._hashing = hashing
        self._hashes = array("q")
        self._seen: dict[str, dict[str, CaseLocation]] = {}
        self.wanted: frozenset[str] | None = None
        """When set, the only ids the caller wants: a reader may skip other rows unchecked."""

    @classmethod
    def looking_for(cls, ids: frozenset[str]) -> IdTracker:
        """No tracking; rows whose id is not in ``ids`` may be skipped unchecked."""
        tracker = cls(only=frozenset())
        tracker.wanted = ids
        return tracker

    @classmethod
    def hashing(cls) -> IdTracker:
        """A first pass: hashes only, never a duplicate reported."""
        return cls(hashing=True)

    @classmethod
    def exact_for(cls, hashes: frozenset[int]) -> IdTracker:
        """Exact tracking of the ids with these hashes only."""
        return cls(hashes)

    def first(self, scope: str, key: str, location: CaseLocation, *, hashed: bool = True) -> CaseLocation | None:
        """Where ``key`` was first seen in ``scope``, or None when this is its first time (it is remembered).

        Args:
            scope: where ids must be unique (a file, or ``""`` for the whole source).
            key: the id.
            location: where it is now.
            hashed: whether a hashing pass records it (a check that repeats another one on the
                same rows passes False).

        Returns:
            The first location, or None.
        """
        if self._hashing:
            if hashed:
                self._hashes.append(hash(key))
            return None
        if self._only is not None and hash(key) not in self._only:
            return None
        seen = self._seen.setdefault(scope, {})
        first = seen.get(key)
        if first is None:
            seen[key] = location
        return first

    def repeated(self) -> frozenset[int]:
        """After a hashing pass: the hashes recorded more than once."""
        if not self._hashes:
            return frozenset()
        if len(self._hashes) <= _SMALL_ID_PASS:
            seen: set[int] = set()
            repeated: set[int] = set()
            for value in self._hashes:
                (repeated if value in seen else seen).add(value)
            return frozenset(repeated)
        import numpy as np  # a large source: sorted as 8-byte integers, not as Python objects

        values = np.sort(np.frombuffer(self._hashes, dtype=np.int64))
        twice = values[1:][values[1:] == values[:-1]]
        return frozenset(int(v) for v in np.unique(twice).tolist())


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
