"""Batches in and out: one lazy cut and one turn-batched writer for judging, sweeps and generation alike."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["MAX_PENDING_ROWS", "TurnWriter", "batched"]


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
