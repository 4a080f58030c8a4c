"""The human ceiling: how often the annotators agree with each other, and every judge on the same footing.

:func:`human_ceiling` is what :func:`~medrewardbench.metrics.analysis.analyze` adds to an analysis
whenever the cases carry per-annotator labels. Its input is a **ratings** array, int
``(n_cases, n_annotators, n_dims)``: the winner (1 or 2, source order) each annotator gave each
case on each dimension, 0 where they gave none (:func:`~medrewardbench.metrics.annotators.ratings_from_annotations`).

Three kinds of numbers, each per dimension and pooled over the six (every labelled
(case, dimension) one item, as the leaderboard score pools them):

* **Agreement between annotators** (:func:`panel_agreement`): pooled pairwise percent agreement,
  Fleiss' kappa and Krippendorff's alpha (nominal), exactly as
  :mod:`medrewardbench.metrics.annotators` defines them, over every case and per organ system.
* **Leave-one-out targets** (:func:`loo_targets`): for case i, annotator r who labelled it and
  dimension d, the target is the strict majority of the *other* annotators' labels of (i, d). With
  two annotators that is the other one's label (a single vote is a strict majority of one). When
  the others have no strict majority (a 1-1 tie of the two others in a panel of three) there is
  no target, and that (case, annotator, dimension) is **not counted**, for annotators and judges
  alike. With three annotators this means a case they all agree on counts three times (each
  annotator agrees with the other two) and a 2-1 case counts once (the dissenter against the
  two others), so every target is a clear majority.
* **Annotators and judges against those targets** (:func:`loo_agreement`): an annotator scores 1
  when their own label equals the target; the "human (leave-one-out)" row pools every annotator.
  A judge scores, for every target and every order it was run in, 1 when its verdict equals the
  target; a failure counts wrong, an order not run is not counted. Every figure is correct over
  counted, summed over cases, annotators (and dimensions for the pooled column): judge and
  annotators are measured on exactly the same targets, so a judge that reaches the human row
  agrees with the annotators as often as one of them does. The gap (judge minus human) is paired;
  the normalised ceiling (judge divided by human, 1.0 = as often as an annotator) comes from the
  same resamples.
* **A decision** (:mod:`medrewardbench.metrics.alttest`): per judge and column, whether it can
  stand in for an annotator (the alternative annotator test), with a cost-benefit margin epsilon.

Intervals are case-bootstrap percentile intervals from the weight matrix the caller passes: the
analysis' one matrix, so they come from the same resamples as every other interval of a report.
Resamples in which a statistic is undefined are left out of its quantiles. Only numpy is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics import power, stats
from medrewardbench.metrics.alttest import AltTestOutcome, alt_test_columns
from medrewardbench.metrics.annotators import MISSING, leave_one_out_majority
from medrewardbench.metrics.results import (
    DEFAULT_EPSILON,
    AltTest,
    AnnotatorAgreement,
    AnnotatorComparison,
    ColumnTable,
    Estimate,
    HumanCeiling,
    JudgeVerdict,
    JudgeVsAnnotators,
    PanelAgreement,
    fixed,
    fixed_p,
)
from medrewardbench.metrics.stats import FloatArray

__all__ = [
    "CATEGORIES",
    "JudgeInput",
    "LooAgreement",
    "PanelEstimates",
    "gap_detectable",
    "has_annotations",
    "human_ceiling",
    "judge_loo_counts",
    "loo_agreement",
    "loo_targets",
    "panel_agreement",
    "panel_features",
    "panel_statistics",
]

CATEGORIES: tuple[int, ...] = (1, 2)
"""The rating categories: the better response in source order."""

# the per-item features of panel_features, in order along the last axis
_AGREEING, _PAIRS, _PAIRABLE, _SHARE = 0, 1, 2, 3
_CATEGORY = 4


def _check_ratings(ratings: npt.ArrayLike) -> npt.NDArray[np.int8]:
    array = np.asarray(ratings)
    if array.ndim != 3:
        raise ValueError(f"ratings must have shape (n_cases, n_annotators, n_dims), got {array.shape}")
    if array.size and not np.isin(array, (MISSING, *CATEGORIES)).all():
        raise ValueError(f"ratings must be {MISSING} (none) or one of {list(CATEGORIES)}")
    return array.astype(np.int8, copy=False)


def _divide(num: FloatArray, den: FloatArray) -> FloatArray:
    """Elementwise ``num / den``, NaN where ``den`` is 0."""
    out = np.full(np.broadcast_shapes(num.shape, den.shape), np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def _with_pooled(values: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    """(..., D) -> (..., D + 1): the pooled column (the sum over dimensions) appended."""
    return np.concatenate([values, values.sum(axis=-1, keepdims=True)], axis=-1)


# --------------------------------------------------------------------------------------------
# Agreement between annotators, with resamples
# --------------------------------------------------------------------------------------------


def panel_features(ratings: npt.ArrayLike) -> FloatArray:
    """Per case, the sums that pairwise agreement, Fleiss' kappa and Krippendorff's alpha are made of.

    For item (i, d) with ``n_c`` ratings in category c and ``m = sum_c n_c``: agreeing pairs
    ``sum_c n_c (n_c - 1)``, pairs ``m (m - 1)``, whether it is pairable (``m >= 2``), its share of
    agreeing pairs (Fleiss' ``P_i``, 0 when not pairable), its category counts (pairable items
    only) and its coincidences ``(n_c n_k - [c = k] n_c) / (m - 1)`` (Krippendorff, pairable only).
    Every statistic is a function of these features summed over items, so a resample's value is
    a function of ``weights @ features``.

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no rating.

    Returns:
        float ``(n_cases, n_dims + 1, n_features)``; the last dimension entry is the sum over
        dimensions (the pooled column).

    Raises:
        ValueError: a malformed ratings array.
    """
    values = _check_ratings(ratings)
    counts = np.stack([(values == c).sum(axis=1) for c in CATEGORIES], axis=-1).astype(np.float64)  # (n, D, C)
    m = counts.sum(axis=-1)
    pairable = m >= 2
    pairs = m * (m - 1.0)
    agreeing = np.sum(counts * (counts - 1.0), axis=-1)
    share = np.where(pairable, agreeing / np.maximum(pairs, 1.0), 0.0)
    kept = counts * pairable[..., None]
    n_categories = len(CATEGORIES)
    outer = kept[..., :, None] * kept[..., None, :] - kept[..., :, None] * np.eye(n_categories)
    coincidences = outer / np.maximum(m - 1.0, 1.0)[..., None, None]
    features = np.concatenate(
        [
            np.stack([agreeing, pairs, pairable.astype(np.float64), share], axis=-1),
            kept,
            coincidences.reshape(coincidences.shape[:-2] + (n_categories * n_categories,)),
        ],
        axis=-1,
    )  # (n, D, F)
    pooled = features.sum(axis=1, keepdims=True)
    return np.concatenate([features, pooled], axis=1)


def panel_statistics(sums: npt.ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Percent agreement, Fleiss' kappa and Krippendorff's alpha from summed :func:`panel_features`.

    Args:
        sums: ``(..., n_features)``: features summed over (possibly resampled) cases.

    Returns:
        ``(percent_agreement, fleiss_kappa, krippendorff_alpha)``, each of shape ``(...)``; NaN
        where undefined (no pairable item; every rating in one category).
    """
    s = np.asarray(sums, dtype=np.float64)
    n_categories = len(CATEGORIES)
    with np.errstate(invalid="ignore", divide="ignore"):
        percent = np.where(s[..., _PAIRS] > 0, s[..., _AGREEING] / s[..., _PAIRS], np.nan)
        pairable = s[..., _PAIRABLE]
        p_bar = np.where(pairable > 0, s[..., _SHARE] / pairable, np.nan)
        categories = s[..., _CATEGORY : _CATEGORY + n_categories]
        total = categories.sum(axis=-1)
        shares = categories / total[..., None]
        p_e = np.sum(shares * shares, axis=-1)
        kappa = np.where((pairable > 0) & (p_e < 1.0 - 1e-12), (p_bar - p_e) / (1.0 - p_e), np.nan)
        coincidences = s[..., _CATEGORY + n_categories :].reshape(s.shape[:-1] + (n_categories, n_categories))
        marginals = coincidences.sum(axis=-1)
        n = marginals.sum(axis=-1)
        off = ~np.eye(n_categories, dtype=bool)
        observed = coincidences[..., off].sum(axis=-1)
        expected = (marginals[..., :, None] * marginals[..., None, :])[..., off].sum(axis=-1)
        alpha = np.where(expected > 0, 1.0 - (n - 1.0) * observed / expected, np.nan)
    return percent, kappa, alpha


