"""Served process groups never outlive their sweep: the supervisor, and the record of leftovers.

Real processes throughout, checked by pid in ``/proc``: a process that starts a server tree (a
shell with children, one of which leaves the group) and is then killed with SIGKILL, and records
of groups an earlier sweep left running, beside processes that must never be touched (a recycled
pid, a live sweep's server, a record of another boot). The end-to-end versions with a real
``sweep`` and a real server are in ``test_sweep_served.py`` (slow).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.sweep import cli_env, group_gone, group_members, process_alive, processes_with_env

from medrewardbench.sweep.config import ServeSpec
from medrewardbench.sweep.served import ServedModel
from medrewardbench.sweep.served_groups import (
    GROUP_TOKEN_ENV,
    ServedGroup,
    ServedGroupRecords,
    new_group,
    stop_leftover_groups,
)
from medrewardbench.sweep.supervisor import process_start_time

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

# a shell (the group's leader) with two children in its group and one that leaves it (a new session)
TREE = "sh -c 'sleep 300 & setsid sleep 301 & sleep 302 & wait' {port}"
MARKER_ENV = "MEDREWARDBENCH_TEST_MARKER"
"""Every process a test starts carries its tmp_path here, so the test finds (and cleans up) exactly its own."""

OWNER = """
import json, sys, time
from pathlib import Path
from medrewardbench.sweep.config import ServeSpec
from medrewardbench.sweep.served import ServedModel
from medrewardbench.sweep.served_groups import ServedGroupRecords

command, directory = sys.argv[1:]
records = ServedGroupRecords(Path(directory) / "running.json")
spec = ServeSpec(command=command, stop_timeout_s=2)
server = ServedModel("tiny", spec, "m", Path(directory) / "tiny.log", records=records)
server.start()
print(json.dumps(server.group.__dict__), flush=True)
time.sleep(600)
"""


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[str]:
    """This test's marker; whatever still carries it at the end is killed."""
    yield str(tmp_path)
    for pid in processes_with_env(MARKER_ENV, str(tmp_path)):
        if pid != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _tree(marker: str, count: int) -> list[int]:
    """The processes carrying the marker (other than this one), once there are ``count`` of them."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = [pid for pid in processes_with_env(MARKER_ENV, marker) if pid != os.getpid()]
        if len(found) >= count:
            return found
        time.sleep(0.05)
    return found


def test_a_killed_owner_takes_its_whole_server_tree_with_it(tmp_path: Path, marker: str) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, TREE, str(tmp_path)], stdout=subprocess.PIPE, env=cli_env(**{MARKER_ENV: marker})
    )
    try:
        assert owner.stdout is not None
        group = json.loads(owner.stdout.readline())
        tree = [pid for pid in _tree(marker, 6) if pid != owner.pid]  # supervisor, shell, three sleeps
        members = group_members(group["pgid"])
        assert len(tree) == 5 and len(members) == 3 and group["pid"] in members
        assert [g["pid"] for g in json.loads((tmp_path / "running.json").read_text())["groups"]] == [group["pid"]]
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        assert group_gone(group["pgid"], tree, timeout=5)  # the sleep that left the group too
        assert not any(process_alive(pid) for pid in tree)
        assert "the sweep is gone; stopping the server's process group" in (tmp_path / "tiny.log").read_text()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_stopping_a_server_stops_its_whole_tree_and_forgets_its_record(tmp_path: Path, marker: str) -> None:
    records = ServedGroupRecords(tmp_path / "servers" / "running.json")
    spec = ServeSpec(command=TREE, stop_timeout_s=2, env={MARKER_ENV: marker})
    server = ServedModel("tiny", spec, "m", tmp_path / "tiny.log", records=records)
    server.start()
    try:
        assert server.group is not None and [g.token for g in records.read()] == [server.group.token]
        tree = _tree(marker, 5)  # supervisor, shell, three sleeps
        assert len(tree) == 5 and server.alive() and server.pid in tree
        assert server.stop() == -signal.SIGTERM
        assert group_gone(server.group.pgid, tree, timeout=5) and not server.alive()
        assert records.read() == [] and server.stop() == -signal.SIGTERM  # twice is fine
    finally:
        server.stop()


def _spawn(spawned: list[subprocess.Popen[bytes]], marker: str, command: str, token: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, MARKER_ENV: marker, **({GROUP_TOKEN_ENV: token} if token else {})}
    process = subprocess.Popen(["sh", "-c", command], env=env, start_new_session=True)
    spawned.append(process)
    time.sleep(0.3)  # the shell's children are up
    return process


@pytest.fixture
def spawned(marker: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Shells a test starts (reaped at the end; the marker fixture kills what still runs)."""
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait()


def _record(process: subprocess.Popen[bytes], token: str, **changes: object) -> ServedGroup:
    group = new_group(
        entry="tiny",
        command="vllm serve m --port 1",
        pid=process.pid,
        pgid=process.pid,
        start_time=process_start_time(process.pid),
        token=token,
        supervisor_pid=process.pid,
        stop_timeout_s=1.0,
    )
    return replace(group, **changes)  # type: ignore[arg-type]


