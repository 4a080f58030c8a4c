"""Calibration: bins that keep ties together, ECE and Brier against direct formulas, PAV against
scikit-learn, temperature scaling recovering a known temperature, and cross-fitting that never
uses a case's own label."""

from __future__ import annotations

import numpy as np
import pytest

from medrewardbench.metrics.calibration import (
    calibration_figures,
    calibration_figures_many,
    equal_mass_bins,
    equal_width_bins,
)
from medrewardbench.metrics.confidence import CaseVerdicts
from medrewardbench.metrics.recalibration import (
    case_folds,
    cross_fitted,
    fit_isotonic,
    fit_temperature,
    isotonic_regression,
)


def _verdicts(p: np.ndarray, labels: np.ndarray, source: str = "probability") -> CaseVerdicts:
    n = p.shape[0]
    return CaseVerdicts(
        run_id="r",
        judge_spec="sim",
        case_ids=tuple(f"c{i}" for i in range(n)),
        p_first=p.astype(np.float64),
        labels=labels.astype(np.int8),
        groups={"organ_system": tuple("ab"[i % 2] for i in range(n))},
        source=source,  # type: ignore[arg-type]
    )


def _simulated(n: int, seed: int = 0, sharpen: float = 1.0) -> CaseVerdicts:
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, size=(n, 6))
    truth = 1 / (1 + np.exp(-z))
    labels = np.where(rng.random((n, 6)) < truth, 1, 2)
    return _verdicts(1 / (1 + np.exp(-sharpen * z)), labels)


def test_pav_matches_a_known_fit_and_scikit_learn() -> None:
    assert isotonic_regression([1.0, 3.0, 2.0, 4.0]).tolist() == [1.0, 2.5, 2.5, 4.0]
    sklearn = pytest.importorskip("sklearn.isotonic")
    rng = np.random.default_rng(1)
    y = rng.random(200) + np.linspace(0, 1, 200)
    w = rng.random(200) + 0.1
    expected = sklearn.IsotonicRegression().fit(np.arange(200), y, sample_weight=w).predict(np.arange(200))
    np.testing.assert_allclose(isotonic_regression(y, w), expected, atol=1e-10)


def test_equal_mass_bins_never_split_equal_confidences() -> None:
    conf = np.array([0.5] * 30 + [1.0] * 70)
    layout = equal_mass_bins(conf, 10)
    assert layout.n_bins == 2
    assert set(layout.index[:30].tolist()) == {0} and set(layout.index[30:].tolist()) == {1}
    spread = np.linspace(0.5, 1.0, 100)
    assert np.bincount(equal_mass_bins(spread, 10).index).tolist() == [10] * 10
    assert equal_width_bins(np.array([0.5, 0.74, 0.75, 1.0]), 2).index.tolist() == [0, 0, 1, 1]


def test_ece_and_brier_of_order_agreement_confidences() -> None:
    # every verdict agrees across orders (confidence 1) and 80 % are right: ECE 0.2, Brier 0.2
    n = 100
    labels = np.ones((n, 6), dtype=np.int8)
    p = np.ones((n, 6))
    p[:20] = 0.0
    figures = calibration_figures(_verdicts(p, labels, "order agreement"), n_resamples=200)
    np.testing.assert_allclose(figures.ece, 0.2)
    np.testing.assert_allclose(figures.ece_mass, 0.2)
    np.testing.assert_allclose(figures.brier, 0.2)
    assert figures.n.tolist() == [100] * 6 + [600]
    assert np.all(figures.brier_low <= 0.2) and np.all(figures.brier_high >= 0.2)
    assert figures.bins[-1].n.tolist() == [0] * 9 + [600]


def test_brier_matches_scikit_learn_and_intervals_bracket_the_point() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    v = _simulated(300)
    figures = calibration_figures(v, n_resamples=300, strata=v.groups["organ_system"])
    for d in range(6):
        expected = metrics.brier_score_loss(v.labels[:, d] == 1, v.p_first[:, d])
        assert figures.brier[d] == pytest.approx(expected)
    assert np.all(figures.brier_low < figures.brier) and np.all(figures.brier < figures.brier_high)
    assert np.all(figures.ece_low <= figures.ece_high)


def test_missing_verdicts_and_labels_are_not_counted() -> None:
    v = _simulated(50)
    p = v.p_first.copy()
    p[:10, 0] = np.nan
    labels = v.labels.copy()
    labels[10:20, 0] = 0
    figures = calibration_figures(_verdicts(p, labels), n_resamples=0)
    assert figures.n[0] == 30 and np.isnan(figures.brier_low).all()


