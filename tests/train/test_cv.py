"""Cross-validation: folds split by case and stratified by organ system, the pooled held-out report
with paired statistics, and ``medrewardbench cv`` end to end on the demo set with a tiny model."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.cases import make_case
from hypothesis import given, settings
from hypothesis import strategies as st

from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics import stats
from medrewardbench.train.folds import FoldError, assign_folds, split_fold

ORGANS = ("brain", "chest", "eye", "heart", "lung")


organ_lists = st.lists(st.sampled_from(ORGANS), min_size=4, max_size=60)


# ---------------------------------------------------------------------------- folds


@settings(max_examples=60, deadline=None)
@given(organs=organ_lists, k=st.integers(2, 6), seed=st.integers(0, 10_000))
def test_folds_partition_the_cases_without_leakage_and_stratify_by_organ(organs: list[str], k: int, seed: int) -> None:
    if len(organs) < k:
        return
    cases = [make_case(i, organ=organ) for i, organ in enumerate(organs)]
    benchmark = Benchmark("t", "memory", tuple(cases))
    assignment = assign_folds(cases, k, seed)
    assert set(assignment) == {c.case_id for c in cases} and set(assignment.values()) <= set(range(k))
    held_out_union: list[str] = []
    for index in range(k):
        split = split_fold(benchmark, k, index, seed)
        train_ids, eval_ids = set(split.train.case_ids()), set(split.evaluation.case_ids())
        assert not train_ids & eval_ids  # no case on both sides (its two orders are built after the split)
        assert train_ids | eval_ids == set(assignment)
        held_out_union += split.evaluation.case_ids()
    assert sorted(held_out_union) == sorted(assignment)  # every case is held out exactly once
    sizes = Counter(assignment.values())
    assert max(sizes.values()) - min(sizes.get(i, 0) for i in range(k)) <= 1
    for organ in set(organs):
        per_fold = Counter(assignment[c.case_id] for c in cases if c.organ_system == organ)
        counts = [per_fold.get(i, 0) for i in range(k)]
        assert max(counts) - min(counts) <= 1, (organ, counts)


@settings(max_examples=30, deadline=None)
@given(organs=organ_lists, k=st.integers(2, 4), seed=st.integers(0, 10_000))
def test_folds_are_deterministic_and_independent_of_input_order(organs: list[str], k: int, seed: int) -> None:
    if len(organs) < k:
        return
    cases = [make_case(i, organ=organ) for i, organ in enumerate(organs)]
    shuffled = cases[:]
    random.Random(seed).shuffle(shuffled)
    assert assign_folds(cases, k, seed) == assign_folds(shuffled, k, seed) == assign_folds(cases, k, seed)


def test_different_seeds_give_different_folds() -> None:
    cases = [make_case(i, organ=ORGANS[i % len(ORGANS)]) for i in range(40)]
    splits = {tuple(sorted(assign_folds(cases, 5, seed).items())) for seed in range(5)}
    assert len(splits) == 5


def test_the_same_comparison_in_swapped_order_never_straddles_the_split() -> None:
    cases = [make_case(i, organ=ORGANS[i % 3]) for i in range(12)]
    twin = make_case(0, organ="lung", question=cases[0].question, swap=True)
    twin = dataclasses.replace(twin, case_id="twin-of-0")
    for seed in range(20):
        assignment = assign_folds([*cases, twin], 4, seed)
        assert assignment["twin-of-0"] == assignment["case-0000"]


def test_fold_errors() -> None:
    cases = [make_case(i, organ="brain") for i in range(3)]
    benchmark = Benchmark("t", "memory", tuple(cases))
    with pytest.raises(FoldError, match="at least 2"):
        assign_folds(cases, 1)
    with pytest.raises(FoldError, match="4 folds need at least 4"):
        assign_folds(cases, 4)
    with pytest.raises(FoldError, match="fold index"):
        split_fold(benchmark, 3, 3)
    with pytest.raises(FoldError, match="unique"):
        assign_folds([cases[0], cases[0]], 2)


def test_demo_folds_are_stratified_by_organ_system() -> None:
    demo = load_benchmark("demo").labeled()
    assignment = assign_folds(demo.cases, 5, 0)
    for organ in demo.organ_systems():
        counts = Counter(assignment[c.case_id] for c in demo.cases if c.organ_system == organ)
        per_fold = [counts.get(i, 0) for i in range(5)]
        assert max(per_fold) - min(per_fold) <= 1


# ---------------------------------------------------------------------------- pooled statistics


def test_summary_uses_the_paired_statistics_of_the_metrics_module() -> None:
    from medrewardbench.train.cv import HeldOutSummary, summarize

    rng = np.random.default_rng(0)
    n = 40
    labels = rng.integers(1, 3, size=(n, len(DIMENSIONS))).astype(np.int8)
    tuned = np.where(rng.random((n, 2, len(DIMENSIONS))) < 0.8, labels[:, None, :], 3 - labels[:, None, :])
    base = rng.integers(1, 3, size=(n, 2, len(DIMENSIONS)))
    base[0, 0, :] = 0  # a failure: counted wrong
    organs = [ORGANS[i % 3] for i in range(n)]
    summary = summarize(tuned.astype(np.int8), base.astype(np.int8), labels, organs, n_resamples=500, seed=3)
    weights = stats.bootstrap_weights(n, 500, 3, strata=np.asarray(organs))
    expected = stats.pairwise_comparisons(np.stack([tuned, base]), labels, weights=weights)
    assert summary.comparison is not None and summary.base is not None
    for j, dim in enumerate(DIMENSIONS):
        comparison = summary.comparison[dim]
        assert comparison.diff == pytest.approx(expected.diff[0, 1, j], abs=1e-6)
        assert comparison.p_case == pytest.approx(expected.p_case[0, 1, j], rel=1e-3)
        assert comparison.p_bootstrap == pytest.approx(expected.p_bootstrap[0, 1, j])
        tuned_cell = summary.tuned[dim]
        assert tuned_cell.low <= tuned_cell.point <= tuned_cell.high
    pooled = summary.comparison.pooled
    correct_t = (tuned == labels[:, None, :]).sum()
    correct_b = (base == labels[:, None, :]).sum()
    assert pooled.diff == pytest.approx((correct_t - correct_b) / (n * 2 * len(DIMENSIONS)), abs=1e-6)
    assert pooled.low < pooled.diff < pooled.high and pooled.p_bootstrap < 0.01
    assert summary.tuned.pooled.point == pytest.approx(correct_t / (n * 2 * len(DIMENSIONS)))
    assert (pooled.a, pooled.b) == ("tuned", "base")
    assert HeldOutSummary.from_json(json.loads(json.dumps(summary.to_json()))).to_json() == summary.to_json()
    same = summarize(tuned.astype(np.int8), tuned.astype(np.int8), labels, organs, n_resamples=200)
    assert same.comparison is not None
    assert same.comparison.pooled.diff == 0 and same.comparison.pooled.p_case == 1.0
    alone = summarize(tuned.astype(np.int8), None, labels, organs, n_resamples=200)
    assert alone.base is None and alone.comparison is None


def test_a_base_that_failed_most_requests_is_a_warning_and_the_floor_is_compared_too() -> None:
    from medrewardbench.train.cv import HeldOutSummary, summarize

    rng = np.random.default_rng(1)
    n = 30
    labels = rng.integers(1, 3, size=(n, len(DIMENSIONS))).astype(np.int8)
    tuned = np.where(rng.random((n, 2, len(DIMENSIONS))) < 0.6, labels[:, None, :], 3 - labels[:, None, :])
    failing = np.zeros((n, 2, len(DIMENSIONS)), dtype=np.int8)  # every request failed (0 = no verdict)
    floor = np.where(rng.random((n, 2, len(DIMENSIONS))) < 0.7, labels[:, None, :], 3 - labels[:, None, :])
    organs = [ORGANS[i % 3] for i in range(n)]
    summary = summarize(
        tuned.astype(np.int8), failing, labels, organs, n_resamples=300, floor=floor.astype(np.int8),
        base_label="hf:tiny", base_failures={"empty output": 2 * n},
    )  # fmt: skip
    assert summary.base_failure_rate == 1.0 and summary.base_mostly_failed
    (warning,) = summary.warnings("hf:tiny")
    assert "hf:tiny failed 100.0 % of its judgments (most common: empty output (60))" in warning
    assert "flatters" in warning and "baseline:longer" in warning and "--constrained" in warning
    assert summary.floor is not None and summary.floor_comparison is not None
    assert summary.floor_comparison.pooled.diff == pytest.approx(
        summary.tuned.pooled.point - summary.floor.pooled.point, abs=1e-5
    )
    assert summary.floor_comparison.pooled.b == "baseline:longer"
    back = HeldOutSummary.from_json(json.loads(json.dumps(summary.to_json())))
    assert back.to_json() == summary.to_json() and back.base_mostly_failed
    fine = summarize(tuned.astype(np.int8), tuned.astype(np.int8), labels, organs, n_resamples=100)
    assert fine.base_failure_rate == 0.0 and fine.warnings() == [] and fine.floor is None


def test_the_cv_tables_put_the_base_s_failures_beside_its_score_and_the_bootstrap_first() -> None:
    from rich.console import Console

    from medrewardbench.cli.cv_report import cv_headline, cv_tables
    from medrewardbench.train.cv import summarize

    rng = np.random.default_rng(2)
    n = 20
    labels = rng.integers(1, 3, size=(n, len(DIMENSIONS))).astype(np.int8)
    tuned = np.where(rng.random((n, 2, len(DIMENSIONS))) < 0.6, labels[:, None, :], 3 - labels[:, None, :])
    summary = summarize(
        tuned.astype(np.int8), np.zeros((n, 2, len(DIMENSIONS)), dtype=np.int8), labels, [ORGANS[0]] * n,
        n_resamples=200, floor=tuned.astype(np.int8), base_label="hf:tiny",
    )  # fmt: skip
    report = {"method": "rm", "k": 5, "confidence": 0.95, "n_resamples": 200, "data": {"n_held_out_cases": n},
              "tuned_judge": "rm: fold reward models", "base_judge": "hf:tiny", "floor_judge": "baseline:longer",
              "folds": [], "notes": [], **summary.to_json()}  # fmt: skip
    console = Console(width=160, record=True)
    for table in cv_tables(report):
        console.print(table)
    text = console.export_text()
    assert "base: hf:tiny (failed 100.0 % of its judgments)" in text
    assert "- hf:tiny" in text and "- baseline:longer" in text and "p case" in text and "McN" not in text
    assert "headline test" in text and "case-level sign-flip test" in text
    headline = cv_headline(report)
    assert headline.startswith("held-out score ") and "+0.0 points vs baseline:longer (p 1.000)" in headline


def test_a_model_trained_on_a_held_out_case_is_refused() -> None:
    from medrewardbench.train.api import TrainResult
    from medrewardbench.train.card import TrainingCard
    from medrewardbench.train.cv import LeakageError, _check_no_leakage

    cases = tuple(make_case(i, organ=ORGANS[i % 2]) for i in range(6))
    split = split_fold(Benchmark("t", "memory", cases), 3, 0)
    leaked_id = split.evaluation.case_ids()[0]
    card = TrainingCard("sft", "base", "out", {"train_case_ids": [leaked_id]}, None, {}, {})
    with pytest.raises(LeakageError, match="held-out"):
        _check_no_leakage(TrainResult("sft", Path("out"), card, "hf:base", "out"), split)


# ---------------------------------------------------------------------------- cv end to end


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Tiny models on a 2-core runner run far faster on one thread (behaviour, not speed, is tested)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _app() -> Any:
    import typer

    from medrewardbench.cli.train import register_commands

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    register_commands(app)
    return app


@pytest.mark.usefixtures("one_torch_thread")
def test_cv_command_end_to_end_on_the_demo_set(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    """Reward models on all 34 demo cases, 5 folds: a held-out table with intervals and cv.json."""
    from typer.testing import CliRunner

    tiny = tiny_qwen2_vl
    out = tmp_path / "cv-rm"
    args = ["cv", "--method", "rm", "--base", str(tiny), "--folds", "5", "--data", "demo", "--out", str(out),
            "--max-steps", "3", "--batch-size", "4", "--grad-accum", "1", "--lr", "1e-3", "--warmup-ratio", "0",
            "--device", "cpu", "--constrained", "--max-tokens", "64", "--bootstrap", "500", "-q"]  # fmt: skip
    result = CliRunner().invoke(_app(), args)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "cv.json").read_text())
    assert report["data"]["n_held_out_cases"] == 34 and report["folds_run"] == [0, 1, 2, 3, 4]
    assert report["data"]["data_hash"] == load_benchmark("demo").data_hash()
    assert sum(fold["n_eval_cases"] for fold in report["folds"]) == 34
    assert report["version"] == 4
    assert report["floor_judge"] == "baseline:longer" and report["chance"] == 0.5 and report["warnings"] == []
    assert report["base_failure_rate"] == 0.0  # constrained decoding: the base answers every request
    assert report["labels"]["kind"] == "illustrative"
    for dim in (*DIMENSIONS,):
        tuned, base = report["tuned"][dim], report["base"][dim]
        assert tuned["n"] == base["n"] == 68  # both orders of every case, the same requests for both
        assert tuned["low"] <= tuned["point"] <= tuned["high"]
        comparison = report["comparison"][dim]
        assert comparison["diff"] == pytest.approx(tuned["point"] - base["point"], abs=1e-5)
        floor = report["floor_comparison"][dim]
        assert floor["diff"] == pytest.approx(tuned["point"] - report["floor"][dim]["point"], abs=1e-5)
        assert 0 <= comparison["p_bootstrap"] <= 1 and 0 <= comparison["p_case"] <= 1
    assert report["tuned"]["all"]["n"] == 68 * len(DIMENSIONS)
    assert all(fold["score"] is not None for fold in report["folds"])
    assert report["base_judge"] == f"hf:{tiny}"
    assert any("illustrative" in note.lower() for note in report["notes"])
    assert any(note.startswith("p_case: the case-level sign-flip test") for note in report["notes"])
    for fold in report["folds"]:
        card = json.loads((Path(fold["model_dir"]) / "training_card.json").read_text())
        assert not set(card["data"]["train_case_ids"]) & set(card["fold"]["eval_case_ids"])
        assert (Path(fold["model_dir"]).parent / "eval" / "metrics.json").is_file()
    # a rerun with --reuse trains nothing, judges nothing new, and prints the held-out table
    rerun = CliRunner().invoke(_app(), [a for a in args if a != "-q"] + ["--reuse"])
    assert rerun.exit_code == 0, rerun.output
    again = json.loads((out / "cv.json").read_text())
    assert all(fold["reused_model"] for fold in again["folds"])
    assert again["tuned"] == report["tuned"] and again["comparison"] == report["comparison"]
    text = " ".join(rerun.stdout.split())
    assert "held-out agreement with the labels (%) on 34 cases x 2 orders" in text and "95% intervals" in text
    assert "floor (longer)" in text and "- baseline:longer" in text and "chance" in text
    assert "held-out score" in text and "points vs baseline:longer" in text and "(paired case bootstrap)" in text
    overall = report["tuned"]["overall"]
    assert f"[{100 * overall['low']:.1f}, {100 * overall['high']:.1f}]" in text
    assert "p case" in text and "case-level sign-flip test" in text and "Folds" in text
    # report renders the folder: one pooled held-out report beside the base and the floor, HTML included
    from medrewardbench.report.render import ReportSettings, render_reports

    (rendered,) = render_reports([out], tmp_path / "report", settings=ReportSettings(n_resamples=200))
    assert {r.judge for r in rendered.analysis.runs} == {"rm: fold reward models", f"hf:{tiny}", "baseline:longer"}
    assert rendered.analysis.run("rm: fold reward models").score.point == pytest.approx(report["tuned"]["all"]["point"])
    assert "rm: fold reward models" in rendered.files["html"].read_text()


@pytest.mark.usefixtures("one_torch_thread")
def test_cv_with_sft_adapters_on_part_of_the_demo(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    """SFT through the library call: LoRA adapters per fold, judged by hf: with the adapter."""
    from medrewardbench.models.options import JudgeOptions, LocalSettings
    from medrewardbench.train import TrainConfig, cross_validate

    tiny = tiny_qwen2_vl
    benchmark = load_benchmark("demo", limit=6)
    config = TrainConfig(max_steps=1, batch_size=2, grad_accum=1, learning_rate=1e-3, warmup_ratio=0, device="cpu")
    options = JudgeOptions(max_tokens=64, local=LocalSettings(device="cpu", constrained=True))
    result = cross_validate(
        "sft", str(tiny), benchmark, tmp_path, config, k=3, folds=[0, 2], judge_options=options, n_resamples=200
    )
    held_out = {case_id for fold in result.folds for case_id in json.loads(
        (fold.model_dir / "training_card.json").read_text())["fold"]["eval_case_ids"]}  # fmt: skip
    assert set(result.case_ids) == held_out and len(result.folds) == 2
    assert result.tuned.shape == (len(held_out), 2, len(DIMENSIONS)) and result.base is not None
    assert (result.tuned > 0).all() and (result.base > 0).all()  # constrained decoding: no failures
    assert all(fold.adapter == str(fold.model_dir) and fold.judge_spec == f"hf:{tiny}" for fold in result.folds)
    assert result.report["folds_run"] == [0, 2] and result.report["tuned_judge"].endswith("(sft)")
