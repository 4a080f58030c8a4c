"""The eval job as a library call: load data, run judges, compute metrics, write the outputs.

cli.py parses flags and calls :func:`evaluate`; notebooks and scripts can call it directly.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from medrewardbench.data.benchmark import KEEP_CASES, Benchmark
from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import Order
from medrewardbench.errors import EvaluationInterrupted
from medrewardbench.evaluation.runner import (
    RunSummary,
    execute_plan,
    execute_while_hashing,
    forget_judgments,
    plan_run,
    register_run,
)
from medrewardbench.evaluation.store import RunRecord, Store
from medrewardbench.judges.base import Judge
from medrewardbench.judges.registry import JudgeOptions, build_judge
from medrewardbench.metrics.settings import SelectiveSettings
from medrewardbench.utils.gcpolicy import long_run
from medrewardbench.utils.outdir import OnWait, OutputLock, check_output_dir, prepare_output_dir

if TYPE_CHECKING:
    from medrewardbench.metrics.core import RunData
    from medrewardbench.metrics.results import Analysis, LeaderboardRow, RunMetrics

# The analysis (numpy's statistics) and the writers are imported where they are used, after the
# requests: importing them on a thread while the requests were out was measured and did not pay
# (the imports' CPU slowed the event loop by as much as it saved).

log = logging.getLogger(__name__)


class ProgressSink:
    """Receives run progress; the CLI implements it with rich, tests with a list."""

    def start(self, judge_spec: str, total: int, already_done: int) -> None:
        """A run begins: ``total`` requests, ``already_done`` of them found in the store."""

    def advance(self, n: int) -> None:
        """``n`` more requests finished."""

    def finish(self, summary: RunSummary) -> None:
        """A run ended."""

    def stage(self, text: str) -> None:
        """A step that may take a while before any run starts (e.g. ``"hashing 10000 cases"``)."""


@dataclass(frozen=True)
class RunHealth:
    """How many of a run's stored requests failed, and why (for the command's summary).

    Attributes:
        run_id: the run.
        judge_spec: its judge.
        stored: requests of the run found in the store.
        failed: those that failed as a whole.
        reasons: failure reason (first line, 80 characters) -> count, most common first.
        structured: the run asked for JSON-schema output (``--structured``), so no hint suggests it.
    """

    run_id: str
    judge_spec: str
    stored: int
    failed: int
    reasons: dict[str, int]
    structured: bool = False

    @property
    def all_failed(self) -> bool:
        """True when the run has stored requests and every one of them failed."""
        return self.stored > 0 and self.failed == self.stored

    @property
    def failure_rate(self) -> float:
        """Failed over stored requests (0 when nothing is stored)."""
        return self.failed / self.stored if self.stored else 0.0

    def hints(self, limit: int = 3) -> list[str]:
        """What to try about the most common failure reasons, one hint each, without repeats."""
        found: list[str] = []
        for reason in list(self.reasons)[:limit]:
            hint = failure_hint(reason, self.judge_spec, structured=self.structured)
            if hint is not None and hint not in found:
                found.append(hint)
        return found


_UNPARSEABLE = ("empty output", "empty response", "no per-dimension verdicts", "output is not text")
_HINTS: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    # (substrings of the reason, judge kinds it applies to (empty: all), the hint)
    (
        _UNPARSEABLE,
        ("hf",),
        "empty output: try `#constrained` (--judge hf:MODEL#constrained decodes only the verdict JSON), "
        "or a larger --max-tokens",
    ),
    (_UNPARSEABLE, ("api",), "unusable output: try --structured (JSON-schema output) or a larger --max-tokens"),
    (_UNPARSEABLE, ("api+structured",), "unusable output with --structured: try a larger --max-tokens"),
    (
        ("HTTP 401", "HTTP 403"),
        (),
        "HTTP 401/403: check --api-key-env (the variable it names must hold a key that --base-url accepts)",
    ),
    (
        ("HTTP 404",),
        (),
        "HTTP 404: check the model name after api: and --base-url (the server lists its models at /v1/models)",
    ),
    (("HTTP 429",), (), "HTTP 429 (rate limit): lower --concurrency or raise --max-retries"),
    (
        ("HTTP 400", "HTTP 422"),
        (),
        "the server refused the request: check --max-tokens, --structured and whether the model takes images",
    ),
    (("timeout",), (), "timeouts: raise --timeout or lower --concurrency"),
    (("connection error",), (), "connection errors: is the server at --base-url running and reachable?"),
    (
        ("image could not be loaded", "could not prepare the request", "image:"),
        (),
        "unreadable images: check the data with `medrewardbench validate SOURCE`",
    ),
    (
        ("tie:",),
        ("rm",),
        "ties (equal scores or lengths) count as wrong: a reward model with many ties barely separates the answers",
    ),
)


def failure_hint(reason: str, judge_spec: str = "", *, structured: bool = False) -> str | None:
    """What to try about one failure reason, when there is something to try.

    A baseline's ties are its nature (equal lengths), not something to fix: they get no hint.

    Args:
        reason: a stored failure reason (its first line).
        judge_spec: the judge that failed, whose kind decides between hints (``#constrained`` for
            ``hf:`` judges, ``--structured`` for ``api:``).
        structured: the run already asked for JSON-schema output: ``--structured`` is not suggested.

    Returns:
        One line, or None.
    """
    kind = judge_spec.partition(":")[0]
    if kind == "api" and structured:
        kind = "api+structured"
    for needles, kinds, hint in _HINTS:
        if (not kinds or kind in kinds) and any(needle in reason for needle in needles):
            return hint
    return None


@dataclass(frozen=True)
class OtherData:
    """Runs in the output directory made on other data than this evaluation's.

    Attributes:
        name: the data set's name.
        data_hash: its fingerprint.
        n_cases: its cases.
        runs: how many runs were made on it.
    """

    name: str
    data_hash: str
    n_cases: int
    runs: int


@dataclass(frozen=True)
class EvaluationResult:
    """What :func:`evaluate` produced.

    ``runs`` are the runs of this call; ``all_runs`` every run in the directory on the same data,
    which the text files, ``metrics`` and ``leaderboard`` describe (the set ``report`` shows).
    """

    out_dir: Path
    summaries: tuple[RunSummary, ...]
    runs: tuple[RunRecord, ...]
    metrics: dict[str, RunMetrics]
    """run id -> point estimates with their counts (metrics.json)"""
    analysis: Analysis
    """the runs analysed together, point estimates only (what eval prints)"""
    leaderboard: tuple[LeaderboardRow, ...]
    files: dict[str, Path]
    all_runs: tuple[RunRecord, ...] = ()
    health: tuple[RunHealth, ...] = ()
    """One entry per run of this call."""
    other_data: tuple[OtherData, ...] = ()
    """Runs in the same store on other data (reports show each data set in its own section)."""
    labels: LabelProvenance = UNKNOWN_LABELS
    """Where the labels of the evaluated data come from (as the store records it)."""

    @property
    def failed_judges(self) -> list[RunHealth]:
        """The runs of this call whose every request failed."""
        return [h for h in self.health if h.all_failed]


class _Data:
    """The evaluated data as the job goes: hashed once every case has been read (maybe during the first run)."""

    def __init__(self, benchmark: Benchmark) -> None:
        self.benchmark = benchmark

    @property
    def data_hash(self) -> str | None:
        """The data's fingerprint, or None while it is still being read."""
        return self.benchmark.data_hash() if self.benchmark.fingerprint_known else None


