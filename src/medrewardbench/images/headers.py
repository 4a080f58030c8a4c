"""Whether a PNG or JPEG file holds plain 8-bit pixels, read from its structure without PIL.

The API judge sends a PNG or JPEG as it is when decoding it gives the same pixels as
:func:`~medrewardbench.images.decode.load_image` (see
:func:`~medrewardbench.models.api.images.passthrough_data_url`). Asking PIL costs a fifth of a
millisecond per image (opening the file object, the plugin's Python parsing, every chunk's checksum
through a stream); these walks read the same facts from the bytes directly.

Each answers True only when the file certainly qualifies: one 8-bit frame in mode ``L`` or
``RGB``, no transparency, no rotation, within the pixel limit, structurally sound (every PNG chunk's
CRC; a JPEG's segments up to the scan). Anything they do not know, or that PIL might read otherwise,
gives False, which means "ask PIL", never "refuse": a PNG chunk outside a short list, a JPEG segment
other than the usual ones, an ICC profile, an EXIF block that does not parse. So a True here is
always a True from PIL (checked over a corpus of valid, unusual and damaged files in
``tests/images/test_headers.py``), and a False costs only the old way.
"""

from __future__ import annotations

import zlib
from typing import Literal

__all__ = ["plain_jpeg", "plain_png"]


def _plain_pixels(bits: int, channels: int | None, width: int, height: int, max_pixels: int) -> bool:
    """One 8-bit frame of 1 or 3 channels (``L`` or ``RGB``), not empty and within the pixel limit."""
    return bits == 8 and channels in (1, 3) and width > 0 and height > 0 and width * height <= max_pixels


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_CHANNELS = {0: 1, 2: 3}
"""Greyscale and truecolour: the colour types that decode to ``L`` and ``RGB`` (no palette, no alpha)."""
_PNG_CHUNKS = frozenset({b"IDAT", b"gAMA", b"cHRM", b"sRGB", b"pHYs", b"tIME", b"tEXt", b"bKGD", b"sBIT"})
"""Chunks (besides IHDR and IEND) a plain PNG may hold: none of them changes the pixels PIL gives or
can make PIL's reading fail when its checksum is right (palettes, transparency, animation, EXIF,
colour profiles and compressed text are left to PIL)."""


def plain_png(data: bytes, max_pixels: int) -> bool:
    """Whether a PNG decodes to one 8-bit ``L`` or ``RGB`` frame without transparency.

    Args:
        data: the file's bytes.
        max_pixels: the most pixels (width x height) accepted.

    Returns:
        True when certain; False when not (ask PIL).
    """
    if len(data) < 45 or not data.startswith(_PNG_SIGNATURE) or data[8:16] != b"\x00\x00\x00\x0dIHDR":
        return False
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    depth, colour, compression, filtering, interlace = data[24:29]
    if compression or filtering or interlace not in (0, 1):
        return False
    if not _plain_pixels(depth, _PNG_CHANNELS.get(colour), width, height, max_pixels):
        return False
    view = memoryview(data)
    end = len(data)
    position = 8
    seen_data = False
    while position + 12 <= end:
        length = int.from_bytes(view[position : position + 4], "big")
        kind = bytes(view[position + 4 : position + 8])
        stop = position + 8 + length
        if length >= 1 << 31 or stop + 4 > end:
            return False
        if zlib.crc32(view[position + 4 : stop]) != int.from_bytes(view[stop : stop + 4], "big"):
            return False
        if kind == b"IEND":
            return seen_data and length == 0
        if kind == b"IDAT":
            seen_data = True
        elif not (kind == b"IHDR" and position == 8) and kind not in _PNG_CHUNKS:
            return False
        position = stop + 4
    return False


_SOF = frozenset({0xC0, 0xC1, 0xC2})
"""Baseline, extended and progressive Huffman frames (the others PIL's decoder may not read)."""
_PLAIN_SEGMENTS = frozenset({0xC4, 0xDD, 0xFE})
"""Huffman tables, restart interval and comments: nothing PIL reads into the image."""


def plain_jpeg(data: bytes, max_pixels: int) -> bool:
    """Whether a JPEG decodes to one 8-bit ``L`` or ``RGB`` frame that needs no rotation.

    Args:
        data: the file's bytes.
        max_pixels: the most pixels (width x height) accepted.

    Returns:
        True when certain; False when not (ask PIL).
    """
    if not data.startswith(b"\xff\xd8"):
        return False
    view = memoryview(data)
    end = len(data)
    position = 2
    frame = False
    exif = False
    while position + 4 <= end:
        if data[position] != 0xFF:
            return False
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        length = int.from_bytes(view[position + 2 : position + 4], "big")
        if length < 2 or position + 2 + length > end:
            return False
        segment = view[position + 4 : position + 2 + length]
        if marker == 0xDA:  # the scan: every header segment has been seen
            return frame
        if marker in _SOF:
            if frame or not _plain_frame(segment, max_pixels):
                return False
            frame = True
        elif marker == 0xDB:
            if not _sound_quantization(segment):
                return False
        elif marker == 0xE0:
            if bytes(segment[:4]) in (b"JFIF", b"JFXX") and len(segment) < 14:
                return False
        elif marker == 0xE1:
            if bytes(segment[:6]) == b"Exif\x00\x00":
                if exif or _exif_orientation(segment[6:]) not in (0, 1):
                    return False
                exif = True
        elif marker == 0xEE:
            if bytes(segment[:5]) == b"Adobe" and len(segment) < 12:
                return False
        elif marker not in _PLAIN_SEGMENTS:
            return False
        position += 2 + length
    return False


def _plain_frame(segment: memoryview, max_pixels: int) -> bool:
    if len(segment) < 6:
        return False
    precision = segment[0]
    height = int.from_bytes(segment[1:3], "big")
    width = int.from_bytes(segment[3:5], "big")
    components = segment[5]
    return len(segment) >= 6 + 3 * components and _plain_pixels(precision, components, width, height, max_pixels)


def _sound_quantization(segment: memoryview) -> bool:
    """Every table of a DQT segment is whole (as PIL requires)."""
    position = 0
    while position < len(segment):
        size = 1 + (64 if segment[position] >> 4 == 0 else 128)
        if position + size > len(segment):
            return False
        position += size
    return True


def _exif_orientation(tiff: memoryview) -> int | None:
    """The orientation tag of an EXIF block's first directory: 1 when absent, None when it does not parse."""
    if len(tiff) < 8:
        return None
    order = bytes(tiff[:2])
    if order not in (b"II", b"MM"):
        return None
    endian: Literal["little", "big"] = "little" if order == b"II" else "big"

    def number(start: int, size: int) -> int:
        return int.from_bytes(tiff[start : start + size], endian)

    if number(2, 2) != 42:
        return None
    directory = number(4, 4)
    if directory < 8 or directory + 2 > len(tiff):
        return None
    count = number(directory, 2)
    if directory + 2 + 12 * count > len(tiff):
        return None
    found = 1
    seen = False
    for entry in range(directory + 2, directory + 2 + 12 * count, 12):
        if number(entry, 2) == 0x0112:
            if seen or number(entry + 2, 2) != 3 or number(entry + 4, 4) != 1:
                return None  # given twice, or not one SHORT: let PIL decide
            found = number(entry + 8, 2)
            seen = True
    return found
