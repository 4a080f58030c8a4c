"""Cutting a lazy stream into batches: one cut for judging, sweeps and generation alike."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

__all__ = ["batched"]


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
