"""The output directory of ``eval``: checked before any judge is called, and held by one process.

:func:`check_output_dir` refuses, without creating anything, an ``--out`` that is a file, lies
below a file, or cannot be written (no permission, read-only file system); writability is proven
by creating and removing a probe file, because permission bits say nothing when running as root.
:func:`check_output_file` does the same for an output file (``build export``, ``build pairs``).

:class:`OutputLock` makes one process at a time work in a directory. Two ``eval`` commands sharing
one store would send every request twice; the second one now waits for the first or stops at once.
The lock is ``fcntl.flock`` on :data:`LOCK_FILENAME`, which the kernel releases when the process
ends however it ends (even SIGKILL), so a lock left by a dead process is never in the way; the file
holds the holder's pid for the message. Readers (``report``, ``leaderboard``) take no lock.
"""

from __future__ import annotations

import errno
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from medrewardbench.errors import OutputDirError, OutputLockedError

log = logging.getLogger(__name__)

LOCK_FILENAME = ".medrewardbench.lock"
"""The lock file inside an output directory (hidden; it stays after the run, holding the last pid)."""


def unwritable_reason(directory: Path) -> str | None:
    """Why files cannot be created in an existing directory, or None when they can.

    A probe file is created and removed: the only test that holds for root, for ACLs and for
    read-only mounts alike.

    Args:
        directory: an existing directory.

    Returns:
        A short reason (``"read-only file system"``, ``"permission denied"``, the OS message), or None.
    """
    try:
        fd, probe = tempfile.mkstemp(prefix=".medrewardbench-probe-", dir=directory)
    except OSError as exc:
        return _os_reason(exc)
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError as exc:
        log.warning("could not remove the probe file %s: %s", probe, exc)
    return None


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return exc.strerror or str(exc)


def check_output_dir(path: str | Path, *, option: str = "--out") -> None:
    """Refuse an output directory that cannot be used, creating nothing.

    Args:
        path: the output directory (it may not exist yet).
        option: how the user named it, for the message.

    Raises:
        OutputDirError: the path is a file (or something else that is not a directory), lies
            below a file, or the directory (or, when it does not exist yet, its nearest existing
            ancestor) does not accept new files.
    """
    out = Path(path)
    if out.exists():
        if not out.is_dir():
            raise OutputDirError(f"{option} {out}: is a file, not a directory; choose another output directory")
        why = unwritable_reason(out)
        if why is not None:
            raise OutputDirError(f"{option} {out}: cannot write to this directory ({why})")
        return
    ancestor = out.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputDirError(f"{option} {out}: lies below {ancestor}, which is a file, not a directory")
    why = unwritable_reason(ancestor)
    if why is not None:
        raise OutputDirError(f"{option} {out}: cannot create it in {ancestor} ({why})")


def check_output_file(path: str | Path, *, option: str = "--out") -> None:
    """Refuse an output file that cannot be written, creating nothing.

    Args:
        path: the output file (it may not exist yet, nor its directory).
        option: how the user named it, for the message.

    Raises:
        OutputDirError: the path is a directory, lies below a file, or its directory (or, when
            that does not exist yet, the nearest existing ancestor) does not accept new files.
    """
    out = Path(path)
    if out.is_dir():
        raise OutputDirError(f"{option} {out}: is a directory, not a file; name a file inside it")
    ancestor = out.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputDirError(f"{option} {out}: lies below {ancestor}, which is a file, not a directory")
    why = unwritable_reason(ancestor)
    if why is not None:
        raise OutputDirError(f"{option} {out}: cannot write in {ancestor} ({why})")


def prepare_output_dir(path: str | Path, *, option: str = "--out") -> Path:
    """Check, create and check again an output directory.

    Args:
        path: the output directory.
        option: how the user named it, for the message.

    Returns:
        The directory, now existing and writable.

    Raises:
        OutputDirError: as for :func:`check_output_dir`, or when creating it fails.
    """
    out = Path(path)
    check_output_dir(out, option=option)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"{option} {out}: cannot create it ({_os_reason(exc)})") from exc
    return out


OnWait = Callable[[int | None], None]
"""Called once with the holder's pid (None when unknown) before waiting for a held lock."""


class OutputLock:
    """An exclusive lock on an output directory for the life of one command; a context manager.

    Args:
        directory: the output directory (it must exist).
        wait: block until the holder is done instead of raising at once.
        on_wait: told the holder's pid before blocking (the CLI prints a line).
        shown_as: how the directory is named in the message (default: the path as given).

    Raises:
        OutputLockedError: from :meth:`acquire`, when another process holds the lock and ``wait``
            is False.
        OutputDirError: the lock file cannot be created.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        wait: bool = False,
        on_wait: OnWait | None = None,
        shown_as: str | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILENAME
        self.wait = wait
        self.on_wait = on_wait
        self.shown_as = shown_as or f"{directory}/"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock (waiting when asked to) and write this process's pid into the file."""
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, as before
            log.warning("output directory locking is not available on this platform")
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputDirError(f"{self.path}: cannot create the lock file ({_os_reason(exc)})") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_pid(fd)
                if not self.wait:
                    raise OutputLockedError(holder, self.shown_as) from None
                if self.on_wait is not None:
                    self.on_wait(holder)
                log.info("waiting for pid %s to release %s", holder, self.path)
                fcntl.flock(fd, fcntl.LOCK_EX)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (the file stays; an unlocked file means nobody holds it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _read_pid(fd: int, attempts: int = 20) -> int | None:
    """The pid the holder wrote; it may not have written it yet, so look a few times."""
    for _ in range(attempts):
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if text.isdigit():
            return int(text)
        time.sleep(0.005)
    return None
