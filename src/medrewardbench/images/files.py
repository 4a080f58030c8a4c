"""Safe access to the files a data source names: regular files only, inside the data, never hanging.

A data set is untrusted input. An image path in it could name a named pipe (reading it blocks for
ever), ``/dev/zero`` (reading never ends), a socket, a directory, a symbolic-link loop, or a private
image anywhere on the machine that an API judge would then upload. Every file the data package
reads goes through :func:`check_regular_file` / :func:`open_regular_file`, and every image path a
row names is checked against an :class:`ImagePolicy` when the row is read.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from medrewardbench.errors import MedRewardBenchError

IMAGE_ROOTS_ENV = "MEDREWARDBENCH_IMAGE_ROOTS"
"""Environment variable: directories (``os.pathsep``-separated) image paths may point into."""


class FileRefused(MedRewardBenchError):
    """A file cannot or may not be read; the message says why in a few words (not which file)."""


def _kind(mode: int) -> str | None:
    """What a non-regular file is, for messages; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _refusal(path: str | Path, exc: OSError) -> FileRefused:
    if exc.errno == errno.ELOOP:
        return FileRefused("symbolic link loop (a link that points back to itself)")
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return FileRefused("broken symbolic link (its target does not exist)")
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return FileRefused("no such file")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return FileRefused("permission denied")
    return FileRefused(f"cannot read file ({exc.strerror or exc})")


def _size_text(size: int) -> str:
    return f"{size / 2**20:,.1f} MiB" if size >= 2**20 else f"{size:,} bytes"


def _check_stat(result: os.stat_result, max_bytes: int | None, size_hint: str) -> None:
    kind = _kind(result.st_mode)
    if kind is not None:
        raise FileRefused(f"is {kind}, not a regular file")
    if max_bytes is not None and result.st_size > max_bytes:
        hint = f"; raise it with {size_hint}" if size_hint else ""
        raise FileRefused(
            f"file is {_size_text(result.st_size)} ({result.st_size} bytes), over the limit of "
            f"{_size_text(max_bytes)}{hint}"
        )


def check_regular_file(path: str | Path, max_bytes: int | None = None, size_hint: str = "") -> os.stat_result:
    """Check, without opening it, that a path is a regular file (after symbolic links) of bounded size.

    Args:
        path: the file.
        max_bytes: the largest size accepted; None for no limit.
        size_hint: how to raise the limit (an environment variable), named in the message.

    Returns:
        The file's ``os.stat`` result.

    Raises:
        FileRefused: missing, a broken link or a link loop, not readable, a directory, named pipe,
            device or socket, or larger than ``max_bytes``.
    """
    try:
        result = os.stat(path)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    _check_stat(result, max_bytes, size_hint)
    return result


def open_regular_file(path: str | Path, max_bytes: int | None = None, size_hint: str = "") -> BinaryIO:
    """Open a regular file for binary reading; anything that could block or never end is refused.

    The path is checked with ``stat`` first, then opened with ``O_NONBLOCK`` (so a named pipe
    swapped in between cannot block the open) and checked again on the open descriptor.

    Args:
        path: the file.
        max_bytes: the largest size accepted; None for no limit.
        size_hint: how to raise the limit, named in the message.

    Returns:
        A binary file object; the caller closes it.

    Raises:
        FileRefused: as for :func:`check_regular_file`.
    """
    check_regular_file(path, max_bytes, size_hint)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    try:
        _check_stat(os.fstat(fd), max_bytes, size_hint)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: str | Path, max_bytes: int | None = None, size_hint: str = "") -> bytes:
    """Read a whole regular file, never more than ``max_bytes``.

    Args:
        path: the file.
        max_bytes: the largest size accepted (also enforced while reading, for files such as
            those in ``/proc`` whose size ``stat`` does not know); None for no limit.
        size_hint: how to raise the limit, named in the message.

    Returns:
        The file's bytes.

    Raises:
        FileRefused: as for :func:`check_regular_file`, or an I/O error while reading.
    """
    with open_regular_file(path, max_bytes, size_hint) as handle:
        try:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
        except OSError as exc:
            raise _refusal(path, exc) from exc
    if max_bytes is not None and len(data) > max_bytes:
        hint = f"; raise it with {size_hint}" if size_hint else ""
        raise FileRefused(f"file holds more than the limit of {_size_text(max_bytes)}{hint}")
    return data


