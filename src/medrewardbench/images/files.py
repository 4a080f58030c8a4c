"""Reading image files safely: regular files only, bounded in bytes and pixels, never hanging.

A data set is untrusted input. An image path in it could name a named pipe (reading it blocks for
ever), ``/dev/zero`` (reading never ends), a socket, a directory or a symbolic-link loop. Every file
the package reads goes through :func:`check_regular_file` / :func:`open_regular_file`, which refuse
anything but a regular file before opening it.

Untrusted images are guarded against decompression bombs by :data:`MAX_IMAGE_PIXELS`, which can be
set with the environment variable ``MEDREWARDBENCH_MAX_IMAGE_PIXELS``, and files larger than
:data:`MAX_IMAGE_BYTES` (``MEDREWARDBENCH_MAX_IMAGE_BYTES``) are refused before they are read. Both
are read through this module at call time, so assigning the module attribute changes them.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path
from typing import BinaryIO

from medrewardbench.errors import ImageError, MedRewardBenchError

logger = logging.getLogger(__name__)

HEAD_BYTES = 132
"""How much of a file tells its format (DICOM's magic ``DICM`` sits at byte 128)."""

MAX_IMAGE_PIXELS_ENV = "MEDREWARDBENCH_MAX_IMAGE_PIXELS"
_DEFAULT_MAX_IMAGE_PIXELS = 89_478_485  # PIL's default: 1024 * 1024 * 1024 // 4 // 3
MAX_IMAGE_BYTES_ENV = "MEDREWARDBENCH_MAX_IMAGE_BYTES"
_DEFAULT_MAX_IMAGE_BYTES = 512 * 2**20


def _positive_int_from_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        logger.warning("ignoring %s=%r (not an integer); using %d", name, raw, default)
        return default
    if value <= 0:
        logger.warning("ignoring %s=%r (must be positive); using %d", name, raw, default)
        return default
    return value


def _max_pixels_from_env() -> int:
    return _positive_int_from_env(MAX_IMAGE_PIXELS_ENV, _DEFAULT_MAX_IMAGE_PIXELS)


MAX_IMAGE_PIXELS: int = _max_pixels_from_env()
"""Largest image (width x height, per frame) that will be decoded; larger ones raise ImageError.

Read at import from ``MEDREWARDBENCH_MAX_IMAGE_PIXELS``; assign to the module attribute to change
it at run time. PIL's own guard (twice ``PIL.Image.MAX_IMAGE_PIXELS``) still applies on top."""


MAX_IMAGE_BYTES: int = _positive_int_from_env(MAX_IMAGE_BYTES_ENV, _DEFAULT_MAX_IMAGE_BYTES)
"""Largest image file (bytes) that will be read; larger ones raise ImageError before any read.

Read at import from ``MEDREWARDBENCH_MAX_IMAGE_BYTES`` (default 512 MiB); assign to the module
attribute to change it at run time. Embedded images are bounded by their data file instead."""


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


def check_stat(result: os.stat_result, max_bytes: int | None, size_hint: str) -> None:
    """Refuse a ``stat`` result that is not a regular file of at most ``max_bytes``.

    Args:
        result: the file's ``os.stat`` (or ``os.lstat`` of a non-link) result.
        max_bytes: the largest size accepted; None for no limit.
        size_hint: how to raise the limit, named in the message.

    Raises:
        FileRefused: a directory, named pipe, device or socket, or a file over the limit.
    """
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
    check_stat(result, max_bytes, size_hint)
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
    fd, _ = _open_checked(path, max_bytes, size_hint)
    return os.fdopen(fd, "rb")


def _open_checked(path: str | Path, max_bytes: int | None, size_hint: str) -> tuple[int, int]:
    """The checked, opened descriptor of a regular file and its size (see :func:`open_regular_file`)."""
    check_regular_file(path, max_bytes, size_hint)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    try:
        result = os.fstat(fd)
        check_stat(result, max_bytes, size_hint)
        return fd, result.st_size
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path: str | Path, max_bytes: int | None = None, size_hint: str = "") -> bytes:
    """Read a whole regular file, never more than ``max_bytes``.

    The file is read straight from its descriptor in a buffer of the size ``fstat`` gives (plus one
    byte, to see a file that grew), not in one of ``max_bytes``: asking for the limit makes Python
    allocate the whole limit (512 MiB for images) for every small file. A file that is longer than
    ``fstat`` said (one that grows, or one in ``/proc`` whose size is 0) is read on in chunks, and
    still never past the limit.

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
    fd, size = _open_checked(path, max_bytes, size_hint)
    limit = None if max_bytes is None else max_bytes + 1
    parts: list[bytes] = []
    total = 0
    want = size + 1 if limit is None else min(size + 1, limit)
    try:
        while True:
            chunk = os.read(fd, want)
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            if limit is not None and total >= limit:
                break
            # a read that filled the request means more may follow; a short one that the end is
            # reached, which a small read confirms (a large one would allocate its whole size)
            step = _READ_CHUNK if len(chunk) == want else _PROBE
            want = step if limit is None else min(step, limit - total)
    except OSError as exc:
        raise _refusal(path, exc) from exc
    finally:
        os.close(fd)
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if max_bytes is not None and len(data) > max_bytes:
        hint = f"; raise it with {size_hint}" if size_hint else ""
        raise FileRefused(f"file holds more than the limit of {_size_text(max_bytes)}{hint}")
    return data


_READ_CHUNK = 1 << 20
"""Bytes a read asks for beyond the size ``fstat`` gave."""
_PROBE = 4096
"""Bytes asked for to confirm the end of a file after a short read."""


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


def check_image_file(path: str | Path, what: str) -> os.stat_result:
    """Refuse, before opening, anything but a regular file of at most :data:`MAX_IMAGE_BYTES`.

    Args:
        path: the image file.
        what: the image as messages name it (``"path image 'x.png'"``).

    Returns:
        The file's ``os.stat`` result.

    Raises:
        ImageError: as :func:`check_regular_file` would refuse it, naming the image.
    """
    try:
        return check_regular_file(path, MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV)
    except FileRefused as exc:
        raise ImageError(f"{what}: {exc}") from exc


def open_image_file(path: str | Path, what: str) -> BinaryIO:
    """Open an image file for binary reading (:func:`open_regular_file` at :data:`MAX_IMAGE_BYTES`).

    Args:
        path: the image file.
        what: the image as messages name it.

    Returns:
        A binary file object; the caller closes it.

    Raises:
        ImageError: the file is refused, naming the image.
    """
    try:
        return open_regular_file(path, MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV)
    except FileRefused as exc:
        raise ImageError(f"{what}: {exc}") from exc


def read_image_file(path: str | Path, what: str) -> bytes:
    """Read a whole image file, never more than :data:`MAX_IMAGE_BYTES`.

    Args:
        path: the image file.
        what: the image as messages name it.

    Returns:
        The file's bytes.

    Raises:
        ImageError: the file is refused or cannot be read, naming the image.
    """
    try:
        return read_regular_file(path, MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV)
    except FileRefused as exc:
        raise ImageError(f"{what}: {exc}") from exc


def read_head(handle: BinaryIO, what: str) -> bytes:
    """The first :data:`HEAD_BYTES` of an open file, which is then rewound.

    Args:
        handle: a seekable binary file.
        what: the image as messages name it.

    Returns:
        Up to :data:`HEAD_BYTES` bytes.

    Raises:
        ImageError: the file cannot be read.
    """
    try:
        head = handle.read(HEAD_BYTES)
        handle.seek(0)
    except OSError as exc:
        raise ImageError(f"{what}: cannot read file ({exc.strerror or exc})") from exc
    return head


def source_head(source: Path | bytes, what: str) -> bytes:
    """The first :data:`HEAD_BYTES` of a file or of bytes in memory.

    Args:
        source: an image file, or encoded image bytes.
        what: the image as messages name it.

    Returns:
        Up to :data:`HEAD_BYTES` bytes.

    Raises:
        ImageError: the file is refused or cannot be read.
    """
    if isinstance(source, bytes):
        return source[:HEAD_BYTES]
    with open_image_file(source, what) as handle:
        return read_head(handle, what)


def short_reason(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, shortened; pydicom puts the useful part on later lines.

    Args:
        exc: the error.
        limit: the longest message kept.

    Returns:
        The reason, for a one-line problem.
    """
    message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if len(message) > limit:
        message = message[: limit - 3] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def check_pixel_count(width: int, height: int, what: str) -> None:
    """Refuse an image larger than :data:`MAX_IMAGE_PIXELS` before its pixels are decoded.

    Args:
        width: pixels per row.
        height: rows.
        what: the image as messages name it.

    Raises:
        ImageError: the image is larger than the limit (a possible decompression bomb).
    """
    limit = MAX_IMAGE_PIXELS
    if width * height > limit:
        raise ImageError(
            f"{what}: refused as a possible decompression bomb ({width}x{height} = {width * height} pixels "
            f"exceeds the limit of {limit}; raise it with {MAX_IMAGE_PIXELS_ENV})"
        )
