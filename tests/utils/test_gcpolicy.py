"""The garbage-collector policy of long runs: frozen heap and a larger young generation, restored after."""

from __future__ import annotations

import gc

import pytest

from medrewardbench.utils.gcpolicy import RUN_YOUNG_THRESHOLD, long_run


def test_a_long_run_freezes_what_exists_and_restores_the_collector_after() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with long_run():
        assert gc.get_freeze_count() > 0  # what existed before is out of every collection
        assert gc.get_threshold() == (max(before[0], RUN_YOUNG_THRESHOLD), before[1], before[2])
        with long_run(young_threshold=50):  # nested: the outer block's settings hold
            assert gc.get_threshold()[0] == max(before[0], RUN_YOUNG_THRESHOLD)
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_in_a_long_run_are_still_collected_and_an_error_restores_the_collector() -> None:
    before = gc.get_threshold()

    class Node:
        pass

    with pytest.raises(RuntimeError), long_run():
        cycle = Node()
        cycle.self = cycle  # type: ignore[attr-defined]
        del cycle
        assert gc.collect() >= 1  # made inside the block: not frozen, found by a collection
        raise RuntimeError("a failed run")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
