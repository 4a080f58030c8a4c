"""The one PNG builder of the tests: real PNG files made with Pillow, the same bytes for the same arguments."""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Literal

from PIL import Image, ImageDraw

RGB = tuple[int, int, int]
Pattern = Literal["solid", "square", "gradient"]

DEFAULT_COLOR: RGB = (200, 30, 30)


def seeded_color(seed: int) -> RGB:
    """A colour that differs between nearby seeds, so that images made from them differ in content."""
    return ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256)


@functools.lru_cache(maxsize=4096)
def png_bytes(
    color: RGB | None = None,
    size: tuple[int, int] = (8, 6),
    *,
    seed: int | None = None,
    pattern: Pattern = "solid",
) -> bytes:
    """Encode a small RGB PNG (cached: equal arguments give the very same bytes).

    Args:
        color: the fill (``solid``) or the square's colour (``square``); by default the seed's
            colour (:func:`seeded_color`) when a seed is given, else ``DEFAULT_COLOR``.
        size: (width, height).
        seed: makes images differ per seed: it picks the default colour and, for ``gradient``, the
            gradient and the place of the disc.
        pattern: ``solid`` (one colour); ``square`` (a ``color`` rectangle on a grey field, for
            vision models: images that differ in content, not only in mean colour); ``gradient``
            (a seed-dependent gradient with a white disc, for galleries where images must look apart).

    Returns:
        The PNG file's bytes.
    """
    fill = color if color is not None else seeded_color(seed) if seed is not None else DEFAULT_COLOR
    width, height = size
    if pattern == "solid":
        image = Image.new("RGB", size, fill)
    elif pattern == "square":
        image = Image.new("RGB", size, (90, 90, 90))
        ImageDraw.Draw(image).rectangle((8, 8, width // 2, height // 2), fill=fill)
    elif pattern == "gradient":
        s = seed or 0
        image = Image.new("RGB", size)
        pixels = image.load()
        assert pixels is not None
        for y in range(height):
            for x in range(width):
                pixels[x, y] = ((x * 5 + s * 29) % 256, (y * 5 + s * 13) % 256, (s * 71) % 256)
        c = 8 + (s * 7) % (min(size) - 16)
        ImageDraw.Draw(image).ellipse((c - 6, c - 6, c + 6, c + 6), fill=(250, 250, 250))
    else:
        raise ValueError(f"unknown pattern {pattern!r}")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def write_png(
    path: Path,
    color: RGB | None = None,
    size: tuple[int, int] = (8, 6),
    *,
    seed: int | None = None,
    pattern: Pattern = "solid",
) -> Path:
    """Write :func:`png_bytes` to ``path`` (parents created) and return the path.

    Without a colour or a seed the image is green, so that it differs from ``png_bytes()``.
    """
    if color is None and seed is None:
        color = (30, 200, 30)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(color, size, seed=seed, pattern=pattern))
    return path
