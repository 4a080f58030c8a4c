"""The chunked, block-wise analysis gives exactly what the stats functions give with the whole weight matrix."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics import resampling, stats
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.resampling import RATIO_METRICS, resample_runs

N_CASES = 90
N_JUDGES = 4
ORGANS = ("brain", "chest", "eye")


def make_inputs(seed: int = 0, *, patterned: bool = True) -> tuple[list[npt.NDArray[np.int8]], ...]:
    """Verdicts of judges with failures, an unrun order, a judge on other requests, unlabelled cases, ties."""
    rng = np.random.default_rng(seed)
    d = len(DIMENSIONS)
    labels = rng.integers(0, 3, size=(N_CASES, d)).astype(np.int8)  # 0 = unlabelled dimension
    lengths = rng.integers(10, 14, size=(N_CASES, 2)).astype(np.int64)  # many equal lengths (ties)
    verdicts = []
    for j in range(N_JUDGES):
        v = rng.integers(0, 3, size=(N_CASES, 2, d)).astype(np.int8)  # 0 = failure
        if patterned and j == 2:
            v[:, 1] = -1  # swapped order never run
        if patterned and j == 3:
            v[: N_CASES // 3] = -1  # a judge that did not finish
        verdicts.append(v)
    organs = np.array([ORGANS[i % 3] if i % 7 else "eye" for i in range(N_CASES)], dtype=object)
    departments = np.array(["radiology" if i % 4 else "ophthalmology" for i in range(N_CASES)], dtype=object)
    return verdicts, labels, lengths, organs, departments  # type: ignore[return-value]


def with_pooled(counts: npt.ArrayLike, n_judges: int) -> npt.NDArray[np.int64]:
    c = np.asarray(counts, dtype=np.int64).reshape(N_CASES, n_judges, -1)
    return np.concatenate([c, c.sum(axis=2, keepdims=True)], axis=2)


def assert_estimates_equal(a: stats.Estimate, b: stats.Estimate) -> None:
    for field in ("point", "low", "high", "n"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=0, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("patterned", [True, False])
@pytest.mark.parametrize("block_size", [1, 7, None])
def test_every_estimate_equals_the_stats_functions_on_the_whole_weight_matrix(
    patterned: bool, block_size: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resampling, "CHUNK_BYTES", 1)  # the smallest chunks: many per organ system
    verdicts, labels, lengths, organs, departments = make_inputs(patterned=patterned)
    n_resamples, seed = 60, 3
    got = resample_runs(
        verdicts,
        labels,
        lengths,
        {"organ_system": tuple(organs), "department": tuple(departments)},
        strata_field="organ_system",
        n_resamples=n_resamples,
        seed=seed,
        confidence=0.9,
        block_size=block_size,
    )
    weights = stats.bootstrap_weights(N_CASES, n_resamples, seed, organs)
    n_judges = len(verdicts)
    stacked = np.stack(verdicts)
    wide = stacked.transpose(1, 2, 0, 3).reshape(N_CASES, 2, -1)
    lab = np.tile(labels, (1, n_judges))
    correct, counted = stats.case_counts(wide, lab)
    _, answered = stats.case_counts(wide, lab, count_failures=False)
    request_correct, request_counted = stats.request_outcomes(wide, lab)
    pairs = [
        (correct, counted),
        (correct, answered),
        (request_correct[:, 0], request_counted[:, 0]),
        (request_correct[:, 1], request_counted[:, 1]),
        stats.strict_accuracy_counts(wide, lab),
        stats.position_consistency_counts(wide),
        stats.first_position_counts(wide),
        stats.longer_preference_counts(wide, lengths),
    ]
    num = np.stack([with_pooled(n, n_judges) for n, _ in pairs], axis=1)
    den = np.stack([with_pooled(d, n_judges) for _, d in pairs], axis=1)
    assert_estimates_equal(got.ratios, stats.ratio_ci(num, den, weights=weights, confidence=0.9))
    assert got.ratios.point.shape == (len(RATIO_METRICS), n_judges, len(DIMENSIONS) + 1)
    np.testing.assert_allclose(got.failure_rate, stats.ratio(den[:, 0] - den[:, 1], den[:, 0]), equal_nan=True)
    np.testing.assert_array_equal(got.counted, den[:, 0].sum(axis=0))
    for field, values in (("organ_system", organs), ("department", departments)):
        expected = stats.grouped_ratio_ci(num[:, 0], den[:, 0], values, weights=weights, confidence=0.9)
        assert got.groups[field].groups == expected.groups
        for part in ("per_group", "micro", "macro"):
            assert_estimates_equal(getattr(got.groups[field], part), getattr(expected, part))
    kappa, ac1 = stats.bootstrap_agreement_ci(wide, lab, weights=weights, confidence=0.9)
    for mine, theirs in ((got.kappa, kappa), (got.ac1, ac1)):
        assert_estimates_equal(
            mine, stats.Estimate(*(np.asarray(getattr(theirs, f)).reshape(n_judges, -1) for f in mine.__dict__))
        )
    by_length = stats.accuracy_by_length_agreement(wide, lab, lengths)
    for field in ("longer_preferred", "shorter_preferred", "n_longer", "n_shorter"):
        np.testing.assert_allclose(getattr(got.by_length, field), getattr(by_length, field), equal_nan=True)
    per_dim = stats.pairwise_comparisons(stacked, labels, weights=weights, confidence=0.9)
    pooled = stats.pairwise_comparisons(stacked, labels, weights=weights, confidence=0.9, pool_dimensions=True)
    assert got.pairwise is not None
    for mine, theirs in zip(got.pairwise, (per_dim, pooled), strict=True):
        for field in ("acc_a", "diff", "low", "high", "p_bootstrap", "p_case", "cases_better", "n_pairs"):
            np.testing.assert_allclose(
                getattr(mine, field), getattr(theirs, field), rtol=0, atol=1e-12, equal_nan=True, err_msg=field
            )


def runs_of(verdicts: list[npt.NDArray[np.int8]], labels: npt.NDArray[np.int8], organs: npt.ArrayLike) -> list[RunData]:
    ids = tuple(f"c{i}" for i in range(N_CASES))
    lengths = np.tile(np.array([[10, 20]]), (N_CASES, 1))
    return [
        RunData(
            run_id=f"r{j}",
            judge_spec=f"test:j{j}",
            data_hash="h",
            case_ids=ids,
            verdicts=v,
            labels=labels,
            lengths=lengths,
            groups={"organ_system": tuple(organs)},  # type: ignore[arg-type]
            orders=(Order.ORIGINAL, Order.SWAPPED),
        )
        for j, v in enumerate(verdicts)
    ]


def test_the_same_seed_gives_the_same_analysis_whatever_the_block_size() -> None:
    verdicts, labels, _, organs, _ = make_inputs(seed=5)
    runs = runs_of(verdicts, labels, organs)
    whole = analyze(runs, n_resamples=120, seed=9, block_size=120).to_json()
    assert analyze(runs, n_resamples=120, seed=9, block_size=1).to_json() == whole
    assert analyze(runs, n_resamples=120, seed=9, block_size=50).to_json() == whole
    assert analyze(runs, n_resamples=120, seed=10, block_size=50).to_json() != whole


def test_weights_drawn_in_blocks_are_the_rows_of_the_whole_matrix() -> None:
    strata = np.array(["a", "b", "a", "c", "b"] * 9)
    whole = stats.bootstrap_weights(45, 70, seed=4, strata=strata)
    for size in (1, 3, 64, 70, 500):
        blocks = list(stats.bootstrap.iter_bootstrap_weights(45, 70, 4, strata, block_size=size))
        assert [start for start, _ in blocks] == list(range(0, 70, size))[: len(blocks)]
        np.testing.assert_array_equal(np.concatenate([block for _, block in blocks]), whole)
    for name in ("a", "b", "c"):
        assert (whole[:, strata == name].sum(axis=1) == (strata == name).sum()).all()