async def _run_all(
    judges: Sequence[Judge],
    data: _Data,
    store: Store,
    orders: Sequence[Order],
    fresh: bool,
    retry_failures: bool,
    sink: ProgressSink,
    started: list[RunRecord],
    while_waiting: Callable[[], Iterable[object]] | None = None,
) -> list[RunSummary]:
    summaries = []
    open_judges = list(judges)

    def registered(run: RunRecord, hashed: Benchmark) -> None:
        data.benchmark = hashed
        store.set_label_provenance(run.data_hash, hashed.labels)
        started.append(run)

    try:
        for judge in judges:
            steps = while_waiting() if while_waiting is not None else None  # this judge's own
            try:
                if not data.benchmark.fingerprint_known:
                    # the store holds nothing of this judge: judge while the data is read and hashed
                    sink.start(judge.spec, len(data.benchmark) * len(orders), 0)
                    summary, data.benchmark = await execute_while_hashing(
                        judge,
                        data.benchmark,
                        store,
                        orders,
                        progress=sink.advance,
                        on_registered=registered,
                        while_waiting=steps,
                    )
                else:
                    plan = plan_run(judge, data.benchmark, store, orders, fresh=fresh, retry_failures=retry_failures)
                    started.append(plan.run)
                    sink.start(judge.spec, plan.total_requests, plan.reused)
                    summary = await execute_plan(judge, plan, store, progress=sink.advance, while_waiting=steps)
            finally:
                open_judges.remove(judge)
                await judge.aclose()  # at once: a local model's memory is needed by the next judge
            sink.finish(summary)
            summaries.append(summary)
    finally:
        # judges that never ran (an interrupt, an earlier judge failing) are closed too
        for judge in open_judges:
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
    wait: bool = False,
    on_wait: OnWait | None = None,
    write_files: bool = True,
    selective: SelectiveSettings | None = None,
) -> EvaluationResult:
    """Run every judge on the benchmark (resuming from the store) and write all outputs.

    In order: the output directory is checked (creating nothing), the judges are built (a bad spec,
    template or API setting fails here and leaves no directory behind), the directory is created
    and locked against other processes, the data is hashed, the judges run, and the text files are
    written for every run in the directory on this data. When the store holds no judgment of the
    first judge and the data has at most :data:`~medrewardbench.data.benchmark.KEEP_CASES` cases,
    that judge's requests start at once and the data is hashed while they are out
    (:func:`~medrewardbench.evaluation.runner.execute_while_hashing`).

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
        wait: when another process works in ``out_dir``, wait for it instead of failing.
        on_wait: told the other process's pid before waiting.
        write_files: write judgments.jsonl, metrics.json and metrics.csv for this data (a probe's
            derived data is stored without them, so that they keep describing the user's data).
        selective: the risk level and the rest of the abstention behind the leaderboard's coverage
            at risk (default: risk 0.10, delta 0.10).

    Returns:
        The run summaries, metrics per run, their point-estimate analysis, the leaderboard and the
        written files.

    Raises:
        ValueError: no judge spec.
        DataError: a ``group_by`` field that no case has a value for.
        OutputDirError: ``out_dir`` is a file, below a file or not writable.
        OutputLockedError: another process works in ``out_dir`` (and ``wait`` is False).
        JudgeSpecError: a judge cannot be built.
        EvaluationInterrupted: Ctrl-C; what finished is stored and the files describe it.
    """
    if not judge_specs:
        raise ValueError("evaluate needs at least one judge spec")
    out = Path(out_dir)
    group_by = benchmark.resolve_group_fields(group_by) if group_by else []
    check_output_dir(out)
    options = options or JudgeOptions()
    sink = progress or ProgressSink()
    specs = list(dict.fromkeys(judge_specs))
    total = len(specs) * len(benchmark) * len(orders)
    lock = OutputLock(out, wait=wait, on_wait=on_wait)
    stage = "building the judges"
    try:
        # build every judge first: a bad spec fails before any work is done and before --out exists
        judges = [judge_factory(spec, options) for spec in specs]
        stage = f"preparing {out}/"
        prepare_output_dir(out)
        stage = f"waiting for another process to finish with {out}/"
        lock.acquire()
    except KeyboardInterrupt:
        raise EvaluationInterrupted(None, total, stage) from None
    try:
        return _evaluate_locked(
            benchmark, judges, out, orders, group_by, fresh, retry_failures, sink, write_files, selective
        )
    finally:
        lock.release()


