"""The source dispatcher: a source string to the loader that reads it.

Sources understood by :func:`load_benchmark` and :func:`~medrewardbench.data.validate.validate_source`:

* ``"demo"``: the built-in demo set (real public images, illustrative labels).
* ``"hf:"``, ``"hf:OWNER/NAME"``, ``"hf:OWNER/NAME@REVISION"``: the reference layout from the
  Hugging Face Hub (default ``Nandzy/Med-RewardBench``), or a Hub dataset folder that ``push``
  uploaded, cached in the normal Hub cache.
* a directory containing ``pair_gt_all/`` (or ``pair_gt_all`` itself): the reference layout.
* a ``.jsonl``, ``.json`` or ``.parquet`` file, or a directory of them: the canonical format
  (see :mod:`medrewardbench.data.canonical`).
* a Hub dataset folder (``README.md`` and ``data/*.parquet``, as ``build export --format hub``
  writes it): :mod:`medrewardbench.data.hub_folder`.

Image paths in the data must resolve, after symbolic links, inside the data's own directory;
``allow_external_images=True`` lifts that, and ``image_roots`` (or the environment variable
``MEDREWARDBENCH_IMAGE_ROOTS``, ``os.pathsep``-separated) allows further directories. Embedded
and builtin images are not concerned.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from medrewardbench.cases import Case
from medrewardbench.data.benchmark import (
    KEEP_BYTES,
    KEEP_CASES,
    WARNINGS_KEPT_PER_KIND,
    Benchmark,
    CaseLocation,
    IdTracker,
    LoadResult,
    WarningLog,
    held_bytes,
    normalize_organ,
    unknown_organs_problem,
)
from medrewardbench.data.canonical import CANONICAL_SUFFIXES, canonical_files
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.data.provenance import (
    DEMO_LABELS,
    MED_REWARDBENCH_LABELS,
    UNKNOWN_LABELS,
    LabelProvenance,
    card_path,
    read_dataset_card,
)
from medrewardbench.errors import DataError, DataProblem
from medrewardbench.images.files import FileRefused, check_regular_file

logger = logging.getLogger(__name__)

__all__ = ["SourceReader", "collect_source", "load_benchmark", "open_source"]


def _unknown_source(source: str, why: str) -> DataError:
    return DataError(
        [
            DataProblem(
                source,
                f"{why}. Expected 'demo', 'hf:[OWNER/NAME][@REVISION]', a directory containing "
                f"pair_gt_all/, or a canonical file ({', '.join(CANONICAL_SUFFIXES)}) or directory of them",
            )
        ]
    )


def _check_local_source(source: str, path: Path) -> None:
    """Refuse a path that is missing, a loop, or neither a directory nor a regular file."""
    if path.is_dir():
        return
    if not os.path.lexists(path):
        raise _unknown_source(source, "no such file or directory")
    try:
        check_regular_file(path)
    except FileRefused as exc:
        raise DataError([DataProblem(source, f"cannot read the data: {exc}")]) from None


CaseRows = Iterator[tuple[Case, CaseLocation, list[DataProblem]]]
"""What a reader yields: each case with where it is and its own warnings."""


@dataclass(frozen=True)
class SourceReader:
    """An opened source: reads its cases from the start each time it is asked, one at a time.

    Attributes:
        source: the source string.
        name: the benchmark's name (the demo file names itself when read).
        kind: ``demo``, ``reference`` or ``canonical``.
        read: ``read(sink, ids, organs)`` yields ``(case, location, warnings)``; problems go to
            ``sink``. The reference layout reads only the files of ``organs``; the other kinds read
            everything and leave the organ selection to the caller.
        files: the files it reads, for noticing a change between two readings.
        labels: where the labels come from (the source's default, or its dataset card).
    """

    source: str
    name: str
    kind: str
    read: Callable[
        [LoadResult, IdTracker, Sequence[str] | None], Iterator[tuple[Case, CaseLocation, list[DataProblem]]]
    ]
    files: Callable[[], list[Path]]
    labels: LabelProvenance = UNKNOWN_LABELS

    def with_card(self, data: str | Path) -> SourceReader:
        """The reader with the data's dataset card applied, if it has one: its name and its labels.

        Args:
            data: the data file or directory (the card is :func:`~medrewardbench.data.provenance.card_path`).

        Returns:
            This reader, or a copy with the card's name and labels.

        Raises:
            DataError: the card cannot be read or holds a bad field.
        """
        card = read_dataset_card(card_path(data))
        if card is None:
            return self
        return dataclasses.replace(self, labels=card.labels, name=card.name or self.name)

    @property
    def selects_organs(self) -> bool:
        """Whether :attr:`read` applies the organ selection itself."""
        return self.kind == "reference"

    def stamp(self) -> tuple[tuple[str, int, int], ...]:
        """Size and modification time of every file it reads."""
        found = []
        for path in self.files():
            try:
                info = path.stat()
            except OSError:
                found.append((str(path), -1, -1))
                continue
            found.append((str(path), info.st_size, info.st_mtime_ns))
        return tuple(found)


def open_source(
    source: str,
    *,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> SourceReader:
    """Find out what a source is and how to read it (nothing is read yet, but the Hub snapshot is found).

    Args:
        source: see the module docstring.
        allow_external_images: accept image paths outside the data's directory.
        image_roots: further directories image paths may point into (``MEDREWARDBENCH_IMAGE_ROOTS``
            is added to them).

    Returns:
        The reader.

    Raises:
        DataError: the source cannot be opened at all (empty, unknown kind, missing path, not a
            regular file or directory, dataset not cached while offline).
    """
    from medrewardbench.data import hub
    from medrewardbench.data.canonical import canonical_data_files, iter_canonical
    from medrewardbench.data.demo import demo_file, iter_demo
    from medrewardbench.data.reference import REFERENCE_NAME, is_reference_layout, iter_reference, reference_files

    if not source.strip():
        raise DataError([DataProblem(repr(source), "empty data source; give a path, 'demo' or 'hf:OWNER/NAME'")])
    policy = ImagePolicy.create(allow_external_images, image_roots)
    if source == "demo":

        def demo_files() -> list[Path]:
            with demo_file() as path:
                return [path]

        return SourceReader(
            source, "demo", "demo", lambda sink, ids, _organs: iter_demo(sink, policy, ids), demo_files, DEMO_LABELS
        )
    if source.startswith(hub.HF_PREFIX):
        repo_id, revision = hub.parse_hf_source(source)
        root = hub.snapshot(repo_id, revision)
        shown = f"hf:{repo_id}" + (f"@{revision}" if revision else "")
        hub_policy = policy
        if Path(root).parent.name == "snapshots":
            # files in the Hub cache are links into the repository's blobs/ folder, two levels up
            hub_policy = policy.with_roots(Path(root).parent.parent)
        if not is_reference_layout(root):  # a Hub dataset folder, as 'push' uploads it
            from medrewardbench.data.hub_folder import hub_data_files, iter_hub_folder

            return SourceReader(
                source,
                repo_id.split("/")[1],
                "canonical",
                lambda sink, ids, _organs: iter_hub_folder(root, sink, hub_policy, ids),
                lambda: hub_data_files(root).files,
            ).with_card(root)
        return SourceReader(
            source,
            REFERENCE_NAME,
            "reference",
            lambda sink, ids, organs: iter_reference(
                root, organs, sink, display_root=shown, policy=hub_policy, ids=ids
            ),
            lambda: reference_files(root),
            MED_REWARDBENCH_LABELS if repo_id == hub.DEFAULT_REPO else UNKNOWN_LABELS,
        ).with_card(root)
    path = Path(source).expanduser()
    _check_local_source(source, path)
    if path.is_dir():
        if is_reference_layout(path):
            return SourceReader(
                source,
                REFERENCE_NAME,
                "reference",
                lambda sink, ids, organs: iter_reference(path, organs, sink, policy=policy, ids=ids),
                lambda: reference_files(path),
            ).with_card(path)
        from medrewardbench.data.hub_folder import hub_data_files, is_hub_folder, iter_hub_folder

        if is_hub_folder(path):
            return SourceReader(
                source,
                path.resolve().name,
                "canonical",
                lambda sink, ids, _organs: iter_hub_folder(path, sink, policy, ids),
                lambda: hub_data_files(path).files,
            ).with_card(path)
        if not canonical_files(path):
            raise _unknown_source(source, "this directory holds neither pair_gt_all/ nor canonical files")
    elif path.suffix.lower() not in CANONICAL_SUFFIXES:
        raise _unknown_source(source, f"unsupported file type {path.suffix or '(none)'!r}")
    return SourceReader(
        source,
        path.name if path.is_dir() else path.stem,
        "canonical",
        lambda sink, ids, _organs: iter_canonical(path, sink, policy, ids),
        lambda: canonical_data_files(path),
    ).with_card(path)


def collect_source(
    source: str,
    organs: Sequence[str] | None = None,
    *,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> LoadResult:
    """Read any source into memory, collecting every problem instead of raising for problems in the data.

    Every case is kept in the result: for small data. :func:`load_benchmark` streams.

    Args:
        source: see the module docstring.
        organs: organ systems to keep; None keeps all.
        allow_external_images: accept image paths outside the data's directory.
        image_roots: further directories image paths may point into (``MEDREWARDBENCH_IMAGE_ROOTS``
            is added to them).

    Returns:
        Cases with their locations, errors and warnings.

    Raises:
        DataError: the source cannot be opened at all (empty, unknown kind, missing path, not a
            regular file or directory, dataset not cached while offline), or an organ system it
            does not have was asked for.
    """
    reader = open_source(source, allow_external_images=allow_external_images, image_roots=image_roots)
    result = LoadResult(name=reader.name, source=source, labels=reader.labels)
    for case, location, warnings in reader.read(result, IdTracker(), organs):
        result.add(case, location)
        result.warnings.extend(warnings)
    if reader.kind == "canonical":
        result.errors.sort(key=lambda p: (p.file, p.row or 0))
    if not reader.selects_organs:
        result.filter_organs(organs)
    return result


@dataclass
class _Scan:
    """What one reading of a source found."""

    sink: LoadResult
    ids: IdTracker
    n_cases: int = 0
    n_labeled: int = 0
    organs_seen: set[str] = field(default_factory=set)
    organs_kept: set[str] = field(default_factory=set)
    warnings: WarningLog = field(default_factory=WarningLog)


class _Keeper:
    """Keeps the cases a scan reads while they are few and small (else none)."""

    def __init__(self) -> None:
        self.cases: list[Case] | None = []
        self._size = 0

    def __call__(self, case: Case, _location: CaseLocation) -> None:
        if self.cases is None:
            return
        self._size += held_bytes(case)
        if len(self.cases) >= KEEP_CASES or self._size > KEEP_BYTES:
            self.cases = None
        else:
            self.cases.append(case)


def _wanted(organs: Sequence[str] | None) -> set[str] | None:
    return {normalize_organ(name) for name in organs} if organs else None


def _scan(
    reader: SourceReader,
    organs: Sequence[str] | None,
    limit: int | None,
    ids: IdTracker,
    each: Callable[[Case, CaseLocation], None] | None = None,
) -> _Scan:
    """Read the whole source once, keeping counts and warnings, not cases."""
    scan = _Scan(LoadResult(name=reader.name, source=reader.source, labels=reader.labels), ids)
    wanted = _wanted(organs)
    for case, location, warnings in reader.read(scan.sink, ids, organs):
        scan.organs_seen.add(case.organ_system)
        if wanted is not None and normalize_organ(case.organ_system) not in wanted:
            continue
        if limit is not None and scan.n_cases >= limit:
            continue
        scan.n_cases += 1
        scan.n_labeled += case.is_labeled
        scan.organs_kept.add(case.organ_system)
        scan.warnings.extend(warnings)
        if each is not None:
            each(case, location)
        if len(scan.sink.warnings) > WARNINGS_KEPT_PER_KIND:  # warnings about no one case, as they come
            scan.warnings.extend(scan.sink.warnings)
            scan.sink.warnings.clear()
    scan.warnings.extend(scan.sink.warnings)
    scan.sink.warnings.clear()
    if reader.kind == "canonical":
        scan.sink.errors.sort(key=lambda p: (p.file, p.row or 0))
    return scan


def _unknown_organs(reader: SourceReader, organs: Sequence[str] | None, seen: set[str]) -> DataError | None:
    if not organs or reader.selects_organs:
        return None
    available = {normalize_organ(name) for name in seen}
    unknown = [name for name in organs if normalize_organ(name) not in available]
    return DataError([unknown_organs_problem(reader.source, unknown, sorted(seen))]) if unknown else None


def _read_selected(
    reader: SourceReader,
    organs: Sequence[str] | None,
    limit: int | None,
    repeated: frozenset[int],
    stamp: tuple[tuple[str, int, int], ...],
) -> Iterator[Case]:
    """The selected cases, read from the source again (after checking it did not change)."""
    now = reader.stamp()
    if now != stamp:
        changed = [entry[0] for entry in now if entry not in stamp] + [entry[0] for entry in stamp if entry not in now]
        raise DataError(
            [
                DataProblem(
                    changed[0] if changed else reader.source,
                    "the data changed since it was loaded; load it again (run the command again)",
                )
            ]
        )
    sink = LoadResult(name=reader.name, source=reader.source)  # the problems are known: only counted here
    wanted = _wanted(organs)
    kept = 0
    for case, _location, _warnings in reader.read(sink, IdTracker.exact_for(repeated), organs):
        if wanted is not None and normalize_organ(case.organ_system) not in wanted:
            continue
        if limit is not None and kept >= limit:
            return
        kept += 1
        yield case


def find_cases(
    source: str,
    case_ids: Iterable[str],
    *,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> dict[str, Case]:
    """Some cases of a source, by id, in one reading of it (nothing else is kept).

    For showing a few cases of a large source (the report's gallery): rows with problems are
    skipped, not reported, and an id given twice yields its first valid row.

    Args:
        source: see the module docstring.
        case_ids: the ids wanted.
        allow_external_images: accept image paths outside the data's directory.
        image_roots: further directories image paths may point into.

    Returns:
        case id -> case, for the wanted ids the source has.

    Raises:
        DataError: the source cannot be opened at all.
    """
    wanted = set(case_ids)
    reader = open_source(source, allow_external_images=allow_external_images, image_roots=image_roots)
    sink = LoadResult(name=reader.name, source=source)
    found: dict[str, Case] = {}
    for case, _location, _warnings in reader.read(sink, IdTracker.looking_for(frozenset(wanted)), None):
        if case.case_id in wanted and case.case_id not in found:
            found[case.case_id] = case
            if len(found) == len(wanted):
                break
        sink.errors.clear()  # problems are not the caller's concern here: never let them pile up
        sink.warnings.clear()
        sink.rejected_images.clear()
    return found


def load_benchmark(
    source: str = "demo",
    *,
    organs: Sequence[str] | None = None,
    limit: int | None = None,
    strict: bool = True,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
    keep: bool = False,
) -> Benchmark:
    """Load a benchmark from any supported source.

    The source is read once here, to check every row and to count the cases, organ systems and
    warnings, keeping no case; the benchmark then reads its cases from the source again, a chunk
    at a time, whenever they are needed. Memory does not grow with the number of cases (repeated
    ids are found with an 8-byte hash per id, then exactly for the few that repeat). Images are not
    decoded here (they load lazily); :func:`validate_source` checks them.

    Args:
        source: ``"demo"``, an ``hf:`` spec, a reference-layout directory or canonical data
            (see the module docstring).
        organs: organ systems to keep (case-insensitive); an unknown name is an error that lists
            the available ones.
        limit: keep the first ``limit`` cases (in the source's deterministic order).
        strict: raise :class:`DataError` with every problem found; with False, rows with problems
            are skipped and the problems become warnings.
        allow_external_images: accept image paths outside the data's directory (by default
            such a row is a problem: an API judge would upload whatever file it names).
        image_roots: further directories image paths may point into (``MEDREWARDBENCH_IMAGE_ROOTS``
            is added to them).
        keep: keep the cases this reading checks when they are few (the bounds of
            :meth:`~medrewardbench.data.benchmark.Benchmark.fingerprinted`), so that hashing the
            data (``eval`` does, at once) does not read and check the source a second time.

    Returns:
        The benchmark. Cases without expert labels, dimensions labelled null and labels without
        a case are in its warnings (counted by kind in ``warning_counts``).

    Raises:
        DataError: the source cannot be read, or (``strict``) it has problems.
        ValueError: a negative limit.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    reader = open_source(source, allow_external_images=allow_external_images, image_roots=image_roots)
    stamp = reader.stamp()
    keeper = _Keeper() if keep else None
    scan = _scan(reader, organs, limit, IdTracker.hashing(), keeper)
    repeated = scan.ids.repeated()
    if repeated:  # some id may be given twice: read again, tracking those ids exactly
        keeper = _Keeper() if keep else None
        scan = _scan(reader, organs, limit, IdTracker.exact_for(repeated), keeper)
    unknown = _unknown_organs(reader, organs, scan.organs_seen)
    if unknown is not None:
        raise unknown
    errors = scan.sink.errors
    if errors and strict:
        raise DataError(errors)
    if errors:
        logger.warning(
            "%s: %d problem(s) in the data; the rows concerned were skipped (strict=False)", source, len(errors)
        )
    log = WarningLog()
    log.extend(errors)
    for warning in scan.warnings.kept:
        log.add(warning)
    for kind, count in scan.warnings.counts.items():  # those counted but not kept
        kept = sum(1 for w in scan.warnings.kept if (w.kind or "") == kind)
        log.counts[kind] = log.counts.get(kind, 0) + count - kept
    if scan.warnings.kept:
        logger.info("%s: %d warning(s), e.g. %s", source, sum(scan.warnings.counts.values()), scan.warnings.kept[0])
    logger.info("%s: loaded %d case(s)", source, scan.n_cases)
    return Benchmark.streaming(
        scan.sink.name,
        source,
        lambda: _read_selected(reader, organs, limit, repeated, stamp),
        n_cases=scan.n_cases,
        organ_systems=scan.organs_kept,
        n_labeled=scan.n_labeled,
        warnings=log.kept,
        warning_counts=log.counts,
        labels=scan.sink.labels,
        prefetched=keeper.cases if keeper is not None else None,
        still_current=lambda: reader.stamp() == stamp,
    )
