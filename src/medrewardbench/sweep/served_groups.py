"""The record of served process groups, and stopping the ones an earlier sweep left running.

Every server a sweep starts on this machine is recorded in ``servers/running.json`` in the output
directory (:class:`ServedGroup`: the server's pid and process group, its command, the start time
of its process, the sweep's pid and start time, this boot and host, and a token the server's
processes carry in their environment) and removed when it is stopped. A server's supervisor takes
its group down when the sweep dies (:mod:`.supervisor`); the record covers the case where the
supervisor could not act either (it was killed too). When a sweep starts it reads the record
(:func:`stop_leftover_groups`): a group whose sweep is gone but whose processes still run is
stopped (SIGTERM, SIGKILL after the entry's ``stop_timeout``), and each such group is told in one
line.

A process is stopped only when it is provably the server's: the recorded pid with the recorded
start time (a pid recycled for another process has another one) and the members of its group, or
a process that carries the group's token. Records of another boot are dropped (nothing of them
runs); records of another host, or of a sweep that still runs, are kept.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from medrewardbench.sweep.supervisor import (
    boot_id,
    is_zombie,
    process_group,
    process_start_time,
    running_pids,
)

log = logging.getLogger(__name__)

__all__ = ["GROUP_TOKEN_ENV", "RECORD_FILENAME", "ServedGroup", "ServedGroupRecords", "stop_leftover_groups"]

RECORD_FILENAME = "running.json"
"""The record's name in the servers' directory (``servers/running.json``)."""
RECORD_SCHEMA = "medrewardbench.served-groups/1"
GROUP_TOKEN_ENV = "MEDREWARDBENCH_SERVED_GROUP"
"""The environment variable every process of a served group inherits: the group's token."""
KILL_WAIT_S = 5.0
_COMMAND_SHOWN = 120


@dataclass(frozen=True)
class ServedGroup:
    """One served process group, as recorded.

    Attributes:
        entry: the sweep entry it serves.
        command: the server command as run.
        pid: the server's first process (its group's leader).
        pgid: its process group.
        start_time: when ``pid`` started, in clock ticks since boot (None where unknown).
        token: the value of :data:`GROUP_TOKEN_ENV` in the server's processes.
        supervisor_pid: its supervisor.
        sweep_pid: the sweep that started it.
        sweep_start_time: when that sweep started (clock ticks since boot).
        boot_id: the boot it ran in.
        host: the machine.
        started_at: when it was started (seconds since the epoch).
        stop_timeout_s: how long it may take to exit after SIGTERM.
    """

    entry: str
    command: str
    pid: int
    pgid: int
    start_time: int | None
    token: str
    supervisor_pid: int
    sweep_pid: int
    sweep_start_time: int | None
    boot_id: str | None
    host: str
    started_at: float
    stop_timeout_s: float

    @classmethod
    def from_json(cls, row: Any) -> ServedGroup | None:
        """A record read back; None when it is not one."""
        try:
            return cls(**row)
        except TypeError:
            return None


class ServedGroupRecords:
    """``servers/running.json`` of one output directory (see the module docstring).

    The output directory's lock keeps other sweeps out; a lock here keeps this process's threads
    in order. Every change rewrites the file whole (written beside it, then renamed).

    Args:
        path: the record file.
    """

    _locks: dict[Path, threading.Lock] = {}
    _locks_lock = threading.Lock()

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with self._locks_lock:
            self._lock = self._locks.setdefault(self.path.resolve(), threading.Lock())

    def read(self) -> list[ServedGroup]:
        """The recorded groups (none when the file is missing or unreadable)."""
        with self._lock:
            return self._read()

    def add(self, group: ServedGroup) -> None:
        """Record a started group."""
        with self._lock:
            self._write([*self._read(), group])

    def remove(self, token: str) -> None:
        """Forget a stopped group."""
        with self._lock:
            groups = self._read()
            kept = [g for g in groups if g.token != token]
            if len(kept) != len(groups):
                self._write(kept)

    def replace(self, groups: Iterable[ServedGroup]) -> None:
        """Keep only ``groups``."""
        with self._lock:
            self._write(list(groups))

    def _read(self) -> list[ServedGroup]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            log.warning("ignoring the unreadable record of served groups %s: %s", self.path, exc)
            return []
        rows = document.get("groups") if isinstance(document, dict) else None
        groups = [ServedGroup.from_json(row) for row in rows] if isinstance(rows, list) else []
        return [g for g in groups if g is not None]

    def _write(self, groups: list[ServedGroup]) -> None:
        if not groups and not self.path.exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        document = {"schema": RECORD_SCHEMA, "groups": [asdict(g) for g in groups]}
        temporary.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)


