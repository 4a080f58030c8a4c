"""Tests for medrewardbench.images on real files: PIL formats, DICOM and packaged images."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pydicom
import pytest
from PIL import Image
from pydicom.data import get_testdata_file
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage

from medrewardbench.cases import ImageRef
from medrewardbench.errors import ImageError
from medrewardbench.images import (
    BUILTIN_IMAGES,
    encode_png,
    image_content_hash,
    image_size,
    load_image,
    looks_like_dicom,
    raw_image_bytes,
)
from medrewardbench.images import files as image_files
from medrewardbench.images import refs as image_refs
from medrewardbench.models.api.images import passthrough_data_url, to_data_url

_UID_ROOT = "1.2.826.0.1.3680043.8.498.4242"


# ---------------------------------------------------------------------------------------------
# Fixtures: real files written to tmp_path
# ---------------------------------------------------------------------------------------------


def _gradient_rgb(width: int = 64, height: int = 48) -> np.ndarray:
    x = np.linspace(0, 255, width, dtype=np.float64)
    y = np.linspace(0, 255, height, dtype=np.float64)
    red = np.tile(x, (height, 1))
    green = np.tile(y[:, None], (1, width))
    blue = 255 - red
    return np.stack([red, green, blue], axis=2).round().astype(np.uint8)


def _write_png(path: Path, array: np.ndarray) -> Path:
    Image.fromarray(array).save(path, format="PNG")
    return path


def _write_dicom(
    path: Path,
    pixels: np.ndarray,
    *,
    photometric: str = "MONOCHROME2",
    window: tuple[float, float] | None = None,
    voi_function: str | None = None,
    rescale: tuple[float, float] | None = None,
    rows_columns: tuple[int, int] | None = None,
) -> Path:
    """Write a little-endian explicit-VR DICOM file with signed 16-bit grey pixels.

    ``pixels`` is (rows, columns) or (frames, rows, columns). ``rows_columns`` overrides the
    declared size (to build files that lie about their dimensions).
    """
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = f"{_UID_ROOT}.1"
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = SecondaryCaptureImageStorage
    ds.SOPInstanceUID = f"{_UID_ROOT}.1"
    ds.Modality = "CT"
    frames = pixels if pixels.ndim == 3 else pixels[np.newaxis]
    rows, columns = rows_columns if rows_columns else frames.shape[1:]
    ds.Rows, ds.Columns = rows, columns
    if pixels.ndim == 3:
        ds.NumberOfFrames = pixels.shape[0]
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = photometric
    ds.BitsAllocated = 16
    ds.BitsStored = 16
    ds.HighBit = 15
    ds.PixelRepresentation = 1
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = window
    if voi_function is not None:
        ds.VOILUTFunction = voi_function
    if rescale is not None:
        ds.RescaleSlope, ds.RescaleIntercept = rescale
    ds.PixelData = frames.astype("<i2").tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def _grey(image: Image.Image) -> np.ndarray:
    """The single grey channel of an RGB image whose three channels are equal."""
    array = np.asarray(image)
    assert (array[:, :, 0] == array[:, :, 1]).all() and (array[:, :, 1] == array[:, :, 2]).all()
    return array[:, :, 0]


def _assert_rgb_uint8_with_contrast(image: Image.Image, min_std: float = 8.0) -> np.ndarray:
    assert image.mode == "RGB"
    array = np.asarray(image)
    assert array.dtype == np.uint8
    assert array.ndim == 3 and array.shape[2] == 3
    assert array.std() > min_std, f"flat image: std {array.std():.1f}"
    assert array.max() > 100, "image is nearly black"
    assert array.min() < 150, "image is nearly white"
    return array


# ---------------------------------------------------------------------------------------------
# PIL formats
# ---------------------------------------------------------------------------------------------


def test_png_from_path_and_bytes_round_trip_exactly(tmp_path: Path) -> None:
    pixels = _gradient_rgb()
    path = _write_png(tmp_path / "gradient.png", pixels)

    from_path = load_image(ImageRef.from_path(path))
    from_bytes = load_image(ImageRef.from_bytes(path.read_bytes(), "gradient.png"))

    assert from_path.mode == "RGB" and from_path.size == (64, 48)
    assert np.array_equal(np.asarray(from_path), pixels)
    assert np.array_equal(np.asarray(from_bytes), pixels)


def test_jpeg_from_path_and_bytes(tmp_path: Path) -> None:
    pixels = _gradient_rgb(80, 60)
    path = tmp_path / "photo.jpg"
    Image.fromarray(pixels).save(path, format="JPEG", quality=95)

    from_path = np.asarray(load_image(ImageRef.from_path(path)))
    from_bytes = np.asarray(load_image(ImageRef.from_bytes(path.read_bytes())))

    assert from_path.shape == (60, 80, 3) and from_path.dtype == np.uint8
    assert np.array_equal(from_path, from_bytes)
    assert np.abs(from_path.astype(int) - pixels.astype(int)).mean() < 3  # lossy, but close


def test_grey_rgba_and_palette_pngs_become_rgb(tmp_path: Path) -> None:
    grey = np.arange(256, dtype=np.uint8).reshape(16, 16)
    _write_png(tmp_path / "grey.png", grey)
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[:2, :, 3] = 255  # top half opaque red, bottom half fully transparent
    _write_png(tmp_path / "rgba.png", rgba)
    Image.fromarray(_gradient_rgb()).convert("P").save(tmp_path / "palette.png")

    grey_rgb = load_image(ImageRef.from_path(tmp_path / "grey.png"))
    assert np.array_equal(_grey(grey_rgb), grey)
    rgba_rgb = np.asarray(load_image(ImageRef.from_path(tmp_path / "rgba.png")))
    assert rgba_rgb[0, 0].tolist() == [200, 0, 0]
    assert rgba_rgb[3, 3].tolist() == [0, 0, 0]
    assert load_image(ImageRef.from_path(tmp_path / "palette.png")).mode == "RGB"


def test_sixteen_bit_png_is_stretched_to_full_range(tmp_path: Path) -> None:
    values = np.array([[0, 1024], [2048, 4095]], dtype=np.uint16)
    path = tmp_path / "twelve_bit.png"
    Image.fromarray(values).save(path)

    grey = _grey(load_image(ImageRef.from_path(path)))

    assert grey.tolist() == [[0, 64], [128, 255]]


def test_jpeg_exif_orientation_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "rotated.jpg"
    image = Image.fromarray(_gradient_rgb(80, 40))
    exif = image.getexif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    image.save(path, format="JPEG", exif=exif.tobytes())

    assert load_image(ImageRef.from_path(path)).size == (40, 80)


# ---------------------------------------------------------------------------------------------
# Builtins shipped by installed packages
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("pydicom:CT_small.dcm", (128, 128)),
        ("pydicom:MR_small.dcm", (64, 64)),
        ("pydicom:693_J2KI.dcm", (512, 512)),
        ("pydicom:examples_overlay.dcm", (484, 300)),
        ("pydicom:examples_rgb_color.dcm", (320, 240)),
        ("pydicom:examples_palette.dcm", (800, 350)),
        ("pydicom:examples_jpeg2k.dcm", (640, 480)),
        ("pydicom:examples_ybr_color.dcm", (320, 240)),
        ("pydicom:JPEG2000.dcm", (256, 1024)),
        ("pydicom:liver_1frame.dcm", (512, 512)),
        ("skimage:retina", (1411, 1411)),
        ("skimage:microaneurysms", (102, 102)),
        ("skimage:immunohistochemistry", (512, 512)),
        ("skimage:cell", (550, 660)),
        ("skimage:shepp_logan_phantom", (400, 400)),
    ],
)
def test_builtin_images_decode_with_contrast(name: str, size: tuple[int, int]) -> None:
    ref = ImageRef.builtin(name)

    image = load_image(ref)

    assert image.size == size
    assert image_size(ref) == size
    _assert_rgb_uint8_with_contrast(image, min_std=8.0)


def test_builtin_list_names_only_images_that_decode() -> None:
    assert len(BUILTIN_IMAGES) == 15
    for name in BUILTIN_IMAGES:
        assert load_image(ImageRef.builtin(name)).mode == "RGB"


def test_ct_window_from_file_gives_soft_tissue_grey_and_bright_bone() -> None:
    grey = _grey(load_image(ImageRef.builtin("pydicom:CT_small.dcm")))
    # CT_small has no window: min/max of its HU range, so air is black and bone is white.
    assert grey.min() == 0 and grey.max() == 255
    # MR_small carries WindowCenter 600 / WindowWidth 1600; pixels outside the window saturate.
    mr = pydicom.dcmread(get_testdata_file("MR_small.dcm", download=False))
    stored = mr.pixel_array.astype(float)
    mr_grey = _grey(load_image(ImageRef.builtin("pydicom:MR_small.dcm")))
    assert (mr_grey[stored <= 600 - 0.5 - 1599 / 2] == 0).all()
    assert (mr_grey[stored > 600 - 0.5 + 1599 / 2] == 255).all()


def test_palette_colour_is_applied() -> None:
    array = _assert_rgb_uint8_with_contrast(load_image(ImageRef.builtin("pydicom:examples_palette.dcm")))
    # The palette maps to blue-tinted colours: channels must differ somewhere.
    assert (array[:, :, 0] != array[:, :, 2]).any()


def test_ybr_multiframe_shows_the_middle_frame_in_rgb() -> None:
    path = get_testdata_file("examples_ybr_color.dcm", download=False)
    ds = pydicom.dcmread(path)
    assert ds.PhotometricInterpretation == "YBR_FULL_422" and int(ds.NumberOfFrames) == 30
    expected = pydicom.pixels.pixel_array(path, index=15)  # pydicom converts YBR to RGB

    image = load_image(ImageRef.builtin("pydicom:examples_ybr_color.dcm"))

    assert np.array_equal(np.asarray(image), expected)
    assert not np.array_equal(np.asarray(image), pydicom.pixels.pixel_array(path, index=0))


def test_rgb_dicom_passes_through_unchanged() -> None:
    path = get_testdata_file("examples_rgb_color.dcm", download=False)
    expected = pydicom.dcmread(path).pixel_array

    assert np.array_equal(np.asarray(load_image(ImageRef.builtin("pydicom:examples_rgb_color.dcm"))), expected)


def test_unknown_builtins_are_refused() -> None:
    for name in ("pydicom:not_a_file.dcm", "skimage:brain", "numpy:eye", "retina"):
        with pytest.raises(ImageError, match="builtin image"):
            load_image(ImageRef.builtin(name))


def test_builtin_raw_bytes_are_the_shipped_files() -> None:
    ct_path = Path(get_testdata_file("CT_small.dcm", download=False))
    assert raw_image_bytes(ImageRef.builtin("pydicom:CT_small.dcm")) == ct_path.read_bytes()
    retina = raw_image_bytes(ImageRef.builtin("skimage:retina"))
    assert retina[:3] == b"\xff\xd8\xff"  # the JPEG that skimage ships


def test_skimage_array_fallback_encodes_png_deterministically() -> None:
    first = image_refs._skimage_array_png("shepp_logan_phantom", "builtin image 'skimage:shepp_logan_phantom'")
    second = image_refs._skimage_array_png("shepp_logan_phantom", "builtin image 'skimage:shepp_logan_phantom'")

    assert first == second and first.startswith(b"\x89PNG")
    assert np.asarray(Image.open(io.BytesIO(first))).max() == 255


# ---------------------------------------------------------------------------------------------
# DICOM rendering on synthetic files with known values
# ---------------------------------------------------------------------------------------------


def test_linear_window_maps_known_values_exactly(tmp_path: Path) -> None:
    hounsfield = np.array([[-1000, -160, -159, -60], [40, 140, 239, 240]])
    stored = hounsfield + 1024  # RescaleIntercept -1024 brings them back to HU
    path = _write_dicom(tmp_path / "window.dcm", stored, window=(40, 400), rescale=(1, -1024))

    grey = _grey(load_image(ImageRef.from_path(path)))

    # PS3.3 C.11.2.1.2.1: ((x - (c - 0.5)) / (w - 1) + 0.5) * 255, clipped at the window edges.
    assert grey.tolist() == [[0, 0, 1, 64], [128, 192, 255, 255]]


def test_window_and_rescale_from_enhanced_functional_groups(tmp_path: Path) -> None:
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence

    hounsfield = np.array([[-1000, -160, -159, -60], [40, 140, 239, 240]])
    frames = np.stack([hounsfield + 1024, np.zeros_like(hounsfield), hounsfield + 1024])
    path = _write_dicom(tmp_path / "enhanced.dcm", frames)
    ds = pydicom.dcmread(path)
    shared = Dataset()
    transform = Dataset()
    transform.RescaleSlope, transform.RescaleIntercept, transform.RescaleType = 1, -1024, "HU"
    shared.PixelValueTransformationSequence = Sequence([transform])
    ds.SharedFunctionalGroupsSequence = Sequence([shared])
    per_frame = []
    for center in (-500, 40, -500):
        group = Dataset()
        voi = Dataset()
        voi.WindowCenter, voi.WindowWidth = center, 400
        group.FrameVOILUTSequence = Sequence([voi])
        per_frame.append(group)
    ds.PerFrameFunctionalGroupsSequence = Sequence(per_frame)
    ds.save_as(path)

    # The middle frame is all zeros stored (-1024 HU) and its own window is 40/400.
    assert (_grey(load_image(ImageRef.from_path(path))) == 0).all()
    ds.PerFrameFunctionalGroupsSequence[1].FrameVOILUTSequence[0].WindowCenter = -1024
    ds.save_as(path)
    assert (_grey(load_image(ImageRef.from_path(path))) == 128).all()


def test_linear_exact_and_sigmoid_windows(tmp_path: Path) -> None:
    values = np.array([[-100, 0, 50, 100]])
    exact = _write_dicom(tmp_path / "exact.dcm", values, window=(0, 200), voi_function="LINEAR_EXACT")
    sigmoid = _write_dicom(tmp_path / "sigmoid.dcm", values, window=(0, 200), voi_function="SIGMOID")

    assert _grey(load_image(ImageRef.from_path(exact))).tolist() == [[0, 128, 191, 255]]
    expected = np.round(255 / (1 + np.exp(-4 * values / 200))).astype(int)
    assert _grey(load_image(ImageRef.from_path(sigmoid))).tolist() == expected.tolist()


def test_no_window_uses_frame_min_max(tmp_path: Path) -> None:
    path = _write_dicom(tmp_path / "plain.dcm", np.array([[-500, 0], [500, 1500]]))

    assert _grey(load_image(ImageRef.from_path(path))).tolist() == [[0, 64], [128, 255]]


def test_monochrome1_is_inverted(tmp_path: Path) -> None:
    values = np.array([[0, 100, 200], [300, 400, 500]])
    mono2 = _write_dicom(tmp_path / "mono2.dcm", values, photometric="MONOCHROME2")
    mono1 = _write_dicom(tmp_path / "mono1.dcm", values, photometric="MONOCHROME1")

    grey2 = _grey(load_image(ImageRef.from_path(mono2)))
    grey1 = _grey(load_image(ImageRef.from_path(mono1)))

    assert grey2[0, 0] == 0 and grey2[1, 2] == 255
    assert np.array_equal(grey1, 255 - grey2)


def test_multiframe_shows_middle_frame(tmp_path: Path) -> None:
    frames = np.stack([np.full((4, 4), value) for value in (0, 100, 200)])
    path = _write_dicom(tmp_path / "frames.dcm", frames, window=(100.5, 201))

    assert (_grey(load_image(ImageRef.from_path(path))) == 128).all()


def test_dicom_detected_by_magic_without_suffix_and_by_suffix_in_bytes(tmp_path: Path) -> None:
    path = _write_dicom(tmp_path / "scan.dcm", np.array([[0, 10], [20, 30]]))
    no_suffix = tmp_path / "scan_without_suffix"
    no_suffix.write_bytes(path.read_bytes())
    data = path.read_bytes()

    assert looks_like_dicom(data) and looks_like_dicom(b"", "x.DCM") and not looks_like_dicom(b"\x89PNG")
    expected = np.asarray(load_image(ImageRef.from_path(path)))
    assert np.array_equal(np.asarray(load_image(ImageRef.from_path(no_suffix))), expected)
    assert np.array_equal(np.asarray(load_image(ImageRef.from_bytes(data))), expected)
    assert image_size(ImageRef.from_bytes(data)) == (2, 2)


def test_dicom_needing_missing_decoder_is_refused_with_reason() -> None:
    ref = ImageRef.builtin("pydicom:MR_small_jpeg_ls_lossless.dcm")

    with pytest.raises(ImageError, match=r"MR_small_jpeg_ls_lossless\.dcm.*JPEG-LS.*not installed"):
        load_image(ref)


def test_twelve_bit_lossy_jpeg_dicom_is_refused_with_reason() -> None:
    with pytest.raises(ImageError, match=r"JPEG-lossy\.dcm.*cannot decode.*12-bit"):
        load_image(ImageRef.builtin("pydicom:JPEG-lossy.dcm"))


def test_truncated_dicom_and_dicom_without_pixels_are_refused() -> None:
    with pytest.raises(ImageError, match=r"MR_truncated\.dcm.*less than expected"):
        load_image(ImageRef.builtin("pydicom:MR_truncated.dcm"))
    with pytest.raises(ImageError, match=r"rtstruct\.dcm.*no pixel data"):
        load_image(ImageRef.builtin("pydicom:rtstruct.dcm"))


# ---------------------------------------------------------------------------------------------
# Refusals: bombs, corrupt and missing files
# ---------------------------------------------------------------------------------------------


def test_png_over_pixel_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write_png(tmp_path / "big.png", np.zeros((120, 100, 3), dtype=np.uint8))
    monkeypatch.setattr(image_files, "MAX_IMAGE_PIXELS", 12_000)
    assert load_image(ImageRef.from_path(path)).size == (100, 120)  # exactly at the limit: fine

    monkeypatch.setattr(image_files, "MAX_IMAGE_PIXELS", 11_999)
    with pytest.raises(ImageError, match=r"big\.png.*decompression bomb.*12000 pixels"):
        load_image(ImageRef.from_path(path))
    with pytest.raises(ImageError, match="decompression bomb"):
        load_image(ImageRef.from_bytes(path.read_bytes(), "big.png"))


def test_png_beyond_pil_hard_limit_is_refused_without_decoding(tmp_path: Path) -> None:
    # A 1-bit 20000x20000 PNG compresses to a few kB but would decode to 400 M pixels.
    path = tmp_path / "bomb.png"
    Image.new("1", (20_000, 20_000)).save(path)
    assert path.stat().st_size < 200_000

    with pytest.raises(ImageError, match=r"bomb\.png.*decompression bomb"):
        load_image(ImageRef.from_path(path))


def test_dicom_over_pixel_limit_is_refused_before_decoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = _write_dicom(tmp_path / "small.dcm", np.zeros((10, 10)))
    monkeypatch.setattr(image_files, "MAX_IMAGE_PIXELS", 99)
    with pytest.raises(ImageError, match=r"small\.dcm.*decompression bomb"):
        load_image(ImageRef.from_path(small))
    monkeypatch.undo()

    # Declares 60000 x 60000 but holds 8 bytes: refused from the header, nothing allocated.
    liar = _write_dicom(tmp_path / "liar.dcm", np.zeros((2, 2)), rows_columns=(60_000, 60_000))
    with pytest.raises(ImageError, match=r"liar\.dcm.*decompression bomb.*3600000000 pixels"):
        load_image(ImageRef.from_bytes(liar.read_bytes(), "liar.dcm"))


def test_pixel_limit_can_be_set_from_environment() -> None:
    code = "from medrewardbench.images import files; print(files.MAX_IMAGE_PIXELS)"
    env = {**os.environ, "MEDREWARDBENCH_MAX_IMAGE_PIXELS": "1234"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "1234"
    assert image_files._DEFAULT_MAX_IMAGE_PIXELS == 89_478_485


def test_truncated_png_is_refused_naming_the_image(tmp_path: Path) -> None:
    full = encode_png(Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)))
    path = tmp_path / "cut.png"
    path.write_bytes(full[: len(full) // 2])

    with pytest.raises(ImageError, match=r"cut\.png.*(truncated|corrupt)"):
        load_image(ImageRef.from_path(path))
    with pytest.raises(ImageError, match=r"embedded image 'cut\.png'"):
        load_image(ImageRef.from_bytes(full[: len(full) // 2], "cut.png"))


def test_garbage_bytes_are_refused_naming_the_image(tmp_path: Path) -> None:
    garbage = b"this is not an image at all" * 10

    with pytest.raises(ImageError, match=r"embedded image 'junk\.png'.*not a recognised image"):
        load_image(ImageRef.from_bytes(garbage, "junk.png"))
    with pytest.raises(ImageError, match=r"junk\.dcm.*not a readable DICOM"):
        load_image(ImageRef.from_bytes(garbage, "junk.dcm"))
    with pytest.raises(ImageError, match="embedded image is empty"):
        load_image(ImageRef.from_bytes(b"", "empty.png"))


def test_missing_file_and_no_image_are_refused(tmp_path: Path) -> None:
    missing = ImageRef.from_path(tmp_path / "nowhere.png")
    for call in (load_image, raw_image_bytes, image_content_hash):
        with pytest.raises(ImageError, match=r"nowhere\.png"):
            call(missing)
    with pytest.raises(ImageError, match="no image"):
        load_image(ImageRef.empty())
    with pytest.raises(ImageError, match="no image"):
        raw_image_bytes(ImageRef.empty())


# ---------------------------------------------------------------------------------------------
# Hashes and encodings
# ---------------------------------------------------------------------------------------------


def test_content_hash_is_sha256_of_raw_bytes_and_stable(tmp_path: Path) -> None:
    path = _write_png(tmp_path / "a.png", _gradient_rgb())
    expected = hashlib.sha256(path.read_bytes()).hexdigest()

    assert image_content_hash(ImageRef.from_path(path)) == expected
    assert image_content_hash(ImageRef.from_path(path)) == expected
    assert image_content_hash(ImageRef.from_bytes(path.read_bytes(), "other name")) == expected
    assert ImageRef.from_path(path).content_hash() == expected

    ct = ImageRef.builtin("pydicom:CT_small.dcm")
    ct_file = Path(get_testdata_file("CT_small.dcm", download=False))
    assert image_content_hash(ct) == hashlib.sha256(ct_file.read_bytes()).hexdigest()


def test_content_hash_is_stable_across_processes() -> None:
    code = "from medrewardbench.cases import ImageRef;print(ImageRef.builtin('skimage:cell').content_hash())"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == image_content_hash(ImageRef.builtin("skimage:cell"))


def test_content_hash_differs_between_images() -> None:
    hashes = {image_content_hash(ImageRef.builtin(name)) for name in BUILTIN_IMAGES}
    assert len(hashes) == len(BUILTIN_IMAGES)
    assert image_content_hash(ImageRef.empty()) == hashlib.sha256(b"").hexdigest()


def test_hash_cache_is_invalidated_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "changing.png"
    # Uncompressed PNGs of equal dimensions have equal sizes whatever the pixels.
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(path, compress_level=0)
    ref = ImageRef.from_path(path)
    first = image_content_hash(ref)

    # Same size, different content, new modification time.
    original = path.read_bytes()
    Image.fromarray(np.full((8, 8, 3), 255, dtype=np.uint8)).save(path, compress_level=0)
    assert len(path.read_bytes()) == len(original)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = image_content_hash(ref)

    # Different size.
    _write_png(path, _gradient_rgb())
    third = image_content_hash(ref)

    assert len({first, second, third}) == 3
    assert third == hashlib.sha256(path.read_bytes()).hexdigest()


def test_hash_cache_makes_rehashing_cheap(tmp_path: Path) -> None:
    path = _write_png(tmp_path / "cached.png", _gradient_rgb())
    image_refs.clear_hash_cache()
    for _ in range(100):
        image_content_hash(ImageRef.from_path(path))
    info = image_refs._hash_file.cache_info()
    assert info.misses == 1 and info.hits == 99


def test_encode_png_and_data_url_round_trip() -> None:
    image = load_image(ImageRef.builtin("skimage:microaneurysms"))

    png = encode_png(image)
    assert png == encode_png(image)
    url = to_data_url(ImageRef.builtin("skimage:microaneurysms"))
    assert url.startswith("data:image/png;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert np.array_equal(np.asarray(decoded), np.asarray(image))

    jpeg_url = to_data_url(image, format="jpeg")
    assert jpeg_url.startswith("data:image/jpeg;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(jpeg_url.split(",", 1)[1]))).format == "JPEG"
    with pytest.raises(ImageError, match="unsupported"):
        to_data_url(image, format="BMP")


def test_imageref_methods_use_this_module(tmp_path: Path) -> None:
    path = _write_png(tmp_path / "via_ref.png", _gradient_rgb())
    ref = ImageRef.from_path(path)

    assert np.array_equal(np.asarray(load_image(ref)), _gradient_rgb())
    assert ref.raw_bytes() == path.read_bytes()


# --------------------------------------------------------------------------- passthrough data URLs
def _file_bytes(image: Image.Image, fmt: str, **params: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def _scan(mode: str = "RGB", size: tuple[int, int] = (48, 32)) -> Image.Image:
    return Image.radial_gradient("L").resize(size).convert(mode)


@pytest.mark.parametrize(
    ("fmt", "mode"), [("PNG", "RGB"), ("PNG", "L"), ("JPEG", "RGB"), ("JPEG", "L"), ("WEBP", "RGB")]
)
def test_passthrough_sends_the_original_bytes_which_decode_to_load_image_pixels(
    tmp_path: Path, fmt: str, mode: str
) -> None:
    original = _file_bytes(_scan(mode), fmt)
    path = tmp_path / f"scan.{fmt.lower()}"
    path.write_bytes(original)
    for ref in (ImageRef.from_bytes(original, path.name), ImageRef.from_path(path)):
        url = passthrough_data_url(ref)
        assert url is not None and url.startswith(f"data:image/{fmt.lower()};base64,")
        payload = base64.b64decode(url.split(",", 1)[1])
        assert payload == original
        # what the API decodes is what every local judge sees
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(payload)).convert("RGB")), np.asarray(load_image(ref)))


def _png_with_chunk_after_header(original: bytes, chunk_type: bytes, data: bytes) -> bytes:
    import zlib

    chunk = len(data).to_bytes(4, "big") + chunk_type + data
    chunk += zlib.crc32(chunk_type + data).to_bytes(4, "big")
    ihdr_end = 8 + 8 + 13 + 4
    return original[:ihdr_end] + chunk + original[ihdr_end:]


def test_passthrough_declines_whatever_would_not_decode_as_load_image_does(monkeypatch: pytest.MonkeyPatch) -> None:
    rgb_png = _file_bytes(_scan(), "PNG")
    jpeg = _file_bytes(_scan(), "JPEG")
    webp = _file_bytes(_scan(), "WEBP")
    exif = Image.Exif()
    exif[0x0112] = 6
    frames = [_scan(), _scan().rotate(90)]
    declined = {
        "alpha": _file_bytes(_scan("RGBA"), "PNG"),
        "palette": _file_bytes(_scan("P"), "PNG"),
        "16-bit": _file_bytes(Image.new("I;16", (8, 8), 3000), "PNG"),
        "transparency chunk": _file_bytes(_scan("L"), "PNG", transparency=0),
        "CMYK": _file_bytes(_scan("CMYK"), "JPEG"),
        "EXIF rotation (JPEG)": _file_bytes(_scan(), "JPEG", exif=exif),
        "EXIF chunk (PNG)": _file_bytes(_scan(), "PNG", exif=exif),
        "animated PNG": _file_bytes(frames[0], "PNG", save_all=True, append_images=frames[1:]),
        "BMP": _file_bytes(_scan(), "BMP"),
        "TIFF": _file_bytes(_scan(), "TIFF"),
        "truncated PNG": rgb_png[:-30],
        "PNG with a bad CRC": rgb_png[:-5] + bytes([rgb_png[-5] ^ 0xFF]) + rgb_png[-4:],
        "PNG with damaged pixel data": rgb_png[: len(rgb_png) // 2]
        + bytes([rgb_png[len(rgb_png) // 2] ^ 0xFF])
        + rgb_png[len(rgb_png) // 2 + 1 :],
        "truncated JPEG": jpeg[: len(jpeg) // 2],
        "truncated WEBP": webp[:-10],
        "not an image": b"plain text, not an image",
        "empty": b"",
    }
    for why, data in declined.items():
        assert passthrough_data_url(ImageRef.from_bytes(data, "x")) is None, why
    assert passthrough_data_url(ImageRef.empty()) is None
    dicom = get_testdata_file("CT_small.dcm")
    assert dicom is not None
    assert passthrough_data_url(ImageRef.from_path(dicom)) is None
    assert passthrough_data_url(ImageRef.from_path("/no/such/file.png")) is None
    # a harmless extra chunk is fine; a decompression bomb is left to load_image to refuse
    assert passthrough_data_url(ImageRef.from_bytes(_png_with_chunk_after_header(rgb_png, b"tEXt", b"a\x00b")))
    monkeypatch.setattr(image_files, "MAX_IMAGE_PIXELS", 100)
    assert passthrough_data_url(ImageRef.from_bytes(rgb_png)) is None
    with pytest.raises(ImageError, match="decompression bomb"):
        to_data_url(ImageRef.from_bytes(rgb_png))


def test_png_data_urls_can_trade_size_for_speed() -> None:
    image = load_image(ImageRef.builtin("skimage:retina")).resize((256, 256))
    fast, small = to_data_url(image, compress_level=1), to_data_url(image)
    assert fast != small
    for url in (fast, small):
        decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert np.array_equal(np.asarray(decoded), np.asarray(image))
