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
