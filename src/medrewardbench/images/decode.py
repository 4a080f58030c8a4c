"""Image decoding for cases: PIL formats, DICOM, and images shipped inside installed packages.

Every image a judge sees goes through :func:`load_image`, which returns an 8-bit RGB
:class:`PIL.Image.Image` or raises :class:`~medrewardbench.errors.ImageError` naming the image.

DICOM is rendered the way a viewer would show it by default: the modality LUT (rescale slope and
intercept), then the VOI LUT or the first window in the file (or the frame's min/max when the file
has none), MONOCHROME1 inverted, palette colour looked up, YBR converted to RGB. Multi-frame data
shows its middle frame.

Builtin images are named ``"pydicom:<test file name>"`` (any file
:func:`pydicom.data.get_testdata_file` finds locally, see :data:`BUILTIN_IMAGES` for those that
decode with the default dependencies) or ``"skimage:<name>"`` for the
:data:`SKIMAGE_BUILTINS` of ``skimage.data``. Nothing is ever downloaded.

Untrusted files are guarded against decompression bombs by :data:`MAX_IMAGE_PIXELS`, which can be
set with the environment variable ``MEDREWARDBENCH_MAX_IMAGE_PIXELS``. Only regular files are
read (a named pipe, device, socket or directory is refused before it is opened, so that nothing can
block or read for ever), and files larger than :data:`MAX_IMAGE_BYTES`
(``MEDREWARDBENCH_MAX_IMAGE_BYTES``) are refused before they are read.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
from PIL import Image, ImageOps

from medrewardbench.cases import ImageRef
from medrewardbench.errors import ImageError
from medrewardbench.images.files import FileRefused, check_regular_file, open_regular_file, read_regular_file

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

logger = logging.getLogger(__name__)

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

_MIME_TYPES: dict[str, str] = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "JPG": "image/jpeg",
    "WEBP": "image/webp",
    "GIF": "image/gif",
}

_EMPTY_HASH = hashlib.sha256(b"").hexdigest()
_EXIF_ORIENTATION = 0x0112
_DICOM_MAGIC_OFFSET = 128
_DICOM_MAGIC = b"DICM"
_HIGH_BIT_DEPTH_MODES = frozenset({"I", "F", "I;16", "I;16L", "I;16B", "I;16N"})


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def load_image(ref: ImageRef) -> Image.Image:
    """Decode an image reference to an 8-bit RGB PIL image.

    Args:
        ref: the image to decode.

    Returns:
        A fully loaded PIL image in mode ``"RGB"``.

    Raises:
        ImageError: the case has no image, the file is missing, unreadable, corrupt or truncated,
            its format is unknown, its DICOM pixel data needs a decoder that is not installed, or
            it is larger than :data:`MAX_IMAGE_PIXELS`. The message names the image.
    """
    if ref.kind == "none":
        raise ImageError("case has no image")
    if ref.kind == "path":
        return _load_path(Path(ref.location), ref.describe())
    if ref.kind == "bytes":
        return _load_bytes(_require_data(ref), ref.location, ref.describe())
    if ref.kind == "builtin":
        return _load_builtin(ref.location, ref.describe())
    raise ImageError(f"{ref.describe()}: unknown image reference kind {ref.kind!r}")


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
        return _read_file(Path(ref.location), ref.describe())
    if ref.kind == "bytes":
        return _require_data(ref)
    if ref.kind == "builtin":
        return _builtin_bytes(ref.location, ref.describe())
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
            :data:`MAX_IMAGE_BYTES`.
    """
    if ref.kind == "none":
        return _EMPTY_HASH
    if ref.kind == "path":
        what = ref.describe()
        stat = _check_file(ref.location, what)
        return _hash_file(os.path.realpath(ref.location), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev)
    if ref.kind == "bytes":
        return hashlib.sha256(_require_data(ref)).hexdigest()
    if ref.kind == "builtin":
        return _hash_builtin(ref.location)
    raise ImageError(f"{ref.describe()}: unknown image reference kind {ref.kind!r}")