def new_group(
    *,
    entry: str,
    command: str,
    pid: int,
    pgid: int,
    start_time: int | None,
    token: str,
    supervisor_pid: int,
    stop_timeout_s: float,
) -> ServedGroup:
    """The record of a group this process (the sweep) has just started."""
    return ServedGroup(
        entry=entry,
        command=command,
        pid=pid,
        pgid=pgid,
        start_time=start_time,
        token=token,
        supervisor_pid=supervisor_pid,
        sweep_pid=os.getpid(),
        sweep_start_time=process_start_time(os.getpid()),
        boot_id=boot_id(),
        host=socket.gethostname(),
        started_at=time.time(),
        stop_timeout_s=stop_timeout_s,
    )


# ------------------------------------------------------------------------------------- leftovers
def _alive(pid: int, start_time: int | None) -> bool:
    """Whether ``pid`` is still the process that started at ``start_time`` (and has not exited)."""
    return start_time is not None and process_start_time(pid) == start_time and not is_zombie(pid)


def _carries(pid: int, token: str) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{GROUP_TOKEN_ENV}={token}".encode() in environ.split(b"\0")


def _members(group: ServedGroup) -> dict[int, int]:
    """The pid and start time of every running process that is provably the group's."""
    leader = _alive(group.pid, group.start_time) and process_group(group.pid) == group.pgid
    members: dict[int, int] = {}
    for pid in running_pids():
        if pid == os.getpid() or is_zombie(pid):
            continue
        started = process_start_time(pid)
        if started is None or (group.start_time is not None and started < group.start_time):
            continue  # older than the server: not one of its processes
        if (leader and process_group(pid) == group.pgid) or _carries(pid, group.token):
            members[pid] = started
    return members


def _signal(group: ServedGroup, members: dict[int, int], signum: int) -> None:
    """Signal the group while its leader is provably it, and each member that is still itself."""
    if _alive(group.pid, group.start_time) and process_group(group.pid) == group.pgid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group.pgid, signum)
    for pid, started in members.items():
        if _alive(pid, started):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


def _wait_gone(members: dict[int, int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(pid, started) for pid, started in members.items()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _stop(group: ServedGroup, members: dict[int, int]) -> str:
    _signal(group, members, signal.SIGTERM)
    how = "SIGTERM"
    if not _wait_gone(members, group.stop_timeout_s):
        how = f"SIGKILL after {group.stop_timeout_s:g} s"
        _signal(group, _members(group) | members, signal.SIGKILL)
        _wait_gone(members, KILL_WAIT_S)
    return how


def _describe(group: ServedGroup, members: dict[int, int], how: str) -> str:
    command = group.command if len(group.command) <= _COMMAND_SHOWN else group.command[: _COMMAND_SHOWN - 3] + "..."
    started = time.strftime("%Y-%m-%d %H:%M", time.localtime(group.started_at))
    return (
        f"stopped the server of {group.entry!r} that an earlier sweep (pid {group.sweep_pid}, gone) left running: "
        f"process group {group.pgid}, {len(members)} process(es), started {started}, {how}; command: {command}"
    )


def stop_leftover_groups(records: ServedGroupRecords) -> list[str]:
    """Stop the recorded groups whose sweep is gone but whose processes still run (see the module docstring).

    Args:
        records: the output directory's record.

    Returns:
        One line for each group stopped.
    """
    groups = records.read()
    if not groups:
        return []
    here, this_boot = socket.gethostname(), boot_id()
    kept: list[ServedGroup] = []
    lines: list[str] = []
    for group in groups:
        if group.host != here:
            kept.append(group)  # a sweep on that machine will look at it
            continue
        if this_boot is None or group.start_time is None:
            kept.append(group)  # nothing can be proven here (no /proc)
            continue
        if group.boot_id != this_boot:
            continue  # the machine restarted since: none of it runs
        if _alive(group.sweep_pid, group.sweep_start_time):
            kept.append(group)  # its sweep runs: its own business
            continue
        members = _members(group)
        if not members:
            continue  # its supervisor stopped it
        how = _stop(group, members)
        line = _describe(group, members, how)
        log.info("%s", line)  # the caller shows it (the sweep: as a note)
        lines.append(line)
    records.replace(kept)
    return lines