@dataclass(frozen=True)
class PanelEstimates:
    """Agreement between annotators per column (the dimensions, then pooled), with intervals."""

    n_cases: int
    """cases with at least two ratings on some dimension"""
    percent_agreement: stats.Estimate
    fleiss_kappa: stats.Estimate
    krippendorff_alpha: stats.Estimate


def _interval(point: FloatArray, samples: FloatArray, n: npt.NDArray[np.int64], confidence: float) -> stats.Estimate:
    low, high = stats.percentile_interval(samples, confidence)
    undefined = np.isnan(point)
    low[undefined] = np.nan
    high[undefined] = np.nan
    return stats.Estimate(np.asarray(point, dtype=np.float64), low, high, np.asarray(n, dtype=np.int64))


def panel_agreement(
    ratings: npt.ArrayLike,
    weights: npt.ArrayLike,
    *,
    cases: npt.ArrayLike | None = None,
    confidence: float = 0.95,
) -> PanelEstimates:
    """Agreement between annotators with case-bootstrap intervals from a given weight matrix.

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no rating.
        weights: ``(B, n_cases)`` resample counts (the analysis' matrix); ``B = 0`` gives points only.
        cases: optional boolean mask of the cases to use (one organ system); their columns of
            ``weights`` are used, so a subset shares the resamples of the whole.
        confidence: interval coverage.

    Returns:
        The three statistics, arrays of shape ``(n_dims + 1,)``; ``n`` counts pairable items.
    """
    features = panel_features(ratings)
    w = np.asarray(weights)
    if w.ndim != 2 or w.shape[1] != features.shape[0]:
        raise ValueError(f"weights must have shape (n_resamples, {features.shape[0]}), got {w.shape}")
    if cases is not None:
        mask = np.asarray(cases, dtype=bool)
        features, w = features[mask], w[:, mask]
    points = panel_statistics(features.sum(axis=0))
    samples = panel_statistics(stats.resampled_sums(w, features))
    n = features[..., _PAIRABLE].sum(axis=0).astype(np.int64)
    n_cases = int(np.count_nonzero(features[:, :-1, _PAIRABLE].any(axis=1)))
    estimates = [_interval(p, s, n, confidence) for p, s in zip(points, samples, strict=True)]
    return PanelEstimates(n_cases, *estimates)


