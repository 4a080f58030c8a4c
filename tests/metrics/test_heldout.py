"""A ``cv`` output folder read back as one pooled held-out run beside its comparisons, and reported.

The folder is laid out as ``cv`` lays it out, with real stores written by ``evaluate``; the fold
"models" are baseline judges, so nothing is trained.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from medrewardbench.data import load_benchmark
from medrewardbench.errors import StoreError
from medrewardbench.evaluation.job import evaluate
from medrewardbench.metrics.analysis import load_run_bundles
from medrewardbench.metrics.heldout import CV_FILE, is_cv_folder, load_cv_bundles
from medrewardbench.report.render import ReportSettings, render_reports
from medrewardbench.train.folds import split_fold

K = 3


def build_cv_folder(out: Path, *, comparisons: bool = True) -> Path:
    benchmark = load_benchmark("demo", limit=12).labeled()
    folds = []
    for index in range(K):
        split = split_fold(benchmark, K, index)
        # each fold's "model": baseline:first on odd folds, baseline:second on even ones
        spec = "baseline:first" if index % 2 else "baseline:second"
        result = evaluate(split.evaluation, [spec], out / f"fold-{index}" / "eval")
        folds.append(
            {"index": index, "run_id": result.runs[0].run_id, "judge_spec": spec, "n_eval_cases": len(split.evaluation)}
        )
    if comparisons:
        evaluate(benchmark, ["baseline:random", "baseline:longer"], out / "baseline")
    report = {"format": "medrewardbench-cv", "version": 3, "method": "rm", "base_model": "tiny", "k": K,
              "tuned_judge": "rm: fold reward models", "data": {"name": benchmark.name}, "folds": folds}  # fmt: skip
    (out / CV_FILE).write_text(json.dumps(report))
    return out


@pytest.fixture(scope="module")
def cv_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_cv_folder(tmp_path_factory.mktemp("cv"))


def test_the_folds_pool_into_one_run_on_the_held_out_cases(cv_folder: Path, tmp_path: Path) -> None:
    assert is_cv_folder(cv_folder) and not is_cv_folder(cv_folder / "baseline")
    pooled, *others = load_cv_bundles(cv_folder)
    assert [b.record.judge_spec for b in others] == ["baseline:random", "baseline:longer"]
    assert pooled.record.judge_spec == "rm: fold reward models" and len(pooled.parts) == K
    assert pooled.data.case_ids == others[0].data.case_ids and pooled.data.data_hash == others[0].data.data_hash
    assert np.array_equal(pooled.data.labels, others[0].data.labels)
    assert pooled.labels.kind == "illustrative"
    # every case carries the verdicts of its own fold's judge
    benchmark = load_benchmark("demo", limit=12).labeled()
    whole = {
        spec: evaluate(benchmark, [spec], tmp_path / spec.replace(":", "-"))
        for spec in ("baseline:first", "baseline:second")
    }
    stores = {spec: load_run_bundles([tmp_path / spec.replace(":", "-")])[0].data for spec in whole}
    for index in range(K):
        split = split_fold(benchmark, K, index)
        spec = "baseline:first" if index % 2 else "baseline:second"
        for case_id in split.evaluation.case_ids():
            i = pooled.data.case_ids.index(case_id)
            j = stores[spec].case_ids.index(case_id)
            assert np.array_equal(pooled.data.verdicts[i], stores[spec].verdicts[j])


def test_report_renders_a_cv_folder_as_one_pooled_held_out_report(cv_folder: Path, tmp_path: Path) -> None:
    (report,) = render_reports([cv_folder], tmp_path, settings=ReportSettings(n_resamples=200))
    assert set(report.files) == {"md", "csv", "pairwise_csv", "json", "xlsx", "html"}
    labels = [run.label for run in report.analysis.runs]
    assert labels == ["rm: fold reward models", "baseline:random", "baseline:longer"]
    html = report.files["html"].read_text("utf-8")
    assert "rm: fold reward models" in html and 'class="zoomable"' in html  # cases re-loaded from the demo
    assert f"one per fold ({K}:" in html  # the configuration table names the fold models
    assert report.analysis.dataset.n_cases == 12


def test_a_cv_folder_without_comparisons_or_with_a_missing_fold(tmp_path: Path) -> None:
    folder = build_cv_folder(tmp_path / "bare", comparisons=False)
    (pooled,) = load_cv_bundles(folder)
    assert pooled.data.n_cases == 12 and pooled.data.data_hash.startswith("cv-")
    (folder / "fold-1" / "eval" / "medrewardbench.sqlite").unlink()
    with pytest.raises(StoreError, match="fold 1 has no store"):
        load_cv_bundles(folder)
    (folder / CV_FILE).write_text("{}")
    with pytest.raises(StoreError, match="is not a medrewardbench-cv report"):
        load_cv_bundles(folder)
