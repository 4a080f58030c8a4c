"""The supervisor of a served model: it runs the server command and takes its process group down with the sweep.

:class:`~medrewardbench.sweep.served.ServedModel` runs ``python -I supervisor.py STOP_TIMEOUT_S --
COMMAND...`` in a session of its own, with three descriptors:

* stdin: the read end of a pipe whose write end only the sweep holds (the *control pipe*);
* stdout: a pipe back to the sweep, one JSON object a line: ``{"started": {"pid", "pgid",
  "start_time"}}`` or ``{"error": why}`` when the command cannot be started, then ``{"exited":
  returncode, "escalated": bool}``;
* stderr: the server's log file (the supervisor's own notes go there too).

It starts the command in a new session, so the server's process group is its own, and waits for
one of two things:

* end of file on the control pipe: the sweep stopped the server (it writes ``stop`` first) or the
  sweep died, even by SIGKILL, since the kernel closes every descriptor of a dead process. The
  supervisor then sends SIGTERM to the group and SIGKILL after ``STOP_TIMEOUT_S``;
* the server's own exit.

Either way it then kills what is left of the group and, where it can be a child subreaper (Linux),
every descendant of the server that left the group (orphans are re-parented to it), reports the exit
status and exits. It never signals a pid that could have been recycled: it signals the group only
while the leader is its unreaped child (a pid in use as a group id is never reused), and otherwise
only its own children.

This file uses nothing but the standard library: it runs as a script, isolated from the
environment's paths (``-I``), and must start fast. :func:`process_start_time` and :func:`boot_id`
serve :mod:`~medrewardbench.sweep.served_groups` too.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["boot_id", "main", "process_group", "process_start_time", "running_pids"]

POLL_S = 0.2
KILL_WAIT_S = 30.0
"""How long the supervisor waits for a SIGKILLed leader, and for the rest of the tree, before it gives up."""
STOP_WORD = b"stop"
_PR_SET_CHILD_SUBREAPER = 36


# --------------------------------------------------------------------------------- process facts
def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (the state first), None when unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def process_start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot; None when unknown.

    None also where this system has no ``/proc``. Two processes with one pid never have the same
    start time, so a pid and its start time name one process.
    """
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    return int(fields[19])


def process_group(pid: int) -> int | None:
    """The process's group id, None when it does not exist or cannot be known."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 3:
        return None
    return int(fields[2])


def process_parent(pid: int) -> int | None:
    """The process's parent id, None when it does not exist or cannot be known."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 2:
        return None
    return int(fields[1])


def is_zombie(pid: int) -> bool:
    """Whether the process has exited and waits to be reaped."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] in ("Z", "X")


def running_pids() -> list[int]:
    """Every process id in ``/proc`` (empty without ``/proc``)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def boot_id() -> str | None:
    """This boot's id (Linux): start times and pids of another boot mean nothing now."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except OSError:
        return None


# ------------------------------------------------------------------------------------ supervisor
def _report(event: dict[str, Any]) -> None:
    """One line to the sweep (which may be gone: then nobody reads it)."""
    with contextlib.suppress(OSError):
        os.write(1, (json.dumps(event) + "\n").encode())


def _note(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"=== medrewardbench supervisor: {text}\n".encode())


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class _Leader:
    """The server's first process: its exit is seen without reaping it, so its group id stays reserved."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.pid = process.pid
        self.returncode: int | None = None

    def exited(self) -> bool:
        if self.returncode is not None:
            return True
        if not hasattr(os, "waitid"):  # no look without reaping here: reap (the group goes unsignalled)
            self.returncode = self.process.poll()
            return self.returncode is not None
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def signal_group(self, signum: int) -> None:
        """Signal the group, only while the leader is unreaped (its id cannot have been recycled)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signum)

    def wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.exited():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def reap(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self.process.wait(timeout=KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                return None
        return self.returncode


def _children() -> list[int]:
    me = os.getpid()
    return [pid for pid in running_pids() if process_parent(pid) == me]


def _reap_orphans(leader: int) -> None:
    """Reap children other than the leader that have exited (orphans re-parented to this subreaper).

    One look costs a system call, not a walk through ``/proc``: it runs five times a second.
    """
    if not hasattr(os, "waitid"):
        return
    while True:
        try:
            waitable = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if waitable is None or waitable.si_pid == leader:
            return  # nothing to reap, or the leader, which ends the watch anyway
        with contextlib.suppress(ChildProcessError):
            os.waitpid(waitable.si_pid, 0)


def _kill_descendants() -> None:
    """SIGKILL every child until none is left (each dead one's children become this subreaper's)."""
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        children = _children()
        if not children:
            return
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _stop(leader: _Leader, stop_timeout: float) -> bool:
    """SIGTERM to the group, SIGKILL after ``stop_timeout``; True when it took SIGKILL."""
    leader.signal_group(signal.SIGTERM)
    if leader.wait_exit(stop_timeout):
        return False
    _note(f"the server ignored SIGTERM for {stop_timeout:g} s; killing its process group")
    leader.signal_group(signal.SIGKILL)
    leader.wait_exit(KILL_WAIT_S)
    return True


def main(argv: list[str]) -> int:
    """Run ``STOP_TIMEOUT_S -- COMMAND...`` as the module docstring says.

    Returns:
        0; 127 when the command cannot be started, 2 for bad arguments.
    """
    if len(argv) < 3 or argv[1] != "--":
        _note("usage: supervisor.py STOP_TIMEOUT_S -- COMMAND...")
        return 2
    stop_timeout = float(argv[0])
    command = argv[2:]
    stopping: list[str] = []
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: stopping.append("SIGTERM"))
    subreaper = _become_subreaper()
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=2, stderr=2, start_new_session=True)
    except OSError as exc:
        _report({"error": exc.strerror or str(exc)})
        return 127
    leader = _Leader(process)
    _report({"started": {"pid": leader.pid, "pgid": leader.pid, "start_time": process_start_time(leader.pid)}})
    told = b""
    while not stopping and not leader.exited():
        readable, _, _ = select.select([0], [], [], POLL_S)
        if readable:
            chunk = os.read(0, 4096)
            told += chunk
            if not chunk:
                stopping.append("stop" if STOP_WORD in told else "eof")
        if subreaper:
            _reap_orphans(leader.pid)
    escalated = False
    if not leader.exited():
        if stopping[0] == "eof":
            _note("the sweep is gone; stopping the server's process group")
        elif stopping[0] == "SIGTERM":
            _note("got SIGTERM; stopping the server's process group")
        escalated = _stop(leader, stop_timeout)
    leader.signal_group(signal.SIGKILL)  # what the server left in its group (the leader is still unreaped)
    returncode = leader.reap()
    if subreaper:
        _kill_descendants()  # and what left the group
    _report({"exited": returncode, "escalated": escalated})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
