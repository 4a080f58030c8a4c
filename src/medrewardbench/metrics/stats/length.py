"""Length bias and coherence between dimensions.

Length bias: how often the longer response is picked, and accuracy split by the experts' length choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.stats.counts import (
    CountArray,
    FloatArray,
    _dimension_index,
    _labels,
    _lengths,
    _verdicts,
    case_counts,
    ratio,
)


@dataclass(frozen=True)
class LengthAccuracy:
    """Accuracy split by whether the expert preferred the longer or the shorter response."""

    longer_preferred: FloatArray
    shorter_preferred: FloatArray
    n_longer: CountArray
    """counted requests on cases where the expert preferred the longer response"""
    n_shorter: CountArray


def _longer(lengths: CountArray) -> npt.NDArray[np.int8]:
    """1 or 2 for the longer response of each case, 0 for a tie."""
    out = np.zeros(lengths.shape[0], dtype=np.int8)
    out[lengths[:, 0] > lengths[:, 1]] = 1
    out[lengths[:, 1] > lengths[:, 0]] = 2
    return out


def longer_preference_counts(verdicts: npt.ArrayLike, lengths: npt.ArrayLike) -> tuple[CountArray, CountArray]:
    """Per case: (answered requests picking the longer response, answered requests), ties excluded.

    Args:
        verdicts: (n_cases, 2, n_dims).
        lengths: (n_cases, 2).

    Returns:
        ``(picked_longer, answered)``, int (n_cases, n_dims).
    """
    v = _verdicts(verdicts)
    longer = _longer(_lengths(lengths, v.shape[0]))[:, None, None]
    answered = (v > 0) & (longer > 0)
    return (answered & (v == longer)).sum(axis=1, dtype=np.int64), answered.sum(axis=1, dtype=np.int64)


def expert_longer_rate(labels: npt.ArrayLike, lengths: npt.ArrayLike) -> FloatArray:
    """How often the experts preferred the longer response (labelled cases, ties excluded).

    Args:
        labels: (n_cases, n_dims).
        lengths: (n_cases, 2).

    Returns:
        (n_dims,), NaN where nothing qualifies.
    """
    lab = _labels(labels)
    longer = _longer(_lengths(lengths, lab.shape[0]))[:, None]
    counted = (lab > 0) & (longer > 0)
    return ratio(counted & (lab == longer), counted)


def accuracy_by_length_agreement(
    verdicts: npt.ArrayLike, labels: npt.ArrayLike, lengths: npt.ArrayLike, *, count_failures: bool = True
) -> LengthAccuracy:
    """Accuracy where the expert-preferred response is the longer one vs. the shorter one.

    A judge that simply favours length scores high on the first and low on the second.

    Args:
        verdicts: (n_cases, 2, n_dims).
        labels: (n_cases, n_dims).
        lengths: (n_cases, 2); cases with equal lengths are in neither split.
        count_failures: see :func:`request_outcomes`.

    Returns:
        A :class:`LengthAccuracy` of (n_dims,) arrays.
    """
    correct, counted = case_counts(verdicts, labels, count_failures=count_failures)
    lab = _labels(labels)
    longer = _longer(_lengths(lengths, lab.shape[0]))[:, None]
    expert_longer = (longer > 0) & (lab == longer)
    expert_shorter = (longer > 0) & (lab > 0) & (lab != longer)
    return LengthAccuracy(
        longer_preferred=ratio(correct * expert_longer, counted * expert_longer),
        shorter_preferred=ratio(correct * expert_shorter, counted * expert_shorter),
        n_longer=(counted * expert_longer).sum(axis=0),
        n_shorter=(counted * expert_shorter).sum(axis=0),
    )


def coherence_counts(
    verdicts: npt.ArrayLike,
    dim_a: str = "overall",
    dim_b: str = "accuracy",
    *,
    dimensions: Sequence[str] = DIMENSIONS,
) -> tuple[CountArray, CountArray]:
    """Per case: (requests whose two dimensions name the same winner, requests answering both).

    Args:
        verdicts: (n_cases, 2, n_dims).
        dim_a: first dimension name.
        dim_b: second dimension name.
        dimensions: the names of the dimension axis.

    Returns:
        ``(same, both_answered)``, int (n_cases,), values 0 to 2.
    """
    v = _verdicts(verdicts)
    if v.shape[2] != len(dimensions):
        raise ValueError(f"verdicts have {v.shape[2]} dimensions, names given for {len(dimensions)}")
    a = v[..., _dimension_index(dim_a, dimensions)]
    b = v[..., _dimension_index(dim_b, dimensions)]
    both = (a > 0) & (b > 0)
    return (both & (a == b)).sum(axis=1, dtype=np.int64), both.sum(axis=1, dtype=np.int64)


def coherence_rate(
    verdicts: npt.ArrayLike,
    dim_a: str = "overall",
    dim_b: str = "accuracy",
    *,
    dimensions: Sequence[str] = DIMENSIONS,
) -> float:
    """How often the judge's winner on ``dim_a`` equals its winner on ``dim_b`` (answered requests).

    Args:
        verdicts: (n_cases, 2, n_dims).
        dim_a: first dimension name.
        dim_b: second dimension name.
        dimensions: the names of the dimension axis.

    Returns:
        The rate, NaN when no request answered both dimensions.
    """
    return float(ratio(*coherence_counts(verdicts, dim_a, dim_b, dimensions=dimensions)))


def expert_coherence_rate(
    labels: npt.ArrayLike,
    dim_a: str = "overall",
    dim_b: str = "accuracy",
    *,
    dimensions: Sequence[str] = DIMENSIONS,
) -> float:
    """How often the experts' winner on ``dim_a`` equals their winner on ``dim_b``.

    Args:
        labels: (n_cases, n_dims).
        dim_a: first dimension name.
        dim_b: second dimension name.
        dimensions: the names of the dimension axis.

    Returns:
        The rate over cases labelled on both dimensions, NaN when there are none.
    """
    lab = _labels(labels)
    if lab.shape[1] != len(dimensions):
        raise ValueError(f"labels have {lab.shape[1]} dimensions, names given for {len(dimensions)}")
    a = lab[:, _dimension_index(dim_a, dimensions)]
    b = lab[:, _dimension_index(dim_b, dimensions)]
    both = (a > 0) & (b > 0)
    return float(ratio(both & (a == b), both))