def image_size(ref: ImageRef) -> tuple[int, int]:
    """Width and height of an image, read from its header without decoding pixels where possible.

    Args:
        ref: the image reference.

    Returns:
        ``(width, height)`` in pixels (one frame for multi-frame DICOM).

    Raises:
        ImageError: the case has no image or the header cannot be read.
    """
    if ref.kind == "none":
        raise ImageError("case has no image")
    what = ref.describe()
    if ref.kind == "builtin":
        resolved = _builtin_file(ref.location, what)
        if resolved is None:
            return load_image(ref).size
        source: Path | bytes = resolved
        name = resolved.name
    elif ref.kind == "path":
        source = Path(ref.location)
        name = source.name
    else:
        source = _require_data(ref)
        name = ref.location
    head = _head(source, what)
    if looks_like_dicom(head, name):
        ds = _read_dicom(source, what, stop_before_pixels=True)
        rows, columns = _dicom_dimensions(ds, what)
        return columns, rows
    try:
        handle = _open_file(source, what) if isinstance(source, Path) else io.BytesIO(source)
        with handle, Image.open(handle) as image:
            return image.size
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageError(f"{what}: refused as a possible decompression bomb ({exc})") from exc
    except Exception as exc:
        raise ImageError(f"{what}: cannot read image header ({_reason(exc)})") from exc


def looks_like_dicom(head: bytes, name: str = "") -> bool:
    """Whether bytes (at least the first 132 of a file) or a file name indicate DICOM.

    Args:
        head: the start of the file.
        name: the file name, if known; a ``.dcm``/``.dicom`` suffix counts as DICOM.

    Returns:
        True for the ``DICM`` magic at byte 128 or a DICOM file suffix.
    """
    if head[_DICOM_MAGIC_OFFSET : _DICOM_MAGIC_OFFSET + 4] == _DICOM_MAGIC:
        return True
    return name.lower().endswith((".dcm", ".dicom"))


def encode_png(image: Image.Image, compress_level: int = 6) -> bytes:
    """Encode a PIL image as PNG, deterministically (same pixels and level, same bytes).

    Args:
        image: any PIL image.
        compress_level: zlib level (0-9); 1 is several times faster than 6 on noisy scans.

    Returns:
        The PNG file bytes.
    """
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=compress_level)
    return buffer.getvalue()


def to_data_url(
    image_or_ref: Image.Image | ImageRef, format: str = "PNG", quality: int = 90, *, compress_level: int = 6
) -> str:
    """A base64 ``data:`` URL of an image, as API judges accept in image message parts.

    Args:
        image_or_ref: a PIL image, or a reference that is decoded first with :func:`load_image`.
        format: ``"PNG"`` (lossless, default), ``"JPEG"`` or ``"WEBP"``.
        quality: encoder quality for lossy formats.
        compress_level: zlib level for PNG (0-9). Level 1 is several times faster than 6 on
            photographs and noisy scans, for files about 10 % larger; the pixels are the same.

    Returns:
        ``"data:image/png;base64,..."`` (or the MIME type of the chosen format).

    Raises:
        ImageError: the reference cannot be decoded, or the format is not supported.
    """
    image = load_image(image_or_ref) if isinstance(image_or_ref, ImageRef) else image_or_ref
    fmt = format.upper()
    if fmt not in _MIME_TYPES:
        raise ImageError(f"unsupported data URL image format {format!r}; use one of {sorted(_MIME_TYPES)}")
    if fmt == "PNG":
        payload = encode_png(image, compress_level)
    else:
        pil_format = "JPEG" if fmt == "JPG" else fmt
        if pil_format == "JPEG" and image.mode not in ("RGB", "L"):
            image = _to_rgb(image)
        buffer = io.BytesIO()
        image.save(buffer, format=pil_format, quality=quality)
        payload = buffer.getvalue()
    return f"data:{_MIME_TYPES[fmt]};base64,{base64.b64encode(payload).decode('ascii')}"


