"""Where a stored run's confidences come from: probabilities, order agreement, or none at all."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers.cases import make_benchmark

from medrewardbench.data.demo import load_demo
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.evaluation.job import evaluate
from medrewardbench.evaluation.runner import run_judge
from medrewardbench.evaluation.store import Store
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import load_preferences, load_run_data


@pytest.mark.parametrize("spec", ["baseline:longer", "baseline:random"])
def test_baselines_give_no_probability_and_say_order_agreement(spec: str, tmp_path: Path) -> None:
    benchmark = load_demo()
    result = evaluate(benchmark, [spec], tmp_path)
    with Store.in_dir(tmp_path) as store:
        [run] = result.runs
        assert load_preferences(store, run) is None
        assert all(row.preferences == {} for row in store.judgments_for_run(run))
        verdicts = case_verdicts(load_run_data(store, run, preferences=True))
    assert verdicts.source == "order agreement"
    assert set(np.unique(verdicts.p_first[~np.isnan(verdicts.p_first)])) <= {0.0, 0.5, 1.0}


def test_one_order_without_probabilities_has_no_confidence(tmp_path: Path) -> None:
    result = evaluate(load_demo(), ["baseline:longer"], tmp_path, orders=(Order.ORIGINAL,))
    with Store.in_dir(tmp_path) as store:
        verdicts = case_verdicts(load_run_data(store, result.runs[0], preferences=True))
    assert verdicts.source == "none"


def test_case_verdicts_of_a_stored_run_average_the_orders_probabilities(tmp_path: Path) -> None:
    class Scripted(Judge):
        """P(A) = 0.9 in the original order, 0.3 swapped (so B); no probability for case-0001 swapped."""

        spec = "test:scripted"
        batch_size = 8
        concurrency = 1

        def config(self) -> dict[str, object]:
            return {"spec": self.spec}

        async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
            out = []
            for r in requests:
                p = 0.9 if r.order is Order.ORIGINAL else 0.3
                given = (
                    {} if (r.case.case_id == "case-0001" and r.order is Order.SWAPPED) else dict.fromkeys(DIMENSIONS, p)
                )
                out.append(JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, "A" if p > 0.5 else "B"), preferences=given))
            return out

    bench = make_benchmark(3)
    with Store.in_dir(tmp_path) as store:
        summary = run_judge(Scripted(), bench, store)
        data = load_run_data(store, summary.run, preferences=True)
    verdicts = case_verdicts(data)
    assert verdicts.source == "probability"
    # case 0 and 2: 0.9 for response_1 shown first, 1 - 0.3 = 0.7 shown second: 0.8
    np.testing.assert_allclose(verdicts.p_first[[0, 2]], 0.8)
    # case 1: 0.9 and, without a probability, the swapped order's hard verdict (B, shown second, is response_1): 1.0
    np.testing.assert_allclose(verdicts.p_first[1], 0.95)
    np.testing.assert_allclose(verdicts.confidence[0], 0.8)
    np.testing.assert_allclose(verdicts.entropy[0], -(0.8 * np.log2(0.8) + 0.2 * np.log2(0.2)))
    assert (verdicts.verdict == 1).all()