# --------------------------------------------------------------------------------------------
# Leave-one-out targets, annotators and judges
# --------------------------------------------------------------------------------------------


def loo_targets(ratings: npt.ArrayLike) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """The leave-one-out targets of every (case, annotator, dimension).

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no rating.

    Returns:
        ``(targets, counted)``: targets int8 of the same shape, the strict majority of the other
        annotators' ratings (0 where they have none), and ``counted``, True where the annotator
        rated and a target exists (see the module docstring).
    """
    values = _check_ratings(ratings)
    targets = np.zeros(values.shape, dtype=np.int8)
    for d in range(values.shape[2]):
        targets[:, :, d] = leave_one_out_majority(values[:, :, d], MISSING)
    counted = (values != MISSING) & (targets != MISSING)
    return targets, counted


@dataclass(frozen=True)
class LooAgreement:
    """Annotators and judges against the leave-one-out targets, per column, with intervals."""

    human: stats.Estimate
    """every annotator pooled: shape ``(n_dims + 1,)``"""
    annotators: stats.Estimate
    """per annotator: ``(n_annotators, n_dims + 1)``"""
    judges: stats.Estimate
    """per judge: ``(n_judges, n_dims + 1)``"""
    gap: stats.Estimate
    """judge minus human, paired: ``(n_judges, n_dims + 1)``"""
    normalised: stats.Estimate
    """judge divided by human, from the same resamples: ``(n_judges, n_dims + 1)``"""


