"""A confidence for every verdict: one case-level preference per judge, case and dimension.

Selective judging (calibration, abstention, picking pairs for doctors) works on one verdict per
case and dimension, not per request: a judge shown a case in both orders gives two answers, and
how much they agree is the cheapest confidence there is. This module turns a run's arrays into
that case-level view.

Per case and dimension, ``p_first`` is the judge's probability that ``response_1`` is the better
answer, averaged over the orders that produced a verdict:

* **probability**: when the back end gave one (token log-probabilities of the verdict, a reward
  model's score margin, a jury's vote share), stored per request in source order
  (:attr:`RunData.preferences`);
* **order agreement**: otherwise the hard verdicts, 1.0 for ``response_1`` and 0.0 for
  ``response_2``, so two agreeing orders give 1.0 or 0.0 and two disagreeing orders give 0.5;
* with one order and no probability there is no confidence at all (``source == "none"``): the
  verdicts are 0 or 1 and nothing is invented from them.

``confidence = max(p, 1 - p)`` is in [0.5, 1]; a dimension without a verdict in any order has
``p_first`` NaN and confidence 0 (it is always abstained on and counts as wrong if forced).
The SCOPE uncertainty (arXiv 2602.13110) is the binary entropy of the averaged preference,
:attr:`CaseVerdicts.entropy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.stats import FloatArray, IntArray

__all__ = ["ConfidenceSource", "CaseVerdicts", "case_verdicts"]

ConfidenceSource = Literal["probability", "order agreement", "none"]
"""Where a run's confidences come from (see the module docstring)."""


@dataclass(frozen=True)
class CaseVerdicts:
    """One judge's case-level preferences, with the doctors' labels beside them.

    Attributes:
        run_id, judge_spec: the run.
        case_ids: one per row.
        p_first: (n_cases, n_dims) probability that ``response_1`` is better; NaN without a verdict.
        labels: (n_cases, n_dims) the experts' winner, 1 or 2; 0 where the case has no label.
        groups: field -> value per case (organ_system, ...), as in :class:`RunData`.
        source: where the confidences come from.
    """

    run_id: str
    judge_spec: str
    case_ids: tuple[str, ...]
    p_first: FloatArray
    labels: IntArray
    groups: Mapping[str, tuple[str, ...]]
    source: ConfidenceSource

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The dimension of each column."""
        return DIMENSIONS

    @property
    def confidence(self) -> FloatArray:
        """max(p, 1 - p) in [0.5, 1]; 0 where the judge gave no verdict."""
        p = self.p_first
        return np.where(np.isnan(p), 0.0, np.maximum(p, 1.0 - p))

    @property
    def verdict(self) -> IntArray:
        """1 or 2 (the preferred response); 0 for a tie (p = 0.5) or no verdict."""
        p = self.p_first
        out = np.zeros(p.shape, dtype=np.int8)
        out[p > 0.5] = 1
        out[p < 0.5] = 2
        return out

    @property
    def correct(self) -> FloatArray:
        """1 where the verdict is the experts', 0 where not or none, 0.5 for a tie; NaN without a label."""
        verdict = self.verdict
        tie = ~np.isnan(self.p_first) & (verdict == 0)
        out = np.where(verdict == self.labels, 1.0, 0.0)
        out = np.where(tie, 0.5, out)
        return np.where(self.labels > 0, out, np.nan)

    @property
    def entropy(self) -> FloatArray:
        """Binary entropy (bits) of the averaged preference (SCOPE); NaN without a verdict."""
        p = self.p_first
        with np.errstate(invalid="ignore", divide="ignore"):
            terms = np.nan_to_num(p * np.log2(p)) + np.nan_to_num((1 - p) * np.log2(1 - p))
        return np.where(np.isnan(p), np.nan, -terms)


def case_verdicts(data: RunData) -> CaseVerdicts:
    """The case-level preferences of one run (see the module docstring for the rules).

    Args:
        data: the run's arrays; ``data.preferences`` is used where it holds a probability.

    Returns:
        The run's :class:`CaseVerdicts`.
    """
    verdicts = data.verdicts.astype(np.int64)
    hard = np.where(verdicts == 1, 1.0, np.where(verdicts == 2, 0.0, np.nan))  # (n, 2, d)
    prefs = data.preferences
    has_probability = prefs is not None and bool(np.isfinite(prefs).any())
    if has_probability:
        assert prefs is not None
        soft = np.where(np.isfinite(prefs) & ~np.isnan(hard), prefs, hard)  # a probability only beside a verdict
    else:
        soft = hard
    counted = ~np.isnan(soft)
    n_counted = counted.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_first = np.where(n_counted > 0, np.nansum(soft, axis=1) / np.maximum(n_counted, 1), np.nan)
    ran_both = bool(((verdicts != -1).sum(axis=1) == 2).any())
    source: ConfidenceSource = "probability" if has_probability else ("order agreement" if ran_both else "none")
    return CaseVerdicts(
        run_id=data.run_id,
        judge_spec=data.judge_spec,
        case_ids=data.case_ids,
        p_first=p_first.astype(np.float64),
        labels=data.labels,
        groups=data.groups,
        source=source,
    )
