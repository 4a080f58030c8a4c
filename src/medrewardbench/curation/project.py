"""The build project directory: one SQLite store, held by one process at a time.

A project is a directory holding ``build.sqlite`` (:mod:`medrewardbench.curation.store`) and, after
``build report``, its report files. Commands that write take the directory's lock
(:class:`~medrewardbench.utils.outdir.OutputLock`, the lock ``eval`` takes on its output directory), so
that two commands never send the same requests twice: the second stops at once, or with ``wait``
waits for the first. ``build report`` reads without the lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from medrewardbench.curation.store import STORE_FILENAME, BuildError, BuildStore
from medrewardbench.utils.outdir import LOCK_FILENAME, OnWait, OutputLock, check_output_dir, prepare_output_dir

log = logging.getLogger(__name__)

__all__ = ["check_project", "open_project", "store_path"]


def store_path(project: str | Path) -> Path:
    """The store file of a project directory.

    Args:
        project: the project directory.

    Returns:
        ``PROJECT/build.sqlite``.
    """
    return Path(project) / STORE_FILENAME


def check_project(project: str | Path) -> Path:
    """The project directory, when it holds a build store.

    Args:
        project: the project directory.

    Returns:
        The directory.

    Raises:
        BuildError: the directory is not a build project (the message says how to start one).
    """
    root = Path(project)
    if not store_path(root).is_file():
        raise BuildError(
            f"{root}: not a build project (no {STORE_FILENAME}); start one with "
            f"'medrewardbench build import {root} SOURCE'"
        )
    return root


@contextmanager
def open_project(
    project: str | Path,
    *,
    create: bool = False,
    lock: bool = True,
    wait: bool = False,
    on_wait: OnWait | None = None,
) -> Iterator[BuildStore]:
    """Open a project's store, holding the directory's lock while the block runs.

    Args:
        project: the project directory.
        create: create the directory and store when missing (``build import``); otherwise a
            directory without a store is refused. When the block fails and the store it created
            holds no question, the store (and the directory, when it was created too) is removed.
        lock: take the directory's lock (every command that writes does).
        wait: when another process holds the lock, wait for it instead of failing.
        on_wait: told the other process's pid before waiting.

    Yields:
        The open store.

    Raises:
        BuildError: not a project (and ``create`` is False).
        OutputDirError: the directory cannot be created or written.
        OutputLockedError: another process holds the lock (and ``wait`` is False).
        StoreError: the store cannot be opened.
    """
    root = Path(project)
    new_dir = new_store = False
    if create:
        check_output_dir(root, option="PROJECT")
        new_dir, new_store = not root.exists(), not store_path(root).exists()
        prepare_output_dir(root, option="PROJECT")
    else:
        check_project(root)
    holder = OutputLock(root, wait=wait, on_wait=on_wait, shown_as=f"{root}/") if lock else None
    if holder is not None:
        holder.acquire()
    left_empty = False
    try:
        with BuildStore(store_path(root)) as store:
            try:
                yield store
            except BaseException:
                left_empty = new_store and _holds_nothing(store)
                raise
    finally:
        if holder is not None:
            holder.release()
        if left_empty:
            _remove_new_project(root, new_dir)


def _holds_nothing(store: BuildStore) -> bool:
    try:
        return store.count_questions() == 0
    except Exception:  # a store that cannot even be counted is not worth keeping either way
        return False


def _remove_new_project(root: Path, new_dir: bool) -> None:
    """A first import failed: the store it created (and the directory) go, so no empty project is left."""
    for name in (STORE_FILENAME, f"{STORE_FILENAME}-wal", f"{STORE_FILENAME}-shm", LOCK_FILENAME):
        try:
            (root / name).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not remove %s: %s", root / name, exc)
    if new_dir:
        with suppress(OSError):  # something else was put there meanwhile: keep it
            root.rmdir()
