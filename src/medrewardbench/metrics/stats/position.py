"""Position measures: consistency across the two orders, picks of the response shown first, strict accuracy.

Each function returns per-case ``(numerator, denominator)`` counts; the estimate is their ratio of
sums (:func:`~medrewardbench.metrics.stats.ratio`), its interval :func:`~medrewardbench.metrics.stats.ratio_ci`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.stats.counts import (
    FIRST_SHOWN,
    ORIGINAL,
    SWAPPED,
    CountArray,
    _verdicts,
    request_outcomes,
)


def position_consistency_counts(verdicts: npt.ArrayLike) -> tuple[CountArray, CountArray]:
    """Per case: (same source winner in both orders, answered in both orders), each 0 or 1.

    Args:
        verdicts: (n_cases, 2, n_dims).

    Returns:
        ``(consistent, both_answered)``, int (n_cases, n_dims).
    """
    v = _verdicts(verdicts)
    both = (v[:, ORIGINAL] > 0) & (v[:, SWAPPED] > 0)
    same = both & (v[:, ORIGINAL] == v[:, SWAPPED])
    return same.astype(np.int64), both.astype(np.int64)


def first_position_counts(verdicts: npt.ArrayLike) -> tuple[CountArray, CountArray]:
    """Per case: (answered requests that picked the response shown first, answered requests).

    The first-shown response is 1 in the original order and 2 in the swapped order.

    Args:
        verdicts: (n_cases, 2, n_dims).

    Returns:
        ``(picked_first, answered)``, int (n_cases, n_dims), values 0 to 2.
    """
    v = _verdicts(verdicts)
    first = np.array(FIRST_SHOWN, dtype=np.int8)[None, :, None]
    answered = v > 0
    picked_first = answered & (v == first)
    return picked_first.sum(axis=1, dtype=np.int64), answered.sum(axis=1, dtype=np.int64)


def strict_accuracy_counts(verdicts: npt.ArrayLike, labels: npt.ArrayLike) -> tuple[CountArray, CountArray]:
    """Per case: (right in both orders, labelled and run in both orders), each 0 or 1.

    Args:
        verdicts: (n_cases, 2, n_dims).
        labels: (n_cases, n_dims).

    Returns:
        ``(right_both, counted)``, int (n_cases, n_dims); a failure in either order makes the case
        wrong; cases not run in both orders are not counted.
    """
    correct, counted = request_outcomes(verdicts, labels)
    both_counted = np.asarray(counted.all(axis=1))
    right_both = np.asarray(both_counted & correct.all(axis=1))
    return right_both.astype(np.int64), both_counted.astype(np.int64)
