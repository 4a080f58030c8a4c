"""The analysis' section on calibration and abstention: runs in, :class:`SelectiveJudging` out.

:func:`selective_section` applies :mod:`medrewardbench.metrics.calibration` and
:mod:`medrewardbench.metrics.selective` to every run of an analysis with one set of
:class:`SelectiveSettings`, and rounds the figures into the records of
:mod:`medrewardbench.metrics.results`. The calibration split and the recalibration folds depend
only on the seed and the number of cases, so every judge is split the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.calibration import CalibrationFigures, calibration_figures_many
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.recalibration import cross_fitted
from medrewardbench.metrics.results import (
    NO_CONFIDENCE,
    Calibration,
    ColumnTable,
    Estimate,
    JudgeSelective,
    ReliabilityBin,
    SelectiveColumn,
    SelectiveJudging,
    fixed,
    fixed_p,
)
from medrewardbench.metrics.selective import ColumnSelection, selective_judging
from medrewardbench.metrics.settings import SelectiveSettings

__all__ = ["SelectiveSettings", "selective_section"]


def _estimates(
    point: npt.ArrayLike, low: npt.ArrayLike, high: npt.ArrayLike, n: npt.ArrayLike
) -> ColumnTable[Estimate]:
    columns = zip(
        np.asarray(point).tolist(),
        np.asarray(low).tolist(),
        np.asarray(high).tolist(),
        np.asarray(n).tolist(),
        strict=True,
    )
    return ColumnTable.of([Estimate(fixed(p), fixed(lo), fixed(hi), int(k)) for p, lo, hi, k in columns])


def _calibration(figures: CalibrationFigures) -> Calibration:
    pooled = figures.bins[-1]
    bins = tuple(
        ReliabilityBin(float(lo), float(hi), int(k), fixed(c), fixed(a))
        for lo, hi, k, c, a in zip(
            pooled.low.tolist(),
            pooled.high.tolist(),
            pooled.n.tolist(),
            pooled.confidence.tolist(),
            pooled.accuracy.tolist(),
            strict=True,
        )
    )
    return Calibration(
        n=ColumnTable.of([int(k) for k in figures.n.tolist()]),
        ece=_estimates(figures.ece, figures.ece_low, figures.ece_high, figures.n),
        ece_equal_mass=_estimates(figures.ece_mass, figures.ece_mass_low, figures.ece_mass_high, figures.n),
        brier=_estimates(figures.brier, figures.brier_low, figures.brier_high, figures.n),
        reliability=bins,
    )


def _column(selection: ColumnSelection) -> SelectiveColumn:
    t = selection.threshold
    return SelectiveColumn(
        threshold=fixed(t.threshold),
        coverage=fixed(selection.coverage),
        accepted=selection.accepted,
        n=selection.n,
        risk=Estimate(fixed(selection.risk), fixed(selection.risk_low), fixed(selection.risk_high), selection.accepted),
        calibration_accepted=t.accepted,
        calibration_errors=t.errors,
        p_value=fixed_p(t.p_value),
        curve_coverage=tuple(fixed(v) for v in selection.curve_coverage.tolist()),
        curve_risk=tuple(fixed(v) for v in selection.curve_risk.tolist()),
    )


def selective_section(
    runs: Sequence[RunData],
    labels: Sequence[str],
    settings: SelectiveSettings,
    *,
    strata: Sequence[str],
    n_resamples: int,
    seed: int,
    confidence: float,
    block_size: int | None = None,
) -> SelectiveJudging | None:
    """Calibration and abstention of every run; None when no case has a label.

    Args:
        runs: runs on the same data.
        labels: the runs' labels (as the analysis names them).
        settings: alpha, delta, recalibration and the rest.
        strata: organ system per case (the bootstrap's strata).
        n_resamples: bootstrap resamples for the intervals (0: points only).
        seed: the seed of the split, the folds and the resamples.
        confidence: interval coverage.
        block_size: resamples drawn at a time (memory only).

    Returns:
        The :class:`SelectiveJudging` record.
    """
    if not runs or not np.any(runs[0].labels > 0):
        return None
    strata_a = np.asarray(list(strata), dtype=object)
    verdicts = [case_verdicts(run) for run in runs]
    confident = [j for j, v in enumerate(verdicts) if v.source != "none"]
    refit_ok = settings.recalibration != "none" and runs[0].n_cases >= settings.folds
    refits = (
        [cross_fitted(verdicts[j], settings.recalibration, folds=settings.folds, seed=seed) for j in confident]
        if refit_ok
        else []
    )
    # every judge's calibration, raw and recalibrated, on one set of resamples
    figures = calibration_figures_many(
        [verdicts[j] for j in confident] + refits,
        strata=strata_a,
        n_resamples=n_resamples,
        seed=seed,
        confidence_level=confidence,
        n_bins=settings.bins,
        block_size=block_size,
    )
    raw = dict(zip(confident, figures[: len(confident)], strict=True))
    recalibrated = dict(zip(confident, figures[len(confident) :], strict=False))
    note = ""
    if settings.recalibration != "none" and not refit_ok:
        note = f"too few cases ({runs[0].n_cases}) for {settings.folds}-fold recalibration"
    judges: list[JudgeSelective] = []
    heldout = calibrate = 0
    for j, (run, label) in enumerate(zip(runs, labels, strict=True)):
        if j not in raw:
            judges.append(JudgeSelective(label, run.run_id, verdicts[j].source, None, None, None, NO_CONFIDENCE))
            continue
        selection = selective_judging(
            verdicts[j],
            alpha=settings.alpha,
            delta=settings.delta,
            calibration_fraction=settings.calibration_fraction,
            seed=seed,
            n_resamples=n_resamples,
            strata=strata_a,
            confidence_level=confidence,
        )
        calibrate, heldout = selection.calibration_cases, selection.heldout_cases
        judges.append(
            JudgeSelective(
                label,
                run.run_id,
                verdicts[j].source,
                _calibration(raw[j]),
                _calibration(recalibrated[j]) if j in recalibrated else None,
                ColumnTable.of([_column(c) for c in selection.columns]),
                note,
            )
        )
    return SelectiveJudging(
        alpha=settings.alpha,
        delta=settings.delta,
        recalibration=settings.recalibration,
        seed=seed,
        calibration_fraction=settings.calibration_fraction,
        folds=settings.folds,
        calibration_cases=calibrate,
        heldout_cases=heldout,
        judges=tuple(judges),
    )


def coverage_at_risk(section: SelectiveJudging | None, label: str) -> float:
    """The pooled held-out coverage of a run at risk alpha (NaN without a section or a confidence).

    Args:
        section: the analysis' section.
        label: the run's label.

    Returns:
        The coverage.
    """
    judge = None if section is None else section.judge(label)
    if judge is None or judge.abstention is None:
        return math.nan
    return judge.abstention.pooled.coverage
