"""Plan requests, skip what the store has, dispatch batches with bounded concurrency, store results.

The runner is the only place that maps judges' presentation-order verdicts (A/B) back to source
order (1/2). ``judge.concurrency`` workers take batches from the plan one at a time. A finished
batch is committed before its worker takes the next one, in one transaction with the batches that
finished in the same turn of the event loop, so a kill loses at most the batches in flight. A
first run, which can reuse nothing, skips the planning and hashes the data while its requests are
out (:func:`execute_while_hashing`). Once the first wave of answers is stored, a caller's
``while_waiting`` steps run one per turn of the event loop while answers are awaited (the eval job imports its
analysis there).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from medrewardbench import __version__
from medrewardbench.cases import Case
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Order, Winner, to_source
from medrewardbench.evaluation.store import RunRecord, Store, StoredJudgment, judgment_fingerprint, make_run_id
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.utils.batching import TurnWriter, batched, guarded_batch

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int], None]
"""Called with the number of requests just finished."""


PLAN_CHUNK = 256
"""Cases read, registered and looked up in the store at a time while planning and dispatching."""


@dataclass(frozen=True)
class RunPlan:
    """What a run will do before it does it.

    The plan holds no request: one byte per case says which orders are still to judge, and
    :meth:`iter_requests` reads the cases from the benchmark again, a chunk at a time, when the run
    dispatches them.
    """

    run: RunRecord
    total_requests: int
    reused: int
    benchmark: Benchmark
    orders: tuple[Order, ...]
    pending_mask: bytes
    """Per case, in order: bit ``i`` is set when ``orders[i]`` is still to judge."""
    n_pending: int
    """Requests still to judge (the store has the rest)."""
    replacing: bool = True
    """Whether a judgment written may replace a stored one: False when the store held no judgment
    of this judge when the run was planned (its writes then skip looking for earlier usage)."""

    @property
    def requests(self) -> tuple[JudgeRequest, ...]:
        """Every request still to judge, in case order then order, in memory (for small data)."""
        return tuple(self.iter_requests())

    def iter_requests(self, store: Store | None = None) -> Iterator[JudgeRequest]:
        """The requests still to judge, in case order then order, read a chunk of cases at a time.

        Args:
            store: when given, the registered content hashes of cases whose hash the benchmark did
                not keep are read from it, so that the cases' images are not read again to hash them.

        Yields:
            The requests.
        """
        if not self.n_pending:
            return
        position = 0
        for chunk in self.benchmark.iter_chunks(PLAN_CHUNK):
            start = position
            masks = self.pending_mask[position : position + len(chunk)]
            position += len(chunk)
            wanted = [(offset, case) for offset, (case, mask) in enumerate(zip(chunk, masks, strict=True)) if mask]
            if not wanted:
                continue
            unknown = []
            for offset, case in wanted:
                known = self.benchmark.content_hash_at(start + offset)  # kept from the fingerprint pass
                if known is not None:
                    case.prime_content_hash(known)
                else:
                    unknown.append(case)
            if store is not None and unknown:
                stored = store.done_for_cases(
                    self.run.judge_fingerprint, self.run.data_hash, [case.case_id for case in unknown]
                )
                for case in unknown:
                    if case.case_id in stored:
                        case.prime_content_hash(stored[case.case_id][0])
            for offset, case in wanted:
                mask = masks[offset]
                for i, order in enumerate(self.orders):
                    if mask >> i & 1:
                        yield JudgeRequest(case, order)


@dataclass(frozen=True)
class RunSummary:
    """What a run did."""

    run: RunRecord
    judged: int
    reused: int
    failed: int
    wall_s: float


def forget_judgments(judge: Judge, store: Store) -> int:
    """Delete every stored judgment of a judge configuration (``--fresh``), saying how many in the log."""
    removed = store.delete_judgments(judge.fingerprint())
    log.info("fresh run: removed %d stored judgments of %s", removed, judge.spec)
    return removed


def plan_run(
    judge: Judge,
    benchmark: Benchmark,
    store: Store,
    orders: Sequence[Order] = (Order.ORIGINAL, Order.SWAPPED),
    *,
    fresh: bool = False,
    retry_failures: bool = False,
) -> RunPlan:
    """Register the run in the store and work out which requests are still missing.

    The benchmark is read twice, a chunk at a time: once for its fingerprint, once to record its
    cases (unless the store holds them already) and ask the store which of each chunk's requests it
    has. Memory holds one chunk and one byte per case.

    Args:
        judge: the judge to run.
        benchmark: the cases (already selected by organ and limit).
        store: the results store.
        orders: presentation orders to judge (at most 8).
        fresh: forget every stored judgment of this judge configuration first.
        retry_failures: judge again requests whose stored judgment failed as a whole.

    Returns:
        The run record and which requests are still to judge.
    """
    orders = tuple(orders)
    run = _run_record(judge, benchmark, orders)
    judge_fp, data_hash = run.judge_fingerprint, run.data_hash
    if fresh:
        forget_judgments(judge, store)
    replacing = store.has_judgments(judge_fp)
    registered = store.count_cases(data_hash) == len(benchmark)
    mask = bytearray(len(benchmark))
    reused = pending = position = 0
    for chunk in benchmark.iter_chunks(PLAN_CHUNK):
        if not registered:
            _add_cases(benchmark, store, chunk, position)
        done = store.done_for_cases(
            judge_fp, data_hash, [case.case_id for case in chunk], include_failures=not retry_failures
        )
        for case in chunk:
            stored = done.get(case.case_id)
            bits = 0
            for i, order in enumerate(orders):
                if stored is not None and order.value in stored[1]:
                    reused += 1
                else:
                    bits |= 1 << i
                    pending += 1
            mask[position] = bits
            position += 1
    store.register_run(run, (), data_hash)  # after its cases: a kill while planning leaves no half-registered run
    return RunPlan(
        run=run,
        total_requests=len(benchmark) * len(orders),
        reused=reused,
        benchmark=benchmark,
        orders=orders,
        pending_mask=bytes(mask),
        n_pending=pending,
        replacing=replacing,
    )


def _run_record(judge: Judge, benchmark: Benchmark, orders: tuple[Order, ...]) -> RunRecord:
    """The record of a judge's run on a hashed benchmark."""
    judge_fp = judge.fingerprint()
    data_hash = benchmark.data_hash()
    return RunRecord(
        run_id=make_run_id(judge.spec, judge_fp, data_hash),
        judge_spec=judge.spec,
        judge_fingerprint=judge_fp,
        data_hash=data_hash,
        dataset_name=benchmark.name,
        dataset_source=benchmark.source,
        orders=orders,
        config=judge.config(),
        # the tool's version, for the report's configuration table (not part of the fingerprint)
        metadata={**judge.metadata(), "medrewardbench_version": __version__},
        n_cases=len(benchmark),
    )


