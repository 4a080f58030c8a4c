"""The array layout, its validation, and per-case counts: the inputs of every other statistic.

Layout (shared by :mod:`medrewardbench.metrics.core` and every module of this package):

* ``verdicts``: int8 (n_cases, 2, n_dims); axis 1 is [original, swapped]; 1 or 2 = the judge's
  winner in source order, :data:`FAILED` (0) = judged without a verdict, :data:`NOT_RUN` (-1) =
  that order was not run.
* ``labels``: int8 (n_cases, n_dims); 1 or 2 = expert winner in source order, 0 = no label.
* ``lengths``: int64 (n_cases, 2), character lengths of response_1 and response_2.

A failure counts as wrong for accuracy (the reference protocol); requests whose order was not run
and cases without a label are not counted at all.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int8]
"""Verdicts and labels (values -1 to 2)."""
CountArray = npt.NDArray[np.int64]
"""Counts of requests or cases."""
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NOT_RUN = -1
"""Verdict of a request whose order was not run."""
FAILED = 0
"""Verdict of a request that was judged but gave no verdict (error, unparseable output, tie)."""
ORIGINAL = 0
"""Index of the original order on the order axis."""
SWAPPED = 1
"""Index of the swapped order on the order axis."""
FIRST_SHOWN = (1, 2)
"""The source winner that means "the response shown first", per order index."""


def _verdicts(verdicts: npt.ArrayLike) -> npt.NDArray[np.int8]:
    v = np.asarray(verdicts)
    if v.ndim != 3 or v.shape[1] != 2:
        raise ValueError(f"verdicts must have shape (n_cases, 2, n_dims), got {v.shape}")
    if v.size and (v.min() < NOT_RUN or v.max() > 2):
        raise ValueError("verdicts must be -1 (not run), 0 (failure), 1 or 2")
    return v.astype(np.int8, copy=False)


def _labels(labels: npt.ArrayLike, n_cases: int | None = None, n_dims: int | None = None) -> npt.NDArray[np.int8]:
    lab = np.asarray(labels)
    if lab.ndim != 2:
        raise ValueError(f"labels must have shape (n_cases, n_dims), got {lab.shape}")
    if (n_cases is not None and lab.shape[0] != n_cases) or (n_dims is not None and lab.shape[1] != n_dims):
        raise ValueError(f"labels have shape {lab.shape}, expected ({n_cases}, {n_dims})")
    if lab.size and (lab.min() < 0 or lab.max() > 2):
        raise ValueError("labels must be 0 (no label), 1 or 2")
    return lab.astype(np.int8, copy=False)


def _lengths(lengths: npt.ArrayLike, n_cases: int) -> CountArray:
    ln = np.asarray(lengths)
    if ln.shape != (n_cases, 2):
        raise ValueError(f"lengths must have shape ({n_cases}, 2), got {ln.shape}")
    return ln.astype(np.int64, copy=False)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _dimension_index(name: str, dimensions: Sequence[str]) -> int:
    try:
        return list(dimensions).index(name)
    except ValueError:
        raise ValueError(f"unknown dimension {name!r}; expected one of {tuple(dimensions)}") from None


def ratio(numerators: npt.ArrayLike, denominators: npt.ArrayLike) -> FloatArray:
    """Ratio of sums over cases (axis 0), NaN where the denominator sums to zero.

    Args:
        numerators: (n_cases, ...) per-case counts.
        denominators: same shape.

    Returns:
        ``sum(numerators, 0) / sum(denominators, 0)``, shape (...).
    """
    num = np.asarray(numerators, dtype=np.float64).sum(axis=0)
    den = np.asarray(denominators, dtype=np.float64).sum(axis=0)
    return _safe_divide(num, den)


def _safe_divide(num: npt.ArrayLike, den: npt.ArrayLike) -> FloatArray:
    num_a = np.asarray(num, dtype=np.float64)
    den_a = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast_shapes(num_a.shape, den_a.shape), np.nan)
    np.divide(num_a, den_a, out=out, where=den_a != 0)
    return out


def request_outcomes(
    verdicts: npt.ArrayLike, labels: npt.ArrayLike, *, count_failures: bool = True
) -> tuple[BoolArray, BoolArray]:
    """Which requests are counted, and which of those are correct.

    Args:
        verdicts: (n_cases, 2, n_dims).
        labels: (n_cases, n_dims).
        count_failures: True (the headline convention) counts a failure as a wrong answer;
            False leaves failures out (accuracy over answered requests).

    Returns:
        ``(correct, counted)``, boolean arrays of shape (n_cases, 2, n_dims).
    """
    v = _verdicts(verdicts)
    lab = _labels(labels, v.shape[0], v.shape[2])[:, None, :]
    counted = (v != NOT_RUN) & (lab != 0)
    if not count_failures:
        counted &= v != FAILED
    correct = counted & (v == lab)
    return correct, counted


def case_counts(
    verdicts: npt.ArrayLike, labels: npt.ArrayLike, *, count_failures: bool = True
) -> tuple[CountArray, CountArray]:
    """Per case and dimension: correct requests and counted requests (0, 1 or 2 each).

    Args:
        verdicts: (n_cases, 2, n_dims).
        labels: (n_cases, n_dims).
        count_failures: see :func:`request_outcomes`.

    Returns:
        ``(correct, counted)``, int arrays of shape (n_cases, n_dims).
    """
    correct, counted = request_outcomes(verdicts, labels, count_failures=count_failures)
    return correct.sum(axis=1, dtype=np.int64), counted.sum(axis=1, dtype=np.int64)
