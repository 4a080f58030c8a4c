"""Images for the API judge: ``data:`` URLs, sent as they are where possible, cached per content."""

from __future__ import annotations

import base64
import io
import os
import threading
from collections import OrderedDict

from PIL import Image

from medrewardbench.errors import ImageError
from medrewardbench.images import files as image_files
from medrewardbench.images.decode import load_image
from medrewardbench.images.dicom import looks_like_dicom
from medrewardbench.images.headers import plain_jpeg, plain_png
from medrewardbench.images.pixels import encode_png, to_rgb
from medrewardbench.images.refs import ImageRef, raw_image_bytes

INLINE_IMAGE_BYTES = 1 << 20
"""Images that can go out as they are and are at most this size are prepared on the event loop."""

_MIME_TYPES: dict[str, str] = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "JPG": "image/jpeg",
    "WEBP": "image/webp",
    "GIF": "image/gif",
}

_EXIF_ORIENTATION = 0x0112


class DataUrl(str):
    """A ``data:`` URL this module made: ``data:<MIME type>;base64,`` and base64 characters, nothing else.

    A JSON encoder escapes none of its characters, so a request body can carry it as it is
    (:func:`medrewardbench.models.api.direct.encode_body`) without scanning its tens of kilobytes
    to find that out: the scan of one 60 kB image cost a quarter of a millisecond, a third of the
    judge's own CPU per image. It is a plain ``str`` in every other respect.
    """

    __slots__ = ()


def _data_url(mime: str, payload: bytes) -> DataUrl:
    return DataUrl(f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}")


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
            image = to_rgb(image)
        buffer = io.BytesIO()
        image.save(buffer, format=pil_format, quality=quality)
        payload = buffer.getvalue()
    return _data_url(_MIME_TYPES[fmt], payload)


