"""The quick PNG/JPEG checks: a True is always PIL's True, and the usual files get one.

A corpus of valid, unusual and damaged files (every mode PIL writes, interlacing, progressive
JPEGs, EXIF rotations, ICC profiles, transparency, text chunks, flipped bytes, cut files) is checked
against the PIL reading the API judge used alone before (:func:`_plain_by_pil`), and
:func:`passthrough_data_url` must give the same answer with and without the quick check.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from medrewardbench.cases import ImageRef
from medrewardbench.images.headers import plain_jpeg, plain_png
from medrewardbench.models.api import images as api_images

LIMIT = 89_478_485


def _picture(mode: str, size: tuple[int, int] = (40, 30), seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    base = Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8), "RGB")
    return base.convert(mode)


def _png(image: Image.Image, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", **params)  # type: ignore[arg-type]
    return buffer.getvalue()


def _jpeg(image: Image.Image, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", **params)  # type: ignore[arg-type]
    return buffer.getvalue()


def _exif(orientation: int | None) -> bytes:
    """An EXIF block as PIL writes it (little-endian; a big-endian one is built below)."""
    exif = Image.Exif()
    if orientation is not None:
        exif[0x0112] = orientation
    exif[0x010F] = "scanner"
    return exif.tobytes()


def _big_endian_exif(orientation: int) -> bytes:
    entries = struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0)
    return b"Exif\x00\x00" + b"MM" + struct.pack(">HI", 42, 8) + struct.pack(">H", 1) + entries + b"\x00\x00\x00\x00"


def _with_chunk(png: bytes, kind: bytes, body: bytes, after_ihdr: bool = True) -> bytes:
    chunk = struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    cut = 33 if after_ihdr else png.rindex(b"IEND") - 4
    return png[:cut] + chunk + png[cut:]


def _jpeg_with_segment(jpeg: bytes, marker: int, body: bytes) -> bytes:
    return jpeg[:2] + bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body + jpeg[2:]


def _corpus() -> list[tuple[str, bytes]]:
    files: list[tuple[str, bytes]] = []
    for mode in ("L", "RGB", "RGBA", "LA", "P", "1", "I;16"):
        files.append((f"png {mode}", _png(_picture(mode))))
    files.append(("png interlaced", _png(_picture("RGB"), interlace=True)))
    files.append(("png optimised", _png(_picture("L"), optimize=True)))
    files.append(("png level 0", _png(_picture("RGB"), compress_level=0)))
    text = PngImagePlugin.PngInfo()
    text.add_text("Software", "scanner")
    text.add_text("Comment", "compressed", zip=True)
    files.append(("png text", _png(_picture("RGB"), pnginfo=text)))
    files.append(("png transparency", _png(_picture("RGB"), transparency=(1, 2, 3))))
    files.append(("png grey transparency", _png(_picture("L"), transparency=7)))
    files.append(("png icc", _png(_picture("RGB"), icc_profile=b"\x00" * 200)))
    files.append(("png exif", _png(_picture("RGB"), exif=_exif(6))))
    files.append(("png gamma", _with_chunk(_png(_picture("RGB")), b"gAMA", struct.pack(">I", 45455))))
    files.append(("png unknown chunk", _with_chunk(_png(_picture("RGB")), b"prVt", b"private")))
    files.append(("png chunk after data", _with_chunk(_png(_picture("RGB")), b"tEXt", b"k\x00v", after_ihdr=False)))
    files.append(("png trailing bytes", _png(_picture("RGB")) + b"\x00" * 10))
    animated = io.BytesIO()
    _picture("RGB").save(animated, format="PNG", save_all=True, append_images=[_picture("RGB", seed=1)])
    files.append(("png animated", animated.getvalue()))
    files.append(("png 1x1", _png(_picture("RGB", (1, 1)))))
    for mode in ("L", "RGB", "CMYK"):
        files.append((f"jpeg {mode}", _jpeg(_picture(mode))))
    files.append(("jpeg progressive", _jpeg(_picture("RGB"), progressive=True)))
    files.append(("jpeg optimised", _jpeg(_picture("RGB"), optimize=True)))
    files.append(("jpeg restart", _jpeg(_picture("RGB"), restart_marker_blocks=1)))
    files.append(("jpeg icc", _jpeg(_picture("RGB"), icc_profile=b"\x00" * 300)))
    for orientation in (None, 0, 1, 3, 6, 8):
        files.append((f"jpeg exif {orientation}", _jpeg(_picture("RGB"), exif=_exif(orientation))))
    for orientation in (1, 6):
        files.append(
            (
                f"jpeg big-endian exif {orientation}",
                _jpeg_with_segment(_jpeg(_picture("L")), 0xE1, _big_endian_exif(orientation)),
            )
        )
    files.append(("jpeg broken exif", _jpeg_with_segment(_jpeg(_picture("RGB")), 0xE1, b"Exif\x00\x00II*\x00")))
    files.append(("jpeg comment", _jpeg(_picture("RGB"), comment=b"a note")))
    files.append(("jpeg photoshop", _jpeg_with_segment(_jpeg(_picture("RGB")), 0xED, b"Photoshop 3.0\x00")))
    files.append(("jpeg adobe", _jpeg_with_segment(_jpeg(_picture("RGB")), 0xEE, b"Adobe\x00d\x00\x00\x00\x00\x01")))
    files.append(
        (
            "jpeg short jfif",
            _jpeg_with_segment(_jpeg(_picture("RGB"))[:2] + _jpeg(_picture("RGB"))[20:], 0xE0, b"JFIF\x00\x01"),
        )
    )
    # damaged copies: a flipped byte at spread positions, and cut files
    rng = random.Random(0)
    for name, data in list(files):
        for _ in range(6):
            spot = rng.randrange(2, len(data))
            damaged = bytearray(data)
            damaged[spot] ^= 1 << rng.randrange(8)
            files.append((f"{name} flipped at {spot}", bytes(damaged)))
        for cut in (len(data) // 3, len(data) - 1):
            files.append((f"{name} cut at {cut}", data[:cut]))
    return files


CORPUS = _corpus()


def _format(data: bytes) -> str | None:
    return api_images._passthrough_format(data)


@pytest.mark.parametrize(("name", "data"), CORPUS, ids=[name for name, _ in CORPUS])
def test_the_quick_check_says_yes_only_where_pil_does(name: str, data: bytes) -> None:
    fmt = _format(data)
    quick = plain_png(data, LIMIT) if fmt == "PNG" else plain_jpeg(data, LIMIT) if fmt == "JPEG" else False
    if quick:
        assert api_images._plain_by_pil(data, fmt or ""), name


def test_the_usual_files_pass_the_quick_check() -> None:
    usual = [
        "png L",
        "png RGB",
        "png interlaced",
        "png optimised",
        "png level 0",
        "png gamma",
        "png trailing bytes",
        "png 1x1",
        "jpeg L",
        "jpeg RGB",
        "jpeg progressive",
        "jpeg optimised",
        "jpeg restart",
        "jpeg exif None",
        "jpeg exif 0",
        "jpeg exif 1",
        "jpeg big-endian exif 1",
        "jpeg comment",
        "jpeg adobe",
    ]
    by_name = dict(CORPUS)
    for name in usual:
        data = by_name[name]
        check = plain_png if name.startswith("png") else plain_jpeg
        assert check(data, LIMIT), name
    # and the rest of the corpus's intact files that PIL passes are mostly passed quickly too
    assert not plain_jpeg(by_name["jpeg exif 6"], LIMIT) and not plain_png(by_name["png transparency"], LIMIT)


def test_the_pixel_limit_holds() -> None:
    png = _png(_picture("RGB", (40, 30)))
    jpeg = _jpeg(_picture("RGB", (40, 30)))
    assert plain_png(png, 1200) and not plain_png(png, 1199)
    assert plain_jpeg(jpeg, 1200) and not plain_jpeg(jpeg, 1199)


@pytest.mark.parametrize(("name", "data"), CORPUS[::3], ids=[name for name, _ in CORPUS[::3]])
def test_the_data_url_is_the_same_with_and_without_the_quick_check(
    name: str, data: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ("image.png" if data[:4] == b"\x89PNG" else "image.jpg")
    path.write_bytes(data)
    ref = ImageRef.from_path(path)
    quick = api_images.passthrough_data_url(ref)
    monkeypatch.setattr(api_images, "_plain_by_header", lambda payload, fmt: False)
    assert api_images.passthrough_data_url(ref) == quick, name