def describe_oserror(exc: OSError) -> str:
    """A short reason for an I/O error, for one-line problems (no file name: the caller has it).

    Args:
        exc: the error.

    Returns:
        E.g. ``"Input/output error"`` or ``"symbolic link loop"``.
    """
    if exc.errno == errno.ELOOP:
        return "symbolic link loop (a link that points back to itself)"
    return exc.strerror or str(exc) or type(exc).__name__


_LEFT_TO_DECODER = frozenset(("no such file", "permission denied", "broken symbolic link (its target does not exist)"))


def _real_dir(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def image_roots_from_env() -> tuple[str, ...]:
    """The directories listed in ``MEDREWARDBENCH_IMAGE_ROOTS`` (empty entries ignored).

    Returns:
        The directories as written.
    """
    raw = os.environ.get(IMAGE_ROOTS_ENV, "")
    return tuple(part for part in raw.split(os.pathsep) if part.strip())


@dataclass(frozen=True)
class ImagePolicy:
    """Which image files the rows of a source may name.

    By default an image path must resolve, after symbolic links, inside one of ``roots``: the
    directory of the data (added by each loader) and any directory the user allowed. With
    ``allow_external`` any path is accepted (the behaviour before this check existed).

    Attributes:
        roots: allowed directories, resolved (``os.path.realpath``).
        allow_external: accept image paths anywhere.
    """

    roots: tuple[str, ...] = ()
    allow_external: bool = False
    _real_parents: dict[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """Resolved directories, so that a data set with many images in few directories is cheap."""

    @classmethod
    def create(cls, allow_external: bool = False, image_roots: Iterable[str | Path] | None = None) -> ImagePolicy:
        """A policy from user settings; ``MEDREWARDBENCH_IMAGE_ROOTS`` is always added to the roots.

        Args:
            allow_external: accept image paths anywhere.
            image_roots: further directories image paths may point into.

        Returns:
            The policy (the data's own directory is added by the loader).
        """
        roots = [*(image_roots or ()), *image_roots_from_env()]
        return cls(tuple(dict.fromkeys(_real_dir(root) for root in roots)), allow_external)

    def with_roots(self, *roots: str | Path) -> ImagePolicy:
        """This policy with more allowed directories (the data's own directory).

        Args:
            roots: directories to add.

        Returns:
            A new policy.
        """
        added = tuple(_real_dir(root) for root in roots)
        return ImagePolicy(tuple(dict.fromkeys((*added, *self.roots))), self.allow_external)

    def check(self, path: str, max_bytes: int | None, size_hint: str = "") -> str | None:
        """Why a row may not name this image file, or None when it may.

        Only ``stat`` is used: the file is not opened. A missing or unreadable file is not
        reported here (validation decodes every image and reports it with the decoder's reason).

        Args:
            path: the absolute image path, as the row resolves it.
            max_bytes: the image size limit.
            size_hint: how to raise it, for the message.

        Returns:
            A one-line reason, or None.
        """
        try:
            entry: os.stat_result | None = os.lstat(path)
        except OSError:
            entry = None  # missing: containment is still checked, the rest is left to the decoder
        is_link = entry is None or stat.S_ISLNK(entry.st_mode)
        if not self.allow_external:
            real = os.path.realpath(path) if is_link else self._real_file(path)
            if not any(_inside(real, root) for root in self.roots):
                shown = real if real == os.path.normpath(path) else f"{path} -> {real}"
                return (
                    f"image path {shown} is outside the data directory ({', '.join(self.roots) or 'none'}); "
                    f"move the image into it, or allow it with --allow-external-images or by listing "
                    f"its directory in {IMAGE_ROOTS_ENV}"
                )
        try:
            if entry is not None and not is_link:
                _check_stat(entry, max_bytes, size_hint)  # not a link: lstat describes the file itself
            else:
                check_regular_file(path, max_bytes, size_hint)
        except FileRefused as exc:
            message = str(exc)
            if message in _LEFT_TO_DECODER or message.startswith("cannot read file"):
                return None
            return f"image file {path}: {message}"
        return None

    def _real_file(self, path: str) -> str:
        """The real path of a file that is not itself a link: its directory resolved once."""
        parent, name = os.path.split(path)
        real_parent = self._real_parents.get(parent)
        if real_parent is None:
            real_parent = self._real_parents[parent] = os.path.realpath(parent)
        return os.path.join(real_parent, name)
