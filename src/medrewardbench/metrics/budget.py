"""The budget planner: how many doctors' labels give an interval of a given half-width.

The target is a judge's agreement with the doctors over the whole pool (one dimension, or the
six pooled), estimated as in :mod:`medrewardbench.metrics.corrected` under the design of
``annotate pick``: the K least confident cases labelled in full (they add no variance), a uniform
random slice of the rest. The planner gives the size of that random slice, for PPI and for the
doctors' labels alone (:func:`medrewardbench.metrics.ppi.labels_needed`), from a variance per label:

* **before any label**, from the judge's own probabilities taken as calibrated: a case whose
  verdicts the judge holds with probability ``p`` is agreed with ``f = c + a p`` of the time
  (``a`` and ``c`` from its verdicts in the two orders), with conditional variance ``a^2 p (1-p)``
  (:func:`medrewardbench.metrics.ppi.calibrated_variances`). An overconfident judge makes this
  plan optimistic for PPI; the plan after the first labels corrects it. A judge without
  probabilities (its confidence is only whether its two orders agreed) gives no variance to
  plan PPI by: the labels-only plan then takes the worst case, 1/4 per label, and PPI's is
  that bound too (power tuning never does worse than the labels alone), marked as a bound;
* **after some labels**, from the slice so far: the variances the estimator itself measures on
  the random slice's labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.corrected import POOLED, DoctorLabels, agreement_arrays, labelled_pool
from medrewardbench.metrics.ppi import calibrated_variances, labels_needed, stratified_ppi
from medrewardbench.metrics.selection import SelectionError, pick_design

__all__ = ["WORST_CASE_VARIANCE", "BudgetPlan", "BudgetRow", "plan_after", "plan_before"]

WORST_CASE_VARIANCE = 0.25
"""The largest variance a label in [0, 1] can have (half 0, half 1)."""


@dataclass(frozen=True)
class BudgetRow:
    """Random labels needed for one half-width.

    Attributes:
        half_width: the interval's half-width.
        ppi: random labels PPI needs.
        labels_only: random labels the doctors' labels alone need.
    """

    half_width: float
    ppi: int
    labels_only: int


@dataclass(frozen=True)
class BudgetPlan:
    """A budget: the design's sizes, where the variances come from, and the labels per half-width.

    Attributes:
        run_id, judge_spec: the judge whose agreement is planned for (and whose probabilities are the proxy).
        dimension: a dimension or ``pooled``.
        pool: the pool's cases.
        least_confident: K, labelled in full (on top of the rows' random labels).
        remainder: N - K, the stratum the random labels are drawn from.
        basis: ``confidence`` (before labels) or ``slice`` (from the labels so far).
        random_labelled: random labels so far (0 before any).
        variance_ppi, variance_labels_only: the variance per label used.
        confidence: the intervals' coverage.
        rows: one per half-width asked for.
        ppi_bound: PPI's numbers are only an upper bound (a judge without probabilities, before labels).
    """

    run_id: str
    judge_spec: str
    dimension: str
    pool: int
    least_confident: int
    remainder: int
    basis: str
    random_labelled: int
    variance_ppi: float
    variance_labels_only: float
    confidence: float
    rows: tuple[BudgetRow, ...]
    ppi_bound: bool = False

    def to_json(self) -> dict[str, Any]:
        """The plan as a JSON object."""
        return {
            "run_id": self.run_id,
            "judge": self.judge_spec,
            "dimension": self.dimension,
            "pool": self.pool,
            "least_confident": self.least_confident,
            "remainder": self.remainder,
            "basis": self.basis,
            "random_labelled": self.random_labelled,
            "variance_ppi": round(self.variance_ppi, 6),
            "variance_labels_only": round(self.variance_labels_only, 6),
            "confidence": self.confidence,
            "ppi_bound": self.ppi_bound,
            "rows": [{"half_width": r.half_width, "ppi": r.ppi, "labels_only": r.labels_only} for r in self.rows],
        }


def _columns(dimension: str) -> list[int]:
    if dimension == POOLED:
        return list(range(len(DIMENSIONS)))
    if dimension not in DIMENSIONS:
        raise SelectionError(f"unknown dimension {dimension!r}; use {POOLED} or one of {', '.join(DIMENSIONS)}")
    return [DIMENSIONS.index(dimension)]


def _rows(
    half_widths: Sequence[float], ppi: float, classical: float, remainder: int, pool: int, confidence: float
) -> tuple[BudgetRow, ...]:
    return tuple(
        BudgetRow(
            half_width=h,
            ppi=labels_needed(h, ppi, remainder=remainder, pool=pool, confidence=confidence),
            labels_only=labels_needed(h, classical, remainder=remainder, pool=pool, confidence=confidence),
        )
        for h in half_widths
    )


def plan_before(
    run: RunData,
    *,
    least_confident: int,
    half_widths: Sequence[float],
    dimension: str = POOLED,
    ranked_by: str = "mean",
    seed: int = 0,
    confidence: float = 0.95,
) -> BudgetPlan:
    """The plan before any label, from the judge's confidences taken as calibrated.

    Args:
        run: the judge's run (its cases are the pool).
        least_confident: K (the same K, seed and ranking as the pick).
        half_widths: the half-widths to plan for.
        dimension: a dimension or ``pooled``.
        ranked_by: the pick's ranking.
        seed: the pick's seed.
        confidence: interval coverage.

    Returns:
        The plan.

    Raises:
        SelectionError: K beyond the pool, a run without confidences, or an unknown dimension.
    """
    columns = _columns(dimension)
    verdicts = case_verdicts(run)
    n = run.n_cases
    census = np.zeros(n, dtype=bool)
    if least_confident:
        if least_confident > n:
            raise SelectionError(f"K = {least_confident} is more than the {n} cases of run {run.run_id}")
        design = pick_design(verdicts, least_confident=least_confident, random=0, seed=seed, ranked_by=ranked_by)
        index = {cid: i for i, cid in enumerate(run.case_ids)}
        census[[index[cid] for cid in design.least_confident_ids]] = True
    p = np.where(np.isnan(verdicts.p_first), 0.5, verdicts.p_first)[~census][:, columns]
    given = run.verdicts[~census][:, :, columns].astype(np.int64)
    ran = given != -1
    n_ran = np.maximum(ran.sum(axis=1), 1)
    says_2 = ((given == 2) & ran).sum(axis=1) / n_ran
    says_1 = ((given == 1) & ran).sum(axis=1) / n_ran
    slope = says_1 - says_2
    proxy = says_2 + slope * p
    bound = verdicts.source != "probability"
    if bound:
        classical = ppi = WORST_CASE_VARIANCE
    else:
        classical, ppi = calibrated_variances(proxy, slope * slope * p * (1 - p))
    remainder = n - int(census.sum())
    return BudgetPlan(
        run_id=run.run_id,
        judge_spec=run.judge_spec,
        dimension=dimension,
        pool=n,
        least_confident=least_confident,
        remainder=remainder,
        basis="confidence",
        random_labelled=0,
        variance_ppi=ppi,
        variance_labels_only=classical,
        confidence=confidence,
        rows=_rows(half_widths, ppi, classical, remainder, n, confidence),
        ppi_bound=bound,
    )


def plan_after(
    run: RunData,
    doctors: DoctorLabels,
    *,
    half_widths: Sequence[float],
    dimension: str = POOLED,
    confidence: float = 0.95,
) -> BudgetPlan:
    """The plan from the slice so far: the variances the estimator measures on the random labels.

    Args:
        run: the judge's run (the design's run, whose cases are the pool).
        doctors: the labels that came back, with their design.
        half_widths: the half-widths to plan for.
        dimension: a dimension or ``pooled``.
        confidence: interval coverage.

    Returns:
        The plan.

    Raises:
        SelectionError: fewer than two random labels, or labels that do not fit the run.
    """
    columns = _columns(dimension)
    design = doctors.design
    pool = labelled_pool(run, doctors, design_run=design is not None and design["run_id"] == run.run_id)
    p_first = case_verdicts(run).p_first
    y, f = agreement_arrays(run, np.arange(run.n_cases), pool.labels, np.where(np.isnan(p_first), 0.5, p_first))
    rest = pool.strata == 1
    y_rest, f_rest = y[rest][:, columns], f[rest][:, columns]
    n = int((~np.isnan(y_rest)).any(axis=1).sum())
    remainder = int(rest.sum())
    if n < 2 or n >= remainder:
        raise SelectionError(
            f"{doctors.source}: {n} random label(s) of {remainder}: the plan from the slice needs at least 2, "
            "and fewer than the whole remainder"
        )
    fit = stratified_ppi(y_rest, f_rest, confidence=confidence)
    per_label = n / (1.0 - n / remainder)  # se^2 = (1 - n/N) S^2 / n
    ppi, classical = fit.ppi.se**2 * per_label, fit.classical.se**2 * per_label
    return BudgetPlan(
        run_id=run.run_id,
        judge_spec=run.judge_spec,
        dimension=dimension,
        pool=run.n_cases,
        least_confident=int((pool.strata == 0).sum()),
        remainder=remainder,
        basis="slice",
        random_labelled=n,
        variance_ppi=ppi,
        variance_labels_only=classical,
        confidence=confidence,
        rows=_rows(half_widths, ppi, classical, remainder, run.n_cases, confidence),
    )
