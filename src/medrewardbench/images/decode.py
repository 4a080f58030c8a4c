"""Image decoding for cases: PIL formats, DICOM, and images shipped inside installed packages.

Every image a judge sees goes through :func:`load_image`, which returns an 8-bit RGB
:class:`PIL.Image.Image` or raises :class:`~medrewardbench.errors.ImageError` naming the image.
DICOM is rendered by :mod:`medrewardbench.images.dicom`; files are read through
:mod:`medrewardbench.images.files` (regular files only, bounded in bytes and pixels).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

from PIL import Image, ImageOps, UnidentifiedImageError

from medrewardbench.errors import ImageError
from medrewardbench.images.dicom import decode_dicom, dicom_dimensions, looks_like_dicom, read_dicom
from medrewardbench.images.files import check_pixel_count, open_image_file, read_head, short_reason, source_head
from medrewardbench.images.pixels import to_rgb
from medrewardbench.images.refs import ImageRef, builtin_bytes, builtin_file, embedded_bytes


def load_image(ref: ImageRef) -> Image.Image:
    """Decode an image reference to an 8-bit RGB PIL image.

    Args:
        ref: the image to decode.

    Returns:
        A fully loaded PIL image in mode ``"RGB"``.

    Raises:
        ImageError: the case has no image, the file is missing, unreadable, corrupt or truncated,
            its format is unknown, its DICOM pixel data needs a decoder that is not installed, or
            it is larger than :data:`~medrewardbench.images.files.MAX_IMAGE_PIXELS`. The message names the image.
    """
    if ref.kind == "none":
        raise ImageError("case has no image")
    if ref.kind == "path":
        return _load_path(Path(ref.location), ref.describe())
    if ref.kind == "bytes":
        return _load_bytes(embedded_bytes(ref), ref.location, ref.describe())
    if ref.kind == "builtin":
        return _load_builtin(ref.location, ref.describe())
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
        resolved = builtin_file(ref.location, what)
        if resolved is None:
            return load_image(ref).size
        source: Path | bytes = resolved
        name = resolved.name
    elif ref.kind == "path":
        source = Path(ref.location)
        name = source.name
    else:
        source = embedded_bytes(ref)
        name = ref.location
    head = source_head(source, what)
    if looks_like_dicom(head, name):
        ds = read_dicom(source, what, stop_before_pixels=True)
        rows, columns = dicom_dimensions(ds, what)
        return columns, rows
    try:
        handle = open_image_file(source, what) if isinstance(source, Path) else io.BytesIO(source)
        with handle, Image.open(handle) as image:
            width, height = image.size
            return int(width), int(height)
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageError(f"{what}: refused as a possible decompression bomb ({exc})") from exc
    except Exception as exc:
        raise ImageError(f"{what}: cannot read image header ({short_reason(exc)})") from exc


def _load_builtin(name: str, what: str) -> Image.Image:
    path = builtin_file(name, what)
    if path is None:
        return _load_bytes(builtin_bytes(name, what), "image.png", what)
    return _load_path(path, what)


def _load_path(path: Path, what: str) -> Image.Image:
    with open_image_file(path, what) as handle:
        if not looks_like_dicom(read_head(handle, what), path.name):
            return _decode_pil(handle, what)
    # pydicom opens the file itself (it reads large values lazily); it was checked just above
    return decode_dicom(path, what)


def _load_bytes(data: bytes, name: str, what: str) -> Image.Image:
    if not data:
        raise ImageError(f"{what}: embedded image is empty")
    if looks_like_dicom(data, name):
        return decode_dicom(data, what)
    return _decode_pil(io.BytesIO(data), what)


def _decode_pil(source: Path | BinaryIO, what: str) -> Image.Image:
    try:
        with Image.open(source) as image:
            check_pixel_count(image.width, image.height, what)
            image.load()
            oriented = ImageOps.exif_transpose(image)
            return to_rgb(oriented if oriented is not None else image)
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageError(f"{what}: refused as a possible decompression bomb ({exc})") from exc
    except UnidentifiedImageError as exc:
        raise ImageError(f"{what}: not a recognised image format") from exc
    except Exception as exc:
        # PIL's plugins raise OSError, SyntaxError, ValueError, EOFError, struct.error and more
        # on corrupt input; all of them mean the same thing here.
        raise ImageError(f"{what}: corrupt or truncated image ({short_reason(exc)})") from exc
