"""Corrected estimates over the pool: judges' agreement, the doctors' preference rate, the leaderboard."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.corrected import POOLED, corrected_estimates, doctor_labels
from medrewardbench.metrics.selection import SelectionError, pick_design

D = len(DIMENSIONS)


def simulated_runs(rng: np.random.Generator, n: int, accuracies: dict[str, float]) -> tuple[list[RunData], np.ndarray]:
    """Runs of judges that agree with hidden doctors' labels at the given rates (both orders, independent)."""
    truth = rng.integers(1, 3, size=(n, D)).astype(np.int8)
    runs = []
    for name, accuracy in accuracies.items():
        right = rng.uniform(size=(n, 2, D)) < accuracy
        verdicts = np.where(right, truth[:, None, :], 3 - truth[:, None, :]).astype(np.int8)
        verdicts[rng.uniform(size=(n, 2, D)) < 0.02] = 0  # a few failures
        runs.append(
            RunData(
                run_id=f"run-{name}",
                judge_spec=name,
                data_hash="data1",
                case_ids=tuple(f"c{i:04d}" for i in range(n)),
                verdicts=verdicts,
                labels=np.zeros((n, D), dtype=np.int8),
                lengths=np.ones((n, 2), dtype=np.int64),
                groups={},
                orders=(Order.ORIGINAL, Order.SWAPPED),
            )
        )
    return runs, truth


def labelled_cases(ids: list[str], truth: np.ndarray, metadata: dict[str, dict] | None = None) -> list[Case]:
    return [
        Case(
            case_id=cid,
            image=ImageRef.empty(),
            question="q",
            response_1="a",
            response_2="b",
            labels={dim: int(truth[int(cid[1:]), j]) for j, dim in enumerate(DIMENSIONS)},
            metadata=(metadata or {}).get(cid, {}),
        )
        for cid in ids
    ]


def test_a_census_gives_each_judges_exact_agreement() -> None:
    rng = np.random.default_rng(0)
    runs, truth = simulated_runs(rng, 120, {"good": 0.9, "poor": 0.6})
    found = corrected_estimates(runs, doctor_labels(labelled_cases([f"c{i:04d}" for i in range(120)], truth), "x"))
    assert [j.judge_spec for j in found.judges] == ["good", "poor"]
    for judge, run in zip(found.judges, runs, strict=True):
        ran = run.verdicts != -1
        exact = ((run.verdicts == truth[:, None, :]) & ran).sum() / ran.sum()
        assert judge.pooled.ppi.estimate == pytest.approx(exact)
        assert judge.pooled.ppi.half_width == 0
    assert found.preference[POOLED].ppi.estimate == pytest.approx((truth == 1).mean())
    assert any("no selection design" in note for note in found.notes)


def test_the_design_in_the_labels_decides_the_strata_and_labels_outside_it_are_not_used() -> None:
    rng = np.random.default_rng(1)
    runs, truth = simulated_runs(rng, 600, {"good": 0.85, "fair": 0.7})
    design = pick_design(case_verdicts(runs[0]), least_confident=60, random=120, seed=3, data_hash="data1")
    picked = [*design.least_confident_ids, *design.random_ids]
    metadata = {cid: {"selection": design.case_metadata(cid)} for cid in picked}
    extra = next(f"c{i:04d}" for i in range(600) if f"c{i:04d}" not in picked)
    found = corrected_estimates(runs, doctor_labels(labelled_cases([*picked, extra], truth, metadata), "x.jsonl"))
    assert found.labelled == 180 and found.ignored == 1
    assert found.reference.startswith("good")
    good = found.judges[0].pooled
    assert [s.size for s in good.strata] == [60, 540] and [s.labelled for s in good.strata] == [60, 120]
    assert good.ppi.half_width < good.classical.half_width
    assert found.judges[1].vs_leader is not None
    assert found.judges[1].vs_leader.ppi.estimate > 0
    assert found.design is not None and found.design["design"] == design.design_id


def test_agreement_intervals_cover_the_pool_truth_by_simulation() -> None:
    rng = np.random.default_rng(2)
    repeats, covered, narrower = 100, 0, 0
    for seed in range(repeats):
        runs, truth = simulated_runs(rng, 400, {"good": 0.85, "fair": 0.7})
        design = pick_design(case_verdicts(runs[0]), least_confident=40, random=80, seed=seed, data_hash="data1")
        picked = [*design.least_confident_ids, *design.random_ids]
        metadata = {cid: {"selection": design.case_metadata(cid)} for cid in picked}
        found = corrected_estimates(runs, doctor_labels(labelled_cases(picked, truth, metadata), "x"))
        fair = next(j for j in found.judges if j.judge_spec == "fair").pooled
        run = runs[1]
        ran = run.verdicts != -1
        exact = ((run.verdicts == truth[:, None, :]) & ran).sum() / ran.sum()
        covered += fair.ppi.low <= exact <= fair.ppi.high
        narrower += fair.ppi.half_width < fair.classical.half_width
    assert covered / repeats >= 0.88  # 100 repeats: a 95 % procedure falls below 88 % with probability < 0.5 %
    assert narrower / repeats >= 0.88


def test_labels_from_other_data_and_an_unknown_reference_are_refused() -> None:
    rng = np.random.default_rng(3)
    runs, truth = simulated_runs(rng, 50, {"good": 0.9})
    design = pick_design(case_verdicts(runs[0]), least_confident=5, random=5, data_hash="other-data")
    metadata = {cid: {"selection": design.case_metadata(cid)} for cid in design.least_confident_ids}
    cases = labelled_cases(list(design.least_confident_ids), truth, metadata)
    with pytest.raises(SelectionError, match="picked from data other-data"):
        corrected_estimates(runs, doctor_labels(cases, "x"))
    plain = labelled_cases(["c0001", "c0002"], truth)
    with pytest.raises(SelectionError, match="no run of 'nobody'"):
        corrected_estimates(runs, doctor_labels(plain, "x"), reference="nobody")
    stranger = [dataclasses.replace(c, case_id="zz" + c.case_id) for c in plain]
    with pytest.raises(SelectionError, match="no doctors' label on any case"):
        corrected_estimates(runs, doctor_labels(stranger, "x"))


def test_two_designs_in_one_file_are_refused() -> None:
    rng = np.random.default_rng(4)
    runs, truth = simulated_runs(rng, 30, {"good": 0.9})
    a = pick_design(case_verdicts(runs[0]), least_confident=2, random=0, seed=1)
    b = pick_design(case_verdicts(runs[0]), least_confident=0, random=2, seed=2)
    metadata = {a.least_confident_ids[0]: {"selection": a.case_metadata(a.least_confident_ids[0])}}
    metadata[b.random_ids[0]] = {"selection": b.case_metadata(b.random_ids[0])}
    with pytest.raises(SelectionError, match="estimate one design at a time"):
        doctor_labels(labelled_cases(list(metadata), truth, metadata), "x")
