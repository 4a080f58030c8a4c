"""Prediction-powered means over a pool of cases, under a stratified design, and the labels they need.

Prediction-powered inference (PPI; Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, *Science*
2023) estimates a mean of labels ``Y`` over a pool from a proxy ``f`` known on every case (here: a
judge's probability) corrected by the labels of a random sample::

    theta = mean_pool(lambda * f) + mean_sample(Y - lambda * f)

The correction term is unbiased whatever the proxy is worth; a good proxy only makes the
residuals ``Y - lambda * f`` vary less than ``Y`` itself, so the interval narrows. ``lambda`` is
tuned for power as in PPI++ (Angelopoulos, Duchi, Zrnic 2023): the value that minimises the
variance, ``Cov(Y, f) / Var(f)`` on the labelled cases, clipped to [0, 1] (0 is the labels alone,
1 is plain PPI). The target is the mean over the **pool itself** (a finite population whose
proxies are all known), so the pool term carries no sampling error and the sample term gets the
finite-population correction ``1 - n/N``; with a census (every case labelled) the estimate is
the exact mean and the interval has width 0. This is the survey statistician's regression
estimator, of which PPI is the machine-learning reading.

**The design** (:mod:`medrewardbench.metrics.selection`): the pool is split into strata, each
labelled on a uniform random sample of its cases. ``annotate pick`` makes two: the K least
confident cases (labelled in full: its mean is known exactly) and the rest (a uniform random
slice of R). The pool mean is ``sum_h (N_h / N) theta_h`` with variance ``sum_h (N_h / N)^2
var_h``, each stratum with its own ``lambda``. A stratum whose labels are incomplete (doctors
have not finished, or could not judge) is treated as a uniform sample of itself: that is an
assumption, and the caller says so.

Several columns (the six dimensions) can be pooled into one mean with weights: the sampling unit
stays the case, so the variance comes from each case's weighted residual (a linearisation that
also covers a dimension some labelled cases have no label on).

Intervals are CLT-based (normal quantile), clipped to the range the labels can take. Beside
each, the **labels-only** interval of the same design (``lambda = 0``) shows the gain.

**Small samples** (``small_sample=True``, the default). The plain CLT variance of a sampled
stratum is the sample variance of its residuals. With few labels and an extreme rate (20 labels,
agreement 0.95: all 20 agree a third of the time) every label is the same, the variance estimate
is 0 and the interval has width 0 although the stratum's mean is not known; the Wald interval of
a proportion fails alike near 0 and 1 (Brown, Cai and DasGupta, *Statistical Science* 2001).
The remedy is Agresti and Coull's (*The American Statistician* 1998): ``z^2 / 2`` pseudo-labels
at each end of the labels' range join the sample before its variance is taken. Here they enter
**the variance only**: the estimate stays the unbiased PPI one (moving it toward the middle, as
Agresti-Coull does, would shift a pooled PPI estimate by about half its standard error at 200
labels). Each pseudo-label carries its column's mean labelled proxy, so ``lambda`` is
unchanged, and is centred on its column's labelled mean. Over several columns each pseudo-label
belongs to one column and adds ``w_d^2`` times its square, as if a pseudo-case's columns were
independent: a mean over six dimensions gets a sixth of a single column's addition. Per sampled
stratum, with ``g_d = n / n_d`` the scaling of a column some labelled cases lack::

    S^2_aug = (SS_residuals + (z^2 / 2) sum_d w_d^2 g_d^2 ((hi - ybar_d)^2 + (lo - ybar_d)^2)) / (n - 1 + z^2)
    S^2     = max(S^2_plain, S^2_aug)

(a floor: near a rate of 0.5 the pseudo-labels spread less than the sample, and the interval is
never narrower than the CLT one). A census stratum still adds nothing (its finite-population
correction is 0), so the interval has width 0 only when every stratum is a census.

For one 0/1 column this is the Agresti-Coull variance, centred on the sample mean. Its exact
coverage at 95 % over rates 0.5-0.998 (by symmetry 0.002-0.5) is at least 89.1 / 91.3 / 93.0 /
93.4 % with 10 / 20 / 60 / 200 labels (the binomial's saw-tooth, as for Agresti-Coull) and
95.4-97.7 % on average, where the Wald interval's minimum is 2 / 4 / 11 / 33 %. The addition is
``O(z^2 / n)``: at the design's 200 random labels the pooled intervals widen by 1-2.5 %.
Checked by simulation in ``benchmarks/bench_ppi.py`` (cells with 20 labels and agreement
0.95 / 0.99, old vs new) and ``tests/metrics/test_ppi_small_samples.py``; ``small_sample=False``
gives the plain CLT interval for that comparison.

:func:`labels_needed` is the budget planner: how many random labels give a half-width, from a
variance per label (before any labels, the judge's confidences taken as calibrated; after, the
residuals of the slice so far).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.stats import FloatArray

__all__ = [
    "MeanInterval",
    "PPIResult",
    "StratumFit",
    "calibrated_variances",
    "labels_needed",
    "normal_quantile",
    "stratified_ppi",
]


def normal_quantile(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 for 0.95).

    Args:
        confidence: the coverage, in (0, 1).

    Returns:
        ``z`` with ``P(|Z| <= z) = confidence``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


@dataclass(frozen=True)
class MeanInterval:
    """A mean over the pool with its CLT interval (small-sample variance: see the module's docstring).

    Attributes:
        estimate: the point estimate (NaN when it cannot be made; ``note`` says why).
        low, high: the interval, clipped to the labels' range.
        se: the standard error.
        note: why there is no estimate; empty when there is one.
    """

    estimate: float
    low: float
    high: float
    se: float
    note: str = ""

    @property
    def half_width(self) -> float:
        """Half the interval's width."""
        return (self.high - self.low) / 2

    def to_json(self) -> dict[str, object]:
        """The interval as a JSON object (NaN as null)."""
        return {
            "estimate": _finite(self.estimate),
            "low": _finite(self.low),
            "high": _finite(self.high),
            "se": _finite(self.se),
            **({"note": self.note} if self.note else {}),
        }


def _finite(value: float) -> float | None:
    return None if not math.isfinite(value) else round(float(value), 6)


@dataclass(frozen=True)
class StratumFit:
    """One stratum of the design, as the estimate used it.

    Attributes:
        size: N_h, the stratum's cases in the pool.
        labelled: n_h, those with at least one label.
        lambdas: the power-tuned lambda per column (0 for labels-only, and where it does not matter).
    """

    size: int
    labelled: int
    lambdas: tuple[float, ...]


@dataclass(frozen=True)
class PPIResult:
    """A prediction-powered mean beside the labels-only one, under the same design.

    Attributes:
        ppi: the prediction-powered estimate and interval.
        classical: the doctors' labels alone (the same strata, lambda = 0).
        n_pool: the pool's cases.
        n_labelled: cases with at least one label.
        strata: each stratum's fit, in the order of the stratum codes.
    """

    ppi: MeanInterval
    classical: MeanInterval
    n_pool: int
    n_labelled: int
    strata: tuple[StratumFit, ...]

    @property
    def variance_ratio(self) -> float:
        """Labels-only variance over PPI variance: how many labels one label is worth (NaN when undefined)."""
        if not (self.ppi.se > 0 and math.isfinite(self.classical.se)):
            return math.nan
        return float((self.classical.se / self.ppi.se) ** 2)

    @property
    def effective_labels(self) -> float:
        """The random labels that labels-only would need for PPI's variance (labelled cases outside a census)."""
        sampled = sum(s.labelled for s in self.strata if s.labelled < s.size)
        return sampled * self.variance_ratio if sampled else math.nan

    def to_json(self) -> dict[str, object]:
        """The result as a JSON object."""
        return {
            "ppi": self.ppi.to_json(),
            "labels_only": self.classical.to_json(),
            "n_pool": self.n_pool,
            "n_labelled": self.n_labelled,
            "variance_ratio": _finite(self.variance_ratio),
            "effective_labels": _finite(self.effective_labels),
            "strata": [{"size": s.size, "labelled": s.labelled, "lambdas": list(s.lambdas)} for s in self.strata],
        }


def _as_2d(values: npt.ArrayLike) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    return array[:, None] if array.ndim == 1 else array


def _power_lambdas(y: FloatArray, f: FloatArray, labelled: npt.NDArray[np.bool_], counts: FloatArray) -> FloatArray:
    """PPI++'s variance-minimising lambda per column on the labelled rows, clipped to [0, 1]; 0 without spread."""
    safe = np.maximum(counts, 1.0)
    y0, f0 = np.where(labelled, y, 0.0), np.where(labelled, f, 0.0)
    dy = np.where(labelled, y0 - y0.sum(axis=0) / safe, 0.0)
    df = np.where(labelled, f0 - f0.sum(axis=0) / safe, 0.0)
    cov = (dy * df).sum(axis=0)
    var_f = (df * df).sum(axis=0)
    usable = (counts >= 2) & (var_f > 1e-12 * np.maximum(counts - 1, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(usable, cov / np.where(usable, var_f, 1.0), 0.0)
    return np.asarray(np.clip(lam, 0.0, 1.0), dtype=np.float64)


def _pseudo_squares(
    y: FloatArray, labelled: npt.NDArray[np.bool_], counts: FloatArray, weights: FloatArray, bounds: tuple[float, float]
) -> float:
    """The pseudo-labels' weighted squares per pair of them (one at each bound).

    ``sum_d w_d^2 g_d^2 ((hi - ybar_d)^2 + (lo - ybar_d)^2)`` over the labelled columns.
    """
    n = float(labelled.any(axis=1).sum())
    safe = np.maximum(counts, 1.0)
    mean_y = np.where(labelled, y, 0.0).sum(axis=0) / safe
    spread = (bounds[1] - mean_y) ** 2 + (bounds[0] - mean_y) ** 2
    scale = n / safe
    return float((np.where(counts > 0, weights * weights * scale * scale * spread, 0.0)).sum())


def _stratum(
    y: FloatArray,
    f: FloatArray,
    weights: FloatArray,
    tuned: bool,
    pseudo: float = 0.0,
    bounds: tuple[float, float] = (0.0, 1.0),
) -> tuple[float, float, tuple[float, ...], int, str]:
    """One stratum's (estimate, variance, lambdas, labelled cases, note) for the weighted columns.

    ``pseudo`` is the number of pseudo-labels put at each end of ``bounds`` (``z^2 / 2``; 0 for
    the plain CLT variance): see the module's docstring.
    """
    size = y.shape[0]
    labelled = ~np.isnan(y)
    counts = labelled.sum(axis=0).astype(np.float64)
    any_label = labelled.any(axis=1)
    n = int(any_label.sum())
    if size == 0:
        return 0.0, 0.0, tuple(0.0 for _ in weights), 0, ""
    if (counts[weights > 0] == 0).any():
        return math.nan, math.nan, tuple(0.0 for _ in weights), n, f"a stratum of {size} cases has no label"
    lambdas = _power_lambdas(y, f, labelled, counts) if tuned else np.zeros(len(weights))
    lambdas = np.where((weights > 0) & (counts < size), lambdas, 0.0)
    safe = np.maximum(counts, 1.0)
    residual = np.where(labelled, np.where(labelled, y, 0.0) - lambdas * f, 0.0)
    mean_residual = residual.sum(axis=0) / safe
    per_column = lambdas * f.mean(axis=0) + mean_residual
    estimate = float((weights * per_column).sum())
    centred = np.where(labelled, (residual - mean_residual) * (n / safe), 0.0)
    z = (centred * weights).sum(axis=1)[any_label]
    lambda_tuple = tuple(float(x) for x in lambdas)
    if n >= size:
        return estimate, 0.0, lambda_tuple, n, ""
    if n < 2:
        return estimate, math.nan, lambda_tuple, n, f"a stratum of {size} cases has only {n} label"
    squares = float(((z - z.mean()) ** 2).sum())
    per_label = squares / (n - 1)
    if pseudo > 0:
        augmented = (squares + pseudo * _pseudo_squares(y, labelled, counts, weights, bounds)) / (n - 1 + 2 * pseudo)
        per_label = max(per_label, augmented)
    variance = (1.0 - n / size) * per_label / n
    return estimate, variance, lambda_tuple, n, ""


def _combine(
    y: FloatArray,
    f: FloatArray,
    codes: npt.NDArray[np.int64],
    weights: FloatArray,
    tuned: bool,
    z_value: float,
    bounds: tuple[float, float],
    small_sample: bool,
) -> tuple[MeanInterval, list[StratumFit]]:
    total = y.shape[0]
    estimate, variance = 0.0, 0.0
    fits: list[StratumFit] = []
    notes: list[str] = []
    for code in np.unique(codes):
        rows = codes == code
        size = int(rows.sum())
        pseudo = z_value * z_value / 2 if small_sample else 0.0
        part, var, lambdas, n, note = _stratum(y[rows], f[rows], weights, tuned, pseudo, bounds)
        share = size / total
        estimate += share * part
        variance += share * share * var
        fits.append(StratumFit(size=size, labelled=n, lambdas=lambdas))
        if note:
            notes.append(note)
    if notes or not math.isfinite(variance):
        return MeanInterval(math.nan if notes else estimate, math.nan, math.nan, math.nan, "; ".join(notes)), fits
    se = math.sqrt(max(variance, 0.0))
    low = max(bounds[0], estimate - z_value * se)
    high = min(bounds[1], estimate + z_value * se)
    return MeanInterval(estimate, low, high, se), fits


def stratified_ppi(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    strata: npt.ArrayLike | None = None,
    *,
    confidence: float = 0.95,
    weights: Sequence[float] | None = None,
    bounds: tuple[float, float] = (0.0, 1.0),
    small_sample: bool = True,
) -> PPIResult:
    """The pool mean of ``y`` by PPI++ under a stratified design, beside the labels-only estimate.

    Args:
        y: (N,) or (N, D) labels on the pool's cases, NaN where a case has no label.
        f: the proxy, same shape, finite on every case.
        strata: (N,) stratum code of each case (each stratum labelled on a uniform random sample
            of itself, or in full); None for one stratum.
        confidence: interval coverage.
        weights: (D,) weights pooling the columns into one mean (default equal); they are
            normalised to sum to 1.
        bounds: the range of the labels, to clip the intervals to (and where the small-sample
            pseudo-labels sit).
        small_sample: add Agresti-Coull-type pseudo-labels to each sampled stratum's variance
            (see the module's docstring); False for the plain CLT variance, which is 0 when a
            stratum's labels are all equal.

    Returns:
        The :class:`PPIResult`; an estimate that cannot be made (a stratum without a label, or
        with one label only) is NaN with a note.

    Raises:
        ValueError: shapes that do not match, a proxy that is not finite, or bad weights.
    """
    y2, f2 = _as_2d(y), _as_2d(f)
    if y2.shape != f2.shape or y2.ndim != 2:
        raise ValueError(f"labels {y2.shape} and proxy {f2.shape} must have the same (N,) or (N, D) shape")
    if not np.isfinite(f2).all():
        raise ValueError("the proxy must be finite on every case of the pool")
    n_pool, n_cols = y2.shape
    codes = np.zeros(n_pool, dtype=np.int64) if strata is None else np.asarray(strata, dtype=np.int64)
    if codes.shape != (n_pool,):
        raise ValueError(f"strata must have one code per case ({n_pool}), not shape {codes.shape}")
    w = np.full(n_cols, 1.0 / n_cols) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (n_cols,) or (w < 0).any() or not w.sum() > 0:
        raise ValueError(f"weights must be {n_cols} non-negative numbers with a positive sum")
    w = w / w.sum()
    z_value = normal_quantile(confidence)
    ppi, fits = _combine(y2, f2, codes, w, True, z_value, bounds, small_sample)
    classical, _ = _combine(y2, f2, codes, w, False, z_value, bounds, small_sample)
    return PPIResult(
        ppi=ppi,
        classical=classical,
        n_pool=n_pool,
        n_labelled=int((~np.isnan(y2)).any(axis=1).sum()),
        strata=tuple(fits),
    )


def labels_needed(
    half_width: float,
    variance_per_label: float,
    *,
    remainder: int,
    pool: int,
    confidence: float = 0.95,
) -> int:
    """Random labels in the remainder stratum for an interval of ``half_width`` on the pool mean.

    The census stratum (if any) adds no variance; the remainder's share ``remainder / pool``
    scales the rest, with the finite-population correction::

        z * (remainder / pool) * sqrt((1/n - 1/remainder) * variance_per_label) <= half_width

    Args:
        half_width: the interval's half-width wanted (on the 0-1 scale).
        variance_per_label: the variance of one label's term: ``Var(Y)`` for labels alone, the
            residual variance ``Var(Y - lambda f)`` for PPI.
        remainder: the cases of the randomly sampled stratum.
        pool: every case of the pool.
        confidence: interval coverage.

    Returns:
        n, at most ``remainder`` (labelling all of it gives width 0); 0 when none is needed.

    Raises:
        ValueError: a half-width that is not positive, a negative variance, or sizes that do not fit.
    """
    if not half_width > 0:
        raise ValueError(f"the half-width must be positive, not {half_width}")
    if not variance_per_label >= 0:
        raise ValueError(f"the variance must be a non-negative number, not {variance_per_label}")
    if not 0 <= remainder <= pool:
        raise ValueError(f"the remainder ({remainder}) must be between 0 and the pool ({pool})")
    if remainder == 0 or variance_per_label == 0:
        return 0
    share = remainder / pool
    allowed = (half_width / (normal_quantile(confidence) * share)) ** 2 / variance_per_label  # = 1/n - 1/N_r
    n = 1.0 / (allowed + 1.0 / remainder)
    return min(remainder, math.ceil(n - 1e-9))


def calibrated_variances(proxy: npt.ArrayLike, spread: npt.ArrayLike | None = None) -> tuple[float, float]:
    """Per-label variances before any label, if the proxies are calibrated (``E[Y | f] = f``).

    Given the proxy, a label varies by ``spread`` (``f (1 - f)`` for a 0/1 label; less for a label
    that is an average over the two orders of a judge that answered them differently). Labels
    alone then vary by ``E spread + Var(f)``; PPI's residual ``Y - f`` (lambda = 1 is optimal for
    a calibrated proxy) by ``E spread``. Columns (dimensions) of one case are averaged, their
    labels taken as independent given the proxy.

    Args:
        proxy: (N,) or (N, D) the proxy on the cases to be sampled.
        spread: the conditional variance of each label, same shape (default ``f (1 - f)``).

    Returns:
        (labels-only variance, PPI variance) per label.
    """
    f = _as_2d(proxy)
    if f.size == 0:
        return 0.0, 0.0
    given = f * (1 - f) if spread is None else _as_2d(spread)
    n_cols = f.shape[1]
    within = float(given.sum(axis=1).mean()) / (n_cols * n_cols)
    classical = within + float(np.var(f.mean(axis=1)))
    return classical, within
