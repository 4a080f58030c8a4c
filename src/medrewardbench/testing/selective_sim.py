"""Simulated judges with known truth, for checking selective judging's guarantee and calibration intervals.

A simulated judge gives each case a confidence ``c`` and is right with a known probability
``accuracy(c)``; the population selective risk of a threshold ``t`` is then known exactly:
``R(t) = E[1 - accuracy(c) | c >= t]``. The tests (a few hundred repeats, seconds) and
``benchmarks/bench_validity.py`` (500 repeats and more) draw calibration and held-out cases from
it, choose a threshold with :func:`medrewardbench.metrics.selective.conformal_threshold` exactly
as a report does, and count how often the chosen threshold's risk exceeds alpha.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from medrewardbench.metrics.selective import conformal_threshold, first_share, threshold_grid

__all__ = ["GuaranteeCheck", "SimulatedJudge", "check_guarantee", "simulated_judges"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SimulatedJudge:
    """A judge with a known accuracy at every confidence.

    Attributes:
        name: how tables name it.
        accuracy: P(right | confidence), vectorised.
        support: None: confidence uniform on [0.5, 1]; else the confidences it takes
            (0.5 is a tie: never accepted) with ``weights``.
        weights: the probability of each support point.
    """

    name: str
    accuracy: Callable[[FloatArray], FloatArray]
    support: tuple[float, ...] | None = None
    weights: tuple[float, ...] | None = None

    def draw(
        self, rng: np.random.Generator, shape: tuple[int, ...], shared: float = 0.0
    ) -> tuple[FloatArray, FloatArray]:
        """(confidence, wrong) for ``shape`` verdicts, rows being cases.

        With ``shared`` > 0 the verdicts of one case (a row) are wrong together more often than
        apart: each verdict's error draw is the case's own uniform with probability ``shared``,
        else its own, so every verdict is still wrong with probability ``1 - accuracy(c)``.
        """
        if self.support is None:
            conf = rng.uniform(0.5, 1.0, size=shape)
        else:
            conf = rng.choice(np.array(self.support), size=shape, p=np.array(self.weights))
        draws = rng.random(shape)
        if shared > 0:
            case = rng.random(shape[:-1] + (1,))
            draws = np.where(rng.random(shape) < shared, case, draws)
        wrong = (draws >= self.accuracy(conf)).astype(np.float64)
        return conf, wrong

    def risk(self, threshold: float) -> float:
        """The population selective risk of ``threshold`` (NaN: it accepts nothing)."""
        if math.isnan(threshold):
            return math.nan
        if self.support is None:
            grid = np.linspace(max(threshold, 0.5), 1.0, 20001)
            if grid[0] >= 1.0:
                return float(1.0 - self.accuracy(np.array([1.0]))[0])
            return float(np.mean(1.0 - self.accuracy(grid)))
        points = np.array(self.support)
        w = np.array(self.weights) * ((points >= threshold) & (points > 0.5))
        if w.sum() == 0:
            return math.nan
        return float((w * (1.0 - self.accuracy(points))).sum() / w.sum())


def simulated_judges() -> tuple[SimulatedJudge, ...]:
    """The judges the checks use: calibrated, over-confident, and two with coarse confidences.

    * calibrated: right with probability ``c`` (risk <= 0.10 from t = 0.80);
    * over-confident: right with ``0.5 + 0.5 u**2``, ``u = 2c - 1`` (at c = 0.9 right 82 % of the
      time; risk <= 0.10 from t = 0.889);
    * order agreement: confidence 1 (both orders agree) 70 % of the time, else a tie; right 93 %
      when sure (every threshold safe at alpha = 0.10);
    * order agreement, over-confident: the same, right 88 % when sure (no threshold is safe: the
      guarantee demands accepting nothing).
    """
    return (
        SimulatedJudge("calibrated", lambda c: c),
        SimulatedJudge("over-confident", lambda c: 0.5 + 0.5 * (2 * c - 1) ** 2),
        SimulatedJudge(
            "order agreement", lambda c: np.where(c >= 1.0, 0.93, 0.5), support=(0.5, 1.0), weights=(0.3, 0.7)
        ),
        SimulatedJudge(
            "order agreement, over-confident",
            lambda c: np.where(c >= 1.0, 0.88, 0.5),
            support=(0.5, 1.0),
            weights=(0.3, 0.7),
        ),
    )


@dataclass(frozen=True)
class GuaranteeCheck:
    """How often the chosen threshold kept its promise over the repeats.

    Attributes:
        judge: the simulated judge's name.
        repeats: how many.
        held: share of repeats whose chosen threshold's population risk is <= alpha (accepting
            nothing counts as held: no accepted verdict is wrong).
        held_mc: its Monte-Carlo standard error.
        realised_held: share whose realised held-out error is <= alpha (nothing accepted: held).
        coverage: mean held-out coverage.
        none_qualified: share of repeats in which no threshold qualified.
    """

    judge: str
    repeats: int
    held: float
    held_mc: float
    realised_held: float
    coverage: float
    none_qualified: float


def check_guarantee(
    judge: SimulatedJudge,
    *,
    repeats: int = 300,
    n_calibration: int = 500,
    n_heldout: int = 500,
    alpha: float = 0.10,
    delta: float = 0.10,
    seed: int = 0,
    dimensions: int = 1,
    shared: float = 0.5,
) -> GuaranteeCheck:
    """Choose a threshold on ``n_calibration`` simulated cases ``repeats`` times and score it.

    With ``dimensions`` > 1 every case has that many verdicts, correlated within the case
    (``shared``), and the threshold is the pooled column's (the case-level betting test).

    Args:
        judge: the simulated judge.
        repeats: how many independent calibration and held-out sets.
        n_calibration: calibration cases per repeat.
        n_heldout: held-out cases per repeat (they fix the grid, and the realised error is measured on them).
        alpha: the risk level.
        delta: the error probability of the guarantee.
        seed: the seed.
        dimensions: verdicts per case (1: the one-dimension binomial test; more: the pooled column).
        shared: how often a verdict's error draw is its case's (the within-case correlation).

    Returns:
        The :class:`GuaranteeCheck`.
    """
    rng = np.random.default_rng(seed)
    cal_conf, cal_wrong = judge.draw(rng, (repeats, n_calibration, dimensions), shared)
    test_conf, test_wrong = judge.draw(rng, (repeats, n_heldout, dimensions), shared)
    held = np.zeros(repeats, dtype=bool)
    realised = np.zeros(repeats, dtype=bool)
    coverage = np.zeros(repeats)
    none = np.zeros(repeats, dtype=bool)
    for r in range(repeats):
        acceptable = test_conf[r] > 0.5
        grid = threshold_grid(test_conf[r][acceptable], 20, first_share(n_calibration, alpha, delta))
        one = dimensions == 1
        found = conformal_threshold(
            cal_conf[r][:, 0] if one else cal_conf[r],
            cal_wrong[r][:, 0] if one else cal_wrong[r],
            (cal_conf[r] > 0.5)[:, 0] if one else cal_conf[r] > 0.5,
            grid,
            alpha=alpha,
            delta=delta,
        )
        t = found.threshold
        none[r] = math.isnan(t)
        risk = judge.risk(t)
        held[r] = math.isnan(risk) or risk <= alpha
        accepted = acceptable & (test_conf[r] >= t) if not none[r] else np.zeros(acceptable.shape, dtype=bool)
        n_acc = int(accepted.sum())
        coverage[r] = n_acc / accepted.size
        realised[r] = n_acc == 0 or float(test_wrong[r][accepted].mean()) <= alpha
    share = float(held.mean())
    return GuaranteeCheck(
        judge=judge.name,
        repeats=repeats,
        held=share,
        held_mc=math.sqrt(max(share * (1 - share), 1e-12) / repeats),
        realised_held=float(realised.mean()),
        coverage=float(coverage.mean()),
        none_qualified=float(none.mean()),
    )
