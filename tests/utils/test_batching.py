import contextlib
from collections.abc import Iterator

from medrewardbench.utils.batching import batched


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

    from medrewardbench.utils.batching import TurnWriter

    writes: list[list[int]] = []

    async def main() -> None:
        writer: TurnWriter[int] = TurnWriter(writes.append)
        await asyncio.gather(writer.add([1, 2]), writer.add([3]), writer.add([4, 5]))
        await writer.add([6])

    asyncio.run(main())
    assert writes == [[1, 2, 3, 4, 5], [6]]


def test_workers_that_never_wait_cannot_pile_up_rows_ahead_of_the_writer() -> None:
    import asyncio

    from medrewardbench.utils.batching import TurnWriter

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

    from medrewardbench.utils.batching import TurnWriter

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


# ------------------------------------------------------------------------ the guarded batch call
def _guarded(run, batch, **kwargs):  # type: ignore[no-untyped-def]
    import asyncio
    import logging

    from medrewardbench.judges.base import JudgeResult
    from medrewardbench.utils.batching import guarded_batch

    return asyncio.run(
        guarded_batch(run, batch, JudgeResult.failed, role="judge", name="x:y", log=logging.getLogger("t"), **kwargs)
    )


def test_a_back_end_that_raises_fails_each_request_of_the_batch_with_the_reason() -> None:
    async def broken(batch):  # type: ignore[no-untyped-def]
        raise ValueError("boom " + "x" * 600)

    results = _guarded(broken, ["a", "b"])
    assert len(results) == 2 and all(r.verdicts == {} for r in results)
    assert results[0].failure.startswith("judge error: ValueError: boom x") and len(results[0].failure) == 500


def test_a_wrong_number_of_results_fails_the_whole_batch() -> None:
    from medrewardbench.judges.base import JudgeResult

    async def short(batch):  # type: ignore[no-untyped-def]
        return [JudgeResult()]

    results = _guarded(short, ["a", "b", "c"])
    assert [r.failure for r in results] == ["judge error: returned 1 results for 3 requests"] * 3


def test_the_batch_time_is_shared_among_results_without_a_latency() -> None:
    import asyncio

    from medrewardbench.judges.base import JudgeResult

    async def timed(batch):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.02)
        return [JudgeResult(latency_s=9.0), JudgeResult(raw_output="r")]

    kept, shared = _guarded(timed, ["a", "b"])
    assert kept.latency_s == 9.0
    assert shared.latency_s is not None and 0.005 < shared.latency_s < 5 and shared.raw_output == "r"

    async def nothing(batch):  # type: ignore[no-untyped-def]
        return []

    assert _guarded(nothing, []) == []  # an empty batch: no division by zero


def test_passthrough_errors_and_cancellation_are_raised() -> None:
    import asyncio

    import pytest

    class EntryGone(Exception):
        pass

    async def gone(batch):  # type: ignore[no-untyped-def]
        raise EntryGone

    async def cancelled(batch):  # type: ignore[no-untyped-def]
        raise asyncio.CancelledError

    with pytest.raises(EntryGone):
        _guarded(gone, ["a"], passthrough=(EntryGone,))
    with pytest.raises(asyncio.CancelledError):
        _guarded(cancelled, ["a"])