def judge_loo_counts(
    verdicts: npt.ArrayLike, targets: npt.ArrayLike, counted: npt.ArrayLike
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per case, a judge's correct and counted (target, order) pairs against the leave-one-out targets.

    Args:
        verdicts: ``(n_cases, 2, n_dims)`` in the shared layout (-1 not run, 0 failed, 1 or 2).
        targets: ``(n_cases, n_annotators, n_dims)`` from :func:`loo_targets`.
        counted: the matching mask from :func:`loo_targets`.

    Returns:
        ``(correct, counted)``, each ``(n_cases, n_dims)``.
    """
    v = np.asarray(verdicts)[:, :, None, :]  # (n, 2, 1, D)
    t = np.asarray(targets)[:, None, :, :]  # (n, 1, R, D)
    pairs = (v != stats.NOT_RUN) & np.asarray(counted, dtype=bool)[:, None, :, :]
    correct = pairs & (v == t)
    return correct.sum(axis=(1, 2)).astype(np.int64), pairs.sum(axis=(1, 2)).astype(np.int64)


def loo_agreement(
    ratings: npt.ArrayLike,
    verdicts: Sequence[npt.ArrayLike],
    weights: npt.ArrayLike,
    *,
    confidence: float = 0.95,
) -> LooAgreement:
    """Every annotator and every judge against the same leave-one-out targets, with intervals.

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no rating.
        verdicts: per judge, ``(n_cases, 2, n_dims)`` verdicts in source order.
        weights: ``(B, n_cases)`` resample counts; ``B = 0`` gives points only.
        confidence: interval coverage.

    Returns:
        The human row, each annotator, each judge and each judge's paired gap to the human row.
    """
    values = _check_ratings(ratings)
    num, den = _loo_counts(values, verdicts)
    sums = stats.resampled_sums(weights, np.stack([num, den], axis=1))  # (B, 2, K, D + 1)
    samples = _divide(sums[:, 0], sums[:, 1])
    points = stats.ratio(num, den)
    n = den.sum(axis=0).astype(np.int64)
    everything = _interval(points, samples, n, confidence)
    n_annotators = values.shape[1]

    def rows(start: int, stop: int) -> stats.Estimate:
        return stats.Estimate(
            everything.point[start:stop], everything.low[start:stop], everything.high[start:stop], n[start:stop]
        )

    first_judge = 1 + n_annotators
    gap_points = points[first_judge:] - points[0]
    gap = _interval(gap_points, samples[:, first_judge:] - samples[:, :1], n[first_judge:], confidence)
    normalised = _interval(
        _divide(points[first_judge:], points[:1]),
        _divide(samples[:, first_judge:], samples[:, :1]),
        n[first_judge:],
        confidence,
    )
    human = rows(0, 1)
    return LooAgreement(
        human=stats.Estimate(human.point[0], human.low[0], human.high[0], human.n[0]),
        annotators=rows(1, first_judge),
        judges=rows(first_judge, points.shape[0]),
        gap=gap,
        normalised=normalised,
    )


def _loo_counts(
    values: npt.NDArray[np.int8], verdicts: Sequence[npt.ArrayLike]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per case, (correct, counted) against the leave-one-out targets of every row, pooled column added.

    Rows: the human row (every annotator), each annotator, then each judge: ``(n, K, D + 1)`` each.
    """
    targets, counted = loo_targets(values)
    hits = counted & (values == targets)
    rows_num = [hits.sum(axis=1), *np.moveaxis(hits, 1, 0)]
    rows_den = [counted.sum(axis=1), *np.moveaxis(counted, 1, 0)]
    for v in verdicts:
        correct, judged = judge_loo_counts(v, targets, counted)
        rows_num.append(correct)
        rows_den.append(judged)
    num = _with_pooled(np.stack(rows_num, axis=1)).astype(np.int64)
    den = _with_pooled(np.stack(rows_den, axis=1)).astype(np.int64)
    return num, den


def gap_detectable(
    ratings: npt.ArrayLike, verdicts: Sequence[npt.ArrayLike]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The smallest gap to the human row these cases can detect (80 % power, two-sided 5 %), per column.

    The gap is paired on cases, so its per-case linearised value is the judge's minus the human
    row's (:mod:`medrewardbench.metrics.power`); the standard deviation is the root mean square over
    judges.

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no rating.
        verdicts: per judge, ``(n_cases, 2, n_dims)``.

    Returns:
        ``(detectable, n_cases)``, each ``(n_dims + 1,)``: fractions (NaN without judges or with fewer
        than two cases with a target) and the cases with a target.
    """
    values = _check_ratings(ratings)
    num, den = _loo_counts(values, verdicts)
    n_annotators = values.shape[1]
    human_u, human_counted = power.linearised(num[:, 0], den[:, 0])
    spread = power.Spread()
    for k in range(1 + n_annotators, num.shape[1]):
        judge_u, judge_counted = power.linearised(num[:, k], den[:, k])
        spread.add(judge_u - human_u, judge_counted | human_counted)
    n_cases = human_counted.sum(axis=0).astype(np.int64)
    return power.detectable(spread.rms_sd(), n_cases), n_cases


# --------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------


def _table(estimate: stats.Estimate, *index: int) -> ColumnTable[Estimate]:
    """Seven estimates (dimensions, then pooled) at a leading index, as a record table."""
    point, low, high, n = (np.asarray(a)[index] for a in (estimate.point, estimate.low, estimate.high, estimate.n))
    return ColumnTable.of(
        [
            Estimate(fixed(p), fixed(lo), fixed(hi), int(k))
            for p, lo, hi, k in zip(point.tolist(), low.tolist(), high.tolist(), n.tolist(), strict=True)
        ]
    )


def _panel_record(panel: PanelEstimates) -> PanelAgreement:
    return PanelAgreement(
        n_cases=panel.n_cases,
        percent_agreement=_table(panel.percent_agreement),
        fleiss_kappa=_table(panel.fleiss_kappa),
        krippendorff_alpha=_table(panel.krippendorff_alpha),
    )


@dataclass(frozen=True)
class JudgeInput:
    """What :func:`human_ceiling` needs of a judge's run."""

    label: str
    run_id: str
    is_baseline: bool
    verdicts: npt.NDArray[np.int8]
    """``(n_cases, 2, n_dims)`` in source order"""


def human_ceiling(
    ratings: npt.ArrayLike,
    annotators: Sequence[str],
    judges: Sequence[JudgeInput],
    groups: Sequence[str],
    weights: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    group_field: str = "organ_system",
    epsilon: float = DEFAULT_EPSILON,
    q: float = 0.05,
) -> HumanCeiling:
    """The human-ceiling section of an analysis.

    Args:
        ratings: ``(n_cases, n_annotators, n_dims)``, 0 = no rating.
        annotators: the annotator of each column of ``ratings``.
        judges: the analysed runs, in the analysis' order.
        groups: the group (organ system) of each case.
        weights: the analysis' ``(B, n_cases)`` bootstrap weights (``B = 0``: points only).
        confidence: interval coverage.
        group_field: the case field ``groups`` comes from.
        epsilon: the alt-test's cost-benefit margin (:mod:`medrewardbench.metrics.alttest`).
        q: the alt-test's false discovery rate across annotators.

    Returns:
        The :class:`~medrewardbench.metrics.results.HumanCeiling` record (numbers rounded as files
        write them), with every judge's stand-in verdicts.

    Raises:
        ValueError: the arrays disagree on cases or annotators.
    """
    values = _check_ratings(ratings)
    if values.shape[1] != len(annotators):
        raise ValueError(f"ratings have {values.shape[1]} annotator columns but {len(annotators)} names were given")
    keys = np.asarray(list(groups), dtype=object)
    if keys.shape != (values.shape[0],):
        raise ValueError(f"groups must name the group of each of the {values.shape[0]} cases, got {keys.shape}")
    given = values != MISSING
    loo = loo_agreement(values, [j.verdicts for j in judges], weights, confidence=confidence)
    by_group: dict[str, PanelAgreement] = {}
    for name in sorted({str(k) for k in keys.tolist()}):
        by_group[name] = _panel_record(panel_agreement(values, weights, cases=keys == name, confidence=confidence))
    return HumanCeiling(
        annotators=tuple(annotators),
        n_cases=int(np.count_nonzero(given.any(axis=(1, 2)))),
        n_annotations=int(np.count_nonzero(given.any(axis=2))),
        agreement=_panel_record(panel_agreement(values, weights, confidence=confidence)),
        by_group=by_group,
        human=_table(loo.human),
        annotators_vs_others=tuple(
            AnnotatorAgreement(name, int(np.count_nonzero(given[:, r].any(axis=1))), _table(loo.annotators, r))
            for r, name in enumerate(annotators)
        ),
        judges=tuple(
            JudgeVsAnnotators(
                j.label,
                j.run_id,
                j.is_baseline,
                _table(loo.judges, k),
                _table(loo.gap, k),
                _table(loo.normalised, k),
            )
            for k, j in enumerate(judges)
        ),
        group_field=group_field,
        verdicts=tuple(
            JudgeVerdict(
                j.label,
                j.run_id,
                j.is_baseline,
                ColumnTable.of(
                    [
                        _alt_test_record(outcome, annotators)
                        for outcome in alt_test_columns(values, j.verdicts, epsilon=epsilon, q=q)
                    ]
                ),
            )
            for j in judges
        ),
        epsilon=epsilon,
    )


def _alt_test_record(outcome: AltTestOutcome, annotators: Sequence[str]) -> AltTest:
    """An alt-test outcome as the record files hold (numbers rounded once)."""
    return AltTest(
        verdict=outcome.verdict,
        reason=outcome.reason,
        winning_rate=fixed(outcome.winning_rate),
        advantage=fixed(outcome.advantage),
        n_annotators=outcome.n_annotators,
        n_cases=outcome.n_cases,
        detectable_margin=fixed(outcome.detectable_margin),
        annotators=tuple(
            AnnotatorComparison(
                annotator=name,
                n_cases=a.n_cases,
                judge_wins=fixed(a.judge_wins),
                annotator_wins=fixed(a.annotator_wins),
                p_value=fixed_p(a.p_value),
                judge_beats=a.judge_beats,
                detectable_margin=fixed(a.detectable_margin),
                judge_worse=a.judge_worse,
            )
            for name, a in zip(annotators, outcome.annotators, strict=True)
        ),
    )


def has_annotations(ratings: npt.ArrayLike | None) -> bool:
    """Whether a ratings array holds any rating (the condition for a human-ceiling section).

    Args:
        ratings: a ratings array or None.

    Returns:
        True when at least one annotator labelled at least one case.
    """
    return ratings is not None and bool(np.any(np.asarray(ratings) != MISSING))