def _add_cases(benchmark: Benchmark, store: Store, chunk: list[Case], position: int) -> None:
    """Record a chunk of a hashed benchmark's cases, starting at ``position``, without reading their images again."""
    for offset, case in enumerate(chunk):
        known = benchmark.content_hash_at(position + offset)
        if known is not None:
            case.prime_content_hash(known)  # hashed with the data: the image is not read again
    store.add_cases(benchmark.data_hash(), chunk, position)


def register_run(judge: Judge, benchmark: Benchmark, store: Store, orders: Sequence[Order]) -> RunRecord:
    """Record a hashed benchmark's cases (unless the store has them) and a judge's run on them.

    Args:
        judge: the judge.
        benchmark: the cases, their fingerprint known.
        store: the results store.
        orders: the run's presentation orders.

    Returns:
        The run's record, as stored.
    """
    run = _run_record(judge, benchmark, tuple(orders))
    if store.count_cases(run.data_hash) != len(benchmark):
        position = 0
        for chunk in benchmark.iter_chunks(PLAN_CHUNK):
            _add_cases(benchmark, store, chunk, position)
            position += len(chunk)
    store.register_run(run, (), run.data_hash)  # after its cases: a kill before leaves no half-registered run
    return run


def to_stored(judge_fp: str, request: JudgeRequest, result: JudgeResult) -> StoredJudgment:
    """Map one judge result to a stored judgment in source order."""
    case: Case = request.case
    case_hash = case.content_hash()
    verdicts: dict[str, Winner] = {}
    dimension_failures = dict(result.dimension_failures)
    for dim in DIMENSIONS:
        letter = result.verdicts.get(dim)
        if letter in ("A", "B"):
            verdicts[dim] = to_source(letter, request.order)
        elif result.failure is None and dim not in dimension_failures:
            dimension_failures[dim] = "no verdict"
    preferences = source_preferences(result.preferences, request.order) if result.failure is None else {}
    return StoredJudgment(
        case_id=case.case_id,
        order=request.order,
        case_hash=case_hash,
        fingerprint=judgment_fingerprint(judge_fp, case_hash, request.order),
        verdicts=verdicts if result.failure is None else {},
        raw_output=result.raw_output,
        failure=result.failure,
        dimension_failures=dimension_failures,
        latency_s=result.latency_s,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        scores=None if result.scores is None else dict(result.scores),
        extra=dict(result.extra),
        preferences={dim: p for dim, p in preferences.items() if dim in verdicts},
    )