def _evaluate_locked(
    benchmark: Benchmark,
    judges: Sequence[Judge],
    out: Path,
    orders: Sequence[Order],
    group_by: Sequence[str],
    fresh: bool,
    retry_failures: bool,
    sink: ProgressSink,
    write_files: bool = True,
    selective: SelectiveSettings | None = None,
) -> EvaluationResult:
    fields = ["organ_system", *[f for f in group_by if f != "organ_system"]]
    started: list[RunRecord] = []
    total = len(judges) * len(benchmark) * len(orders)
    data = _Data(benchmark)
    pipelined = False
    try:
        with Store.in_dir(out) as store:
            first = judges[0].fingerprint()
            if fresh and not benchmark.fingerprint_known and len(benchmark) <= KEEP_CASES:
                # forgotten here, so that the first judge can judge while the data is hashed
                forget_judgments(judges[0], store)
            pipelined = (
                not benchmark.fingerprint_known and len(benchmark) <= KEEP_CASES and not store.has_judgments(first)
            )
            if not pipelined:
                # Something may be reused: hash before planning, and here, not inside the event loop:
                # there a Ctrl-C only asks the loop to stop, and the loop cannot stop before a long
                # stretch of synchronous hashing ends. A small data set is kept in memory by the same
                # reading, so that planning and judging do not read it again. (With nothing stored,
                # the first judge's requests go out while the data is read and hashed, a case at a
                # time: :func:`execute_while_hashing`.)
                sink.stage(f"hashing {len(benchmark)} cases")
                data.benchmark = benchmark.fingerprinted()
                store.set_label_provenance(data.benchmark.data_hash(), benchmark.labels)
            with long_run():  # the requests: fewer garbage collections, none over what exists already
                summaries = asyncio.run(
                    _run_all(judges, data, store, orders, fresh, retry_failures, sink, started, _output_import_steps)
                )
            data_hash = data.benchmark.data_hash()
            return _write_outputs(
                store, out, data.benchmark, data_hash, summaries, started, fields, write_files, selective
            )
    except KeyboardInterrupt:
        if data.data_hash is None and pipelined:
            # a first run stopped before every case was read: read and hash the rest (what the job
            # did before sending any request when something was stored) and record the run, so
            # that the files describe what finished; a second Ctrl-C skips that
            _register_interrupted(judges[0], benchmark, data, out, orders, started, total)
        if data.data_hash is None:
            raise EvaluationInterrupted(None, total, "hashing the data") from None
        with Store.in_dir(out) as store:
            if store.runs_on_data(data.data_hash):
                _write_outputs(store, out, data.benchmark, data.data_hash, [], started, fields, write_files, selective)
            stored = _stored_requests(store, judges, data.benchmark, orders)
        raise EvaluationInterrupted(stored, total) from None


