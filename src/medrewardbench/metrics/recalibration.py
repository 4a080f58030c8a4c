"""Cross-fitted recalibration of a judge's preferences: isotonic regression or temperature scaling.

Isotonic regression (pool-adjacent-violators, in numpy) or temperature scaling of
``logit(p_first)``, fitted on K-1 folds of cases and applied to the held-out fold
(:func:`cross_fitted`), so every recalibrated preference comes from a map that never saw its
case; :mod:`medrewardbench.metrics.calibration` then measures it like any other preferences.
Both maps are fitted on the data and its mirror ``(1 - p, 1 - y)``: the order of the two responses
in the source carries no meaning, so the map is symmetric and keeps every verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.confidence import CaseVerdicts
from medrewardbench.metrics.settings import RECALIBRATIONS
from medrewardbench.metrics.stats import CountArray, FloatArray

__all__ = [
    "RECALIBRATIONS",
    "IsotonicMap",
    "Recalibration",
    "TemperatureMap",
    "case_folds",
    "cross_fitted",
    "fit_isotonic",
    "fit_temperature",
    "isotonic_regression",
]

Recalibration = Literal["none", "isotonic", "temperature"]

_CLIP = 1e-4
"""Preferences are clipped to [_CLIP, 1 - _CLIP] before a logit (order agreement gives 0 and 1)."""


def isotonic_regression(y: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> FloatArray:
    """The non-decreasing fit to ``y`` (in the given order) by pool-adjacent-violators.

    Args:
        y: values, ordered by the regressor.
        weights: positive weights (default 1).

    Returns:
        The fitted values, same length: the weighted least-squares non-decreasing sequence.
    """
    values = np.asarray(y, dtype=np.float64).reshape(-1)
    w = np.ones_like(values) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    means: list[float] = []
    masses: list[float] = []
    sizes: list[int] = []
    for value, weight in zip(values.tolist(), w.tolist(), strict=True):
        means.append(value)
        masses.append(weight)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            mass = masses[-2] + masses[-1]
            means[-2] = (means[-2] * masses[-2] + means[-1] * masses[-1]) / mass
            masses[-2] = mass
            sizes[-2] += sizes[-1]
            del means[-1], masses[-1], sizes[-1]
    return np.repeat(np.array(means), np.array(sizes, dtype=np.int64)) if means else np.zeros(0)


@dataclass(frozen=True)
class IsotonicMap:
    """A fitted isotonic map: linear interpolation between the fitted points, constant outside."""

    x: FloatArray
    y: FloatArray

    def __call__(self, p: npt.ArrayLike) -> FloatArray:
        """The recalibrated preference of each ``p`` (NaN stays NaN)."""
        p_a = np.asarray(p, dtype=np.float64)
        return np.where(np.isnan(p_a), np.nan, np.interp(np.nan_to_num(p_a, nan=0.5), self.x, self.y))


def fit_isotonic(p: npt.ArrayLike, y: npt.ArrayLike) -> IsotonicMap:
    """Isotonic regression of the label on ``p``, fitted on the data and its mirror (a symmetric map).

    Args:
        p: preferences for ``response_1`` in [0, 1].
        y: 1 where the experts prefer ``response_1``, else 0.

    Returns:
        The map; with no data, the identity.
    """
    p_a = np.asarray(p, dtype=np.float64).reshape(-1)
    y_a = np.asarray(y, dtype=np.float64).reshape(-1)
    if p_a.size == 0:
        return IsotonicMap(np.array([0.0, 1.0]), np.array([0.0, 1.0]))
    xs = np.concatenate([p_a, 1.0 - p_a])
    ys = np.concatenate([y_a, 1.0 - y_a])
    # pool equal x first: PAV on distinct x with their mean label and count as weight
    ux, inverse = np.unique(xs, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1)).astype(np.float64)
    mean_y = np.bincount(inverse.reshape(-1), weights=ys) / counts
    return IsotonicMap(ux, isotonic_regression(mean_y, counts))


@dataclass(frozen=True)
class TemperatureMap:
    """``sigmoid(logit(p) / temperature)``: a temperature above 1 softens, below 1 sharpens."""

    temperature: float

    def __call__(self, p: npt.ArrayLike) -> FloatArray:
        """The recalibrated preference of each ``p`` (NaN stays NaN)."""
        z = _logit(np.asarray(p, dtype=np.float64)) / self.temperature
        return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)


def _logit(p: FloatArray) -> FloatArray:
    q = np.clip(p, _CLIP, 1.0 - _CLIP)
    return np.asarray(np.log(q) - np.log1p(-q), dtype=np.float64)


def fit_temperature(p: npt.ArrayLike, y: npt.ArrayLike, *, max_temperature: float = 1e4) -> TemperatureMap:
    """Temperature scaling of ``logit(p)``: the temperature that minimises the log loss (Newton on 1/T).

    No intercept: ``p`` and ``1 - p`` are mirror images (the source order of the two responses
    means nothing), and a slope alone keeps that symmetry.

    Args:
        p: preferences for ``response_1``.
        y: 1 where the experts prefer ``response_1``, else 0.
        max_temperature: the largest temperature returned (a judge no better than chance).

    Returns:
        The fitted map; with no informative data, temperature 1.
    """
    z = _logit(np.asarray(p, dtype=np.float64).reshape(-1))
    y_a = np.asarray(y, dtype=np.float64).reshape(-1)
    if z.size == 0 or not np.any(z != 0):
        return TemperatureMap(1.0)
    a = 1.0
    for _ in range(100):
        s = 1.0 / (1.0 + np.exp(-a * z))
        grad = float(np.sum((s - y_a) * z))
        hess = float(np.sum(s * (1 - s) * z * z))
        if hess <= 1e-12:
            break
        step = grad / hess
        a_new = max(a - step, 1.0 / max_temperature)
        if abs(a_new - a) < 1e-10:
            a = a_new
            break
        a = a_new
    return TemperatureMap(1.0 / a if a > 0 else max_temperature)


def case_folds(n_cases: int, k: int, seed: int) -> CountArray:
    """A fold (0..k-1) for every case, seeded, sizes differing by at most one.

    Args:
        n_cases: how many cases.
        k: how many folds (at least 2).
        seed: the seed.

    Returns:
        (n_cases,) fold per case.
    """
    if k < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds, got {k}")
    order = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0xCA1B,))).permutation(n_cases)
    folds = np.empty(n_cases, dtype=np.int64)
    folds[order] = np.arange(n_cases) % k
    return folds


def _fit(method: str, p: FloatArray, y: FloatArray) -> IsotonicMap | TemperatureMap:
    if method == "isotonic":
        return fit_isotonic(p, y)
    if method == "temperature":
        return fit_temperature(p, y)
    raise ValueError(f"unknown recalibration {method!r}; expected one of {', '.join(RECALIBRATIONS)}")


def cross_fitted(verdicts: CaseVerdicts, method: str, *, folds: int = 5, seed: int = 0) -> CaseVerdicts:
    """Recalibrated preferences, each from a map fitted on the other folds of cases.

    One map per fold is fitted on every labelled, answered cell of the other K-1 folds (all
    dimensions together) and applied to the held-out fold's cells, so no preference is ever
    recalibrated by a map that saw its case. Cells without a verdict stay without one.

    Args:
        verdicts: one judge's case-level preferences.
        method: ``"isotonic"`` or ``"temperature"`` (``"none"`` returns ``verdicts``).
        folds: K, the number of folds of cases.
        seed: the seed of the folds.

    Returns:
        The same cases with recalibrated ``p_first``.
    """
    if method == "none":
        return verdicts
    n_cases = len(verdicts.case_ids)
    if n_cases < folds:
        raise ValueError(f"cross-fitted recalibration needs at least {folds} cases, got {n_cases}")
    fold_of = case_folds(n_cases, folds, seed)
    counted = (verdicts.labels > 0) & ~np.isnan(verdicts.p_first)
    p = np.nan_to_num(verdicts.p_first)
    y = (verdicts.labels == 1).astype(np.float64)
    out = np.full(verdicts.p_first.shape, np.nan)
    for fold in range(folds):
        held = fold_of == fold
        train = counted & ~held[:, None]
        mapping = _fit(method, p[train], y[train])
        out[held] = mapping(verdicts.p_first[held])
    return replace(verdicts, p_first=np.where(np.isnan(verdicts.p_first), np.nan, out))
