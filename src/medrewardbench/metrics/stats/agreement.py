"""Chance-corrected agreement with the experts: Cohen's kappa and Gwet's AC1, with case-bootstrap intervals.

Failures are **excluded** (not a third category): kappa measures agreement when the judge answers;
the failure rate is reported separately and accuracy already counts failures as wrong.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.stats.bootstrap import Estimate, _estimate, _resolve_weights, resampled_sums
from medrewardbench.metrics.stats.counts import (
    CountArray,
    FloatArray,
    _check_confidence,
    _labels,
    _safe_divide,
    _verdicts,
)


def kappa_from_confusion(cells: npt.ArrayLike) -> FloatArray:
    """Cohen's kappa from 2x2 confusion counts ``(..., 2, 2)`` [pred, gold], elementwise.

    ``(p_o - p_e) / (1 - p_e)`` with ``p_e`` from the two raters' marginals; NaN when undefined
    (no pairs, or both raters used one and the same class, as scikit-learn returns).
    """
    c = np.asarray(cells, dtype=np.float64)
    total = c.sum(axis=(-2, -1))
    observed = _safe_divide(c[..., 0, 0] + c[..., 1, 1], total)
    pred_1 = _safe_divide(c[..., 0, 0] + c[..., 0, 1], total)
    gold_1 = _safe_divide(c[..., 0, 0] + c[..., 1, 0], total)
    expected = pred_1 * gold_1 + (1.0 - pred_1) * (1.0 - gold_1)
    return _safe_divide(observed - expected, 1.0 - expected)


def ac1_from_confusion(cells: npt.ArrayLike) -> FloatArray:
    """Gwet's AC1 from 2x2 confusion counts ``(..., 2, 2)``, elementwise.

    ``(p_o - p_e) / (1 - p_e)`` with ``p_e = 2 * pi (1 - pi)`` and ``pi`` the mean of the two
    raters' share of class 1; defined whenever there is a pair, since ``p_e <= 1/2``.
    """
    c = np.asarray(cells, dtype=np.float64)
    total = c.sum(axis=(-2, -1))
    observed = _safe_divide(c[..., 0, 0] + c[..., 1, 1], total)
    pi_1 = _safe_divide(2.0 * c[..., 0, 0] + c[..., 0, 1] + c[..., 1, 0], 2.0 * total)
    expected = 2.0 * pi_1 * (1.0 - pi_1)
    return _safe_divide(observed - expected, 1.0 - expected)


def _case_confusion(verdicts: npt.ArrayLike, labels: npt.ArrayLike) -> CountArray:
    """Per case and dimension, 2x2 counts over its answered labelled requests: (n, D, 2, 2)."""
    v = _verdicts(verdicts)
    lab = _labels(labels, v.shape[0], v.shape[2])[:, None, :]
    cells = np.empty(v.shape[:1] + v.shape[2:] + (2, 2), dtype=np.int64)
    for p in (1, 2):
        for g in (1, 2):
            cells[..., p - 1, g - 1] = ((v == p) & (lab == g)).sum(axis=1)
    return cells


def bootstrap_agreement_ci(
    verdicts: npt.ArrayLike,
    labels: npt.ArrayLike,
    *,
    weights: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int | None = 0,
    strata: npt.ArrayLike | None = None,
) -> tuple[Estimate, Estimate]:
    """Kappa and AC1 with the experts per dimension, pooled over both orders, with case-bootstrap intervals.

    Every answered, labelled request is one pair (judge's winner, experts' winner); failures and
    requests not run are left out, and ``n`` says how many pairs each value rests on.

    Args:
        verdicts: (n_cases, 2, n_dims).
        labels: (n_cases, n_dims).
        weights: precomputed (B, n_cases) resample counts; None draws one.
        confidence: interval coverage.
        n_resamples: resamples when ``weights`` is None.
        seed: seed when ``weights`` is None.
        strata: strata when ``weights`` is None.

    Returns:
        ``(kappa, ac1)`` estimates of (n_dims,) arrays; ``n`` is answered, labelled requests.
    """
    _check_confidence(confidence)
    cells = _case_confusion(verdicts, labels)
    w = _resolve_weights(weights, cells.shape[0], n_resamples, seed, strata)
    totals = cells.sum(axis=0)
    n = totals.sum(axis=(-2, -1)).astype(np.int64)
    resampled = resampled_sums(w, cells)
    kappa = _estimate(kappa_from_confusion(totals), kappa_from_confusion(resampled), n, confidence)
    ac1 = _estimate(ac1_from_confusion(totals), ac1_from_confusion(resampled), n, confidence)
    return kappa, ac1
