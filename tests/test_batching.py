import contextlib
from collections.abc import Iterator

from medrewardbench.batching import batched


def test_batches_keep_order_and_the_last_one_is_shorter() -> None:
    assert list(batched(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batched([], 3)) == []
    assert list(batched("ab", 0)) == [["a"], ["b"]]  # a size below 1 counts as 1


def test_the_stream_is_read_only_as_far_as_the_batches_taken() -> None:
    read: list[int] = []

    def stream() -> Iterator[int]:
        for i in range(1_000_000):
            read.append(i)
            yield i

    first = next(batched(stream(), 4))
    assert first == [0, 1, 2, 3] and read == [0, 1, 2, 3]


def test_batches_finishing_in_one_loop_turn_share_one_write() -> None:
    import asyncio

    from medrewardbench.batching import TurnWriter

    writes: list[list[int]] = []

    async def main() -> None:
        writer: TurnWriter[int] = TurnWriter(writes.append)
        await asyncio.gather(writer.add([1, 2]), writer.add([3]), writer.add([4, 5]))
        await writer.add([6])

    asyncio.run(main())
    assert writes == [[1, 2, 3, 4, 5], [6]]


def test_workers_that_never_wait_cannot_pile_up_rows_ahead_of_the_writer() -> None:
    import asyncio

    from medrewardbench.batching import TurnWriter

    largest = 0

    def write(rows: list[int]) -> None:
        nonlocal largest
        largest = max(largest, len(rows))

    async def worker(writer: TurnWriter[int]) -> None:
        for i in range(2_000):
            await writer.add([i] * 10)  # an instant worker: its only await is the writer's

    async def main() -> None:
        writer: TurnWriter[int] = TurnWriter(write, max_pending=100)
        await asyncio.gather(*(worker(writer) for _ in range(8)))
        writer.flush()

    asyncio.run(main())
    assert 0 < largest <= 100 + 10


def test_a_cancelled_writer_still_writes_what_finished() -> None:
    import asyncio

    from medrewardbench.batching import TurnWriter

    writes: list[list[int]] = []

    async def main() -> None:
        writer: TurnWriter[int] = TurnWriter(writes.append)
        task = asyncio.ensure_future(writer.add([7, 8]))
        await asyncio.sleep(0)  # the add is waiting for its turn's companions
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert writes == [[7, 8]]