def passthrough_data_url(ref: ImageRef) -> str | None:
    """The image's own bytes as a ``data:`` URL, when a vision API reads them as :func:`load_image` would.

    Decoding an image and encoding it again as PNG costs tens to hundreds of milliseconds for a
    megapixel scan, and a JPEG grows several times over. Any OpenAI-compatible vision endpoint
    reads PNG, JPEG and WebP itself, so such files can be sent as they are when decoding them
    gives the same 8-bit pixels as :func:`load_image`. Everything else is left to
    :func:`to_data_url`. That covers DICOM, 16-bit or palette images, alpha channels, CMYK, EXIF
    rotation, animation, other formats, and images over :data:`MAX_IMAGE_PIXELS`. It also covers
    files whose structure does not check out: a PNG with a bad chunk CRC, a JPEG without its end
    marker, or a WebP whose RIFF size is wrong. For those, the usual path gives the usual error.

    Only the header is parsed; no pixel is decoded.

    Args:
        ref: the image reference.

    Returns:
        ``"data:image/png;base64,..."`` (or jpeg, webp) with the original bytes, or ``None``.
    """
    if ref.kind == "none":
        return None
    try:
        payload = raw_image_bytes(ref)
    except ImageError:
        return None
    if looks_like_dicom(payload[: _DICOM_MAGIC_OFFSET + 4], ref.location):
        return None
    fmt = _passthrough_format(payload)
    if fmt is None:
        return None
    try:
        with Image.open(io.BytesIO(payload), formats=[fmt]) as image:
            if (
                image.mode not in ("RGB", "L")
                or "transparency" in image.info
                or getattr(image, "is_animated", False)
                or image.width * image.height > MAX_IMAGE_PIXELS
            ):
                return None
            if fmt == "PNG":
                # PIL reads a PNG's EXIF only by decoding it (the chunk may follow the pixels): a
                # file that may carry one (a rotation, which load_image applies) takes the usual path
                if b"eXIf" in payload:
                    return None
                image.verify()  # every chunk's CRC, up to IEND; no pixel decoding
            elif image.getexif().get(_EXIF_ORIENTATION, 1) not in (0, 1):
                return None
    except Exception:
        return None
    return f"data:{_MIME_TYPES[fmt]};base64,{base64.b64encode(payload).decode('ascii')}"


def _passthrough_format(payload: bytes) -> str | None:
    """PNG, JPEG or WEBP when the bytes start (and, where the format says so, end) as they should."""
    if payload.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if payload.startswith(b"\xff\xd8\xff"):
        # a JPEG cut short loses its end-of-image marker; some writers pad after it
        return "JPEG" if payload.rstrip(b"\x00\r\n ").endswith(b"\xff\xd9") else None
    if payload[:4] == b"RIFF" and payload[8:12] == b"WEBP":
        return "WEBP" if int.from_bytes(payload[4:8], "little") + 8 == len(payload) else None
    return None


@dataclass(frozen=True)
class DicomDisplay:
    """What a viewer needs to offer window/level control over a DICOM image."""

    monochrome: bool
    """Whether window/level applies (MONOCHROME1/2); colour images are shown as they are."""
    modality: str | None
    """The DICOM Modality (``"CT"``, ``"MR"``, ...), if given."""
    units: str | None
    """``"HU"`` for CT or a rescale type of HU, else the rescale type, if any."""
    center: float
    """The window the default rendering uses (the file's first window, else the value range)."""
    width: float
    minimum: float
    """Smallest and largest value after the modality LUT, over the shown frame."""
    maximum: float
    rows: int
    columns: int


def is_dicom(ref: ImageRef) -> bool:
    """Whether an image reference points at DICOM data (magic bytes or file suffix).

    Args:
        ref: the image reference.

    Returns:
        True for DICOM; False for other formats and for no image.

    Raises:
        ImageError: the file cannot be read.
    """
    if ref.kind == "none":
        return False
    source, name = _dicom_source(ref)
    return looks_like_dicom(_head(source, ref.describe()), name)


def dicom_display(ref: ImageRef) -> DicomDisplay:
    """The default window and value range of a DICOM image's shown (middle) frame.

    Args:
        ref: a DICOM image reference.

    Returns:
        The display facts a window/level control needs.

    Raises:
        ImageError: not DICOM, or the pixel data cannot be decoded.
    """
    from pydicom.pixels import apply_modality_lut

    what = ref.describe()
    ds, frame, photometric, index = _dicom_frame_for(ref, what)
    rows, columns = _dicom_dimensions(ds, what)
    modality = str(ds.get("Modality") or "").strip() or None
    rescale_type = str(ds.get("RescaleType") or "").strip() or None
    units = "HU" if modality == "CT" or rescale_type == "HU" else rescale_type
    monochrome = photometric in ("MONOCHROME1", "MONOCHROME2") or (frame.ndim == 2 and photometric == "")
    if not monochrome:
        return DicomDisplay(False, modality, units, 127.5, 256.0, 0.0, 255.0, rows, columns)
    view = _frame_view(ds, index)
    values = apply_modality_lut(frame, view).astype(np.float64)
    low, high = _finite_range(values)
    window = None if view.get("VOILUTSequence") else _window(view)
    center, width = (window[0], window[1]) if window is not None else ((low + high) / 2.0, max(high - low, 1.0))
    return DicomDisplay(True, modality, units, float(center), float(width), low, high, rows, columns)


