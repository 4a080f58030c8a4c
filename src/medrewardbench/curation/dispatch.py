"""Dispatch generation requests with bounded concurrency and store each batch as it finishes.

The same pattern as the judging runner (:mod:`medrewardbench.evaluation.runner`): ``generator.concurrency``
workers take batches of ``generator.batch_size`` requests from one shared iterator, so at most
that many batches are in flight; a finished batch is committed before its worker takes the next
one, in one transaction with the batches that finished in the same turn of the event loop, so a
kill or Ctrl-C loses at most the batches in flight. The requests come from a lazy iterator (the
store is asked for the next chunk of questions only when the workers need it), so the plan is
never held in memory whole.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from medrewardbench.curation.generators import GenerationRequest, GenerationResult, TextGenerator
from medrewardbench.utils.batching import TurnWriter, batched, guarded_batch

log = logging.getLogger(__name__)

__all__ = ["DispatchSummary", "ProgressCallback", "Writer", "dispatch"]

ProgressCallback = Callable[[int], None]
"""Called with the number of requests just finished."""
Writer = Callable[[Sequence[tuple[GenerationRequest, GenerationResult]]], None]
"""Stores finished (request, result) pairs and commits."""


@dataclass(frozen=True)
class DispatchSummary:
    """What one dispatch did: requests finished now, how many of them failed, the wall time."""

    done: int
    failed: int
    wall_s: float


class _AnswerCounter:
    """Stores finished answers for :class:`~medrewardbench.utils.batching.TurnWriter`, counting them."""

    def __init__(self, write: Writer, progress: ProgressCallback | None) -> None:
        self.write = write
        self.progress = progress
        self.done = 0
        self.failed = 0

    def __call__(self, rows: list[tuple[GenerationRequest, GenerationResult]]) -> None:
        self.write(rows)
        self.done += len(rows)
        self.failed += sum(1 for _, result in rows if result.failure is not None)
        if self.progress is not None:
            self.progress(len(rows))


async def dispatch(
    generator: TextGenerator,
    requests: Iterable[GenerationRequest],
    write: Writer,
    *,
    progress: ProgressCallback | None = None,
) -> DispatchSummary:
    """Answer every request, storing each batch as it finishes.

    Args:
        generator: the model.
        requests: the requests, consumed lazily by the workers.
        write: stores finished answers (called on the event loop's thread).
        progress: told how many requests just finished.

    Returns:
        How many requests finished and failed, and the wall time.

    Raises:
        Exception: whatever ``write`` raises (the store failing ends the step; what was written stays).
    """
    started = time.perf_counter()
    batches = batched(requests, generator.batch_size)
    counter = _AnswerCounter(write, progress)
    writer: TurnWriter[tuple[GenerationRequest, GenerationResult]] = TurnWriter(counter)

    async def worker() -> None:
        # the iterator is shared: each batch goes to exactly one worker
        for batch in batches:
            results = await guarded_batch(
                generator.generate_batch, batch, GenerationResult.failed, role="generator", name=generator.spec, log=log
            )
            await writer.add(list(zip(batch, results, strict=True)))

    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, generator.concurrency))]
    try:
        done, _pending = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        writer.flush()
    return DispatchSummary(counter.done, counter.failed, time.perf_counter() - started)
