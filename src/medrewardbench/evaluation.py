"""The eval job as a library call: load data, run judges, compute metrics, write the outputs.

cli.py parses flags and calls :func:`evaluate`; notebooks and scripts can call it directly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import Order
from medrewardbench.judges.base import Judge
from medrewardbench.judges.registry import JudgeOptions, build_judge
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.core import load_run_data, run_metrics
from medrewardbench.metrics.results import Analysis, LeaderboardRow, RunMetrics
from medrewardbench.report.files import (
    metrics_csv_rows,
    metrics_document,
    write_judgments_jsonl,
    write_metrics_csv,
    write_metrics_json,
)
from medrewardbench.runner import RunSummary, execute_plan, plan_run
from medrewardbench.store import RunRecord, Store

log = logging.getLogger(__name__)


class ProgressSink:
    """Receives run progress; the CLI implements it with rich, tests with a list."""

    def start(self, judge_spec: str, total: int, already_done: int) -> None:  # noqa: B027
        """A run begins: ``total`` requests, ``already_done`` of them found in the store."""

    def advance(self, n: int) -> None:  # noqa: B027
        """``n`` more requests finished."""

    def finish(self, summary: RunSummary) -> None:  # noqa: B027
        """A run ended."""


@dataclass(frozen=True)
class EvaluationResult:
    """What :func:`evaluate` produced."""

    out_dir: Path
    summaries: tuple[RunSummary, ...]
    runs: tuple[RunRecord, ...]
    metrics: dict[str, RunMetrics]
    """run id -> point estimates with their counts (metrics.json)"""
    analysis: Analysis
    """the runs analysed together, point estimates only (what eval prints)"""
    leaderboard: tuple[LeaderboardRow, ...]
    files: dict[str, Path]


async def _run_all(
    judges: Sequence[Judge],
    benchmark: Benchmark,
    store: Store,
    orders: Sequence[Order],
    fresh: bool,
    retry_failures: bool,
    sink: ProgressSink,
) -> list[RunSummary]:
    summaries = []
    for judge in judges:
        try:
            plan = plan_run(judge, benchmark, store, orders, fresh=fresh, retry_failures=retry_failures)
            sink.start(judge.spec, plan.total_requests, plan.reused)
            summary = await execute_plan(judge, plan, store, progress=sink.advance)
            sink.finish(summary)
            summaries.append(summary)
        finally:
            await judge.aclose()
    return summaries


def evaluate(
    benchmark: Benchmark,
    judge_specs: Sequence[str],
    out_dir: str | Path = "results",
    *,
    orders: Sequence[Order] = (Order.ORIGINAL, Order.SWAPPED),
    options: JudgeOptions | None = None,
    group_by: Sequence[str] = (),
    fresh: bool = False,
    retry_failures: bool = False,
    progress: ProgressSink | None = None,
    judge_factory: Callable[[str, JudgeOptions], Judge] = build_judge,
) -> EvaluationResult:
    """Run every judge on the benchmark (resuming from the store) and write all outputs.

    Args:
        benchmark: the selected cases.
        judge_specs: judge specs, run one after another.
        out_dir: output directory (store, judgments.jsonl, metrics.json, metrics.csv).
        orders: presentation orders.
        options: shared judge settings.
        group_by: extra metadata fields to group by, besides organ_system.
        fresh: drop stored judgments of these judge configurations first.
        retry_failures: judge again requests whose stored judgment failed.
        progress: progress receiver.
        judge_factory: how a spec becomes a judge (tests inject judges here).

    Returns:
        The run summaries, metrics per run, their point-estimate analysis, the leaderboard and the
        written files.

    Raises:
        ValueError: no judge spec.
    """
    if not judge_specs:
        raise ValueError("evaluate needs at least one judge spec")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    options = options or JudgeOptions()
    sink = progress or ProgressSink()
    # build every judge first: a bad spec fails before any work is done
    judges = [judge_factory(spec, options) for spec in dict.fromkeys(judge_specs)]
    with Store.in_dir(out) as store:
        summaries = asyncio.run(_run_all(judges, benchmark, store, orders, fresh, retry_failures, sink))
        runs = [store.run(s.run.run_id) for s in summaries]
        fields = ["organ_system", *[f for f in group_by if f != "organ_system"]]
        data = [load_run_data(store, r) for r in runs]
        metrics = {d.run_id: run_metrics(d, fields) for d in data}
        analysis = analyze(data, n_resamples=0, group_fields=fields, dataset_name=benchmark.name)
        files = {
            "store": store.path,
            "judgments": out / "judgments.jsonl",
            "metrics_json": out / "metrics.json",
            "metrics_csv": out / "metrics.csv",
        }
        write_judgments_jsonl(store, runs, files["judgments"])
    write_metrics_json(metrics_document(runs, metrics, analysis.leaderboard), files["metrics_json"])
    write_metrics_csv(metrics_csv_rows(runs, metrics), files["metrics_csv"])
    return EvaluationResult(
        out_dir=out,
        summaries=tuple(summaries),
        runs=tuple(runs),
        metrics=metrics,
        analysis=analysis,
        leaderboard=analysis.leaderboard,
        files=files,
    )