def render_dicom_window(ref: ImageRef, center: float, width: float) -> Image.Image:
    """Render a DICOM image with a chosen window instead of the file's own (window/level).

    The same path as :func:`load_image` (modality LUT, MONOCHROME1 inversion, middle frame of a
    multi-frame object), with a linear window of the given center and width in modality units
    (Hounsfield units for CT). Colour images have no window and come back as :func:`load_image`
    renders them.

    Args:
        ref: a DICOM image reference.
        center: window center (level).
        width: window width, at least 1.

    Returns:
        An 8-bit RGB image.

    Raises:
        ImageError: not DICOM, an invalid window, or pixel data that cannot be decoded.
    """
    what = ref.describe()
    if not (np.isfinite(center) and np.isfinite(width)) or width < 1:
        raise ImageError(f"{what}: invalid window (center {center}, width {width}); the width must be >= 1")
    ds, frame, photometric, index = _dicom_frame_for(ref, what)
    try:
        rgb = _render_frame(frame, photometric, ds, index, window_override=(float(center), float(width)))
    except ImageError as exc:
        raise ImageError(f"{what}: {exc}") from exc
    except Exception as exc:
        raise ImageError(f"{what}: cannot render DICOM pixel data ({_reason(exc)})") from exc
    return Image.fromarray(rgb, mode="RGB")


def _dicom_source(ref: ImageRef) -> tuple[Path | bytes, str]:
    what = ref.describe()
    if ref.kind == "path":
        return Path(ref.location), Path(ref.location).name
    if ref.kind == "bytes":
        return _require_data(ref), ref.location
    if ref.kind == "builtin":
        resolved = _builtin_file(ref.location, what)
        if resolved is None:
            return _builtin_bytes(ref.location, what), "image.png"
        return resolved, resolved.name
    raise ImageError(f"{what}: no image")


def _dicom_frame_for(ref: ImageRef, what: str) -> tuple[Dataset, np.ndarray, str, int]:
    source, name = _dicom_source(ref)
    if not looks_like_dicom(_head(source, what), name):
        raise ImageError(f"{what}: not a DICOM image")
    ds = _read_dicom(source, what)
    if not any(keyword in ds for keyword in ("PixelData", "FloatPixelData", "DoubleFloatPixelData")):
        raise ImageError(f"{what}: DICOM file has no pixel data")
    rows, columns = _dicom_dimensions(ds, what)
    _check_pixel_count(columns, rows, what)
    try:
        frames = int(ds.get("NumberOfFrames") or 1)
    except (TypeError, ValueError):
        frames = 1
    index = max(frames, 1) // 2
    frame, photometric = _decode_dicom_frame(ds, index, what)
    return ds, frame, photometric, index


def clear_hash_cache() -> None:
    """Forget cached content hashes (they are otherwise kept for the life of the process)."""
    _hash_file.cache_clear()
    _hash_builtin.cache_clear()


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------


def _require_data(ref: ImageRef) -> bytes:
    if ref.data is None:
        raise ImageError(f"{ref.describe()}: embedded image has no bytes")
    return ref.data


def _check_file(path: str | Path, what: str) -> os.stat_result:
    """Refuse, before opening, anything but a regular file of at most MAX_IMAGE_BYTES."""
    try:
        return check_regular_file(path, MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV)
    except FileRefused as exc:
        raise ImageError(f"{what}: {exc}") from exc


def _open_file(path: str | Path, what: str) -> BinaryIO:
    try:
        return open_regular_file(path, MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV)
    except FileRefused as exc:
        raise ImageError(f"{what}: {exc}") from exc


def _read_file(path: Path, what: str) -> bytes:
    try:
        return read_regular_file(path, MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_ENV)
    except FileRefused as exc:
        raise ImageError(f"{what}: {exc}") from exc


def _read_head(handle: BinaryIO, what: str) -> bytes:
    try:
        head = handle.read(_DICOM_MAGIC_OFFSET + 4)
        handle.seek(0)
    except OSError as exc:
        raise ImageError(f"{what}: cannot read file ({exc.strerror or exc})") from exc
    return head


def _head(source: Path | bytes, what: str) -> bytes:
    if isinstance(source, bytes):
        return source[: _DICOM_MAGIC_OFFSET + 4]
    with _open_file(source, what) as handle:
        return _read_head(handle, what)


@functools.lru_cache(maxsize=65_536)
def _hash_file(path: str, size: int, mtime_ns: int, inode: int, device: int) -> str:
    """Hash of a file's bytes; the stat fields are part of the cache key only."""
    what = f"path image {path!r}"
    digest = hashlib.sha256()
    read = 0
    with _open_file(path, what) as handle:
        try:
            for block in iter(lambda: handle.read(1 << 20), b""):
                read += len(block)
                if read > MAX_IMAGE_BYTES:  # a file that grew, or one whose stat size is 0 (/proc)
                    raise ImageError(f"{what}: file holds more than the limit of {MAX_IMAGE_BYTES} bytes")
                digest.update(block)
        except OSError as exc:
            raise ImageError(f"{what}: cannot read file ({exc.strerror or exc})") from exc
    return digest.hexdigest()