def _register_interrupted(
    judge: Judge,
    benchmark: Benchmark,
    data: _Data,
    out: Path,
    orders: Sequence[Order],
    started: list[RunRecord],
    total: int,
) -> None:
    """Record the run of a first judge stopped while the data was still read (:func:`execute_while_hashing`).

    Raises:
        EvaluationInterrupted: a second Ctrl-C (the judgments stay stored; the next run reuses them).
    """
    try:
        hashed = benchmark.fingerprinted()
        with Store.in_dir(out) as store:
            store.set_label_provenance(hashed.data_hash(), hashed.labels)
            started.append(register_run(judge, hashed, store, orders))
        data.benchmark = hashed
    except KeyboardInterrupt:
        with Store.in_dir(out) as store:
            stored = store.count_judgments(judge.fingerprint())  # the store held none before this run
        raise EvaluationInterrupted(stored, total) from None


_OUTPUT_MODULES = ("medrewardbench.metrics.analysis", "medrewardbench.metrics.core", "medrewardbench.report.files")
"""What :func:`_write_outputs` imports (with numpy, about 0.2 s of the command's time)."""

_OUTPUT_IMPORT_STEPS = (
    "ctypes",
    "numpy",
    "numpy.ma",  # imported by numpy.unique on first use
    "numpy.random",  # and this by the selective section's split
    "numpy.typing",
    "statistics",
    "medrewardbench.metrics.power",
    "medrewardbench.metrics.stats",  # its submodules with it: the package imports them all
    "medrewardbench.metrics.annotators",
    "medrewardbench.metrics.codec",
    "medrewardbench.metrics.results",
    "medrewardbench.metrics.core",
    "medrewardbench.metrics.cost",
    "medrewardbench.metrics.alttest",
    "medrewardbench.metrics.human",
    "medrewardbench.metrics.resampling",
    "medrewardbench.metrics.confidence",
    "medrewardbench.metrics.calibration",
    "medrewardbench.metrics.recalibration",
    "medrewardbench.metrics.selective",
    "medrewardbench.metrics.selective_section",
    "medrewardbench.utils.shorten",
    "medrewardbench.metrics.analysis",
    "medrewardbench.report",
    "medrewardbench.report.files",
)
"""The modules of :data:`_OUTPUT_MODULES` and what they import, dependencies first, so that each
import runs only its own module's code, and a package's the modules it imports (a test checks the
order in a fresh eval process)."""