def source_preferences(preferences: Mapping[str, float], order: Order) -> dict[str, float]:
    """Map probabilities that the response shown first is better to ``response_1`` (source order).

    Args:
        preferences: dimension -> P(the response shown first, "A", is better).
        order: the order the case was shown in.

    Returns:
        dimension -> P(``response_1`` is better): ``p`` in the original order, ``1 - p`` swapped;
        values that are not finite probabilities in [0, 1] are dropped.
    """
    mapped: dict[str, float] = {}
    for dim, value in preferences.items():
        p = float(value)
        if dim in DIMENSIONS and math.isfinite(p) and 0.0 <= p <= 1.0:
            mapped[dim] = p if order is Order.ORIGINAL else 1.0 - p
    return mapped


class _JudgmentCounter:
    """Stores finished judgments for :class:`~medrewardbench.utils.batching.TurnWriter`, counting them."""

    def __init__(
        self, store: Store, judge_fp: str, progress: ProgressCallback | None, *, replacing: bool = True
    ) -> None:
        self.store = store
        self.replacing = replacing
        self.judge_fp = judge_fp
        self.progress = progress
        self.judged = 0
        self.failed = 0

    def __call__(self, rows: list[StoredJudgment]) -> None:
        self.store.write_judgments(self.judge_fp, rows, replacing=self.replacing)
        self.judged += len(rows)
        self.failed += sum(1 for r in rows if r.failure is not None)
        if self.progress is not None:
            self.progress(len(rows))


async def execute_plan(
    judge: Judge,
    plan: RunPlan,
    store: Store,
    *,
    progress: ProgressCallback | None = None,
    while_waiting: Iterable[object] | None = None,
) -> RunSummary:
    """Judge every pending request of a plan and store each batch as it finishes.

    At most ``judge.concurrency`` batches of ``judge.batch_size`` requests are in flight: one per
    worker, each taking the next batch of the plan when its last one is stored. The requests are
    made as the workers take them (:meth:`RunPlan.iter_requests`), never all at once.
    ``while_waiting`` is a caller's preparation for later, in small steps taken while answers are
    awaited (see :func:`_judge_all`).
    """
    started = time.perf_counter()
    counter = _JudgmentCounter(store, plan.run.judge_fingerprint, progress, replacing=plan.replacing)
    await _judge_all(judge, plan.iter_requests(store), counter, while_waiting)
    return RunSummary(
        run=plan.run,
        judged=counter.judged,
        reused=plan.reused,
        failed=counter.failed,
        wall_s=time.perf_counter() - started,
    )