@functools.lru_cache(maxsize=256)
def _hash_builtin(name: str) -> str:
    return hashlib.sha256(_builtin_bytes(name, f"builtin image {name!r}")).hexdigest()


def _split_builtin(name: str, what: str) -> tuple[str, str]:
    package, sep, item = name.partition(":")
    if not sep or not item or package not in ("pydicom", "skimage"):
        raise ImageError(f"{what}: builtin names look like 'pydicom:CT_small.dcm' or 'skimage:retina'")
    return package, item


def _builtin_file(name: str, what: str) -> Path | None:
    """The file behind a builtin image, or None for a skimage image that ships no file."""
    package, item = _split_builtin(name, what)
    if package == "pydicom":
        from pydicom.data import get_testdata_file

        try:
            found = get_testdata_file(item, download=False)
        except Exception as exc:
            raise ImageError(f"{what}: pydicom cannot look up this test file ({_reason(exc)})") from exc
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
    import skimage.data

    try:
        array = np.asarray(getattr(skimage.data, item)())
    except Exception as exc:
        raise ImageError(f"{what}: scikit-image cannot provide it offline ({_reason(exc)})") from exc
    if array.dtype != np.uint8:
        low, high = _finite_range(array)
        # skimage returns floats in [0, 1] for synthetic images; keep that scale when it applies.
        array = _scale_to_uint8(array, *((0.0, 1.0) if low >= 0.0 and high <= 1.0 else (low, high)))
    return encode_png(Image.fromarray(array))


def _builtin_bytes(name: str, what: str) -> bytes:
    path = _builtin_file(name, what)
    if path is None:
        logger.debug("%s: no file in the scikit-image package; encoding its array as PNG", what)
        return _skimage_array_png(_split_builtin(name, what)[1], what)
    return _read_file(path, what)


def _load_builtin(name: str, what: str) -> Image.Image:
    path = _builtin_file(name, what)
    if path is None:
        return _load_bytes(_builtin_bytes(name, what), "image.png", what)
    return _load_path(path, what)


def _load_path(path: Path, what: str) -> Image.Image:
    with _open_file(path, what) as handle:
        if not looks_like_dicom(_read_head(handle, what), path.name):
            return _decode_pil(handle, what)
    # pydicom opens the file itself (it reads large values lazily); it was checked just above
    return _decode_dicom(path, what)


def _load_bytes(data: bytes, name: str, what: str) -> Image.Image:
    if not data:
        raise ImageError(f"{what}: embedded image is empty")
    if looks_like_dicom(data, name):
        return _decode_dicom(data, what)
    return _decode_pil(io.BytesIO(data), what)


