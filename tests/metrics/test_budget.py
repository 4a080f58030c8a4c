"""The budget planner: the labels it asks for give the half-width it promises (checked by simulation)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics.budget import plan_after, plan_before
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.corrected import corrected_estimates, doctor_labels
from medrewardbench.metrics.selection import SelectionError, pick_design

D = len(DIMENSIONS)


def calibrated_run(rng: np.random.Generator, n: int) -> RunData:
    """A judge with probabilities (both orders) whose verdict follows them; doctors will be drawn from them."""
    p = rng.beta(0.5, 0.5, size=(n, D))
    verdicts = np.where(p > 0.5, 1, 2).astype(np.int8)
    return RunData(
        run_id="run-prob",
        judge_spec="prob",
        data_hash="data1",
        case_ids=tuple(f"c{i:04d}" for i in range(n)),
        verdicts=np.stack([verdicts, verdicts], axis=1),
        labels=np.zeros((n, D), dtype=np.int8),
        lengths=np.ones((n, 2), dtype=np.int64),
        groups={},
        orders=(Order.ORIGINAL, Order.SWAPPED),
        preferences=np.stack([p, p], axis=1),
    )


def doctors_for(run: RunData, rng: np.random.Generator) -> np.ndarray:
    assert run.preferences is not None
    return np.where(rng.uniform(size=(run.n_cases, D)) < run.preferences[:, 0, :], 1, 2)


def labelled(run: RunData, truth: np.ndarray, design, only: list[str] | None = None) -> list[Case]:
    picked = only if only is not None else [*design.least_confident_ids, *design.random_ids]
    return [
        Case(
            case_id=cid,
            image=ImageRef.empty(),
            question="q",
            response_1="a",
            response_2="b",
            labels={dim: int(truth[int(cid[1:]), j]) for j, dim in enumerate(DIMENSIONS)},
            metadata={"selection": design.case_metadata(cid)},
        )
        for cid in picked
    ]


def test_the_plan_before_labels_delivers_its_half_width_for_a_calibrated_judge() -> None:
    rng = np.random.default_rng(0)
    run = calibrated_run(rng, 2000)
    plan = plan_before(run, least_confident=100, half_widths=[0.02, 0.05], seed=1)
    assert plan.remainder == 1900 and plan.basis == "confidence"
    row = plan.rows[0]
    assert row.ppi < row.labels_only
    assert plan.rows[1].ppi < row.ppi
    widths, covered = [], 0
    for repeat in range(60):
        truth = doctors_for(run, rng)
        design = pick_design(case_verdicts(run), least_confident=100, random=row.ppi, seed=1 + 1000 * repeat)
        found = corrected_estimates([run], doctor_labels(labelled(run, truth, design), "x"))
        pooled = found.judges[0].pooled
        widths.append(pooled.ppi.half_width)
        exact = (run.verdicts == truth[:, None, :]).mean()
        covered += pooled.ppi.low <= exact <= pooled.ppi.high
    assert np.mean(widths) == pytest.approx(0.02, rel=0.15)
    assert covered >= 52  # of 60: a 95 % procedure falls below with probability about 1 %


def test_the_plan_from_the_slice_so_far_matches_the_estimators_own_variances() -> None:
    rng = np.random.default_rng(1)
    run = calibrated_run(rng, 1500)
    truth = doctors_for(run, rng)
    design = pick_design(case_verdicts(run), least_confident=50, random=100, seed=2, data_hash="data1")
    doctors = doctor_labels(labelled(run, truth, design), "x")
    plan = plan_after(run, doctors, half_widths=[0.03])
    assert plan.basis == "slice" and plan.random_labelled == 100 and plan.least_confident == 50
    found = corrected_estimates([run], doctors).judges[0].pooled
    # planning for the half-width the slice gives now asks for about the labels it has
    again = plan_after(run, doctors, half_widths=[found.ppi.half_width, found.classical.half_width])
    assert again.rows[0].ppi == pytest.approx(100, abs=2)
    assert again.rows[1].labels_only == pytest.approx(100, abs=2)


def test_the_least_confident_stratum_is_found_again_when_the_export_left_some_out() -> None:
    rng = np.random.default_rng(2)
    run = calibrated_run(rng, 300)
    truth = doctors_for(run, rng)
    design = pick_design(case_verdicts(run), least_confident=30, random=40, seed=3, data_hash="data1")
    some = [*design.least_confident_ids[:25], *design.random_ids]
    found = corrected_estimates([run], doctor_labels(labelled(run, truth, design, some), "x")).judges[0].pooled
    assert [s.size for s in found.strata] == [30, 270]
    assert [s.labelled for s in found.strata] == [25, 40]


def test_a_plan_from_too_few_labels_or_for_an_unknown_dimension_is_refused() -> None:
    rng = np.random.default_rng(3)
    run = calibrated_run(rng, 100)
    truth = doctors_for(run, rng)
    design = pick_design(case_verdicts(run), least_confident=5, random=1, seed=3)
    with pytest.raises(SelectionError, match="at least 2"):
        plan_after(run, doctor_labels(labelled(run, truth, design), "x"), half_widths=[0.05])
    with pytest.raises(SelectionError, match="unknown dimension"):
        plan_before(run, least_confident=5, half_widths=[0.05], dimension="kindness")


def test_a_run_changed_since_the_pick_keeps_the_files_strata_when_the_file_lists_them_all() -> None:
    rng = np.random.default_rng(4)
    run = calibrated_run(rng, 200)
    truth = doctors_for(run, rng)
    design = pick_design(case_verdicts(run), least_confident=20, random=30, seed=3, data_hash="data1")
    assert run.preferences is not None
    changed = dataclasses.replace(run, preferences=np.flip(run.preferences, axis=0).copy())  # re-judged since
    found = corrected_estimates([changed], doctor_labels(labelled(run, truth, design), "x"))
    assert [s.size for s in found.judges[0].pooled.strata] == [20, 180]
    assert any("changed since the pick" in note for note in found.notes)
    some = [*design.least_confident_ids[:15], *design.random_ids]
    with pytest.raises(SelectionError, match="lists only 15 of the 20 least-confident pairs"):
        corrected_estimates([changed], doctor_labels(labelled(run, truth, design, some), "x"))
