"""What an annotator receives of an image: its pixels, re-encoded as PNG, and nothing else.

Image files carry text besides pixels: EXIF (camera, software, dates, free-text descriptions),
XMP, PNG text chunks, GIF and JPEG comments, ICC profile descriptions. Any of it may name a source,
the model that made a figure, or a patient, which would break the blinding of the review. So no
file is served as stored: the pixels are decoded (the EXIF orientation applied first, as a viewer
would show them), copied into a fresh image and written as a PNG that holds only them. PNG is
lossless, so the pixels a doctor sees are exactly those of the stored file (of its first frame,
as the judges see it too); DICOM is rendered the same way by the image module.
"""

from __future__ import annotations

import io

from PIL import Image, ImageOps

from medrewardbench.images.files import check_pixel_count
from medrewardbench.images.pixels import encode_png, to_rgb

_KEPT_MODES = frozenset({"1", "L", "LA", "RGB", "RGBA", "I;16", "I"})
"""Modes PNG stores as they are; the others are converted (palettes expanded, the rest to RGB)."""


def pixels_only_png(data: bytes, what: str = "image") -> bytes:
    """Re-encode a browser image (PNG, JPEG, GIF, WEBP, ...) as a PNG without any metadata.

    Args:
        data: the stored file.
        what: the image as messages name it.

    Returns:
        PNG bytes with only the IHDR, IDAT and IEND chunks: the pixels, oriented as EXIF says.

    Raises:
        ImageError: the image is larger than the pixel limit.
        OSError, ValueError, SyntaxError: PIL cannot decode it.
    """
    with Image.open(io.BytesIO(data)) as opened:
        check_pixel_count(opened.width, opened.height, what)
        opened.load()
        oriented = ImageOps.exif_transpose(opened)
        image = oriented if oriented is not None else opened
        if image.mode in ("P", "PA"):
            has_alpha = image.mode == "PA" or "transparency" in image.info
            image = image.convert("RGBA" if has_alpha else "RGB")
        elif image.mode not in _KEPT_MODES:
            image = to_rgb(image)
        # a fresh image from the raw pixels: no info dict, so nothing but pixels can be written
        clean = Image.frombytes(image.mode, image.size, image.tobytes())
    return encode_png(clean, compress_level=1)