def _reason(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, shortened; pydicom puts the useful part on later lines."""
    message = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if len(message) > limit:
        message = message[: limit - 3] + "..."
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _check_pixel_count(width: int, height: int, what: str) -> None:
    limit = MAX_IMAGE_PIXELS
    if width * height > limit:
        raise ImageError(
            f"{what}: refused as a possible decompression bomb ({width}x{height} = {width * height} pixels "
            f"exceeds the limit of {limit}; raise it with {MAX_IMAGE_PIXELS_ENV})"
        )


# ---------------------------------------------------------------------------------------------
# PIL formats
# ---------------------------------------------------------------------------------------------


def _decode_pil(source: Path | BinaryIO, what: str) -> Image.Image:
    try:
        with Image.open(source) as image:
            _check_pixel_count(image.width, image.height, what)
            image.load()
            oriented = ImageOps.exif_transpose(image)
            return _to_rgb(oriented if oriented is not None else image)
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageError(f"{what}: refused as a possible decompression bomb ({exc})") from exc
    except Image.UnidentifiedImageError as exc:
        raise ImageError(f"{what}: not a recognised image format") from exc
    except Exception as exc:
        # PIL's plugins raise OSError, SyntaxError, ValueError, EOFError, struct.error and more
        # on corrupt input; all of them mean the same thing here.
        raise ImageError(f"{what}: corrupt or truncated image ({_reason(exc)})") from exc


def _to_rgb(image: Image.Image) -> Image.Image:
    """Convert any PIL mode to 8-bit RGB, stretching high-bit-depth grey to the full range."""
    if image.mode == "RGB":
        return image.copy()
    if image.mode in _HIGH_BIT_DEPTH_MODES:
        array = np.asarray(image).astype(np.float64)
        grey = _scale_to_uint8(array, *_finite_range(array))
        return Image.fromarray(grey).convert("RGB")
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        # Transparent areas become black, the background radiology images are read on.
        background = Image.new("RGBA", rgba.size, (0, 0, 0, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


# ---------------------------------------------------------------------------------------------
# DICOM
# ---------------------------------------------------------------------------------------------


def _read_dicom(source: Path | bytes, what: str, stop_before_pixels: bool = False) -> Dataset:
    import pydicom
    from pydicom.errors import InvalidDicomError

    fp: str | BinaryIO = str(source) if isinstance(source, Path) else io.BytesIO(source)
    forced = False
    try:
        try:
            ds = pydicom.dcmread(fp, defer_size="1 MB", stop_before_pixels=stop_before_pixels)
        except InvalidDicomError:
            # Files without the 128-byte preamble and 'DICM' (old ACR-NEMA style) still parse.
            if not isinstance(fp, str):
                fp.seek(0)
            forced = True
            ds = pydicom.dcmread(fp, defer_size="1 MB", stop_before_pixels=stop_before_pixels, force=True)
    except Exception as exc:
        raise ImageError(f"{what}: not a readable DICOM file ({_reason(exc)})") from exc
    if forced and "SOPClassUID" not in ds and "Rows" not in ds:
        # force=True parses almost any bytes; without these it was not DICOM at all.
        raise ImageError(f"{what}: not a readable DICOM file (no DICOM header or image attributes)")
    _ensure_transfer_syntax(ds)
    return ds


def _ensure_transfer_syntax(ds: Dataset) -> None:
    """Files read with force=True may lack a transfer syntax; infer it from how they were read."""
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import ExplicitVRBigEndian, ExplicitVRLittleEndian, ImplicitVRLittleEndian

    meta = getattr(ds, "file_meta", None)
    if meta is not None and "TransferSyntaxUID" in meta:
        return
    implicit_vr, little_endian = getattr(ds, "original_encoding", (None, None))
    if implicit_vr is None or little_endian is None:
        return
    syntax = {
        (True, True): ImplicitVRLittleEndian,
        (False, True): ExplicitVRLittleEndian,
        (False, False): ExplicitVRBigEndian,
    }.get((bool(implicit_vr), bool(little_endian)))
    if syntax is None:
        return
    if meta is None:
        ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = syntax


def _dicom_dimensions(ds: Dataset, what: str) -> tuple[int, int]:
    try:
        rows = int(ds.Rows)
        columns = int(ds.Columns)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ImageError(f"{what}: DICOM file has no valid Rows/Columns ({_reason(exc)})") from exc
    if rows <= 0 or columns <= 0:
        raise ImageError(f"{what}: DICOM file has an empty image ({rows}x{columns})")
    return rows, columns


def _decode_dicom(source: Path | bytes, what: str) -> Image.Image:
    ds = _read_dicom(source, what)
    if not any(keyword in ds for keyword in ("PixelData", "FloatPixelData", "DoubleFloatPixelData")):
        raise ImageError(f"{what}: DICOM file has no pixel data")
    rows, columns = _dicom_dimensions(ds, what)
    _check_pixel_count(columns, rows, what)
    try:
        frames = int(ds.get("NumberOfFrames") or 1)
    except (TypeError, ValueError):
        frames = 1
    index = max(frames, 1) // 2
    frame, photometric = _decode_dicom_frame(ds, index, what)
    try:
        rgb = _render_frame(frame, photometric, ds, index)
    except ImageError as exc:
        raise ImageError(f"{what}: {exc}") from exc
    except Exception as exc:
        raise ImageError(f"{what}: cannot render DICOM pixel data ({_reason(exc)})") from exc
    return Image.fromarray(rgb, mode="RGB")


def _decode_dicom_frame(ds: Dataset, index: int, what: str) -> tuple[np.ndarray, str]:
    """Decode one frame; returns the array and its photometric interpretation after decoding."""
    from pydicom.pixels import get_decoder

    syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    if syntax is None:
        raise ImageError(f"{what}: DICOM file has no transfer syntax")
    try:
        decoder = get_decoder(syntax)
    except NotImplementedError as exc:
        raise ImageError(f"{what}: no DICOM decoder exists for transfer syntax {syntax.name!r}") from exc
    if not decoder.is_available:
        missing = "; ".join(decoder.missing_dependencies) or "no plugin"
        raise ImageError(
            f"{what}: pixel data is {syntax.name!r}, which needs a decoder that is not installed (options: {missing})"
        )
    try:
        # as_rgb: YBR_FULL(_422) comes back as RGB, and the returned metadata says so.
        options: dict[str, Any] = {"as_rgb": True}
        array, meta = decoder.as_array(ds, index=index, **options)
    except Exception as exc:
        raise ImageError(f"{what}: cannot decode DICOM pixel data ({syntax.name}; {_reason(exc)})") from exc
    photometric = str(meta.get("photometric_interpretation", ds.get("PhotometricInterpretation", "")))
    return array, photometric.strip().upper()


def _render_frame(
    frame: np.ndarray, photometric: str, ds: Dataset, index: int, window_override: tuple[float, float] | None = None
) -> np.ndarray:
    """Map one decoded frame to an (rows, columns, 3) uint8 array (``window_override``: center, width)."""
    if photometric in ("MONOCHROME1", "MONOCHROME2") or (frame.ndim == 2 and photometric == ""):
        grey = _render_monochrome(
            frame, ds, index, invert=photometric == "MONOCHROME1", window_override=window_override
        )
        return np.repeat(grey[:, :, np.newaxis], 3, axis=2)
    if photometric == "PALETTE COLOR":
        return _render_palette(frame, ds)
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ImageError(f"unexpected {photometric or 'unknown'} pixel array of shape {frame.shape}")
    if photometric in ("YBR_FULL", "YBR_FULL_422"):
        from pydicom.pixels import convert_color_space

        frame = convert_color_space(frame, photometric, "RGB")
    elif photometric not in ("RGB", "YBR_RCT", "YBR_ICT"):
        # YBR_RCT/ICT are undone by the JPEG 2000 codec; anything else has no conversion here.
        raise ImageError(f"photometric interpretation {photometric!r} is not supported")
    bits = int(ds.get("BitsStored") or 8)
    if frame.dtype == np.uint8 or bits <= 8:
        return np.clip(frame, 0, 255).astype(np.uint8)
    return _scale_to_uint8(frame.astype(np.float64), 0.0, float(2**bits - 1))


def _render_monochrome(
    frame: np.ndarray, ds: Dataset, index: int, invert: bool, window_override: tuple[float, float] | None = None
) -> np.ndarray:
    from pydicom.pixels import apply_modality_lut, apply_voi

    view = _frame_view(ds, index)
    values = apply_modality_lut(frame, view)
    if window_override is not None:
        unit = _apply_window(values.astype(np.float64), window_override[0], window_override[1], "LINEAR")
    elif view.get("VOILUTSequence"):
        lut_out = apply_voi(values if np.issubdtype(values.dtype, np.integer) else values.round(), view)
        lo, hi = _voi_lut_range(view)
        unit = _unit_scale(lut_out.astype(np.float64), lo, hi)
    else:
        window = _window(view)
        if window is not None:
            center, width, function = window
            unit = _apply_window(values.astype(np.float64), center, width, function)
        else:
            logger.debug("DICOM frame has no window; using its min/max")
            as_float = values.astype(np.float64)
            unit = _unit_scale(as_float, *_finite_range(as_float))
    if str(view.get("PresentationLUTShape", "")).upper() == "INVERSE":
        invert = not invert
    if invert:
        unit = 1.0 - unit
    return np.round(unit * 255.0).astype(np.uint8)


def _frame_view(ds: Dataset, index: int) -> Dataset:
    """The modality and VOI attributes that apply to one frame, as a flat dataset.

    Enhanced multi-frame objects keep rescale and window in functional groups rather than at
    the top level; per-frame values win over shared ones, which win over top-level ones.
    """
    from pydicom.dataset import Dataset

    keywords = (
        "PhotometricInterpretation",
        "BitsStored",
        "BitsAllocated",
        "PixelRepresentation",
        "RescaleSlope",
        "RescaleIntercept",
        "RescaleType",
        "ModalityLUTSequence",
        "WindowCenter",
        "WindowWidth",
        "VOILUTFunction",
        "VOILUTSequence",
        "PresentationLUTShape",
    )
    view = Dataset()
    if hasattr(ds, "file_meta"):
        view.file_meta = ds.file_meta
    for keyword in keywords:
        if keyword in ds:
            view[keyword] = ds[keyword]
    groups: list[Any] = []
    shared = ds.get("SharedFunctionalGroupsSequence")
    if shared:
        groups.append(shared[0])
    per_frame = ds.get("PerFrameFunctionalGroupsSequence")
    if per_frame and index < len(per_frame):
        groups.append(per_frame[index])
    for group in groups:
        for sequence_keyword in ("PixelValueTransformationSequence", "FrameVOILUTSequence"):
            sequence = group.get(sequence_keyword)
            if not sequence:
                continue
            for keyword in keywords:
                if keyword in sequence[0]:
                    view[keyword] = sequence[0][keyword]
    return view


def _window(view: Dataset) -> tuple[float, float, str] | None:
    """The first (center, width, function) of a dataset, or None if it has no usable window."""
    if "WindowCenter" not in view or "WindowWidth" not in view:
        return None
    try:
        center = _first_number(view["WindowCenter"].value)
        width = _first_number(view["WindowWidth"].value)
    except (TypeError, ValueError, IndexError):
        logger.debug("ignoring unreadable window %r/%r", view.get("WindowCenter"), view.get("WindowWidth"))
        return None
    function = str(view.get("VOILUTFunction") or "LINEAR").strip().upper()
    if function not in ("LINEAR", "LINEAR_EXACT", "SIGMOID"):
        logger.debug("unknown VOI LUT function %r; using LINEAR", function)
        function = "LINEAR"
    if not np.isfinite(center) or not np.isfinite(width):
        return None
    if width < 1 if function == "LINEAR" else width <= 0:
        logger.debug("ignoring invalid window width %s for %s", width, function)
        return None
    return center, width, function


def _first_number(value: Any) -> float:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        return float(value[0])
    return float(value)


def _apply_window(values: np.ndarray, center: float, width: float, function: str) -> np.ndarray:
    """DICOM PS3.3 C.11.2.1.2 windowing to the range [0, 1].

    Implemented here rather than with pydicom's ``apply_windowing`` because that one maps to an
    output range inferred from the stored bit depth, and 8-bit display needs [0, 1] exactly.
    """
    if function == "SIGMOID":
        return np.asarray(1.0 / (1.0 + np.exp(-4.0 * (values - center) / width)))
    if function == "LINEAR":
        center -= 0.5
        width -= 1.0
    low = center - width / 2.0
    high = center + width / 2.0
    if width <= 0:
        return np.where(values > high, 1.0, 0.0)
    scaled = (values - center) / width + 0.5
    return np.where(values <= low, 0.0, np.where(values > high, 1.0, np.clip(scaled, 0.0, 1.0)))


def _voi_lut_range(view: Dataset) -> tuple[float, float]:
    """Output range of the first VOI LUT: the extent of its entries (some declare 16 bits, use 12)."""
    from pydicom.pixels import apply_voi

    item = view.VOILUTSequence[0]
    entries, first_map = int(item.LUTDescriptor[0]) or 2**16, int(item.LUTDescriptor[1])
    table = apply_voi(np.arange(first_map, first_map + entries, dtype=np.int64), view).astype(np.float64)
    return float(table.min()), float(table.max())


def _render_palette(frame: np.ndarray, ds: Dataset) -> np.ndarray:
    from pydicom.pixels import apply_color_lut

    rgb = apply_color_lut(frame, ds)
    if rgb.dtype == np.uint8:
        return rgb
    descriptor = ds.RedPaletteColorLookupTableDescriptor
    entries, first_map = int(descriptor[0]) or 2**16, int(descriptor[1])
    full_table = apply_color_lut(np.arange(first_map, first_map + entries, dtype=np.int64), ds)
    # Some writers declare 16-bit entries but store 8-bit values; the whole table tells which.
    top = 255.0 if int(full_table.max()) <= 255 else 65535.0
    return _scale_to_uint8(rgb.astype(np.float64), 0.0, top)


# ---------------------------------------------------------------------------------------------
# Numeric helpers
# ---------------------------------------------------------------------------------------------


def _finite_range(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)] if np.issubdtype(values.dtype, np.floating) else values
    if finite.size == 0:
        return 0.0, 0.0
    return float(finite.min()), float(finite.max())


def _unit_scale(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Linearly map [low, high] to [0, 1], clipping; a flat image maps to 0."""
    if high <= low:
        return np.zeros(values.shape, dtype=np.float64)
    scaled = (np.nan_to_num(values, nan=low) - low) / (high - low)
    return np.clip(scaled, 0.0, 1.0)


def _scale_to_uint8(values: np.ndarray, low: float, high: float) -> np.ndarray:
    return np.round(_unit_scale(values.astype(np.float64), low, high) * 255.0).astype(np.uint8)
