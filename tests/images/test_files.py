"""``read_regular_file``: the whole file, never past the limit, without allocating the limit."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from medrewardbench.images.files import FileRefused, read_regular_file


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 70_000, (1 << 20) + 3])
def test_reads_exactly_the_file(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f.bin"
    payload = os.urandom(size)
    path.write_bytes(payload)
    assert read_regular_file(path) == payload
    assert read_regular_file(path, max_bytes=size) == payload
    if size:
        with pytest.raises(FileRefused, match="over the limit"):
            read_regular_file(path, max_bytes=size - 1, size_hint="MRB_X")


def test_a_small_file_does_not_cost_an_allocation_of_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "small.png"
    path.write_bytes(b"x" * 50_000)
    tracemalloc.start()
    try:
        read_regular_file(path, max_bytes=512 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # the file and some slack, not 512 MiB


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux /proc")
def test_a_file_whose_size_stat_does_not_know_is_read_to_its_end_and_held_to_the_limit() -> None:
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0
    text = read_regular_file(status)
    assert text.startswith(b"Name:") and b"VmRSS" in text
    with pytest.raises(FileRefused, match="holds more than the limit of 16 bytes; raise it with MRB_X"):
        read_regular_file(status, max_bytes=16, size_hint="MRB_X")


def test_a_file_that_grew_after_fstat_is_read_on_and_refused_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "growing.bin"
    path.write_bytes(b"a" * 100)
    real_fstat, real_stat = os.fstat, os.stat

    def stale(found: os.stat_result) -> os.stat_result:  # the size as it was before the file grew
        return os.stat_result((*found[:6], 10, *found[7:]))

    monkeypatch.setattr(os, "fstat", lambda fd: stale(real_fstat(fd)))
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: stale(real_stat(p, *a, **k)))
    assert read_regular_file(path) == b"a" * 100
    assert read_regular_file(path, max_bytes=100) == b"a" * 100
    with pytest.raises(FileRefused, match="holds more than the limit"):
        read_regular_file(path, max_bytes=50)