def _output_import_steps() -> Iterator[str]:
    """Import what :func:`_write_outputs` needs a module at a time, while a run's answers are awaited.

    The runner takes one step per turn of the event loop once the first wave of answers is stored
    (``while_waiting``): each import then runs between answers instead of after the last one.
    Each step yields the module it imported.
    """
    for name in (*_OUTPUT_IMPORT_STEPS, *_OUTPUT_MODULES):
        importlib.import_module(name)
        yield name


def _write_outputs(
    store: Store,
    out: Path,
    benchmark: Benchmark,
    data_hash: str,
    summaries: Sequence[RunSummary],
    started: Sequence[RunRecord],
    fields: Sequence[str],
    write_files: bool = True,
    selective: SelectiveSettings | None = None,
) -> EvaluationResult:
    """Metrics and text files for every run in the store on this data; health of this call's runs."""
    from medrewardbench.metrics.analysis import analyze
    from medrewardbench.metrics.core import load_run_data, run_metrics
    from medrewardbench.report.files import (
        metrics_csv_rows,
        metrics_document,
        write_judgments_jsonl,
        write_metrics_csv,
        write_metrics_json,
    )

    runs = [store.run(r.run_id) for r in started]
    all_runs = store.runs_on_data(data_hash)
    labels = store.label_provenance(data_hash)
    data = {r.run_id: load_run_data(store, r, preferences=True) for r in all_runs}
    metrics = {run_id: run_metrics(d, fields) for run_id, d in data.items()}
    analysis = analyze(
        list(data.values()),
        n_resamples=0,
        group_fields=fields,
        dataset_name=benchmark.name,
        labels=labels,
        selective=selective,
    )
    files = {"store": store.path}
    if write_files:
        files.update(
            judgments=out / "judgments.jsonl", metrics_json=out / "metrics.json", metrics_csv=out / "metrics.csv"
        )
        write_judgments_jsonl(store, all_runs, files["judgments"])
        write_metrics_json(
            metrics_document(all_runs, metrics, analysis.leaderboard, analysis.human, labels={data_hash: labels}),
            files["metrics_json"],
        )
        write_metrics_csv(metrics_csv_rows(all_runs, metrics), files["metrics_csv"])
    health = tuple(_health(r, data[r.run_id]) for r in runs)
    others: dict[str, list[RunRecord]] = {}
    for record in store.runs():
        if record.data_hash != data_hash:
            others.setdefault(record.data_hash, []).append(record)
    other_data = tuple(
        OtherData(records[0].dataset_name, other_hash, records[0].n_cases, len(records))
        for other_hash, records in others.items()
    )
    return EvaluationResult(
        out_dir=out,
        summaries=tuple(summaries),
        runs=tuple(runs),
        metrics=metrics,
        analysis=analysis,
        leaderboard=analysis.leaderboard,
        files=files,
        all_runs=tuple(all_runs),
        health=health,
        other_data=other_data,
        labels=labels,
    )


def _health(run: RunRecord, data: RunData) -> RunHealth:
    from medrewardbench.metrics.stats import NOT_RUN

    stored = int((data.verdicts[:, :, 0] != NOT_RUN).sum())
    failed = sum(data.failures.values())
    structured = bool(run.config.get("structured")) or bool(run.metadata.get("structured_requested"))
    return RunHealth(run.run_id, run.judge_spec, stored, failed, dict(data.failures), structured)


def _stored_requests(store: Store, judges: Sequence[Judge], benchmark: Benchmark, orders: Sequence[Order]) -> int:
    """How many of this call's requests (every judge, case and order) the store holds."""
    if not store.count_cases(benchmark.data_hash()):
        return 0  # no judge got as far as recording the cases: nothing of this data is stored
    data_hash = benchmark.data_hash()
    return sum(store.count_done(judge.fingerprint(), data_hash, orders) for judge in judges)
