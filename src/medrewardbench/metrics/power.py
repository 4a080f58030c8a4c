"""The smallest differences a data set can detect: small-sample honesty for every table.

A report's numbers are agreements ``R = sum_i c_i / sum_i m_i`` over cases (``c_i`` correct and
``m_i`` counted judgments of case i: two orders, six dimensions). Their judgments are clustered
in cases, so the number of judgments overstates the information; the case is the unit, as it is
for every interval of a report.

The **minimum detectable difference** (MDE) at 80 % power and two-sided level 5 % is::

    MDE = (z_0.975 + z_0.80) * s / sqrt(n)  =  2.80 * s / sqrt(n)

with n the cases counted and s the between-case standard deviation of the linearised agreement
``u_i = (c_i - R m_i) / mean(m)`` (the delta method for a ratio of sums: ``Var(R) ~ var(u) / n``).
Because ``u_i`` is a per-case quantity, the correlation between a case's judgments is in s (the
design effect needs no separate estimate). A paired difference of two agreements on the same
cases uses ``u_i(A) - u_i(B)``.

For a table that shows several judges, s is the root mean square over the judges (or pairs):
the MDE of a typical judge. :func:`detectable_differences` gives it per column for three
questions: is a judge different from chance, from another judge, from the human row. Only numpy
and the standard library are needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

__all__ = [
    "ALPHA",
    "POWER",
    "Spread",
    "detectable",
    "linearised",
    "mde_multiplier",
    "pair_rms_sd",
    "rms_sd",
]

ALPHA = 0.05
"""Two-sided level of the detectable differences."""
POWER = 0.8
"""Power of the detectable differences."""


def mde_multiplier(alpha: float = ALPHA, power: float = POWER) -> float:
    """``z_{1 - alpha/2} + z_power`` (2.80 at the defaults)."""
    normal = NormalDist()
    return normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)


def linearised(numerators: npt.ArrayLike, denominators: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per-case linearised values of ratios of sums, and which cases count.

    Args:
        numerators: ``(n_cases, ...)`` per-case numerators (correct judgments).
        denominators: ``(n_cases, ...)`` per-case denominators (counted judgments).

    Returns:
        ``(u, counted)`` of the same shape: ``u_i = (c_i - R m_i) / mean(m)`` over the counted cases
        (``m_i > 0``; ``mean(m)`` over them), 0 elsewhere; ``u`` sums to 0 over cases.
    """
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    counted = den > 0
    n = counted.sum(axis=0)
    total = den.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(total > 0, num.sum(axis=0) / np.where(total > 0, total, 1.0), 0.0)
        mean_den = np.where(n > 0, total / np.maximum(n, 1), 1.0)
    u = np.where(counted, (num - r * den) / mean_den, 0.0)
    return u, counted


def _sd(u: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``sqrt(sum u^2 / (n - 1))`` over axis 0 (u has mean 0 over its n counted cases); NaN below 2 cases."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n >= 2, np.sqrt(np.sum(u * u, axis=0) / np.maximum(n - 1, 1)), np.nan)


class Spread:
    """Accumulates judges' linearised values, one judge at a time, in memory of one judge's size.

    :meth:`rms_sd` is the root mean square over judges of each judge's between-case standard
    deviation; :meth:`pair_rms_sd` the root mean square over every pair of judges of the standard
    deviation of their paired per-case difference, from the identity
    ``sum_{A<B} (u_A - u_B)^2 = J sum_A u_A^2 - (sum_A u_A)^2`` (per case), so pairs are never formed;
    a pair's cases are those counted for any judge.
    """

    def __init__(self) -> None:
        self.n_judges = 0
        self._sum: np.ndarray | None = None
        self._squares: np.ndarray | None = None
        self._counted: np.ndarray | None = None
        self._variances: list[np.ndarray] = []

    def add(self, u: npt.ArrayLike, counted: npt.ArrayLike) -> None:
        """One judge: ``u`` and ``counted`` of :func:`linearised`, ``(n_cases, ...)``."""
        values = np.asarray(u, dtype=np.float64)
        mask = np.asarray(counted, dtype=bool)
        sd = _sd(values, mask.sum(axis=0))
        self._variances.append(sd * sd)
        if self._sum is None or self._squares is None or self._counted is None:
            self._sum, self._squares, self._counted = values.copy(), values * values, mask.copy()
        else:
            self._sum += values
            self._squares += values * values
            self._counted |= mask
        self.n_judges += 1

    def rms_sd(self) -> np.ndarray:
        """Root mean square over judges of the between-case SD; NaN where no judge has two cases."""
        if not self._variances:
            return np.full((), np.nan)
        variances = np.stack(self._variances)
        defined = ~np.isnan(variances)
        count = defined.sum(axis=0)
        total = np.where(defined, variances, 0.0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, np.sqrt(total / np.maximum(count, 1)), np.nan)

    def pair_rms_sd(self) -> np.ndarray:
        """Root mean square over pairs of judges of their paired difference's SD; NaN below two judges."""
        if self.n_judges < 2 or self._sum is None or self._squares is None or self._counted is None:
            return np.full(() if self._sum is None else self._sum.shape[1:], np.nan)
        j = self.n_judges
        squares = np.sum(j * self._squares - self._sum**2, axis=0)
        n = self._counted.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n >= 2, np.sqrt(squares / (j * (j - 1) / 2) / np.maximum(n - 1, 1)), np.nan)


def rms_sd(values: Sequence[np.ndarray], counted: Sequence[np.ndarray]) -> np.ndarray:
    """Root mean square, over judges, of the between-case standard deviation of linearised values.

    Args:
        values: per judge, ``u`` of :func:`linearised`, ``(n_cases, ...)``.
        counted: per judge, the matching mask.

    Returns:
        ``(...)``: NaN where no judge has two counted cases.
    """
    spread = Spread()
    for u, mask in zip(values, counted, strict=True):
        spread.add(u, mask)
    return spread.rms_sd()


def pair_rms_sd(values: Sequence[np.ndarray], counted: Sequence[np.ndarray]) -> np.ndarray:
    """Root mean square, over every pair of judges, of the SD of their paired per-case difference (:class:`Spread`).

    Args:
        values: per judge, ``u`` of :func:`linearised`.
        counted: per judge, the matching mask.

    Returns:
        ``(...)``: NaN with fewer than two judges or two cases.
    """
    spread = Spread()
    for u, mask in zip(values, counted, strict=True):
        spread.add(u, mask)
    return spread.pair_rms_sd()


def detectable(sd: npt.ArrayLike, n: npt.ArrayLike, *, alpha: float = ALPHA, power: float = POWER) -> np.ndarray:
    """The minimum detectable difference ``(z_{1-alpha/2} + z_power) sd / sqrt(n)``.

    Args:
        sd: between-case standard deviations (fractions).
        n: cases.
        alpha: two-sided level.
        power: power.

    Returns:
        Fractions; NaN where ``sd`` is NaN or ``n < 2``.
    """
    s = np.asarray(sd, dtype=np.float64)
    cases = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cases >= 2, mde_multiplier(alpha, power) * s / np.sqrt(np.maximum(cases, 1.0)), np.nan)