def test_temperature_scaling_recovers_a_known_temperature() -> None:
    v = _simulated(3000, sharpen=3.0)
    fitted = fit_temperature(v.p_first.reshape(-1), (v.labels == 1).reshape(-1))
    assert fitted.temperature == pytest.approx(3.0, rel=0.1)
    mapped = fitted(np.array([0.2, 0.5, 0.8]))
    assert mapped[1] == pytest.approx(0.5) and mapped[0] == pytest.approx(1 - mapped[2])


def test_isotonic_map_is_symmetric_and_monotone() -> None:
    v = _simulated(500, sharpen=2.0)
    mapping = fit_isotonic(v.p_first.reshape(-1), (v.labels == 1).reshape(-1))
    grid = np.linspace(0, 1, 101)
    assert np.all(np.diff(mapping(grid)) >= -1e-12)
    np.testing.assert_allclose(mapping(grid), 1 - mapping(1 - grid), atol=1e-12)


@pytest.mark.parametrize("method", ["isotonic", "temperature"])
def test_cross_fitting_never_uses_a_cases_own_label(method: str) -> None:
    v = _simulated(200, sharpen=3.0)
    folds = case_folds(200, 5, seed=7)
    first = cross_fitted(v, method, folds=5, seed=7)
    flipped = v.labels.copy()
    held = folds == 0
    flipped[held] = 3 - flipped[held]
    second = cross_fitted(_verdicts(v.p_first, flipped), method, folds=5, seed=7)
    np.testing.assert_array_equal(first.p_first[held], second.p_first[held])
    assert not np.array_equal(first.p_first[~held], second.p_first[~held])


def test_recalibration_improves_an_over_confident_judge_out_of_fold() -> None:
    v = _simulated(1500, seed=3, sharpen=4.0)
    raw = calibration_figures(v, n_resamples=0)
    for method in ("isotonic", "temperature"):
        fitted = calibration_figures(cross_fitted(v, method, folds=5, seed=0), n_resamples=0)
        assert fitted.ece[-1] < raw.ece[-1] / 2
        assert fitted.brier[-1] < raw.brier[-1]


def test_cross_fitting_needs_enough_cases() -> None:
    with pytest.raises(ValueError, match="at least 5 cases"):
        cross_fitted(_simulated(3), "isotonic")
    with pytest.raises(ValueError, match="unknown recalibration"):
        cross_fitted(_simulated(10), "platt")


def test_many_judges_share_resamples_and_match_one_at_a_time() -> None:
    first, second = _simulated(120, seed=1), _simulated(120, seed=2, sharpen=2.0)
    together = calibration_figures_many([first, second], n_resamples=150, seed=9)
    for alone, joint in zip(
        (calibration_figures(first, n_resamples=150, seed=9), calibration_figures(second, n_resamples=150, seed=9)),
        together,
        strict=True,
    ):
        np.testing.assert_allclose(joint.brier, alone.brier)
        np.testing.assert_allclose(joint.ece_mass, alone.ece_mass)
        np.testing.assert_allclose(joint.ece_low, alone.ece_low, atol=1e-6)
        np.testing.assert_array_equal(joint.n, alone.n)


def test_large_data_intervals_come_from_the_linearisation_and_agree_with_the_bootstrap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import medrewardbench.metrics.calibration as calibration

    v = _simulated(2000, seed=5, sharpen=2.0)
    boot = calibration_figures(v, n_resamples=600, seed=1)
    monkeypatch.setattr(calibration, "BOOTSTRAP_LIMIT", 100)
    normal = calibration_figures(v, n_resamples=600, seed=1)
    for name in ("brier", "ece", "ece_mass"):
        width = getattr(boot, f"{name}_high") - getattr(boot, f"{name}_low")
        for side in ("low", "high"):
            gap = np.abs(getattr(normal, f"{name}_{side}") - getattr(boot, f"{name}_{side}"))
            assert np.all(gap < 0.25 * width), (name, side)  # the ECE's bootstrap is a little skewed


def test_a_judge_confident_and_right_on_few_cases_gets_no_zero_width_interval() -> None:
    """Every resample of 10 such cases has a Brier score and an ECE of 0; the interval must not say
    [0, 0]: the floor bounds them by the exact share of the 10 cases that could differ."""
    n = 10
    figures = calibration_figures(_verdicts(np.ones((n, 6)), np.ones((n, 6))), n_resamples=300)
    bound = 1 - 0.025 ** (1 / n)
    for name in ("brier", "ece", "ece_mass"):
        point, low, high = (getattr(figures, name + suffix) for suffix in ("", "_low", "_high"))
        assert np.all(point == 0.0), name
        assert np.all(low == 0.0) and high == pytest.approx(np.full(7, bound)), name
