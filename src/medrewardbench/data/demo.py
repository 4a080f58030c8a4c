"""The built-in demo set: a few cases on real public images shipped by installed packages.

The cases live in ``medrewardbench/data/demo_cases.json``::

    {"name": ..., "version": ..., "notice": ..., "cases": [<canonical rows>]}

with images given as ``{"builtin": "pydicom:CT_small.dcm"}`` or ``{"builtin": "skimage:retina"}``.
Its labels were not written by medical experts: every case carries the notice in its metadata
under ``"label_note"``. Its per-annotator labels (three made-up raters, ``illustrative-rater-1``
to ``-3``, whose strict majority equals the labels on every dimension) are illustrative as well:
they give the human-ceiling tables something to show.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path

from medrewardbench.cases import Case
from medrewardbench.data.benchmark import Benchmark, CaseLocation, IdTracker, LoadResult
from medrewardbench.data.canonical import iter_rows, read_json_document
from medrewardbench.data.image_policy import ImagePolicy
from medrewardbench.data.jsonio import JSONTextError
from medrewardbench.data.provenance import DEMO_LABELS
from medrewardbench.errors import DataError, DataProblem

logger = logging.getLogger(__name__)

DEMO_RESOURCE = "demo_cases.json"
"""The demo file's name inside the ``medrewardbench.data`` package."""
DEMO_NOTICE = (
    "Demo data: real public images shipped by pydicom and scikit-image, with questions, responses, "
    "labels and per-annotator labels (made-up raters) written for illustration, not by medical experts. "
    "Use it to try the tools; its accuracies say nothing about a judge's clinical quality."
)
"""Shown wherever demo results appear; the demo file's own ``notice`` takes precedence."""
LABEL_NOTE_KEY = "label_note"


def _demo_resource() -> AbstractContextManager[Path]:
    """A context manager yielding a real path to the demo file (tests point it elsewhere)."""
    return resources.as_file(resources.files("medrewardbench.data").joinpath(DEMO_RESOURCE))


def demo_file() -> AbstractContextManager[Path]:
    """A context manager yielding a real path to the demo file (for change checks)."""
    return _demo_resource()


def iter_demo(
    sink: LoadResult, policy: ImagePolicy | None = None, ids: IdTracker | None = None
) -> Iterator[tuple[Case, CaseLocation, list[DataProblem]]]:
    """Read the demo file one case at a time; its name goes to ``sink.name``.

    Args:
        sink: where problems go (and the demo's name).
        policy: user settings for image paths (the demo's own images are builtins); the demo
            file's directory is always allowed.
        ids: finds repeated ids (None: every id exactly).

    Yields:
        ``(case, location, warnings)``; every case's metadata carries ``"label_note"``.

    Raises:
        DataError: the demo file is missing or is not a JSON object with a ``cases`` list.
    """
    with _demo_resource() as path:
        shown = f"medrewardbench/data/{DEMO_RESOURCE}"
        if not path.is_file():
            raise DataError([DataProblem(shown, "the demo data file is missing from the installed package")])
        try:
            document = read_json_document(path)
        except JSONTextError as exc:
            raise DataError([DataProblem(shown, f"unreadable demo file: {exc}")]) from exc
        if not isinstance(document, dict) or not isinstance(document.get("cases"), list):
            raise DataError([DataProblem(shown, "the demo file must be an object with a 'cases' list")])
        notice = document.get("notice")
        note = notice if isinstance(notice, str) and notice.strip() else DEMO_NOTICE
        rows = []
        for record in document["cases"]:
            if isinstance(record, dict):
                metadata = record.get("metadata")
                merged = dict(metadata) if isinstance(metadata, dict) else {}
                merged.setdefault(LABEL_NOTE_KEY, note)
                if metadata is None or isinstance(metadata, dict):
                    record = {**record, "metadata": merged}
            rows.append(record)
        sink.name = str(document.get("name") or "demo")
        sink.labels = DEMO_LABELS
        rules = (policy or ImagePolicy()).with_roots(path.parent)
        yield from iter_rows(enumerate(rows, start=1), shown, path.parent, sink, rules, ids)


def collect_demo(source: str = "demo", policy: ImagePolicy | None = None) -> LoadResult:
    """Read the demo file, collecting every problem.

    Args:
        source: the source string to record.
        policy: user settings for image paths (the demo's own images are builtins); the demo
            file's directory is always allowed.

    Returns:
        The demo cases (each with ``metadata["label_note"]``), errors and warnings.

    Raises:
        DataError: the demo file is missing or is not a JSON object with a ``cases`` list.
    """
    result = LoadResult(name="demo", source=source, labels=DEMO_LABELS)
    for case, location, warnings in iter_demo(result, policy):
        result.add(case, location)
        result.warnings.extend(warnings)
    return result


def load_demo(*, strict: bool = True) -> Benchmark:
    """Load the built-in demo set.

    Args:
        strict: raise on any problem in the demo file (there should be none).

    Returns:
        The demo benchmark; every case's metadata carries ``"label_note"``.

    Raises:
        DataError: the demo file is missing or invalid.
    """
    return collect_demo().to_benchmark(strict=strict)
