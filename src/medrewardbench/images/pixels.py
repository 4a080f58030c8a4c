"""Pixel arithmetic shared by the decoders: scaling to 8 bits, RGB conversion, PNG encoding.

numpy is imported where an array is made, here and in :mod:`~medrewardbench.images.dicom`: every
command imports these modules at start-up, and most (an API judge sending PNG or JPEG files as
they are) never make one.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from PIL import Image

if TYPE_CHECKING:
    import numpy as np


HIGH_BIT_DEPTH_MODES = frozenset({"I", "F", "I;16", "I;16L", "I;16B", "I;16N"})


def finite_range(values: np.ndarray) -> tuple[float, float]:
    """The smallest and largest finite value of an array (``(0, 0)`` when it has none).

    Args:
        values: any numeric array.

    Returns:
        ``(low, high)``.
    """
    import numpy as np

    finite = values[np.isfinite(values)] if np.issubdtype(values.dtype, np.floating) else values
    if finite.size == 0:
        return 0.0, 0.0
    return float(finite.min()), float(finite.max())


def unit_scale(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Linearly map [low, high] to [0, 1], clipping; a flat image maps to 0.

    Args:
        values: any numeric array (NaN counts as ``low``).
        low: the value mapped to 0.
        high: the value mapped to 1.

    Returns:
        A float64 array of the same shape.
    """
    import numpy as np

    if high <= low:
        return np.zeros(values.shape, dtype=np.float64)
    scaled = (np.nan_to_num(values, nan=low) - low) / (high - low)
    clipped: np.ndarray = np.clip(scaled, 0.0, 1.0)
    return clipped


def scale_to_uint8(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """Linearly map [low, high] to 0..255, clipping and rounding.

    Args:
        values: any numeric array.
        low: the value mapped to 0.
        high: the value mapped to 255.

    Returns:
        A uint8 array of the same shape.
    """
    import numpy as np

    return np.round(unit_scale(values.astype(np.float64), low, high) * 255.0).astype(np.uint8)


def to_rgb(image: Image.Image) -> Image.Image:
    """Convert any PIL mode to 8-bit RGB, stretching high-bit-depth grey to the full range.

    Args:
        image: a PIL image in any mode.

    Returns:
        A new image in mode ``"RGB"``; transparent areas become black.
    """
    if image.mode == "RGB":
        return image.copy()
    if image.mode in HIGH_BIT_DEPTH_MODES:
        import numpy as np

        array = np.asarray(image).astype(np.float64)
        grey = scale_to_uint8(array, *finite_range(array))
        return Image.fromarray(grey).convert("RGB")
    if image.mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        # Transparent areas become black, the background radiology images are read on.
        background = Image.new("RGBA", rgba.size, (0, 0, 0, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


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