async def execute_while_hashing(
    judge: Judge,
    benchmark: Benchmark,
    store: Store,
    orders: Sequence[Order] = (Order.ORIGINAL, Order.SWAPPED),
    *,
    progress: ProgressCallback | None = None,
    on_registered: Callable[[RunRecord, Benchmark], None] | None = None,
    while_waiting: Iterable[object] | None = None,
) -> tuple[RunSummary, Benchmark]:
    """Judge every request of a small benchmark whose fingerprint is not known yet, starting at once.

    For a judge of which the store holds no judgment (a first run, or one after ``--fresh``),
    nothing can be reused, so nothing needs planning: the requests go out at once, while a task of
    the event loop reads and hashes the cases (:meth:`Benchmark.fingerprinting`) a case at a time
    whenever the loop has nothing else to do (waiting for answers), and records the cases and the
    run as soon as the last case is hashed, long before the last answers. A request whose case is
    not read yet reads it itself. Each judgment is stored as it finishes, with its case's content
    hash: a run killed before it is recorded leaves its judgments in the store, and the next run
    (planned as usual) finds and reuses them.

    Args:
        judge: the judge; the store must hold no judgment of its fingerprint.
        benchmark: the cases (at most :data:`~medrewardbench.data.benchmark.KEEP_CASES`), their
            fingerprint not known yet.
        store: the results store.
        orders: presentation orders.
        progress: told how many requests just finished.
        on_registered: called with the run's record and the hashed benchmark as soon as they are
            recorded.
        while_waiting: a preparation for later, in small steps taken while answers are awaited
            (see :func:`_judge_all`).

    Returns:
        The run's summary and the hashed benchmark (in memory when it is small:
        :meth:`Benchmark.fingerprinted`).

    Raises:
        ImageError: an image cannot be read (the judgments finished before are stored).
        DataError: the source changed since it was loaded.
    """
    started = time.perf_counter()
    orders = tuple(orders)

    def register(hashed: Benchmark) -> RunRecord:
        run = register_run(judge, hashed, store, orders)
        if on_registered is not None:
            on_registered(run, hashed)
        return run

    reading = _ReadAhead(benchmark, register)
    requests = (JudgeRequest(case, order) for case in reading.cases() for order in orders)
    # no judgment of this judge is stored: its writes need not look for ones they replace
    counter = _JudgmentCounter(store, judge.fingerprint(), progress, replacing=False)
    ahead = asyncio.ensure_future(reading.read_ahead())
    try:
        await _judge_all(judge, requests, counter, while_waiting)
        await ahead  # ended when the requests did: they end only after the reading
    finally:
        if ahead.done() and not ahead.cancelled():
            ahead.exception()  # raised to the requests already (an unreadable image): retrieved here
        ahead.cancel()
    run, hashed = reading.registered()
    summary = RunSummary(
        run=run, judged=counter.judged, reused=0, failed=counter.failed, wall_s=time.perf_counter() - started
    )
    return summary, hashed


