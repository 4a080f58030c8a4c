"""The source dispatcher: a source string to the loader that reads it.

Sources understood by :func:`load_benchmark` and :func:`~medrewardbench.data.validate.validate_source`:

* ``"demo"``: the built-in demo set (real public images, illustrative labels).
* ``"hf:"``, ``"hf:OWNER/NAME"``, ``"hf:OWNER/NAME@REVISION"``: the reference layout from the
  Hugging Face Hub (default ``Nandzy/Med-RewardBench``), cached in the normal Hub cache.
* a directory containing ``pair_gt_all/`` (or ``pair_gt_all`` itself): the reference layout.
* a ``.jsonl``, ``.json`` or ``.parquet`` file, or a directory of them: the canonical format
  (see :mod:`medrewardbench.data.canonical`).

Image paths in the data must resolve, after symbolic links, inside the data's own directory;
``allow_external_images=True`` lifts that, and ``image_roots`` (or the environment variable
``MEDREWARDBENCH_IMAGE_ROOTS``, ``os.pathsep``-separated) allows further directories. Embedded
and builtin images are not concerned.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from medrewardbench.data.benchmark import Benchmark, LoadResult
from medrewardbench.data.canonical import CANONICAL_SUFFIXES, canonical_files
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.data.provenance import MED_REWARDBENCH_LABELS, card_path, read_dataset_card
from medrewardbench.errors import DataError, DataProblem
from medrewardbench.images.files import FileRefused, check_regular_file

logger = logging.getLogger(__name__)

__all__ = ["collect_source", "load_benchmark"]


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


def collect_source(
    source: str,
    organs: Sequence[str] | None = None,
    *,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> LoadResult:
    """Read any source, collecting every problem instead of raising for problems in the data.

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
    from medrewardbench.data import hub
    from medrewardbench.data.canonical import load_canonical
    from medrewardbench.data.demo import collect_demo
    from medrewardbench.data.reference import is_reference_layout, load_reference

    if not source.strip():
        raise DataError([DataProblem(repr(source), "empty data source; give a path, 'demo' or 'hf:OWNER/NAME'")])
    policy = ImagePolicy.create(allow_external_images, image_roots)
    if source == "demo":
        result = collect_demo(source, policy)
    elif source.startswith(hub.HF_PREFIX):
        repo_id, revision = hub.parse_hf_source(source)
        root = hub.snapshot(repo_id, revision)
        shown = f"hf:{repo_id}" + (f"@{revision}" if revision else "")
        if Path(root).parent.name == "snapshots":
            # files in the Hub cache are links into the repository's blobs/ folder, two levels up
            policy = policy.with_roots(Path(root).parent.parent)
        result = load_reference(root, organs, source=source, display_root=shown, policy=policy)
        if repo_id == hub.DEFAULT_REPO:
            result.labels = MED_REWARDBENCH_LABELS
        return _with_card(result, root)
    else:
        path = Path(source).expanduser()
        _check_local_source(source, path)
        if path.is_dir():
            if is_reference_layout(path):
                return _with_card(load_reference(path, organs, source=source, policy=policy), path)
            if not canonical_files(path):
                raise _unknown_source(source, "this directory holds neither pair_gt_all/ nor canonical files")
            result = load_canonical(path, source, policy)
        elif path.suffix.lower() in CANONICAL_SUFFIXES:
            result = load_canonical(path, source, policy)
        else:
            raise _unknown_source(source, f"unsupported file type {path.suffix or '(none)'!r}")
        _with_card(result, path)
    result.filter_organs(organs)
    return result


def _with_card(result: LoadResult, data: str | Path) -> LoadResult:
    """Apply the data's dataset card, if it has one: its name and its labels' provenance.

    Args:
        result: what the loader read.
        data: the data file or directory (the card is :func:`~medrewardbench.data.provenance.card_path`).

    Returns:
        ``result``, changed in place.

    Raises:
        DataError: the card cannot be read or holds a bad field.
    """
    card = read_dataset_card(card_path(data))
    if card is not None:
        result.labels = card.labels
        if card.name:
            result.name = card.name
    return result


def load_benchmark(
    source: str = "demo",
    *,
    organs: Sequence[str] | None = None,
    limit: int | None = None,
    strict: bool = True,
    allow_external_images: bool = False,
    image_roots: Sequence[str | Path] | None = None,
) -> Benchmark:
    """Load a benchmark from any supported source.

    Images are not decoded here (they load lazily); :func:`validate_source` checks them.

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

    Returns:
        The benchmark. Cases without expert labels, dimensions labelled null and labels without
        a case are in its warnings.

    Raises:
        DataError: the source cannot be read, or (``strict``) it has problems.
        ValueError: a negative limit.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    benchmark = collect_source(
        source, organs, allow_external_images=allow_external_images, image_roots=image_roots
    ).to_benchmark(strict=strict)
    if limit is not None:
        benchmark = benchmark.select(limit=limit)
    return benchmark