def test_groups_left_by_a_dead_sweep_are_stopped_and_nothing_else_is_touched(
    tmp_path: Path, marker: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    dead_sweep = subprocess.Popen(["true"])
    dead_sweep.wait()
    dead = {"sweep_pid": dead_sweep.pid, "sweep_start_time": 1}
    token = tmp_path.name  # one per test, so tokens never meet another test's processes

    leftover = _spawn(spawned, marker, "sleep 300 & sleep 301 & wait", f"{token}-left")
    leftover_tree = group_members(leftover.pid)
    # the leader exited on its own; its child still runs in the group and carries the token
    leaderless = _spawn(spawned, marker, "sleep 302 & exit 0", f"{token}-orphaned")
    leader_started = process_start_time(leaderless.pid)
    leaderless.wait()
    orphans = processes_with_env(GROUP_TOKEN_ENV, f"{token}-orphaned")
    # a recorded pid now recycled for an unrelated process: same pid, another start time, no token
    unrelated = _spawn(spawned, marker, "sleep 303", "")
    recycled = _record(unrelated, f"{token}-recycled", **dead)
    recycled = replace(recycled, start_time=(recycled.start_time or 0) - 1)
    # the server of a sweep that still runs (this process), and a record of another boot
    owned = _spawn(spawned, marker, "sleep 304", f"{token}-owned")
    other_boot = _spawn(spawned, marker, "sleep 305", f"{token}-boot")

    records = ServedGroupRecords(tmp_path / "running.json")
    records.replace(
        [
            _record(leftover, f"{token}-left", **dead),
            replace(_record(leaderless, f"{token}-orphaned", **dead), start_time=leader_started),
            recycled,
            _record(owned, f"{token}-owned"),
            _record(other_boot, f"{token}-boot", boot_id="another-boot", **dead),
            _record(unrelated, f"{token}-elsewhere", host="another-host", **dead),
        ]
    )
    assert len(leftover_tree) == 3 and len(orphans) == 1 and leader_started is not None
    lines = stop_leftover_groups(records)

    assert len(lines) == 2 and all(line.startswith("stopped the server of 'tiny'") for line in lines), lines
    assert f"process group {leftover.pid}, 3 process(es)" in lines[0] and "SIGTERM" in lines[0]
    assert f"process group {leaderless.pid}, 1 process(es)" in lines[1]
    assert leftover.wait(timeout=10) == -signal.SIGTERM  # a leader whose parent is gone is reaped by init
    assert group_gone(leftover.pid, leftover_tree, timeout=10)
    assert group_gone(leaderless.pid, orphans, timeout=10)
    for untouched in (unrelated, owned, other_boot):
        assert untouched.poll() is None and process_alive(untouched.pid)
    # the stopped, the vanished and the other boot's records are forgotten
    assert [g.token for g in records.read()] == [f"{token}-owned", f"{token}-elsewhere"]
    assert stop_leftover_groups(records) == []


def test_a_leftover_that_ignores_sigterm_gets_sigkill_after_its_stop_timeout(
    tmp_path: Path, marker: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    token = f"{tmp_path.name}-stubborn"
    stubborn = _spawn(spawned, marker, "trap '' TERM; sleep 300 & sleep 301 & wait", token)
    tree = group_members(stubborn.pid)
    records = ServedGroupRecords(tmp_path / "running.json")
    records.replace([_record(stubborn, token, sweep_pid=stubborn.pid, sweep_start_time=1, stop_timeout_s=0.5)])
    [line] = stop_leftover_groups(records)
    assert len(tree) == 3 and "SIGKILL after 0.5 s" in line
    assert stubborn.wait(timeout=10) == -signal.SIGKILL
    assert group_gone(stubborn.pid, tree, timeout=10)


def test_the_supervisor_adopts_and_reaps_what_the_server_orphans_while_it_runs(tmp_path: Path, marker: str) -> None:
    # the subshell exits at once; its `sleep 1` is re-parented to the supervisor and exits there
    spec = ServeSpec(command="sh -c '(sleep 1 &); sleep 300' {port}", stop_timeout_s=2, env={MARKER_ENV: marker})
    server = ServedModel("tiny", spec, "m", tmp_path / "tiny.log")
    server.start()
    try:
        assert server.supervisor is not None
        supervisor = server.supervisor.pid
        adopted = _wait_until(lambda: len(_children(supervisor)) == 2)  # the leader and the orphan
        reaped = _wait_until(lambda: _children(supervisor) == [server.pid])  # no zombie left under it
        assert adopted and reaped and server.alive()
    finally:
        server.stop()


def _wait_until(condition: Callable[[], bool], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _children(pid: int) -> list[int]:
    """The processes (zombies too) whose parent is ``pid``."""
    found = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError, IndexError):
            if name.isdigit() and int(Path(f"/proc/{name}/stat").read_text().rpartition(")")[2].split()[1]) == pid:
                found.append(int(name))
    return found
