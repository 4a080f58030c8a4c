"""Dispatch one entry's batches to wherever its judge runs, and store every finished batch at once.

The driver of a sweep is the only process that writes the store, however many processes or nodes
judge. For each entry it plans the run as ``eval`` does (:func:`medrewardbench.evaluation.runner.plan_run`:
same fingerprints, same resume), cuts the pending requests into the judge's batches, and keeps
``concurrency`` of them in flight through a :class:`JudgeBackend`: the judge itself in this process
(:class:`LocalBackend`) or a Ray worker (:mod:`medrewardbench.sweep.ray_backend`). A batch's
results are mapped to source order and committed as soon as it finishes (batches finishing in the
same turn of the event loop share one transaction), so a kill loses only the batches in flight.

Before each batch the entry's endpoint cap (if any) gives a slot and the budget (if any) must
accept the batch's estimated cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from medrewardbench.evaluation.runner import RunPlan, to_stored
from medrewardbench.evaluation.store import Store, StoredJudgment
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.metrics.cost import Price
from medrewardbench.sweep.budget import Budget, CostEstimator, EndpointLimits, result_cost
from medrewardbench.sweep.errors import EntryFailed, ServerError
from medrewardbench.sweep.progress import EntryOutcome, SweepProgress
from medrewardbench.utils.batching import TurnWriter, batched, guarded_batch

log = logging.getLogger(__name__)

__all__ = ["EntryPlan", "JudgeBackend", "LocalBackend", "StoreWriter", "batches_of", "dispatch", "judge_safely"]


class JudgeBackend(Protocol):
    """Where an entry's batches are judged."""

    batch_size: int
    concurrency: int
    node: str | None
    """The node it runs on (None: this process)."""

    async def judge(self, batch: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """One result per request, in order.

        Raises:
            ServerError, EntryFailed: the entry cannot go on (nothing of this batch is stored).
        """
        ...


async def judge_safely(judge: Judge, batch: Sequence[JudgeRequest]) -> list[JudgeResult]:
    """Judge a batch as ``eval`` does (:func:`~medrewardbench.utils.batching.guarded_batch`).

    A judge that raises fails the batch's requests instead of the run; errors that concern the
    whole entry (its server died) are raised, not stored.

    Args:
        judge: the judge.
        batch: the requests.

    Returns:
        One result per request, with a latency (the batch's time shared) where the judge set none.
    """
    return await guarded_batch(
        judge.judge_batch,
        batch,
        JudgeResult.failed,
        role="judge",
        name=judge.spec,
        log=log,
        passthrough=(ServerError, EntryFailed),
    )


class LocalBackend:
    """The judge itself, in this process.

    Args:
        judge: the judge.
    """

    node: str | None = None

    def __init__(self, judge: Judge) -> None:
        self.judge_ = judge
        self.batch_size = max(1, judge.batch_size)
        self.concurrency = max(1, judge.concurrency)

    async def judge(self, batch: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Judge the batch here (see :func:`judge_safely`)."""
        return await judge_safely(self.judge_, batch)


class StoreWriter(TurnWriter[tuple[str, StoredJudgment]]):
    """Commits finished batches of several judges; those that finish in one loop turn share a write.

    The mechanism is :class:`~medrewardbench.utils.batching.TurnWriter`'s; the write groups the rows by
    judge configuration, one transaction for each.

    Args:
        store: the results store to commit to.
    """

    def __init__(self, store: Store) -> None:
        super().__init__(self._write_grouped)
        self.store = store

    async def add_judged(self, judge_fingerprint: str, rows: list[StoredJudgment]) -> None:
        """Queue rows of one judge configuration and commit them by the end of this loop turn."""
        await self.add((judge_fingerprint, row) for row in rows)

    def _write_grouped(self, pending: list[tuple[str, StoredJudgment]]) -> None:
        grouped: dict[str, list[StoredJudgment]] = {}
        for fingerprint, row in pending:
            grouped.setdefault(fingerprint, []).append(row)
        for fingerprint, rows in grouped.items():
            self.store.write_judgments(fingerprint, rows)


def batches_of(requests: Sequence[JudgeRequest], size: int) -> list[Sequence[JudgeRequest]]:
    """The plan's requests cut into batches, in plan order.

    The cut :func:`~medrewardbench.utils.batching.batched` makes.
    """
    size = max(1, size)
    return [requests[start : start + size] for start in range(0, len(requests), size)]


@dataclass
class EntryPlan:
    """An entry ready to dispatch: its run plan and what limits it.

    Attributes:
        name: the entry's name.
        plan: the run's plan (requests still to judge).
        price: its price (None: not counted against the budget).
        estimator: estimates its batches' cost (None without a price or without a budget).
        base_url: the endpoint its requests go to, for the endpoint caps (None: none).
    """

    name: str
    plan: RunPlan
    price: Price | None = None
    estimator: CostEstimator | None = None
    base_url: str | None = None


async def dispatch(
    entry: EntryPlan,
    backend: JudgeBackend,
    writer: StoreWriter,
    outcome: EntryOutcome,
    progress: SweepProgress,
    *,
    budget: Budget | None = None,
    limits: EndpointLimits | None = None,
    requests: Sequence[JudgeRequest] | None = None,
) -> None:
    """Judge an entry's pending requests (or ``requests``) and store each batch as it finishes.

    Args:
        entry: the entry and its plan.
        backend: where its batches are judged.
        writer: the store writer shared by every entry.
        outcome: updated as batches finish (``judged``, ``failed``, ``nodes``); ``status`` becomes
            ``budget`` when the budget stops it.
        progress: told of every stored batch.
        budget: the sweep's budget, if any.
        limits: the sweep's endpoint caps, if any.
        requests: the requests to judge instead of the plan's (Batch API requests retried live).

    Raises:
        ServerError, EntryFailed: the entry cannot go on; what finished is stored.
    """
    # the plan's requests are made as the workers take them (a chunk of cases read at a time)
    total = entry.plan.n_pending if requests is None else len(requests)
    pending: Iterable[JudgeRequest] = entry.plan.iter_requests() if requests is None else requests
    batches: Iterator[Sequence[JudgeRequest]] = batched(pending, backend.batch_size)
    fingerprint = entry.plan.run.judge_fingerprint
    dispatched = 0
    stopped = False
    costed = budget is not None and entry.price is not None and entry.estimator is not None

    async def worker() -> None:
        nonlocal dispatched, stopped
        for batch in batches:  # the iterator is shared: each batch goes to exactly one worker
            if stopped:
                return
            estimate = 0.0
            if costed:
                assert budget is not None and entry.estimator is not None
                estimate = entry.estimator.batch(batch)
                if not budget.try_reserve(entry.name, estimate, total - dispatched):
                    stopped = True
                    outcome.status = "budget"
                    return
            dispatched += len(batch)
            actual = 0.0
            try:
                slot = limits.slot(entry.base_url) if limits is not None else contextlib.nullcontext()
                async with slot:
                    results = await backend.judge(batch)
                if costed:
                    assert entry.price is not None and entry.estimator is not None
                    costs = [result_cost(entry.price, r) for r in results]
                    share = estimate / max(1, len(batch))
                    actual = sum(share if c is None else c for c in costs)
                    entry.estimator.observe(actual, len(batch))
            finally:
                if costed:
                    assert budget is not None
                    budget.settle(estimate, actual)
            rows = [to_stored(fingerprint, request, result) for request, result in zip(batch, results, strict=True)]
            await writer.add_judged(fingerprint, rows)
            outcome.judged += len(rows)
            outcome.failed += sum(1 for r in rows if r.failure is not None)
            node = backend.node or "local"
            outcome.nodes[node] = outcome.nodes.get(node, 0) + len(rows)
            progress.advance(entry.name, len(rows), backend.node)

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, backend.concurrency))]
    try:
        done, _ = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()  # the first error (a dead server, a store failure) ends the entry
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        writer.flush()
