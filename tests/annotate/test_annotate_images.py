"""Images reach annotators as pixels only: no EXIF, XMP, text chunk or comment that could name a patient,
a source or a model survives, the pixels are exactly those of the file, and EXIF orientation is applied."""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.annotate import ADMIN, as_user, case_rows, client_for, login, make_project, serve_in_thread
from PIL import Image, ImageOps, PngImagePlugin
from sqlalchemy import select

from medrewardbench.annotate.db import Assignment, ImageBlob, Item
from medrewardbench.annotate.service import Identity

PATIENT = "Jane Roe"
PLANTED = (PATIENT, "jane roe", "JANE ROE", "GPT-Secret-Model", "hospital-archive-7")
XMP = (
    b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
    b'<rdf:Description xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:creator>Jane Roe</dc:creator>'
    b"<dc:source>hospital-archive-7</dc:source></rdf:Description></rdf:RDF></x:xmpmeta>"
)


def exif(orientation: int = 1) -> Image.Exif:
    data = Image.Exif()
    data[0x010E] = f"Chest CT of {PATIENT}"  # ImageDescription
    data[0x013B] = PATIENT  # Artist
    data[0x0131] = "GPT-Secret-Model"  # Software
    data[0x0112] = orientation
    return data


def pattern(mode: str, size: tuple[int, int] = (23, 17)) -> Image.Image:
    rng = np.random.default_rng(7)
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    array = rng.integers(0, 256, size=(size[1], size[0], channels), dtype=np.uint8)
    return Image.fromarray(array[..., 0] if channels == 1 else array, mode)


def write_images(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    # JPEG: EXIF (rotated 90 degrees by its orientation tag), XMP and a comment
    path = folder / "photo.jpg"
    pattern("RGB").save(path, quality=90, exif=exif(orientation=6), xmp=XMP, comment=f"patient {PATIENT}".encode())
    paths["jpeg"] = path
    # PNG with transparency: tEXt, zTXt (compressed, so not visible as bytes), iTXt, XMP and eXIf chunks
    info = PngImagePlugin.PngInfo()
    info.add_text("Author", PATIENT)
    info.add_text("Source", "hospital-archive-7", zip=True)
    info.add_itxt("Description", f"scan of {PATIENT}", lang="en", tkey="Description")
    info.add_itxt("XML:com.adobe.xmp", XMP.decode())
    path = folder / "scan.png"
    pattern("RGBA").save(path, pnginfo=info, exif=exif())
    paths["png"] = path
    # GIF (a palette) with a comment
    path = folder / "loop.gif"
    pattern("RGB").convert("P", palette=Image.Palette.ADAPTIVE).save(path, comment=f"patient {PATIENT}".encode())
    paths["gif"] = path
    # WEBP with EXIF and XMP
    path = folder / "view.webp"
    pattern("RGB").save(path, lossless=True, exif=exif(), xmp=XMP)
    paths["webp"] = path
    return paths


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, dict[str, Path]]]:
    root = tmp_path_factory.mktemp("images")
    paths = write_images(root / "input" / "images")
    rows = case_rows(len(paths))
    for row, path in zip(rows, paths.values(), strict=True):
        row["image"] = f"images/{path.name}"
    cases = root / "input" / "pairs.jsonl"
    cases.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    project = make_project(root / "proj", cases, annotators=("alice",), per_case=1)
    with serve_in_thread(project) as base:
        yield project, base, paths
    project.close()


def assignment_for(project: Any, file_name: str) -> tuple[str, str]:
    """(assignment public id of alice, item public id) of the case showing ``file_name``."""
    alice = as_user(project, "alice")
    with project.db.read() as s:
        found = s.execute(
            select(Assignment.public_id, Item.public_id)
            .join(Item, Item.id == Assignment.item_id)
            .join(ImageBlob, ImageBlob.id == Item.image_id)
            .where(ImageBlob.name == file_name, Assignment.user_id == alice.user_id)
        ).first()
    assert found is not None, file_name
    return found[0], found[1]


def png_chunks(data: bytes) -> list[bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        chunks.append(data[offset + 4 : offset + 8])
        offset += 12 + length
    return chunks


@pytest.mark.parametrize("kind", ["jpeg", "png", "gif", "webp"])
def test_served_images_carry_the_pixels_and_nothing_else(served: tuple[Any, str, dict[str, Path]], kind: str) -> None:
    project, base, paths = served
    original = paths[kind]
    raw = original.read_bytes()
    assert PATIENT.encode() in raw  # planted
    assignment, item = assignment_for(project, original.name)
    token = project.create_api_token(Identity.command_line(), "alice", f"images {kind}")
    responses = []
    with client_for(base) as client:
        login(client, "alice")
        responses.append(client.get(f"/a/{assignment}/image"))
        responses.append(
            client.get(f"/api/v1/assignments/{assignment}/image", headers={"authorization": f"Bearer {token}"})
        )
    with client_for(base) as client:
        login(client, ADMIN)
        responses.append(client.get(f"/admin/items/{item}/image"))
    with Image.open(original) as opened:
        expected = ImageOps.exif_transpose(opened)
        expected_rgba = np.asarray(expected.convert("RGBA"))
    for response in responses:
        assert response.status_code == 200 and response.headers["content-type"] == "image/png"
        data = response.content
        assert set(png_chunks(data)) <= {b"IHDR", b"IDAT", b"IEND"}, png_chunks(data)
        inflated = zlib.decompress(b"".join(_idat(data)))
        for secret in PLANTED:
            assert secret.encode() not in data and secret.encode() not in inflated, secret
        with Image.open(io.BytesIO(data)) as shown:
            assert not {"exif", "xmp", "comment", "icc_profile", "Author", "Description"} & set(shown.info)
            assert np.array_equal(np.asarray(shown.convert("RGBA")), expected_rgba)
    if kind == "jpeg":  # the orientation tag (6: rotate 90 degrees) was applied before it was dropped
        with Image.open(io.BytesIO(responses[0].content)) as shown:
            assert shown.size == (17, 23)


def _idat(data: bytes) -> Iterator[bytes]:
    offset = 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        if data[offset + 4 : offset + 8] == b"IDAT":
            yield data[offset + 8 : offset + 8 + length]
        offset += 12 + length