class _ReadAhead:
    """A benchmark's fingerprinting reading, shared by the requests and a task that reads ahead of them.

    Both take cases from one iterator in the event loop's thread: the task puts the cases it
    reads in a queue that the requests empty first. Whichever meets the end of the data records
    the run (``register``); an error of the reading is raised to the requests that come after it.
    """

    def __init__(self, benchmark: Benchmark, register: Callable[[Benchmark], RunRecord]) -> None:
        self._reading = benchmark.fingerprinting()
        self._iterator = iter(self._reading)
        self._queue: deque[Case] = deque()
        self._register = register
        self._run: RunRecord | None = None
        self._error: BaseException | None = None

    def _next(self) -> Case | None:
        """The next case read from the data (None at its end, once the run is recorded)."""
        if self._error is not None:
            raise self._error
        if self._run is not None:
            return None
        try:
            try:
                return next(self._iterator)
            except StopIteration:
                self._run = self._register(self._reading.result())
                return None
        except BaseException as error:  # the reading or the recording failed: later callers get it too
            self._error = error
            raise

    async def read_ahead(self) -> None:
        """Read and hash the cases one at a time, letting the event loop run between them."""
        while (case := self._next()) is not None:
            self._queue.append(case)
            await asyncio.sleep(0)

    def cases(self) -> Iterator[Case]:
        """Every case in order: the ones read ahead first, then read on demand."""
        while True:
            if self._queue:
                yield self._queue.popleft()
            elif (case := self._next()) is not None:
                yield case
            else:
                return

    def registered(self) -> tuple[RunRecord, Benchmark]:
        """The recorded run and the hashed benchmark (after the reading has ended)."""
        if self._run is None:
            raise RuntimeError("the run is recorded once every case has been read")
        return self._run, self._reading.result()


async def _judge_all(
    judge: Judge,
    requests: Iterator[JudgeRequest],
    counter: _JudgmentCounter,
    while_waiting: Iterable[object] | None = None,
) -> None:
    """Judge requests with ``judge.concurrency`` workers, storing each batch's judgments through ``counter``.

    ``while_waiting`` is work for later cut into small steps (each ``next()`` of its iterator takes
    one; the eval job imports its analysis a module at a time). Once the first wave of answers is
    stored (as many requests as the workers send at the start), a task takes one step per turn of
    the event loop: a step runs between answers, as the reading ahead of
    :func:`execute_while_hashing` does, and while the loop would otherwise wait. Started earlier,
    the steps would hold up the first wave's answers, which arrive together. Steps left when the
    last answer is stored are not taken (the run is never made longer for them), nor are any in a
    run shorter than one wave. An error in a step is logged and ends the steps; it cannot stop the run.
    """
    judge_fp = counter.judge_fp
    batches = batched(requests, judge.batch_size)
    writer: TurnWriter[StoredJudgment] = TurnWriter(counter)
    preparing: list[asyncio.Future[None]] = []  # the task taking the steps, once started
    first_wave = max(1, judge.concurrency) * judge.batch_size  # the requests sent at once at the start

    async def worker() -> None:
        # the requests' iterator is shared: each batch goes to exactly one worker
        for batch in batches:
            results = await guarded_batch(
                judge.judge_batch, batch, JudgeResult.failed, role="judge", name=judge.spec, log=log
            )
            await writer.add([to_stored(judge_fp, req, res) for req, res in zip(batch, results, strict=False)])
            if while_waiting is not None and not preparing and counter.judged >= first_wave:
                preparing.append(asyncio.ensure_future(_take_steps(while_waiting)))

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, judge.concurrency))]
    try:
        done, _pending = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # a worker's error (the store failing, an unreadable image) ends the run
    finally:
        for future in (*workers, *preparing):
            future.cancel()
        await asyncio.gather(*workers, *preparing, return_exceptions=True)
        writer.flush()


async def _take_steps(steps: Iterable[object]) -> None:
    """Take ``steps`` one per turn of the event loop; an error is logged at debug level and ends them."""
    try:
        for _ in steps:
            await asyncio.sleep(0)
    except Exception:  # a preparation for later: that later step reports the error
        log.debug("preparing while the answers are awaited failed", exc_info=True)


def run_judge(
    judge: Judge,
    benchmark: Benchmark,
    store: Store,
    orders: Sequence[Order] = (Order.ORIGINAL, Order.SWAPPED),
    *,
    fresh: bool = False,
    retry_failures: bool = False,
    progress: ProgressCallback | None = None,
) -> RunSummary:
    """Plan and execute one run synchronously (creates its own event loop)."""
    plan = plan_run(judge, benchmark, store, orders, fresh=fresh, retry_failures=retry_failures)
    return asyncio.run(execute_plan(judge, plan, store, progress=progress))
