"""The sweep job: every judge of a sweep file on one data set, into one store, then one report.

:func:`run_sweep` is what ``medrewardbench sweep`` calls. In order: the output directory is
checked, the data loaded, prices resolved, the light judges built (a bad key or URL fails here,
before anything exists), the directory created and locked against other processes (the lock of
``eval``), the data hashed; then the entries run, the juries are computed from what is stored,
costs recorded, and ``judgments.jsonl``, ``metrics.json``, ``metrics.csv``, the report
(``report/``) and ``sweep.json`` written.

Where entries run:

* on this machine (no ``--ray``): API judges and baselines all at once (each with its own
  concurrency, every endpoint within its cap); local models (``hf:``, ``rm:``) and served models
  one after another beside them, since each needs the machine's accelerator or memory;
* with ``--ray ADDRESS|auto|local``: each entry in a Ray actor that asks for the entry's resources
  (:mod:`medrewardbench.sweep.ray_backend`), all at once, as far as the cluster has room.

Either way this process alone writes the store, with the same fingerprints as ``eval``: a rerun
resumes, a judgment is never stored twice, and ``judgments.jsonl`` is the same byte for byte.

Why one module of this size: the sweep job: planning, dispatch, juries, costs and the files, in the
order they run; each step is a function, the module is the sequence.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.data.benchmark import Benchmark
from medrewardbench.errors import (
    DataError,
    EvaluationInterrupted,
    MedRewardBenchError,
    OutputDirError,
    StoreError,
)
from medrewardbench.evaluation.runner import plan_run
from medrewardbench.evaluation.store import RunRecord, Store
from medrewardbench.judges.api import DEFAULT_API_KEY_ENV, ApiJudge
from medrewardbench.judges.base import Judge
from medrewardbench.judges.registry import build_judge
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.core import load_run_data, run_metrics
from medrewardbench.metrics.cost import COST_KEY, Price, RunCost, per_1000, recorded_cost, run_cost, total_usd
from medrewardbench.metrics.results import Analysis
from medrewardbench.models.options import JudgeOptions
from medrewardbench.prompts import load_template
from medrewardbench.report.files import (
    metrics_csv_rows,
    metrics_document,
    write_judgments_jsonl,
    write_metrics_csv,
    write_metrics_json,
)
from medrewardbench.sweep.batch_api import BatchRunner
from medrewardbench.sweep.budget import Budget, CostEstimator, EndpointLimits, check_budget, resolve_prices
from medrewardbench.sweep.config import JudgeEntry, SweepConfig
from medrewardbench.sweep.dispatch import EntryPlan, JudgeBackend, LocalBackend, StoreWriter, dispatch
from medrewardbench.sweep.errors import EntryFailed, SweepFileError
from medrewardbench.sweep.jury import JuryMember, JuryOutcome, store_jury
from medrewardbench.sweep.progress import EntryOutcome, SweepProgress
from medrewardbench.sweep.served import SERVED_KEY_ENV, ServedApiJudge, ServedModel, stop_all_servers
from medrewardbench.sweep.served_groups import RECORD_FILENAME, ServedGroupRecords, stop_leftover_groups
from medrewardbench.utils.outdir import OnWait, OutputLock, check_output_dir, prepare_output_dir

log = logging.getLogger(__name__)

__all__ = ["SUMMARY_FILENAME", "SUMMARY_SCHEMA", "SweepOptions", "SweepResult", "run_sweep"]

SUMMARY_FILENAME = "sweep.json"
SUMMARY_SCHEMA = "medrewardbench.sweep/1"
REPORT_DIRNAME = "report"
SERVER_LOG_DIRNAME = "servers"
FORWARDED_ENV = ("OPENAI_BASE_URL", "MEDREWARDBENCH_IMAGE_ROOTS")
"""Variables a Ray worker gets from the driver besides the key variables its entry names."""

JudgeFactory = Callable[[str, JudgeOptions], Judge]


@dataclass(frozen=True)
class SweepOptions:
    """How to run a sweep (the command's flags).

    Attributes:
        out_dir: the results directory (store, files, report).
        ray: ``None`` (this machine), ``auto``, ``local`` or a Ray cluster address.
        prices: the ``--prices`` table (wins over the sweep file's prices).
        budget_usd: ``--budget``: the most the sweep's stored judgments may cost.
        batch_api: ``--batch-api``: ``api:`` entries (not served, ``batch_api`` not false) go through
            the provider's Batch API.
        fresh: forget the stored judgments of these judges first.
        retry_failures: judge again requests whose stored judgment failed.
        wait: wait for another process working in ``out_dir`` instead of failing.
        report: write the report at the end (intervals, tiers, pairwise tests).
    """

    out_dir: Path = Path("results")
    ray: str | None = None
    prices: Mapping[str, Price] | None = None
    budget_usd: float | None = None
    batch_api: bool = False
    fresh: bool = False
    retry_failures: bool = False
    wait: bool = False
    report: bool = True


@dataclass
class BudgetSummary:
    """How the budget went: the limit, the cost of what is stored, and who stopped with what left."""

    limit: float
    spent: float
    stopped: dict[str, int] = field(default_factory=dict)


@dataclass
class SweepResult:
    """What a sweep did and wrote.

    Attributes:
        out_dir: the results directory.
        outcomes: one per judge entry, in file order.
        juries: one per jury that could be computed.
        runs: the sweep's runs (entries in file order, then juries).
        analysis: the report's analysis (None when no report was written).
        files: what was written (``store``, ``judgments``, ``metrics_json``, ``metrics_csv``,
            ``summary``, and the report's files as ``report_md``, ...).
        budget: the budget's account, with ``--budget``.
        notes: things worth telling (juries not computed, ...).
        cost_usd: what the entries with a price cost in all (their stored judgments, requests asked
            again included); a jury's cost is its members' and is not added again. None: no price.
    """

    out_dir: Path
    outcomes: list[EntryOutcome]
    juries: list[JuryOutcome]
    runs: list[RunRecord]
    analysis: Analysis | None
    files: dict[str, Path]
    budget: BudgetSummary | None = None
    notes: list[str] = field(default_factory=list)
    cost_usd: float | None = None

    @property
    def failed_entries(self) -> list[EntryOutcome]:
        """Entries that could not finish (their server or worker failed)."""
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def budget_stopped(self) -> list[EntryOutcome]:
        """Entries the budget stopped before they finished."""
        return [o for o in self.outcomes if o.status == "budget"]

    @property
    def all_failed(self) -> list[EntryOutcome]:
        """Entries that judged requests now and failed every one of them."""
        return [o for o in self.outcomes if o.judged and o.failed == o.judged]

    def nodes(self) -> dict[str, int]:
        """Node -> requests judged there in this sweep."""
        totals: dict[str, int] = {}
        for outcome in self.outcomes:
            for node, count in outcome.nodes.items():
                totals[node] = totals.get(node, 0) + count
        return totals


@dataclass
class _Entry:
    """An entry while the sweep runs."""

    entry: JudgeEntry
    price: Price | None
    outcome: EntryOutcome
    judge: Judge | None = None
    batch_api: bool = False
    run: RunRecord | None = None


_ENTRY_ERRORS: tuple[type[BaseException], ...] = (MedRewardBenchError,)
"""Errors that end one entry (a server that does not start, a model that does not load), not the sweep."""
_SWEEP_ERRORS: tuple[type[BaseException], ...] = (StoreError, OutputDirError)
"""Errors that end the sweep however they arise."""


def _slug(name: str) -> str:
    text = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name).strip("-.")
    return "-".join(part for part in text.split("-") if part)[:80] or "entry"


def _key_variables(entry: JudgeEntry) -> list[str]:
    if entry.kind != "api":
        return []
    default = SERVED_KEY_ENV if entry.is_served else DEFAULT_API_KEY_ENV
    return [entry.options.api.api_key_env or default]


class _Driver:
    """Runs the entries of one sweep against one open store (the event-loop part of :func:`run_sweep`)."""

    def __init__(
        self,
        config: SweepConfig,
        options: SweepOptions,
        benchmark: Benchmark,
        data_hash: str,
        store: Store,
        entries: list[_Entry],
        progress: SweepProgress,
        judge_factory: JudgeFactory,
    ) -> None:
        self.config = config
        self.options = options
        self.benchmark = benchmark
        self.data_hash = data_hash
        self.store = store
        self.entries = entries
        self.progress = progress
        self.judge_factory = judge_factory
        self.writer = StoreWriter(store)
        self.limits = EndpointLimits(config.endpoint_caps())
        self.budget = Budget(options.budget_usd) if options.budget_usd is not None else None

    # ------------------------------------------------------------------------------- common
    def _plan(self, item: _Entry, judge: Judge) -> EntryPlan:
        plan = plan_run(
            judge,
            self.benchmark,
            self.store,
            self.config.orders,
            fresh=self.options.fresh,
            retry_failures=self.options.retry_failures,
        )
        item.run = plan.run
        outcome = item.outcome
        outcome.run_id = plan.run.run_id
        outcome.total = plan.total_requests
        outcome.reused = plan.reused
        estimator = None
        if item.price is not None and self.budget is not None:
            template = None
            with contextlib.suppress(MedRewardBenchError, OSError):
                template = load_template(item.entry.options.template)
            estimator = CostEstimator(item.price, template, item.entry.options.max_tokens)
            stored = self.store.judgments_for_run(plan.run)
            estimator.observe_stored(stored)
            self.budget.spent += run_cost(item.price, stored, len(self.config.orders)).usd
        self.progress.entry_started(item.entry.name, plan.total_requests, plan.reused)
        return EntryPlan(item.entry.name, plan, item.price, estimator, item.entry.base_url())

    async def _dispatch(self, item: _Entry, plan: EntryPlan, backend: JudgeBackend) -> None:
        if item.batch_api and plan.plan.n_pending:
            assert isinstance(item.judge, ApiJudge)
            runner = BatchRunner(
                plan,
                item.judge,
                self.store,
                self.writer,
                item.outcome,
                self.progress,
                self.config.batch_api,
                self.options.out_dir,
                backend,
                budget=self.budget,
                limits=self.limits,
            )
            await runner.run()
            return
        await dispatch(plan, backend, self.writer, item.outcome, self.progress, budget=self.budget, limits=self.limits)

    async def _guard(self, item: _Entry, work: Coroutine[Any, Any, None]) -> None:
        started = time.monotonic()
        outcome = item.outcome
        try:
            await work
        except _SWEEP_ERRORS:
            raise
        except _ENTRY_ERRORS as exc:
            outcome.status = "failed"
            outcome.error = str(exc)
            self.progress.note(f"{item.entry.name} failed: {exc}")
        except asyncio.CancelledError:
            outcome.status = "interrupted"
            raise
        finally:
            outcome.wall_s = time.monotonic() - started
            self.progress.entry_finished(outcome)

    def _log_path(self, entry: JudgeEntry) -> Path:
        return self.options.out_dir / SERVER_LOG_DIRNAME / f"{_slug(entry.name)}.log"

    # -------------------------------------------------------------------------------- local
    async def _run_light(self, item: _Entry) -> None:
        judge = item.judge
        assert judge is not None
        try:
            plan = self._plan(item, judge)
            await self._dispatch(item, plan, LocalBackend(judge))
        finally:
            await judge.aclose()

    async def _run_heavy(self, item: _Entry) -> None:
        entry = item.entry
        if entry.serve is not None:
            await self._run_served(item)
            return
        self.progress.stage(f"{entry.name}: loading the model")
        judge = await asyncio.to_thread(self.judge_factory, entry.spec, entry.options)
        item.judge = judge
        try:
            plan = self._plan(item, judge)
            await self._dispatch(item, plan, LocalBackend(judge))
        finally:
            await judge.aclose()

    async def _run_served(self, item: _Entry) -> None:
        entry = item.entry
        assert entry.serve is not None
        judge = ServedApiJudge(entry.model, entry.options, entry.serve)
        item.judge = judge
        plan = self._plan(item, judge)
        if not plan.plan.n_pending:
            return  # everything is stored: no server to start
        records = ServedGroupRecords(self.options.out_dir / SERVER_LOG_DIRNAME / RECORD_FILENAME)
        server = ServedModel(
            entry.name, entry.serve, entry.serve.model or entry.model, self._log_path(entry), records=records
        )
        try:
            server.start()
            assert server.pid is not None and server.port is not None
            self.progress.server_started(entry.name, server.pid, server.port, str(server.log_path))
            self.progress.stage(f"{entry.name}: waiting for its server ({server.base_url})")
            await server.wait_ready_async()
            judge.bind(server)
            await dispatch(plan, LocalBackend(judge), self.writer, item.outcome, self.progress, budget=self.budget)
        finally:
            await judge.aclose()
            await asyncio.to_thread(server.stop)

    async def run_local(self) -> None:
        """Light entries all at once; heavy ones one after another beside them."""
        light = [item for item in self.entries if not item.entry.is_heavy]
        heavy = [item for item in self.entries if item.entry.is_heavy]

        async def heavy_lane() -> None:
            for item in heavy:
                await self._guard(item, self._run_heavy(item))

        await _all_or_nothing([self._guard(item, self._run_light(item)) for item in light] + [heavy_lane()])

    # ---------------------------------------------------------------------------------- ray
    def _payload(self, entry: JudgeEntry) -> Any:
        from medrewardbench.sweep.ray_backend import WorkerPayload

        names = [*_key_variables(entry), *FORWARDED_ENV]
        env = {name: os.environ[name] for name in names if os.environ.get(name)}
        return WorkerPayload(entry=entry, data=self.config.data, data_hash=self.data_hash, env=env)

    async def _run_ray(self, item: _Entry) -> None:
        from medrewardbench.sweep.ray_backend import DescribedJudge, RayBackend

        entry = item.entry
        plan: EntryPlan | None = None
        if entry.serve is not None:
            # planned here first: a complete run needs no worker, no GPU and no server
            plan = self._plan(item, ServedApiJudge(entry.model, entry.options, entry.serve))
            if not plan.plan.n_pending:
                return
        backend = RayBackend(
            entry,
            self._payload(entry),
            max_restarts=self.config.ray.max_restarts,
            batch_retries=self.config.ray.batch_retries,
            progress=self.progress,
        )
        in_order = False  # close the worker (and fetch its server's log), or kill it after an interrupt
        try:
            self.progress.stage(f"{entry.name}: starting its Ray worker")
            description = await backend.start()
            if plan is None:
                plan = self._plan(item, DescribedJudge(description))
            elif description.fingerprint != plan.plan.run.judge_fingerprint:
                raise EntryFailed(
                    f"{entry.name}: its Ray worker describes another judge configuration than the driver "
                    "(different medrewardbench versions on the nodes?)"
                )
            try:
                await dispatch(
                    plan, backend, self.writer, item.outcome, self.progress, budget=self.budget, limits=self.limits
                )
            except asyncio.CancelledError:
                raise
            except BaseException:
                in_order = True  # a failed entry still brings its server's log back
                raise
            in_order = True
        finally:
            if in_order:
                text = await backend.close()
                if text is not None:
                    path = self._log_path(entry)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(text, encoding="utf-8")
            else:
                backend.kill()

    async def run_ray(self) -> None:
        """Every entry in its Ray worker at once (Batch API entries poll from here)."""
        works = []
        for item in self.entries:
            if item.batch_api:
                works.append(self._guard(item, self._run_light(item)))
            else:
                works.append(self._guard(item, self._run_ray(item)))
        await _all_or_nothing(works)


async def _all_or_nothing(works: Sequence[Coroutine[Any, Any, None]]) -> None:
    """Run coroutines together; the first that raises cancels the others, and its error is raised."""
    tasks = [asyncio.ensure_future(work) for work in works]
    if not tasks:
        return
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# --------------------------------------------------------------------------------------- the job


def _check_prices(config: SweepConfig, prices: Mapping[str, Price | None]) -> None:
    """With a budget, every hosted API entry needs a price (its cost cannot be bounded otherwise)."""
    for entry in config.judges:
        if entry.kind == "api" and not entry.is_served and prices.get(entry.name) is None:
            raise SweepFileError(
                config.path,
                entry.line,
                f"{entry.name}: --budget needs a price for every hosted api: judge; give it price: "
                "{input: ..., output: ...} (dollars per million tokens), or a --prices file naming "
                f"{entry.model!r}",
            )


def load_sweep_data(config: SweepConfig) -> Benchmark:
    """Load the sweep's cases and check that something can be measured on them.

    Raises:
        DataError: the source cannot be read, or no case carries an expert label.
    """
    from medrewardbench.data import load_benchmark, nothing_to_measure

    data = config.data
    benchmark = load_benchmark(
        data.source, organs=data.organs, limit=data.limit, allow_external_images=data.allow_external_images
    )
    problem = nothing_to_measure(benchmark.source, benchmark.cases)
    if problem is not None:
        raise DataError([problem])
    return benchmark


def run_sweep(
    config: SweepConfig,
    options: SweepOptions,
    *,
    benchmark: Benchmark | None = None,
    progress: SweepProgress | None = None,
    judge_factory: JudgeFactory = build_judge,
    on_wait: OnWait | None = None,
) -> SweepResult:
    """Run a sweep (see the module docstring).

    Args:
        config: the checked sweep file.
        options: the command's flags.
        benchmark: the sweep's cases, when already loaded (:func:`load_sweep_data`).
        progress: progress receiver.
        judge_factory: how a spec becomes a judge in this process (tests inject judges here).
        on_wait: told the other process's pid before waiting for the output directory.

    Returns:
        What was done and written.

    Raises:
        OutputDirError: ``out_dir`` cannot be used; OutputLockedError: another process uses it.
        SweepFileError: ``--budget`` without a price for a hosted API entry.
        ValueError: a ``--budget`` that is not a finite number >= 0.
        DataError: the data cannot be read or has nothing to measure.
        JudgeSpecError, MissingExtraError: a judge cannot be built (before anything is written).
        EvaluationInterrupted: Ctrl-C; what finished is stored and the files describe it.
    """
    sink = progress or SweepProgress()
    out = Path(options.out_dir)
    check_output_dir(out)
    prices = resolve_prices(config, options.prices)
    if options.budget_usd is not None:
        check_budget(options.budget_usd)
        _check_prices(config, prices)
    if benchmark is None:
        sink.stage(f"loading {config.data.source}")
        benchmark = load_sweep_data(config)
    entries = [
        _Entry(
            entry,
            prices[entry.name],
            EntryOutcome(entry.name, entry.spec),
            batch_api=options.batch_api and entry.kind == "api" and not entry.is_served and entry.batch_api,
        )
        for entry in config.judges
    ]
    lock = OutputLock(out, wait=options.wait, on_wait=on_wait)
    built: list[Judge] = []
    try:
        # light judges are built now: a missing key or a bad URL fails before anything exists
        for item in entries:
            if not item.entry.is_heavy and (options.ray is None or item.batch_api):
                item.judge = judge_factory(item.entry.spec, item.entry.options)
                built.append(item.judge)
            elif not item.entry.is_heavy:
                with contextlib.suppress(Exception):
                    asyncio.run(judge_factory(item.entry.spec, item.entry.options).aclose())  # checked, not kept
        prepare_output_dir(out)
        lock.acquire()
    except KeyboardInterrupt:
        raise EvaluationInterrupted(None, len(entries) * len(benchmark) * len(config.orders), "starting") from None
    except BaseException:
        for judge in built:
            with contextlib.suppress(Exception):
                asyncio.run(judge.aclose())
        raise
    try:
        # servers an earlier sweep left running (it and their supervisors were killed) go first
        for line in stop_leftover_groups(ServedGroupRecords(out / SERVER_LOG_DIRNAME / RECORD_FILENAME)):
            sink.warning(line)
        return _run_locked(config, options, benchmark, entries, prices, sink, judge_factory)
    finally:
        stop_all_servers()
        lock.release()


def _run_locked(
    config: SweepConfig,
    options: SweepOptions,
    benchmark: Benchmark,
    entries: list[_Entry],
    prices: Mapping[str, Price | None],
    sink: SweepProgress,
    judge_factory: JudgeFactory,
) -> SweepResult:
    out = Path(options.out_dir)
    total = len(entries) * len(benchmark) * len(config.orders)
    try:
        sink.stage(f"hashing {len(benchmark)} cases")
        data_hash = benchmark.data_hash()
    except KeyboardInterrupt:
        raise EvaluationInterrupted(None, total, "hashing the data") from None
    interrupted = False
    with Store.in_dir(out) as store:
        store.set_label_provenance(data_hash, benchmark.labels)
        driver = _Driver(config, options, benchmark, data_hash, store, entries, sink, judge_factory)
        owns_ray = False
        try:
            if options.ray is not None:
                from medrewardbench.sweep.ray_backend import connect

                sink.stage(f"connecting to Ray ({options.ray})")
                owns_ray = connect(options.ray)
                asyncio.run(driver.run_ray())
            else:
                asyncio.run(driver.run_local())
        except KeyboardInterrupt:
            interrupted = True
            for item in entries:
                if item.outcome.status == "done" and item.outcome.stored < item.outcome.total:
                    item.outcome.status = "interrupted"
        finally:
            driver.writer.flush()
            stop_all_servers()
            if owns_ray:
                from medrewardbench.sweep.ray_backend import disconnect

                disconnect()
        try:
            result = _finish(config, options, benchmark, data_hash, store, entries, prices, driver, interrupted, sink)
        except KeyboardInterrupt:
            interrupted = True
            result = None
    if interrupted:
        stored = sum(item.outcome.stored for item in entries)
        raise EvaluationInterrupted(stored, total)
    assert result is not None
    return result


def _finish(
    config: SweepConfig,
    options: SweepOptions,
    benchmark: Benchmark,
    data_hash: str,
    store: Store,
    entries: list[_Entry],
    prices: Mapping[str, Price | None],
    driver: _Driver,
    interrupted: bool,
    sink: SweepProgress,
) -> SweepResult:
    """Juries, costs, files and (unless interrupted) the report."""
    out = Path(options.out_dir)
    notes: list[str] = []
    # costs: the run's stored judgments at the entry's price (prices never enter a fingerprint)
    costs: dict[str, RunCost] = {}
    for item in entries:
        if item.run is None:
            continue
        run = store.run(item.run.run_id)
        metadata = {key: value for key, value in run.metadata.items() if key != COST_KEY}
        metadata["sweep_entry"] = item.entry.name
        if item.price is not None:
            cost = run_cost(item.price, store.judgments_for_run(run), len(config.orders))
            costs[item.entry.name] = cost
            metadata[COST_KEY] = cost.to_json()
        store.update_run_metadata(run.run_id, metadata)
    # juries: from what is stored, no request
    juries: list[JuryOutcome] = []
    runs_by_name = {item.entry.name: item.run for item in entries}
    for jury in config.juries:
        missing = [name for name, _ in jury.members if runs_by_name.get(name) is None]
        if missing:
            notes.append(f"jury {jury.name} not computed: {', '.join(missing)} never started (see above)")
            continue
        members = [JuryMember(name, weight, store.run(runs_by_name[name].run_id)) for name, weight in jury.members]  # type: ignore[union-attr]
        member_costs = [costs.get(name) for name, _ in jury.members]
        extra: dict[str, Any] = {}
        if any(c is not None for c in member_costs):
            usd = sum(c.usd for c in member_costs if c is not None)
            cases = min((c.cases for c in member_costs if c is not None), default=0)
            extra[COST_KEY] = RunCost(
                usd=usd,
                per_1000_cases=sum(c.per_1000_cases for c in member_costs if c is not None)
                if cases
                else per_1000(0, 0),
                cases=cases,
                requests=0,
                members=tuple(name for (name, _), c in zip(jury.members, member_costs, strict=True) if c is not None),
            ).to_json()
        outcome = store_jury(
            store,
            jury,
            members,
            benchmark.cases,
            data_hash,
            config.orders,
            dataset_name=benchmark.name,
            dataset_source=benchmark.source,
            metadata=extra,
        )
        juries.append(outcome)
    # the files of eval, for every run on this data (the sweep's first, in file order)
    sweep_runs = [store.run(item.run.run_id) for item in entries if item.run is not None]
    sweep_runs += [jury.run for jury in juries]
    ids = {run.run_id for run in sweep_runs}
    all_runs = sweep_runs + [run for run in store.runs_on_data(data_hash) if run.run_id not in ids]
    files: dict[str, Path] = {"store": store.path}
    analysis: Analysis | None = None
    if all_runs:
        fields = ["organ_system", *[f for f in config.group_by if f != "organ_system"]]
        data = {run.run_id: load_run_data(store, run, preferences=True) for run in all_runs}
        metrics = {run_id: run_metrics(d, fields) for run_id, d in data.items()}
        labels = store.label_provenance(data_hash)
        points = analyze(
            list(data.values()), n_resamples=0, group_fields=fields, dataset_name=benchmark.name, labels=labels
        )
        files["judgments"] = out / "judgments.jsonl"
        files["metrics_json"] = out / "metrics.json"
        files["metrics_csv"] = out / "metrics.csv"
        write_judgments_jsonl(store, all_runs, files["judgments"])
        write_metrics_json(
            metrics_document(all_runs, metrics, points.leaderboard, points.human, labels={data_hash: labels}),
            files["metrics_json"],
        )
        write_metrics_csv(metrics_csv_rows(all_runs, metrics), files["metrics_csv"])
        if options.report and not interrupted and sweep_runs:
            analysis = _report(config, out, [run.run_id for run in sweep_runs], fields, files, sink)
    budget = None
    if driver.budget is not None:
        spent = total_usd(costs.values())
        budget = BudgetSummary(driver.budget.limit, spent, dict(driver.budget.stopped))
    result = SweepResult(
        out_dir=out,
        outcomes=[item.outcome for item in entries],
        juries=juries,
        runs=sweep_runs,
        analysis=analysis,
        files=files,
        budget=budget,
        notes=notes,
        cost_usd=total_usd(costs.values()) if costs else None,
    )
    files["summary"] = _write_summary(config, result, out / SUMMARY_FILENAME)
    return result


def _report(
    config: SweepConfig, out: Path, run_ids: list[str], fields: list[str], files: dict[str, Path], sink: SweepProgress
) -> Analysis:
    from medrewardbench.report.render import ReportSettings, read_analysis_json, render_report

    settings = config.report
    sink.stage(f"writing the report ({settings.n_resamples} bootstrap resamples)")
    formats = list(dict.fromkeys([*settings.formats, "json"]))
    written = render_report(
        [out],
        out / REPORT_DIRNAME,
        formats,
        ReportSettings(
            judges=run_ids,
            confidence=settings.confidence,
            n_resamples=settings.n_resamples,
            group_fields=fields,
            alpha=settings.alpha,
            title=settings.title,
        ),
    )
    for name, path in written.items():
        files[f"report_{name}"] = path
    return read_analysis_json(written["json"])


def _write_summary(config: SweepConfig, result: SweepResult, path: Path) -> Path:
    """``sweep.json``: how every entry and jury ended, the budget, requests per node."""
    leaderboard = []
    if result.analysis is not None:
        for row in result.analysis.leaderboard:
            cost = None
            for run in result.runs:
                if run.run_id == row.run_id:
                    found = recorded_cost(run.metadata)
                    cost = None if found is None else found.to_json()
            leaderboard.append(
                {"rank": row.rank, "judge": row.judge, "run_id": row.run_id, "tier": row.tier, "cost": cost}
            )
    document = {
        "schema": SUMMARY_SCHEMA,
        "sweep_file": str(config.path),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "entries": [
            {
                "name": o.name,
                "judge": o.spec,
                "run_id": o.run_id,
                "status": o.status,
                "requests": o.total,
                "stored": o.stored,
                "judged_now": o.judged,
                "failed_now": o.failed,
                "error": o.error,
                "nodes": o.nodes,
                "wall_s": round(o.wall_s, 3),
                "batch_ids": o.batch_ids,
            }
            for o in result.outcomes
        ],
        "juries": [
            {
                "name": j.name,
                "run_id": j.run.run_id,
                "judgments": j.judgments,
                "abstentions": j.abstentions,
                "no_majority": j.no_majority,
                "no_majority_requests": j.failed,
            }
            for j in result.juries
        ],
        "budget": None
        if result.budget is None
        else {
            "limit_usd": result.budget.limit,
            "spent_usd": round(result.budget.spent, 6),
            "stopped": result.budget.stopped,
        },
        "nodes": result.nodes(),
        # juries are left out: their cost is their members' (each jury's row in the leaderboard shows it)
        "cost_usd": None if result.cost_usd is None else round(result.cost_usd, 6),
        "leaderboard": leaderboard,
        "notes": result.notes,
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
