"""Image references, their bytes and their content hashes: what a :class:`~medrewardbench.cases.Case` points at.

An :class:`ImageRef` names an image without decoding it: a file, bytes in memory, an image an
installed package ships, or none. This module reads the encoded bytes behind a reference and hashes
them (the hash is part of every judgment's fingerprint); decoding is
:func:`medrewardbench.images.decode.load_image`.

Builtin images are named ``"pydicom:<test file name>"`` (any file
:func:`pydicom.data.get_testdata_file` finds locally, see :data:`BUILTIN_IMAGES` for those that
decode with the default dependencies) or ``"skimage:<name>"`` for the
:data:`SKIMAGE_BUILTINS` of ``skimage.data``. Nothing is ever downloaded.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

from PIL import Image

from medrewardbench.errors import ImageError
from medrewardbench.images import files
from medrewardbench.images.files import check_image_file, open_image_file, read_image_file, short_reason
from medrewardbench.images.pixels import encode_png, finite_range, scale_to_uint8

logger = logging.getLogger(__name__)

ImageKind = Literal["path", "bytes", "builtin", "none"]


@dataclass(frozen=True)
class ImageRef:
    """A reference to an image that is decoded only when asked for (:func:`~medrewardbench.images.decode.load_image`).

    Kinds:
        ``path``: a file on disk (PNG, JPEG, any PIL format, or DICOM).
        ``bytes``: encoded file bytes held in memory (for example from a parquet Image struct).
        ``builtin``: an image that an installed package ships, named ``"pydicom:CT_small.dcm"``
            or ``"skimage:retina"`` (see :data:`BUILTIN_IMAGES`).
        ``none``: the case has no image.
    """

    kind: ImageKind
    location: str = ""
    """File path (``path``), original file name if any (``bytes``) or builtin name."""
    data: bytes | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_path(cls, path: str | Path) -> ImageRef:
        """A reference to an image file on disk."""
        return cls("path", str(path))

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "") -> ImageRef:
        """A reference to encoded image bytes held in memory (``name``: the original file name, if any)."""
        return cls("bytes", name, data)

    @classmethod
    def builtin(cls, name: str) -> ImageRef:
        """A reference to an image an installed package ships (see :data:`BUILTIN_IMAGES`)."""
        return cls("builtin", name)

    @classmethod
    def empty(cls) -> ImageRef:
        """No image: the case is text only."""
        return cls("none")

    def raw_bytes(self) -> bytes:
        """The encoded bytes behind this reference (file contents for paths and builtins)."""
        return raw_image_bytes(self)

    def content_hash(self) -> str:
        """A SHA-256 of the encoded image bytes, stable across machines; used for cache keys."""
        return image_content_hash(self)

    def describe(self) -> str:
        """A short human-readable description for errors and reports."""
        if self.kind == "bytes":
            return f"embedded image {self.location!r}" if self.location else "embedded image"
        if self.kind == "none":
            return "no image"
        return f"{self.kind} image {self.location!r}"


_EMPTY_HASH = hashlib.sha256(b"").hexdigest()

SKIMAGE_BUILTINS: dict[str, str] = {
    "retina": "retina.jpg",
    "microaneurysms": "microaneurysms.png",
    "immunohistochemistry": "ihc.png",
    "cell": "cell.png",
    "shepp_logan_phantom": "phantom.png",
}
"""``skimage.data`` functions usable as builtins, with the file each one reads from the package."""


BUILTIN_IMAGES: tuple[str, ...] = (
    "pydicom:CT_small.dcm",
    "pydicom:MR_small.dcm",
    "pydicom:693_J2KI.dcm",
    "pydicom:examples_overlay.dcm",
    "pydicom:examples_rgb_color.dcm",
    "pydicom:examples_palette.dcm",
    "pydicom:examples_jpeg2k.dcm",
    "pydicom:examples_ybr_color.dcm",
    "pydicom:JPEG2000.dcm",
    "pydicom:liver_1frame.dcm",
    *(f"skimage:{name}" for name in SKIMAGE_BUILTINS),
)
"""Builtin medical images known to decode offline with the core dependencies."""


def raw_image_bytes(ref: ImageRef) -> bytes:
    """The encoded bytes behind an image reference.

    For paths this is the file's contents, for embedded images the bytes themselves, for builtins
    the file the package ships (a skimage image without a file is encoded as PNG, deterministically).

    Args:
        ref: the image reference.

    Returns:
        The encoded bytes; stable across runs and machines for the same installed packages.

    Raises:
        ImageError: the case has no image, or the file cannot be read.
    """
    if ref.kind == "none":
        raise ImageError("case has no image")
    if ref.kind == "path":
        return read_image_file(ref.location, ref.describe())
    if ref.kind == "bytes":
        return embedded_bytes(ref)
    if ref.kind == "builtin":
        return builtin_bytes(ref.location, ref.describe())
    raise ImageError(f"{ref.describe()}: unknown image reference kind {ref.kind!r}")


def image_content_hash(ref: ImageRef) -> str:
    """SHA-256 (hex) of the encoded image bytes, cached so that rehashing a dataset is cheap.

    Paths are cached on (resolved path, size, mtime, inode, device), so a changed file is hashed
    again; builtins are cached by name. A reference without an image hashes to ``sha256(b"")``.

    Args:
        ref: the image reference.

    Returns:
        64 lowercase hex characters.

    Raises:
        ImageError: the file cannot be read, is not a regular file, or is larger than
            :data:`files.MAX_IMAGE_BYTES`.
    """
    if ref.kind == "none":
        return _EMPTY_HASH
    if ref.kind == "path":
        what = ref.describe()
        stat = check_image_file(ref.location, what)
        # the device and inode name the file whatever the path (no realpath: a stat of every component)
        return _hash_file(ref.location, stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev)
    if ref.kind == "bytes":
        return hashlib.sha256(embedded_bytes(ref)).hexdigest()
    if ref.kind == "builtin":
        return _hash_builtin(ref.location)
    raise ImageError(f"{ref.describe()}: unknown image reference kind {ref.kind!r}")


def clear_hash_cache() -> None:
    """Forget cached content hashes (they are otherwise kept for the life of the process)."""
    _hash_file.cache_clear()
    _hash_builtin.cache_clear()


def image_source(ref: ImageRef) -> tuple[Path | bytes, str]:
    """Where an image's encoded bytes are: a file (read lazily) or bytes, and a file name for its format.

    Args:
        ref: the image reference.

    Returns:
        ``(path or bytes, file name)``; a builtin without a file comes as PNG bytes named ``image.png``.

    Raises:
        ImageError: no image, or a builtin that cannot be found.
    """
    what = ref.describe()
    if ref.kind == "path":
        return Path(ref.location), Path(ref.location).name
    if ref.kind == "bytes":
        return embedded_bytes(ref), ref.location
    if ref.kind == "builtin":
        resolved = builtin_file(ref.location, what)
        if resolved is None:
            return builtin_bytes(ref.location, what), "image.png"
        return resolved, resolved.name
    raise ImageError(f"{what}: no image")


def embedded_bytes(ref: ImageRef) -> bytes:
    """The bytes of an embedded (``bytes``) image.

    Args:
        ref: an embedded image reference.

    Returns:
        Its bytes.

    Raises:
        ImageError: the reference carries no bytes.
    """
    if ref.data is None:
        raise ImageError(f"{ref.describe()}: embedded image has no bytes")
    return ref.data


@functools.lru_cache(maxsize=65_536)
def _hash_file(path: str, size: int, mtime_ns: int, inode: int, device: int) -> str:
    """Hash of a file's bytes; the stat fields are part of the cache key only."""
    what = f"path image {path!r}"
    digest = hashlib.sha256()
    read = 0
    # one buffer about the file's size (a read of 1 MiB would allocate 1 MiB however small the file)
    view = memoryview(bytearray(min(max(size + 1, 1 << 16), 1 << 20)))
    with open_image_file(path, what) as handle:
        try:
            while count := cast(io.BufferedReader, handle).readinto(view):
                read += count
                if read > files.MAX_IMAGE_BYTES:  # a file that grew, or one whose stat size is 0 (/proc)
                    raise ImageError(f"{what}: file holds more than the limit of {files.MAX_IMAGE_BYTES} bytes")
                digest.update(view[:count])
        except OSError as exc:
            raise ImageError(f"{what}: cannot read file ({exc.strerror or exc})") from exc
    return digest.hexdigest()


