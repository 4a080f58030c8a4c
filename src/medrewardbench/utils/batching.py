"""Batches in and out: one lazy cut, one guarded call and one turn-batched writer.

The eval runner (:mod:`medrewardbench.evaluation.runner`), sweep dispatch (:mod:`medrewardbench.sweep.dispatch`)
and build generation (:mod:`medrewardbench.curation.dispatch`) all cut their requests with
:func:`batched`, send each batch through :func:`guarded_batch` and store the results with a
:class:`TurnWriter`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")
Request = TypeVar("Request")
Result = TypeVar("Result", bound="Timed")

__all__ = ["MAX_PENDING_ROWS", "REASON_MAX_CHARS", "Timed", "TurnWriter", "batched", "guarded_batch"]

REASON_MAX_CHARS = 500
"""The longest failure reason an exception of a back end becomes."""


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Group items into lists of ``size`` as they come, the last one shorter.

    The stream is read only as far as the batches taken (``itertools.batched`` needs Python 3.12).

    Args:
        items: the items, produced as they are needed.
        size: items per batch; anything below 1 counts as 1.

    Yields:
        Lists of at most ``size`` items, in order.
    """
    size = max(1, size)
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class Timed(Protocol):
    """A result that may carry its latency (a judge's or a generator's result)."""

    @property
    def latency_s(self) -> float | None:
        """Wall time spent on this request, or None when the back end did not measure it."""


async def guarded_batch(
    run: Callable[[Sequence[Request]], Awaitable[Sequence[Result]]],
    batch: Sequence[Request],
    failed: Callable[[str], Result],
    *,
    role: str,
    name: str,
    log: logging.Logger,
    passthrough: tuple[type[BaseException], ...] = (),
) -> list[Result]:
    """Send one batch to a back end so that its bug fails the batch's requests, not the whole job.

    * an exception (other than cancellation and ``passthrough``) is logged with its traceback and
      becomes one failed result per request: ``"<role> error: <Type>: <message>"``, cut to
      :data:`REASON_MAX_CHARS`;
    * a back end that returns another number of results than it was given requests fails them all:
      ``"<role> error: returned N results for M requests"``;
    * a result without a latency gets the batch's wall time shared equally among its requests.

    Args:
        run: the back end's batch call (``judge.judge_batch``, ``generator.generate_batch``).
        batch: the requests.
        failed: makes a failed result from a reason.
        role: what the back end is (``judge``, ``generator``), the start of each reason.
        name: the back end's spec, for the log.
        log: where the traceback goes (the caller's logger).
        passthrough: exceptions that concern more than this batch (a server that died), re-raised.

    Returns:
        Exactly one result per request, in order.

    Raises:
        asyncio.CancelledError: the call was cancelled.
        BaseException: one of ``passthrough``.
    """
    started = time.perf_counter()
    try:
        results = await run(batch)
    except asyncio.CancelledError:
        raise
    except passthrough:
        raise
    except Exception as exc:  # a back end's bug must not lose the rest of the job
        log.exception("%s %s raised on a batch of %d", role, name, len(batch))
        reason = f"{role} error: {type(exc).__name__}: {exc}"[:REASON_MAX_CHARS]
        return [failed(reason) for _ in batch]
    if len(results) != len(batch):
        reason = f"{role} error: returned {len(results)} results for {len(batch)} requests"
        return [failed(reason) for _ in batch]
    share = (time.perf_counter() - started) / max(1, len(batch))
    return [r if r.latency_s is not None else _with_latency(r, share) for r in results]


def _with_latency(result: Result, latency: float) -> Result:
    # dataclasses.replace without its per-call introspection: results are plain frozen dataclasses
    return type(result)(**{**vars(result), "latency_s": latency})


MAX_PENDING_ROWS = 4096
"""Finished rows held at most before they are written, whatever the number of workers."""


class TurnWriter(Generic[T]):
    """Writes finished rows, one write for all the batches that finish in one turn of the event loop.

    A commit per result costs more CPU on the event loop than the work itself once dozens of
    requests are in flight. The first batch to finish in a turn waits one turn for the others and
    then writes them all, so no finished row waits longer than that. A batch that joins waits for
    that write too, so that a worker that never awaits (an instant judge or generator) cannot pile
    up finished rows ahead of the writer; past ``max_pending`` they are written at once.
    Cancellation never drops a finished row.

    The eval runner, sweep dispatch and build generation share this mechanism; each passes the
    write that fits its store (and counts or reports progress there).

    Args:
        write: stores a list of rows (called on the event loop's thread).
        max_pending: rows held at most before they are written at once.
    """

    def __init__(self, write: Callable[[list[T]], None], max_pending: int = MAX_PENDING_ROWS) -> None:
        self.write = write
        self.max_pending = max_pending
        self._pending: list[T] = []
        self._collecting = False

    async def add(self, rows: Iterable[T]) -> None:
        """Queue finished rows; they are written by the end of this loop turn."""
        self._pending.extend(rows)
        if self._collecting:
            # the batch that opened this turn's write takes these too: let it run first
            if len(self._pending) >= self.max_pending:
                self.flush()
            await asyncio.sleep(0)
            return
        self._collecting = True
        try:
            await asyncio.sleep(0)  # the other batches that finished in this turn join in
        finally:
            self._collecting = False
            self.flush()  # also when cancelled: finished rows are never dropped

    def flush(self) -> None:
        """Write everything queued now."""
        rows, self._pending = self._pending, []
        if rows:
            self.write(rows)