def passthrough_data_url(ref: ImageRef) -> str | None:
    """The image's own bytes as a ``data:`` URL, when a vision API reads them as :func:`load_image` would.

    Decoding an image and encoding it again as PNG costs tens to hundreds of milliseconds for a
    megapixel scan, and a JPEG grows several times over. Any OpenAI-compatible vision endpoint
    reads PNG, JPEG and WebP itself, so such files can be sent as they are when decoding them
    gives the same 8-bit pixels as :func:`load_image`. Everything else is left to
    :func:`to_data_url`. That covers DICOM, 16-bit or palette images, alpha channels, CMYK, EXIF
    rotation, animation, other formats, and images over
    :data:`~medrewardbench.images.files.MAX_IMAGE_PIXELS`. It also covers files whose structure
    does not check out: a PNG with a bad chunk CRC, a JPEG without its end marker, or a WebP whose
    RIFF size is wrong. For those, the usual path gives the usual error.

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
    if looks_like_dicom(payload[: image_files.HEAD_BYTES], ref.location):
        return None
    fmt = _passthrough_format(payload)
    if fmt is None:
        return None
    if fmt == "PNG" and b"eXIf" in payload:
        # PIL reads a PNG's EXIF only by decoding it (the chunk may follow the pixels): a file that
        # may carry one (a rotation, which load_image applies) takes the usual path
        return None
    if not _plain_by_header(payload, fmt) and not _plain_by_pil(payload, fmt):
        return None
    return _data_url(_MIME_TYPES[fmt], payload)


def _plain_by_header(payload: bytes, fmt: str) -> bool:
    """The quick check (:mod:`medrewardbench.images.headers`): True only where PIL would say so too."""
    limit = image_files.MAX_IMAGE_PIXELS
    if Image.MAX_IMAGE_PIXELS is not None:  # past it PIL warns, past twice it refuses: PIL decides
        limit = min(limit, Image.MAX_IMAGE_PIXELS)
    if fmt == "PNG":
        return plain_png(payload, limit)
    if fmt == "JPEG":
        return plain_jpeg(payload, limit)
    return False


def _plain_by_pil(payload: bytes, fmt: str) -> bool:
    """Whether PIL, reading the header (no pixel decoded), finds one plain 8-bit L or RGB frame."""
    try:
        with Image.open(io.BytesIO(payload), formats=[fmt]) as image:
            if (
                image.mode not in ("RGB", "L")
                or "transparency" in image.info
                or getattr(image, "is_animated", False)
                or image.width * image.height > image_files.MAX_IMAGE_PIXELS
            ):
                return False
            if fmt == "PNG":
                image.verify()  # every chunk's CRC, up to IEND; no pixel decoding
            elif image.getexif().get(_EXIF_ORIENTATION, 1) not in (0, 1):
                return False
    except Exception:
        return False
    return True


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


class DataUrlCache:
    """A small thread-safe LRU of image data URLs keyed by image content hash.

    Encoding that needs decoding (decode, PNG, base64) runs in worker threads; concurrent requests
    for the same image wait for one encoding instead of repeating it.

    Args:
        size: how many data URLs to keep (0 keeps none).
        passthrough: send PNG, JPEG and WebP files as they are where that gives the same pixels
            (:func:`passthrough_data_url`); False always decodes and re-encodes.
    """

    def __init__(self, size: int = 32, passthrough: bool = True) -> None:
        self._size = max(size, 0)
        self.passthrough = passthrough
        self._entries: OrderedDict[str, str] = OrderedDict()
        # the same ImageRef object again (both orders of a case, cases sharing an image) is answered
        # on the event loop without hashing its bytes in a worker thread; holding the reference keeps
        # its id from being reused while the entry lives
        self._by_identity: OrderedDict[int, tuple[ImageRef, str]] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def lookup(self, image: ImageRef) -> str | None:
        """The data URL of this very object if it was encoded recently (cheap; call on the loop)."""
        with self._lock:
            entry = self._by_identity.get(id(image))
            if entry is None or entry[0] is not image:
                return None
            self._by_identity.move_to_end(id(image))
            self.hits += 1
            return entry[1]

    def count_miss(self) -> None:
        """Count a miss that was served without :meth:`get` (an image sent as it is)."""
        with self._lock:
            self.misses += 1

    def remember(self, image: ImageRef, url: str) -> None:
        """Let :meth:`lookup` answer for this object."""
        if not self._size:
            return
        with self._lock:
            self._by_identity[id(image)] = (image, url)
            self._by_identity.move_to_end(id(image))
            while len(self._by_identity) > self._size:
                self._by_identity.popitem(last=False)

    def get(self, image: ImageRef) -> str:
        """The data URL of ``image``, encoding it on a miss (call from a worker thread)."""
        key = image.content_hash()
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return cached
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                cached = self._entries.get(key)
                if cached is not None:
                    self.hits += 1
                    return cached
                self.misses += 1
            url = (passthrough_data_url(image) if self.passthrough else None) or to_data_url(image, compress_level=1)
            with self._lock:
                if self._size:
                    self._entries[key] = url
                    while len(self._entries) > self._size:
                        self._entries.popitem(last=False)
                self._key_locks.pop(key, None)
        return url


def inline_data_url(image: ImageRef) -> str | None:
    """A small file that can go out as it is, read and encoded on the calling thread; else ``None``.

    Args:
        image: the image reference.

    Returns:
        The file's own bytes as a data URL when it is at most :data:`INLINE_IMAGE_BYTES` and
        :func:`passthrough_data_url` accepts it; ``None`` otherwise (the caller then encodes it
        in a worker thread, which also reports any problem with the file).
    """
    if image.kind == "bytes" and image.data is not None:
        size = len(image.data)
    elif image.kind == "path":
        try:
            size = os.stat(image.location).st_size
        except OSError:
            return None  # the worker path reports the problem
    else:
        return None
    return passthrough_data_url(image) if size <= INLINE_IMAGE_BYTES else None
