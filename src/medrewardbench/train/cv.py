"""K-fold cross-validation of trained judges: train each fold, judge its held-out cases, pool, compare.

For each fold ``i`` of :func:`~medrewardbench.train.folds.assign_folds` (by case, stratified by
organ system), :func:`cross_validate`

1. trains on the other folds (:func:`~medrewardbench.train.api.train`),
2. checks from the training card that no held-out case was trained on, in either order,
3. judges fold ``i`` in both presentation orders through the ordinary judges and
   :func:`~medrewardbench.evaluation.job.evaluate`: ``hf:BASE`` with the fold's adapter (SFT, DPO) or
   ``rm:FOLD_MODEL`` (reward models).

The held-out judgments of all folds are pooled (each case judged once per order, by the model
that never saw it), and two comparisons are judged on the same cases: the untuned base model (by
default ``hf:BASE``, the same judge without an adapter) and the baseline floor ``baseline:longer``
(the longer answer wins; a trained judge that does not beat it has learned little). All are
analysed together by :func:`~medrewardbench.metrics.analysis.analyze`, as ``report`` analyses
runs: per dimension and pooled over dimensions, the held-out agreement with the labels with
case-bootstrap intervals stratified by organ system, and the differences with a paired bootstrap
interval and p-value (the same resamples for every judge; the headline test), and the case-level
sign-flip test beside it (``p_case``).
Chance (50 %) is the last reference. Failures (unparseable answers, reward ties) count as wrong,
as everywhere in medrewardbench; the base model's failure rate is reported beside its score, and a
base that failed more than half of its requests is a warning (comparing with it flatters).

Output layout (``medrewardbench report OUT`` renders it as one pooled held-out report)::

    OUT/fold-<i>/model/     adapter or reward model + training_card.json
    OUT/fold-<i>/eval/      store, judgments.jsonl, metrics.json of the held-out cases
    OUT/baseline/           the base model and the baseline floor on the pooled held-out cases
    OUT/cv.json             the report

Why one module of this size: the fold loop, its pooling and the comparisons with the base model and
the floor are one procedure with one record type (the command-line tables already live in
cli/cv_report.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.evaluation.job import ProgressSink, evaluate
from medrewardbench.evaluation.store import Store
from medrewardbench.judges.registry import JudgeOptions
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.core import RunData, load_run_data
from medrewardbench.metrics.heldout import COMPARISON_DIR, CV_FILE, CV_FORMAT
from medrewardbench.metrics.results import STRATA, ColumnTable, Estimate, PairwiseComparison, number
from medrewardbench.train.api import TrainResult, train
from medrewardbench.train.card import CARD_FILE, read_training_card
from medrewardbench.train.config import TrainConfig
from medrewardbench.train.folds import FoldSplit, assign_folds, split_with_assignment
from medrewardbench.train.progress import TrainProgress

logger = logging.getLogger(__name__)

__all__ = [
    "CV_FILE",
    "CVResult",
    "FoldOutcome",
    "HeldOutSummary",
    "LeakageError",
    "cross_validate",
    "default_baseline_spec",
]

CV_VERSION = 4
"""3: the baseline floor (``floor``, ``floor_comparison``), the base's failure rate and warnings;
2: held-out tables are the typed results' tables (``{dimension or "all": estimate}``), the
comparison holds pairwise records, and a fold's ``score`` is its pooled held-out accuracy."""
ORDERS = (Order.ORIGINAL, Order.SWAPPED)
FLOOR_SPEC = "baseline:longer"
"""The baseline floor every cross-validation is also compared with."""
CHANCE = 0.5
"""Agreement of a coin flip."""
BASE_FAILURE_WARNING = 0.5
"""A base judge failing more than this share of its requests makes a comparison with it flatter."""


class LeakageError(MedRewardBenchError):
    """A held-out case was part of the training data of the model that judges it."""


