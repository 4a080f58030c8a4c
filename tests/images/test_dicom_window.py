"""Window/level rendering of DICOM images (the annotation app's viewer uses it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
import pytest
from helpers.data import write_dicom
from helpers.images import write_png
from pydicom.data import get_testdata_file
from pydicom.pixels import apply_modality_lut

from medrewardbench.cases import ImageRef
from medrewardbench.errors import ImageError
from medrewardbench.images import dicom_display, is_dicom, load_image, render_dicom_window

CT = ImageRef.builtin("pydicom:CT_small.dcm")


def hounsfield(name: str) -> np.ndarray:
    ds = pydicom.dcmread(get_testdata_file(name, download=False))
    return apply_modality_lut(ds.pixel_array, ds).astype(np.float64)


def expected_grey(values: np.ndarray, center: float, width: float) -> np.ndarray:
    """DICOM PS3.3 C.11.2.1.2 linear window, scaled to 0..255 and rounded."""
    c, w = center - 0.5, width - 1.0
    unit = np.clip((values - c) / w + 0.5, 0.0, 1.0)
    unit = np.where(values <= c - w / 2, 0.0, np.where(values > c + w / 2, 1.0, unit))
    return np.round(unit * 255.0)


@pytest.mark.parametrize(("center", "width"), [(-600, 1500), (40, 400), (400, 1800), (40, 80)])
def test_window_follows_the_dicom_linear_formula_in_hounsfield_units(center: float, width: float) -> None:
    image = render_dicom_window(CT, center, width)
    grey = np.asarray(image)[:, :, 0].astype(np.float64)
    assert image.mode == "RGB" and image.size == (128, 128)
    assert np.array_equal(grey, expected_grey(hounsfield("CT_small.dcm"), center, width))


def test_a_narrow_window_saturates_more_than_a_wide_one() -> None:
    brain = np.asarray(render_dicom_window(CT, 40, 80))[:, :, 0]
    lung = np.asarray(render_dicom_window(CT, -600, 1500))[:, :, 0]
    saturated = lambda a: np.mean((a == 0) | (a == 255))  # noqa: E731
    assert saturated(brain) > saturated(lung) + 0.2


def test_display_facts_of_a_ct_and_an_mr() -> None:
    ct = dicom_display(CT)
    values = hounsfield("CT_small.dcm")
    assert ct.monochrome and ct.modality == "CT" and ct.units == "HU"
    assert (ct.minimum, ct.maximum) == (values.min(), values.max())
    assert (ct.rows, ct.columns) == (128, 128)
    mr = dicom_display(ImageRef.builtin("pydicom:MR_small.dcm"))
    assert mr.modality == "MR" and mr.units is None
    # the file's own window, used by the default rendering: the same pixels as load_image
    same = render_dicom_window(ImageRef.builtin("pydicom:MR_small.dcm"), mr.center, mr.width)
    assert np.array_equal(np.asarray(same), np.asarray(load_image(ImageRef.builtin("pydicom:MR_small.dcm"))))


def test_monochrome1_is_inverted_after_windowing(tmp_path: Path) -> None:
    path = write_dicom(tmp_path / "m2.dcm")
    ds = pydicom.dcmread(path)
    ds.PhotometricInterpretation = "MONOCHROME1"
    inverted = tmp_path / "m1.dcm"
    ds.save_as(inverted)
    normal = np.asarray(render_dicom_window(ImageRef.from_path(path), 1000, 2000)).astype(int)
    flipped = np.asarray(render_dicom_window(ImageRef.from_path(inverted), 1000, 2000)).astype(int)
    assert np.array_equal(normal, 255 - flipped)


def test_embedded_dicom_bytes_render_like_the_file(tmp_path: Path) -> None:
    path = write_dicom(tmp_path / "ct.dcm")
    from_bytes = render_dicom_window(ImageRef.from_bytes(path.read_bytes(), "ct.dcm"), 500, 1000)
    from_file = render_dicom_window(ImageRef.from_path(path), 500, 1000)
    assert np.array_equal(np.asarray(from_bytes), np.asarray(from_file))
    assert is_dicom(ImageRef.from_bytes(path.read_bytes(), "")) is True


def test_colour_dicom_has_no_window_and_renders_as_usual() -> None:
    ref = ImageRef.builtin("pydicom:examples_rgb_color.dcm")
    assert dicom_display(ref).monochrome is False
    assert np.array_equal(np.asarray(render_dicom_window(ref, 0, 100)), np.asarray(load_image(ref)))


def test_non_dicom_and_bad_windows_are_refused(tmp_path: Path) -> None:
    png = ImageRef.from_path(write_png(tmp_path / "a.png"))
    assert is_dicom(png) is False and is_dicom(ImageRef.empty()) is False
    with pytest.raises(ImageError, match="not a DICOM image"):
        render_dicom_window(png, 40, 400)
    with pytest.raises(ImageError, match="not a DICOM image"):
        dicom_display(png)
    with pytest.raises(ImageError, match="width must be >= 1"):
        render_dicom_window(CT, 40, 0)
    with pytest.raises(ImageError, match="invalid window"):
        render_dicom_window(CT, float("nan"), 400)
