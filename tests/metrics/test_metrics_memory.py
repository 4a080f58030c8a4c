"""Metrics read runs as arrays: four times the judgments, about a kilobyte more per case at most."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.evaluation.store import RunRecord, Store, StoredJudgment, judgment_fingerprint, make_run_id
from medrewardbench.metrics.analysis import analyze, load_run_bundles


def write_store(root: Path, n_cases: int) -> Path:
    image = ImageRef.builtin("pydicom:CT_small.dcm")
    cases = [
        Case(
            case_id=f"case-{i:06d}",
            image=image,
            question=f"What does scan {i} show?",
            response_1="A normal study." * (1 + i % 3),
            response_2="A finding that needs follow-up.",
            labels=dict.fromkeys(DIMENSIONS, 1 + i % 2),
            organ_system=("chest", "brain", "eye")[i % 3],
        )
        for i in range(n_cases)
    ]
    data_hash = f"data-{n_cases}"
    with Store.in_dir(root) as store:
        for j in range(2):
            judge_fp = f"judge-{j}"
            record = RunRecord(
                run_id=make_run_id(f"test:judge-{j}", judge_fp, data_hash),
                judge_spec=f"test:judge-{j}",
                judge_fingerprint=judge_fp,
                data_hash=data_hash,
                dataset_name="synthetic",
                dataset_source="(in memory)",
                orders=(Order.ORIGINAL, Order.SWAPPED),
                config={"spec": f"test:judge-{j}"},
                metadata={},
                n_cases=n_cases,
            )
            store.register_run(record, cases if j == 0 else [], data_hash)
            rows = [
                StoredJudgment(
                    case_id=case.case_id,
                    order=order,
                    case_hash=case.content_hash(),
                    fingerprint=judgment_fingerprint(judge_fp, case.content_hash(), order),
                    verdicts=dict.fromkeys(DIMENSIONS, 1 + (i + j) % 2),
                    raw_output='{"overall": "A", "reason": "' + "a long enough reason " * 10 + '"}',
                    failure=None,
                    dimension_failures={},
                    latency_s=0.5,
                    prompt_tokens=900,
                    completion_tokens=120,
                    scores=None,
                    extra={},
                )
                for i, case in enumerate(cases)
                for order in (Order.ORIGINAL, Order.SWAPPED)
            ]
            store.write_judgments(judge_fp, rows)
    return root


def analysis_peak(root: Path) -> int:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        bundles = load_run_bundles([root])
        result = analyze([b.data for b in bundles], n_resamples=50, block_size=10)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert len(result.leaderboard) == 2
    return peak


def test_metrics_memory_grows_by_little_more_than_the_arrays(tmp_path: Path) -> None:
    analysis_peak(write_store(tmp_path / "warm-up", 100))  # imports and caches are not the cases' memory
    small = analysis_peak(write_store(tmp_path / "small", 1_000))
    large = analysis_peak(write_store(tmp_path / "large", 4_000))
    # a Python object per judgment (4 per case here, as the base commit built them) cost 7.8 KB per
    # case in this test; the arrays, the shared case table and a chunk's counts cost about 1.2 KB
    per_case = (large - small) / 3_000
    assert per_case < 2_500, f"peak traced memory {small} B at 1,000 cases, {large} B at 4,000 ({per_case:.0f} B/case)"