@functools.lru_cache(maxsize=256)
def _hash_builtin(name: str) -> str:
    return hashlib.sha256(builtin_bytes(name, f"builtin image {name!r}")).hexdigest()


def _split_builtin(name: str, what: str) -> tuple[str, str]:
    package, sep, item = name.partition(":")
    if not sep or not item or package not in ("pydicom", "skimage"):
        raise ImageError(f"{what}: builtin names look like 'pydicom:CT_small.dcm' or 'skimage:retina'")
    return package, item


def builtin_file(name: str, what: str) -> Path | None:
    """The file behind a builtin image, or None for a skimage image that ships no file.

    Args:
        name: ``"pydicom:FILE"`` or ``"skimage:NAME"``.
        what: the image as messages name it.

    Returns:
        The installed file, or None.

    Raises:
        ImageError: a malformed or unknown name, or a test file pydicom does not ship locally.
    """
    package, item = _split_builtin(name, what)
    if package == "pydicom":
        from pydicom.data import get_testdata_file

        try:
            found = get_testdata_file(item, download=False)
        except Exception as exc:
            raise ImageError(f"{what}: pydicom cannot look up this test file ({short_reason(exc)})") from exc
        if found is None or not isinstance(found, str):
            raise ImageError(f"{what}: pydicom does not ship this test file locally")
        return Path(found)
    if item not in SKIMAGE_BUILTINS:
        raise ImageError(f"{what}: unknown skimage image; available: {', '.join(sorted(SKIMAGE_BUILTINS))}")
    import skimage.data

    candidate = Path(skimage.data.__file__).parent / SKIMAGE_BUILTINS[item]
    return candidate if candidate.is_file() else None


def _skimage_array_png(item: str, what: str) -> bytes:
    """Encode a skimage.data array as PNG for installs that keep no file for it."""
    import numpy as np
    import skimage.data

    try:
        array = np.asarray(getattr(skimage.data, item)())
    except Exception as exc:
        raise ImageError(f"{what}: scikit-image cannot provide it offline ({short_reason(exc)})") from exc
    if array.dtype != np.uint8:
        low, high = finite_range(array)
        # skimage returns floats in [0, 1] for synthetic images; keep that scale when it applies.
        array = scale_to_uint8(array, *((0.0, 1.0) if low >= 0.0 and high <= 1.0 else (low, high)))
    return encode_png(Image.fromarray(array))


def builtin_bytes(name: str, what: str) -> bytes:
    """The encoded bytes of a builtin image (its file, or its array encoded as PNG).

    Args:
        name: ``"pydicom:FILE"`` or ``"skimage:NAME"``.
        what: the image as messages name it.

    Returns:
        The bytes; the same for the same installed packages.

    Raises:
        ImageError: the builtin cannot be found or read.
    """
    path = builtin_file(name, what)
    if path is None:
        logger.debug("%s: no file in the scikit-image package; encoding its array as PNG", what)
        return _skimage_array_png(_split_builtin(name, what)[1], what)
    return read_image_file(path, what)