@dataclass(frozen=True)
class FoldOutcome:
    """One fold: what was trained, where, and how it did on its own held-out cases."""

    index: int
    n_train_cases: int
    n_eval_cases: int
    model_dir: Path
    judge_spec: str
    adapter: str | None
    run_id: str
    losses: Mapping[str, Any]
    accuracy: Mapping[str, float]
    """dimension -> held-out accuracy of the fold's model"""
    score: float
    """held-out accuracy pooled over the six dimensions (the leaderboard score)"""
    train_s: float
    eval_s: float
    reused_model: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The fold as it appears in the cross-validation summary file."""
        return {
            "index": self.index,
            "n_train_cases": self.n_train_cases,
            "n_eval_cases": self.n_eval_cases,
            "model_dir": str(self.model_dir),
            "judge_spec": self.judge_spec,
            "adapter": self.adapter,
            "run_id": self.run_id,
            "losses": {k: self.losses.get(k) for k in ("first", "final", "mean")},
            "accuracy": {dim: number(value) for dim, value in self.accuracy.items()},
            "score": number(self.score),
            "train_s": round(self.train_s, 3),
            "eval_s": round(self.eval_s, 3),
            "reused_model": self.reused_model,
        }


@dataclass(frozen=True)
class CVResult:
    """The pooled held-out result of a cross-validation.

    Attributes:
        report: the JSON-ready report (also written to ``OUT/cv.json``).
        summary: the pooled held-out tables and comparison (typed; ``report`` holds them as JSON).
        case_ids: the pooled held-out cases, in benchmark order.
        labels: (n_cases, n_dims) expert labels.
        tuned: (n_cases, 2, n_dims) verdicts of the fold models, each case by the model of its fold.
        base: the untuned base model's verdicts on the same cases (None without a baseline).
        folds: per-fold outcomes.
        out_dir: the output directory.
        report_path: ``OUT/cv.json``.
    """

    report: dict[str, Any]
    summary: HeldOutSummary
    case_ids: tuple[str, ...]
    labels: npt.NDArray[np.int8]
    tuned: npt.NDArray[np.int8]
    base: npt.NDArray[np.int8] | None
    folds: tuple[FoldOutcome, ...]
    out_dir: Path
    report_path: Path
    organs: tuple[str, ...] = field(default=())


def default_baseline_spec(base_model: str) -> str:
    """The untuned comparison: the base model as a generative ``hf:`` judge."""
    return f"hf:{base_model}"


def _verdicts_by_case(out_dir: Path, run_id: str) -> dict[str, npt.NDArray[np.int8]]:
    """case_id -> (2, n_dims) verdicts of one stored run."""
    with Store.in_dir(out_dir) as store:
        data = load_run_data(store, store.run(run_id))
    return {case_id: data.verdicts[i] for i, case_id in enumerate(data.case_ids)}


def _reusable(
    model_dir: Path, method: str, base_model: str, data_hash: str, split: FoldSplit, config: TrainConfig
) -> bool:
    """True when ``model_dir`` holds a model trained with exactly these settings on this fold."""
    if not (model_dir / CARD_FILE).is_file():
        return False
    try:
        card = read_training_card(model_dir)
    except MedRewardBenchError:
        return False
    expected = config.as_dict()
    expected["learning_rate"] = config.resolved_learning_rate(method)
    if method == "rm":
        expected["head_learning_rate"] = config.resolved_head_learning_rate(method)
    fold = card.fold or {}
    path = Path(base_model).expanduser()
    base = str(path.resolve()) if path.exists() else base_model
    return (
        card.method == method
        and card.base_model == base
        and card.data.get("data_hash") == data_hash
        and fold.get("k") == split.k
        and fold.get("index") == split.index
        and fold.get("seed") == split.seed
        and list(fold.get("eval_case_ids", [])) == list(split.evaluation.case_ids())
        and dict(card.hyperparameters) == json.loads(json.dumps(expected, default=str))
    )


def _check_no_leakage(result: TrainResult, split: FoldSplit) -> None:
    trained = set(result.card.train_case_ids)
    held_out = set(split.evaluation.case_ids())
    leaked = sorted(trained & held_out)
    if leaked:
        raise LeakageError(
            f"fold {split.index}: {len(leaked)} held-out case(s) were in the training data, e.g. {leaked[:3]}"
        )


@dataclass(frozen=True)
class HeldOutSummary:
    """The pooled held-out result: agreement of the tuned model and of each comparison, and the paired tests.

    Attributes:
        tuned: the trained models' held-out agreement with the labels, per column.
        base: the untuned base model's, on the same cases (None when not run).
        comparison: tuned (``a``) against base (``b``), per column.
        floor: the baseline floor's (``baseline:longer``), on the same cases (None when not run).
        floor_comparison: tuned against the floor, per column.
        base_failure_rate: the share of the base's judgments that failed (NaN without a base).
        base_failures: the base's failure reasons with counts, most common first.
    """

    tuned: ColumnTable[Estimate]
    base: ColumnTable[Estimate] | None
    comparison: ColumnTable[PairwiseComparison] | None
    floor: ColumnTable[Estimate] | None = None
    floor_comparison: ColumnTable[PairwiseComparison] | None = None
    base_failure_rate: float = float("nan")
    base_failures: Mapping[str, int] = field(default_factory=dict)

    @property
    def base_mostly_failed(self) -> bool:
        """Whether the base failed more than half of its requests (a comparison with it flatters)."""
        return self.base_failure_rate > BASE_FAILURE_WARNING

    def warnings(self, base_label: str = "the base judge") -> list[str]:
        """What a reader must know before trusting the comparison with the base, in words."""
        if not self.base_mostly_failed:
            return []
        reasons = "; ".join(f"{reason} ({count})" for reason, count in list(self.base_failures.items())[:2])
        return [
            f"{base_label} failed {100 * self.base_failure_rate:.1f} % of its judgments"
            + (f" (most common: {reasons})" if reasons else "")
            + ": failures count as wrong, so the difference from it flatters the tuned model; compare with the "
            f"baseline floor ({FLOOR_SPEC}) and chance instead, or make the base answer (hf: judges: --constrained)"
        ]

    def to_json(self) -> dict[str, Any]:
        """The tables and comparisons as ``cv.json`` holds them."""

        def table(value: ColumnTable[Estimate] | None) -> Any:
            return None if value is None else value.to_json(Estimate.to_json)

        def tests(value: ColumnTable[PairwiseComparison] | None) -> Any:
            return None if value is None else value.to_json(PairwiseComparison.to_json)

        return {
            "tuned": table(self.tuned),
            "base": table(self.base),
            "comparison": tests(self.comparison),
            "floor": table(self.floor),
            "floor_comparison": tests(self.floor_comparison),
            "base_failure_rate": number(self.base_failure_rate),
            "base_failures": dict(self.base_failures),
            "chance": CHANCE,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HeldOutSummary:
        """Read :meth:`to_json` output (or a whole cv.json report, version 2 to 4; before 4 without ``p_case``)."""

        def table(key: str) -> ColumnTable[Estimate] | None:
            value = data.get(key)
            return None if value is None else ColumnTable.from_json(value, Estimate.from_json)

        def tests(key: str) -> ColumnTable[PairwiseComparison] | None:
            value = data.get(key)
            return None if value is None else ColumnTable.from_json(value, PairwiseComparison.from_json)

        tuned = table("tuned")
        if tuned is None:
            raise MedRewardBenchError("a cross-validation report without a tuned table")
        rate = data.get("base_failure_rate")
        return cls(
            tuned=tuned,
            base=table("base"),
            comparison=tests("comparison"),
            floor=table("floor"),
            floor_comparison=tests("floor_comparison"),
            base_failure_rate=float("nan") if rate is None else float(rate),
            base_failures={str(k): int(v) for k, v in (data.get("base_failures") or {}).items()},
        )


def _held_out_run(
    run_id: str,
    spec: str,
    verdicts: npt.NDArray[np.int8],
    labels: npt.NDArray[np.int8],
    organs: Sequence[str],
    lengths: npt.NDArray[np.int64],
    failures: Mapping[str, int] | None = None,
) -> RunData:
    return RunData(
        run_id=run_id,
        judge_spec=spec,
        data_hash="held-out",
        case_ids=tuple(str(i) for i in range(len(labels))),
        verdicts=np.asarray(verdicts, dtype=np.int8),
        labels=np.asarray(labels, dtype=np.int8),
        lengths=lengths,
        groups={STRATA: tuple(organs)},
        orders=ORDERS,
        failures=dict(failures or {}),
    )


def summarize(
    tuned: npt.NDArray[np.int8],
    base: npt.NDArray[np.int8] | None,
    labels: npt.NDArray[np.int8],
    organs: Sequence[str],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    tuned_label: str = "tuned",
    base_label: str = "base",
    lengths: npt.ArrayLike | None = None,
    floor: npt.NDArray[np.int8] | None = None,
    floor_label: str = FLOOR_SPEC,
    base_failures: Mapping[str, int] | None = None,
) -> HeldOutSummary:
    """Held-out agreement with intervals, and the paired comparisons with the base model and the floor.

    The judges are analysed together like runs in a report (the same bootstrap resamples for all,
    stratified by organ system), so the numbers mean what they mean everywhere else.

    Args:
        tuned: (n, 2, n_dims) pooled held-out verdicts of the trained models.
        base: (n, 2, n_dims) verdicts of the untuned base model on the same cases, or None.
        labels: (n, n_dims).
        organs: organ system per case (bootstrap strata).
        confidence: interval coverage.
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.
        tuned_label: the tuned judge's name in the comparison records.
        base_label: the base judge's name in the comparison records.
        lengths: (n, 2) response lengths; they play no part in agreement and may be left out.
        floor: (n, 2, n_dims) verdicts of the baseline floor on the same cases, or None.
        floor_label: the floor's name in the comparison records.
        base_failures: the base's failure reasons with counts (reported with its failure rate).

    Returns:
        The :class:`HeldOutSummary` (a comparison is None when its judge was not run).
    """
    n = len(labels)
    case_lengths = np.zeros((n, 2), dtype=np.int64) if lengths is None else np.asarray(lengths, dtype=np.int64)
    runs = [_held_out_run("tuned", tuned_label, tuned, labels, organs, case_lengths)]
    if base is not None:
        runs.append(_held_out_run("base", base_label, base, labels, organs, case_lengths, base_failures))
    if floor is not None:
        runs.append(_held_out_run("floor", floor_label, floor, labels, organs, case_lengths))
    analysis = analyze(runs, confidence=confidence, n_resamples=n_resamples, seed=seed)
    by_id = {run.run_id: run for run in analysis.runs}
    tuned_run = by_id["tuned"]

    def against(run_id: str) -> tuple[ColumnTable[Estimate] | None, ColumnTable[PairwiseComparison] | None]:
        other = by_id.get(run_id)
        if other is None:
            return None, None
        return other.accuracy, ColumnTable.of(analysis.pairwise.between(tuned_run.label, other.label))

    base_table, comparison = against("base")
    floor_table, floor_comparison = against("floor")
    base_run = by_id.get("base")
    return HeldOutSummary(
        tuned_run.accuracy,
        base_table,
        comparison,
        floor_table,
        floor_comparison,
        base_failure_rate=float("nan") if base_run is None else base_run.failure_rate.pooled,
        base_failures=dict(base_failures or {}),
    )


def cross_validate(
    method: str,
    base_model: str,
    benchmark: Benchmark,
    out_dir: str | Path,
    config: TrainConfig | None = None,
    *,
    k: int = 5,
    seed: int = 0,
    folds: Sequence[int] | None = None,
    judge_options: JudgeOptions | None = None,
    baseline_spec: str | None = "default",
    baseline_options: JudgeOptions | None = None,
    floor_spec: str | None = FLOOR_SPEC,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    reuse_models: bool = False,
    train_progress: TrainProgress | None = None,
    eval_progress: ProgressSink | None = None,
) -> CVResult:
    """Train and evaluate every fold, pool the held-out judgments and compare with the base model.

    Args:
        method: ``sft``, ``dpo`` or ``rm``.
        base_model: Hub id or directory of the base vision-language model.
        benchmark: labelled data (unlabelled cases are ignored).
        out_dir: output directory (see the module docstring).
        config: training hyperparameters (its ``seed`` also seeds training; ``template`` is used
            for evaluation too).
        k: number of folds.
        seed: seed of the fold split and of the bootstrap.
        folds: run only these fold indices (the report pools their held-out cases); None runs all.
        judge_options: options of the held-out judges (device, dtype, batch size,
            ``local.constrained``...); the adapter is set per fold.
        baseline_spec: the untuned judge; ``"default"`` is :func:`default_baseline_spec`, None skips it.
        baseline_options: its options; None uses ``judge_options`` without an adapter.
        floor_spec: the baseline floor judged on the same cases (default ``baseline:longer``); None skips it.
        confidence: interval coverage.
        n_resamples: bootstrap resamples.
        reuse_models: skip training a fold whose model directory already holds a model trained
            with the same method, base, data, fold and hyperparameters.
        train_progress: training progress receiver.
        eval_progress: evaluation progress receiver.

    Returns:
        The pooled result; the report is also written to ``OUT/cv.json``.

    Raises:
        MedRewardBenchError: bad folds, no labelled cases, or a leak between training and evaluation.
    """
    started = time.perf_counter()
    config = config or TrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    labelled = benchmark.labeled()
    if not labelled.cases:
        raise MedRewardBenchError(f"{benchmark.source}: no labelled case for cross-validation")
    data_hash = benchmark.data_hash()
    assignment = assign_folds(labelled.cases, k, seed)
    fold_indices = sorted(set(folds)) if folds is not None else list(range(k))
    if not fold_indices or any(not 0 <= i < k for i in fold_indices):
        raise MedRewardBenchError(f"fold indices must be in 0..{k - 1}, got {list(folds or [])}")
    options = (judge_options or JudgeOptions()).with_changes(template=config.template, seed=config.seed)
    tuned_by_case: dict[str, npt.NDArray[np.int8]] = {}
    outcomes: list[FoldOutcome] = []
    for index in fold_indices:
        split = split_with_assignment(labelled, assignment, k, index, seed)
        fold_dir = out / f"fold-{index}"
        model_dir = fold_dir / "model"
        train_started = time.perf_counter()
        reused = reuse_models and _reusable(model_dir, method, base_model, data_hash, split, config)
        if reused:
            card = read_training_card(model_dir)
            logger.info("fold %d: reusing the model in %s", index, model_dir)
            result = TrainResult(
                method=method,
                output_dir=model_dir,
                card=card,
                judge_spec=str(card.judge["spec"]),
                judge_adapter=card.judge.get("adapter"),
            )
        else:
            result = train(
                method,
                base_model,
                benchmark,
                model_dir,
                config,
                fold=split,
                data_hash=data_hash,
                progress=train_progress,
            )
        train_s = time.perf_counter() - train_started
        _check_no_leakage(result, split)
        eval_started = time.perf_counter()
        evaluation = evaluate(
            split.evaluation,
            [result.judge_spec],
            fold_dir / "eval",
            orders=ORDERS,
            options=options.with_local(adapter=result.judge_adapter),
            progress=eval_progress,
        )
        eval_s = time.perf_counter() - eval_started
        run = evaluation.runs[0]
        fold_verdicts = _verdicts_by_case(evaluation.out_dir, run.run_id)
        for case_id in split.evaluation.case_ids():
            tuned_by_case[case_id] = fold_verdicts[case_id]
        fold_run = evaluation.analysis.run(run.run_id)
        outcomes.append(
            FoldOutcome(
                index=index,
                n_train_cases=len(split.train),
                n_eval_cases=len(split.evaluation),
                model_dir=model_dir,
                judge_spec=result.judge_spec,
                adapter=result.judge_adapter,
                run_id=run.run_id,
                losses=result.card.losses,
                accuracy={dim: fold_run.accuracy[dim].point for dim in DIMENSIONS},
                score=fold_run.score.point,
                train_s=train_s,
                eval_s=eval_s,
                reused_model=reused,
            )
        )
        logger.info("fold %d: held-out score %.4f", index, fold_run.score.point)
    held_out = Benchmark(
        labelled.name,
        labelled.source,
        tuple(case for case in labelled.cases if case.case_id in tuned_by_case),
        labels=labelled.labels,
    )
    case_ids = held_out.case_ids()
    n, d = len(case_ids), len(DIMENSIONS)
    labels = np.zeros((n, d), dtype=np.int8)
    for i, case in enumerate(held_out.cases):
        for j, dim in enumerate(DIMENSIONS):
            labels[i, j] = case.labels.get(dim, 0)
    tuned = np.stack([tuned_by_case[case_id] for case_id in case_ids]).astype(np.int8)
    base: npt.NDArray[np.int8] | None = None
    floor: npt.NDArray[np.int8] | None = None
    base_failures: dict[str, int] = {}
    resolved_baseline = default_baseline_spec(base_model) if baseline_spec == "default" else baseline_spec
    baseline_s = 0.0
    baseline_run: str | None = None
    floor_run: str | None = None
    if resolved_baseline:
        baseline_started = time.perf_counter()
        evaluation = evaluate(
            held_out,
            [resolved_baseline],
            out / COMPARISON_DIR,
            orders=ORDERS,
            options=baseline_options or options.with_local(adapter=None),
            progress=eval_progress,
        )
        baseline_run = evaluation.runs[0].run_id
        base_by_case = _verdicts_by_case(evaluation.out_dir, baseline_run)
        base = np.stack([base_by_case[case_id] for case_id in case_ids]).astype(np.int8)
        base_failures = dict(evaluation.health[0].reasons) if evaluation.health else {}
        baseline_s = time.perf_counter() - baseline_started
    if floor_spec:
        evaluation = evaluate(held_out, [floor_spec], out / COMPARISON_DIR, orders=ORDERS, progress=eval_progress)
        floor_run = evaluation.runs[0].run_id
        floor_by_case = _verdicts_by_case(evaluation.out_dir, floor_run)
        floor = np.stack([floor_by_case[case_id] for case_id in case_ids]).astype(np.int8)
    organs = tuple(case.organ_system for case in held_out.cases)
    tuned_label = f"hf:{base_model} + fold LoRA adapters ({method})" if method != "rm" else "rm: fold reward models"
    summary = summarize(
        tuned,
        base,
        labels,
        organs,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        tuned_label=tuned_label,
        base_label=resolved_baseline or "base",
        lengths=[(len(case.response_1), len(case.response_2)) for case in held_out.cases],
        floor=floor,
        floor_label=floor_spec or FLOOR_SPEC,
        base_failures=base_failures,
    )
    notes = [
        "held-out: each case is judged, in both orders, only by the model of the fold that did not train on it",
        "failures (unparseable answers, equal reward scores) count as wrong",
        "intervals: case bootstrap stratified by organ system; differences (tuned - base, tuned - floor) with a "
        "paired case bootstrap on the same resamples, whose p_bootstrap is the headline test",
        "p_case: the case-level sign-flip test of the same differences (each case's difference in correct "
        "requests, over its orders and dimensions, kept whole; mid-p of its exact distribution)",
        f"chance: {CHANCE:.0%} agreement; the floor ({floor_spec or 'not run'}) picks the longer answer",
        f"labels: {held_out.labels.banner()}",
    ]
    warnings = summary.warnings(resolved_baseline or "the base judge")
    report: dict[str, Any] = {
        "format": CV_FORMAT,
        "version": CV_VERSION,
        "method": method,
        "base_model": base_model,
        "k": k,
        "seed": seed,
        "folds_run": fold_indices,
        "data": {
            "name": labelled.name,
            "source": labelled.source,
            "data_hash": data_hash,
            "n_labelled_cases": len(labelled),
            "n_held_out_cases": n,
            "organ_systems": sorted(set(organs)),
        },
        "tuned_judge": tuned_label,
        "base_judge": resolved_baseline,
        "baseline_run_id": baseline_run,
        "floor_judge": floor_spec,
        "floor_run_id": floor_run,
        "labels": held_out.labels.to_json(),
        **summary.to_json(),
        "warnings": warnings,
        "folds": [outcome.as_dict() for outcome in outcomes],
        "hyperparameters": config.as_dict(),
        "confidence": confidence,
        "n_resamples": n_resamples,
        "notes": notes,
        "timings": {
            "total_s": round(time.perf_counter() - started, 3),
            "train_s": round(sum(o.train_s for o in outcomes), 3),
            "eval_s": round(sum(o.eval_s for o in outcomes), 3),
            "baseline_s": round(baseline_s, 3),
        },
    }
    report_path = out / CV_FILE
    report_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", "utf-8")
    return CVResult(
        report=report,
        summary=summary,
        case_ids=case_ids,
        labels=labels,
        tuned=tuned,
        base=base,
        folds=tuple(outcomes),
        out_dir=out,
        report_path=report_path,
        organs=organs,
    )
