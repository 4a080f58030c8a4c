"""DICOM rendering: a frame to 8-bit RGB the way a viewer shows it, and window/level on request.

DICOM is rendered the way a viewer would show it by default: the modality LUT (rescale slope and
intercept), then the VOI LUT or the first window in the file (or the frame's min/max when the file
has none), MONOCHROME1 inverted, palette colour looked up, YBR converted to RGB. Multi-frame data
shows its middle frame. pydicom is imported where a DICOM file is read.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from PIL import Image

from medrewardbench.errors import ImageError
from medrewardbench.images.files import check_pixel_count, short_reason, source_head
from medrewardbench.images.pixels import finite_range, scale_to_uint8, unit_scale
from medrewardbench.images.refs import ImageRef, image_source

if TYPE_CHECKING:
    import numpy as np
    from pydicom.dataset import Dataset

logger = logging.getLogger(__name__)

_DICOM_MAGIC_OFFSET = 128
_DICOM_MAGIC = b"DICM"


def looks_like_dicom(head: bytes, name: str = "") -> bool:
    """Whether bytes (at least the first 132 of a file) or a file name indicate DICOM.

    Args:
        head: the start of the file.
        name: the file name, if known; a ``.dcm``/``.dicom`` suffix counts as DICOM.

    Returns:
        True for the ``DICM`` magic at byte 128 or a DICOM file suffix.
    """
    if head[_DICOM_MAGIC_OFFSET : _DICOM_MAGIC_OFFSET + 4] == _DICOM_MAGIC:
        return True
    return name.lower().endswith((".dcm", ".dicom"))


@dataclass(frozen=True)
class DicomDisplay:
    """What a viewer needs to offer window/level control over a DICOM image."""

    monochrome: bool
    """Whether window/level applies (MONOCHROME1/2); colour images are shown as they are."""
    modality: str | None
    """The DICOM Modality (``"CT"``, ``"MR"``, ...), if given."""
    units: str | None
    """``"HU"`` for CT or a rescale type of HU, else the rescale type, if any."""
    center: float
    """The window the default rendering uses (the file's first window, else the value range)."""
    width: float
    minimum: float
    """Smallest and largest value after the modality LUT, over the shown frame."""
    maximum: float
    rows: int
    columns: int
    percentile_windows: tuple[tuple[str, float, float], ...] = ()
    """(name, center, width) of windows from the shown frame's values: the full range and the
    ones that clip the darkest and brightest 1 % and 5 % (see :data:`PERCENTILE_WINDOWS`). They fit
    any modality, unlike CT presets in Hounsfield units (MR values have no fixed scale)."""


PERCENTILE_WINDOWS: tuple[tuple[str, float, float], ...] = (
    ("full range", 0.0, 100.0),
    ("1-99 %", 1.0, 99.0),
    ("5-95 %", 5.0, 95.0),
)
"""(name, low percentile, high percentile) of the windows :func:`dicom_display` computes."""


def percentile_windows(values: np.ndarray) -> tuple[tuple[str, float, float], ...]:
    """Windows (name, center, width) spanning percentiles of an image's values (finite ones only).

    Args:
        values: the values after the modality LUT (any shape).

    Returns:
        One window per entry of :data:`PERCENTILE_WINDOWS`, each at least 1 wide; empty when no
        value is finite.
    """
    import numpy as np

    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return ()
    bounds = np.percentile(finite, [p for _, low, high in PERCENTILE_WINDOWS for p in (low, high)])
    out = []
    for index, (name, _, _) in enumerate(PERCENTILE_WINDOWS):
        low, high = float(bounds[2 * index]), float(bounds[2 * index + 1])
        out.append((name, (low + high) / 2.0, max(high - low, 1.0)))
    return tuple(out)


def is_dicom(ref: ImageRef) -> bool:
    """Whether an image reference points at DICOM data (magic bytes or file suffix).

    Args:
        ref: the image reference.

    Returns:
        True for DICOM; False for other formats and for no image.

    Raises:
        ImageError: the file cannot be read.
    """
    if ref.kind == "none":
        return False
    source, name = image_source(ref)
    return looks_like_dicom(source_head(source, ref.describe()), name)


def dicom_display(ref: ImageRef) -> DicomDisplay:
    """The default window and value range of a DICOM image's shown (middle) frame.

    Args:
        ref: a DICOM image reference.

    Returns:
        The display facts a window/level control needs.

    Raises:
        ImageError: not DICOM, or the pixel data cannot be decoded.
    """
    import numpy as np
    from pydicom.pixels.processing import apply_modality_lut

    what = ref.describe()
    ds, frame, photometric, index = _dicom_frame_for(ref, what)
    rows, columns = dicom_dimensions(ds, what)
    modality = str(ds.get("Modality") or "").strip() or None
    rescale_type = str(ds.get("RescaleType") or "").strip() or None
    units = "HU" if modality == "CT" or rescale_type == "HU" else rescale_type
    monochrome = photometric in ("MONOCHROME1", "MONOCHROME2") or (frame.ndim == 2 and photometric == "")
    if not monochrome:
        return DicomDisplay(False, modality, units, 127.5, 256.0, 0.0, 255.0, rows, columns)
    view = _frame_view(ds, index)
    values = apply_modality_lut(frame, view).astype(np.float64)
    low, high = finite_range(values)
    window = None if view.get("VOILUTSequence") else _window(view)
    center, width = (window[0], window[1]) if window is not None else ((low + high) / 2.0, max(high - low, 1.0))
    return DicomDisplay(
        True, modality, units, float(center), float(width), low, high, rows, columns, percentile_windows(values)
    )


def render_dicom_window(ref: ImageRef, center: float, width: float) -> Image.Image:
    """Render a DICOM image with a chosen window instead of the file's own (window/level).

    The same path as :func:`~medrewardbench.images.decode.load_image` (modality LUT, MONOCHROME1
    inversion, middle frame of a multi-frame object), with a linear window of the given center and
    width in modality units (Hounsfield units for CT). Colour images have no window and come back
    as :func:`~medrewardbench.images.decode.load_image` renders them.

    Args:
        ref: a DICOM image reference.
        center: window center (level).
        width: window width, at least 1.

    Returns:
        An 8-bit RGB image.

    Raises:
        ImageError: not DICOM, an invalid window, or pixel data that cannot be decoded.
    """
    import numpy as np

    what = ref.describe()
    if not (np.isfinite(center) and np.isfinite(width)) or width < 1:
        raise ImageError(f"{what}: invalid window (center {center}, width {width}); the width must be >= 1")
    ds, frame, photometric, index = _dicom_frame_for(ref, what)
    try:
        rgb = _render_frame(frame, photometric, ds, index, window_override=(float(center), float(width)))
    except ImageError as exc:
        raise ImageError(f"{what}: {exc}") from exc
    except Exception as exc:
        raise ImageError(f"{what}: cannot render DICOM pixel data ({short_reason(exc)})") from exc
    return Image.fromarray(rgb, mode="RGB")


def _dicom_frame_for(ref: ImageRef, what: str) -> tuple[Dataset, np.ndarray, str, int]:
    source, name = image_source(ref)
    if not looks_like_dicom(source_head(source, what), name):
        raise ImageError(f"{what}: not a DICOM image")
    ds = read_dicom(source, what)
    if not any(keyword in ds for keyword in ("PixelData", "FloatPixelData", "DoubleFloatPixelData")):
        raise ImageError(f"{what}: DICOM file has no pixel data")
    rows, columns = dicom_dimensions(ds, what)
    check_pixel_count(columns, rows, what)
    try:
        frames = int(ds.get("NumberOfFrames") or 1)
    except (TypeError, ValueError):
        frames = 1
    index = max(frames, 1) // 2
    frame, photometric = _decode_dicom_frame(ds, index, what)
    return ds, frame, photometric, index


def read_dicom(source: Path | bytes, what: str, stop_before_pixels: bool = False) -> Dataset:
    """Read a DICOM dataset, also without the preamble (old ACR-NEMA files).

    Args:
        source: a DICOM file, or its bytes.
        what: the image as messages name it.
        stop_before_pixels: read the header only.

    Returns:
        The dataset, with a transfer syntax set.

    Raises:
        ImageError: not a readable DICOM file.
    """
    import pydicom
    from pydicom.errors import InvalidDicomError

    fp: str | BinaryIO = str(source) if isinstance(source, Path) else io.BytesIO(source)
    forced = False
    try:
        try:
            ds = pydicom.dcmread(fp, defer_size="1 MB", stop_before_pixels=stop_before_pixels)
        except InvalidDicomError:
            # Files without the 128-byte preamble and 'DICM' (old ACR-NEMA style) still parse.
            if not isinstance(fp, str):
                fp.seek(0)
            forced = True
            ds = pydicom.dcmread(fp, defer_size="1 MB", stop_before_pixels=stop_before_pixels, force=True)
    except Exception as exc:
        raise ImageError(f"{what}: not a readable DICOM file ({short_reason(exc)})") from exc
    if forced and "SOPClassUID" not in ds and "Rows" not in ds:
        # force=True parses almost any bytes; without these it was not DICOM at all.
        raise ImageError(f"{what}: not a readable DICOM file (no DICOM header or image attributes)")
    _ensure_transfer_syntax(ds)
    return ds


def _ensure_transfer_syntax(ds: Dataset) -> None:
    """Files read with force=True may lack a transfer syntax; infer it from how they were read."""
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import ExplicitVRBigEndian, ExplicitVRLittleEndian, ImplicitVRLittleEndian

    meta = getattr(ds, "file_meta", None)
    if meta is not None and "TransferSyntaxUID" in meta:
        return
    implicit_vr, little_endian = getattr(ds, "original_encoding", (None, None))
    if implicit_vr is None or little_endian is None:
        return
    syntax = {
        (True, True): ImplicitVRLittleEndian,
        (False, True): ExplicitVRLittleEndian,
        (False, False): ExplicitVRBigEndian,
    }.get((bool(implicit_vr), bool(little_endian)))
    if syntax is None:
        return
    if meta is None:
        ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = syntax


def dicom_dimensions(ds: Dataset, what: str) -> tuple[int, int]:
    """Rows and columns of a DICOM image.

    Args:
        ds: the dataset.
        what: the image as messages name it.

    Returns:
        ``(rows, columns)``.

    Raises:
        ImageError: missing, invalid or empty dimensions.
    """
    try:
        rows = int(ds.Rows)
        columns = int(ds.Columns)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ImageError(f"{what}: DICOM file has no valid Rows/Columns ({short_reason(exc)})") from exc
    if rows <= 0 or columns <= 0:
        raise ImageError(f"{what}: DICOM file has an empty image ({rows}x{columns})")
    return rows, columns


def decode_dicom(source: Path | bytes, what: str) -> Image.Image:
    """Render the shown (middle) frame of a DICOM file to 8-bit RGB.

    Args:
        source: a DICOM file, or its bytes.
        what: the image as messages name it.

    Returns:
        An RGB image.

    Raises:
        ImageError: no pixel data, too many pixels, no decoder installed, or data that cannot be rendered.
    """
    ds = read_dicom(source, what)
    if not any(keyword in ds for keyword in ("PixelData", "FloatPixelData", "DoubleFloatPixelData")):
        raise ImageError(f"{what}: DICOM file has no pixel data")
    rows, columns = dicom_dimensions(ds, what)
    check_pixel_count(columns, rows, what)
    try:
        frames = int(ds.get("NumberOfFrames") or 1)
    except (TypeError, ValueError):
        frames = 1
    index = max(frames, 1) // 2
    frame, photometric = _decode_dicom_frame(ds, index, what)
    try:
        rgb = _render_frame(frame, photometric, ds, index)
    except ImageError as exc:
        raise ImageError(f"{what}: {exc}") from exc
    except Exception as exc:
        raise ImageError(f"{what}: cannot render DICOM pixel data ({short_reason(exc)})") from exc
    return Image.fromarray(rgb, mode="RGB")


def _decode_dicom_frame(ds: Dataset, index: int, what: str) -> tuple[np.ndarray, str]:
    """Decode one frame; returns the array and its photometric interpretation after decoding."""
    from pydicom.pixels.decoders.base import get_decoder

    syntax = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    if syntax is None:
        raise ImageError(f"{what}: DICOM file has no transfer syntax")
    try:
        decoder = get_decoder(syntax)
    except NotImplementedError as exc:
        raise ImageError(f"{what}: no DICOM decoder exists for transfer syntax {syntax.name!r}") from exc
    if not decoder.is_available:
        missing = "; ".join(decoder.missing_dependencies) or "no plugin"
        raise ImageError(
            f"{what}: pixel data is {syntax.name!r}, which needs a decoder that is not installed (options: {missing})"
        )
    try:
        # as_rgb: YBR_FULL(_422) comes back as RGB, and the returned metadata says so.
        options: dict[str, Any] = {"as_rgb": True}
        array, meta = decoder.as_array(ds, index=index, **options)
    except Exception as exc:
        raise ImageError(f"{what}: cannot decode DICOM pixel data ({syntax.name}; {short_reason(exc)})") from exc
    photometric = str(meta.get("photometric_interpretation", ds.get("PhotometricInterpretation", "")))
    return array, photometric.strip().upper()


def _render_frame(
    frame: np.ndarray, photometric: str, ds: Dataset, index: int, window_override: tuple[float, float] | None = None
) -> np.ndarray:
    """Map one decoded frame to an (rows, columns, 3) uint8 array (``window_override``: center, width)."""
    import numpy as np

    if photometric in ("MONOCHROME1", "MONOCHROME2") or (frame.ndim == 2 and photometric == ""):
        grey = _render_monochrome(
            frame, ds, index, invert=photometric == "MONOCHROME1", window_override=window_override
        )
        return np.repeat(grey[:, :, np.newaxis], 3, axis=2)
    if photometric == "PALETTE COLOR":
        return _render_palette(frame, ds)
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ImageError(f"unexpected {photometric or 'unknown'} pixel array of shape {frame.shape}")
    if photometric in ("YBR_FULL", "YBR_FULL_422"):
        from pydicom.pixels.processing import convert_color_space

        frame = convert_color_space(frame, photometric, "RGB")
    elif photometric not in ("RGB", "YBR_RCT", "YBR_ICT"):
        # YBR_RCT/ICT are undone by the JPEG 2000 codec; anything else has no conversion here.
        raise ImageError(f"photometric interpretation {photometric!r} is not supported")
    bits = int(ds.get("BitsStored") or 8)
    if frame.dtype == np.uint8 or bits <= 8:
        clipped: np.ndarray = np.clip(frame, 0, 255).astype(np.uint8)
        return clipped
    return scale_to_uint8(frame.astype(np.float64), 0.0, float(2**bits - 1))


def _render_monochrome(
    frame: np.ndarray, ds: Dataset, index: int, invert: bool, window_override: tuple[float, float] | None = None
) -> np.ndarray:
    import numpy as np
    from pydicom.pixels.processing import apply_modality_lut, apply_voi

    view = _frame_view(ds, index)
    values = apply_modality_lut(frame, view)
    if window_override is not None:
        unit = _apply_window(values.astype(np.float64), window_override[0], window_override[1], "LINEAR")
    elif view.get("VOILUTSequence"):
        lut_out = apply_voi(values if np.issubdtype(values.dtype, np.integer) else values.round(), view)
        lo, hi = _voi_lut_range(view)
        unit = unit_scale(lut_out.astype(np.float64), lo, hi)
    else:
        window = _window(view)
        if window is not None:
            center, width, function = window
            unit = _apply_window(values.astype(np.float64), center, width, function)
        else:
            logger.debug("DICOM frame has no window; using its min/max")
            as_float = values.astype(np.float64)
            unit = unit_scale(as_float, *finite_range(as_float))
    if str(view.get("PresentationLUTShape", "")).upper() == "INVERSE":
        invert = not invert
    if invert:
        unit = 1.0 - unit
    return np.round(unit * 255.0).astype(np.uint8)


def _frame_view(ds: Dataset, index: int) -> Dataset:
    """The modality and VOI attributes that apply to one frame, as a flat dataset.

    Enhanced multi-frame objects keep rescale and window in functional groups rather than at
    the top level; per-frame values win over shared ones, which win over top-level ones.
    """
    from pydicom.dataset import Dataset

    keywords = (
        "PhotometricInterpretation",
        "BitsStored",
        "BitsAllocated",
        "PixelRepresentation",
        "RescaleSlope",
        "RescaleIntercept",
        "RescaleType",
        "ModalityLUTSequence",
        "WindowCenter",
        "WindowWidth",
        "VOILUTFunction",
        "VOILUTSequence",
        "PresentationLUTShape",
    )
    view = Dataset()
    if hasattr(ds, "file_meta"):
        view.file_meta = ds.file_meta
    for keyword in keywords:
        if keyword in ds:
            view[keyword] = ds[keyword]
    groups: list[Any] = []
    shared = ds.get("SharedFunctionalGroupsSequence")
    if shared:
        groups.append(shared[0])
    per_frame = ds.get("PerFrameFunctionalGroupsSequence")
    if per_frame and index < len(per_frame):
        groups.append(per_frame[index])
    for group in groups:
        for sequence_keyword in ("PixelValueTransformationSequence", "FrameVOILUTSequence"):
            sequence = group.get(sequence_keyword)
            if not sequence:
                continue
            for keyword in keywords:
                if keyword in sequence[0]:
                    view[keyword] = sequence[0][keyword]
    return view


def _window(view: Dataset) -> tuple[float, float, str] | None:
    """The first (center, width, function) of a dataset, or None if it has no usable window."""
    import numpy as np

    if "WindowCenter" not in view or "WindowWidth" not in view:
        return None
    try:
        center = _first_number(view["WindowCenter"].value)
        width = _first_number(view["WindowWidth"].value)
    except (TypeError, ValueError, IndexError):
        logger.debug("ignoring unreadable window %r/%r", view.get("WindowCenter"), view.get("WindowWidth"))
        return None
    function = str(view.get("VOILUTFunction") or "LINEAR").strip().upper()
    if function not in ("LINEAR", "LINEAR_EXACT", "SIGMOID"):
        logger.debug("unknown VOI LUT function %r; using LINEAR", function)
        function = "LINEAR"
    if not np.isfinite(center) or not np.isfinite(width):
        return None
    if width < 1 if function == "LINEAR" else width <= 0:
        logger.debug("ignoring invalid window width %s for %s", width, function)
        return None
    return center, width, function


def _first_number(value: Any) -> float:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        return float(value[0])
    return float(value)


def _apply_window(values: np.ndarray, center: float, width: float, function: str) -> np.ndarray:
    """DICOM PS3.3 C.11.2.1.2 windowing to the range [0, 1].

    Implemented here rather than with pydicom's ``apply_windowing`` because that one maps to an
    output range inferred from the stored bit depth, and 8-bit display needs [0, 1] exactly.
    """
    import numpy as np

    if function == "SIGMOID":
        return np.asarray(1.0 / (1.0 + np.exp(-4.0 * (values - center) / width)))
    if function == "LINEAR":
        center -= 0.5
        width -= 1.0
    low = center - width / 2.0
    high = center + width / 2.0
    if width <= 0:
        return np.where(values > high, 1.0, 0.0)
    scaled = (values - center) / width + 0.5
    return np.where(values <= low, 0.0, np.where(values > high, 1.0, np.clip(scaled, 0.0, 1.0)))


def _voi_lut_range(view: Dataset) -> tuple[float, float]:
    """Output range of the first VOI LUT: the extent of its entries (some declare 16 bits, use 12)."""
    import numpy as np
    from pydicom.pixels.processing import apply_voi

    item = view.VOILUTSequence[0]
    entries, first_map = int(item.LUTDescriptor[0]) or 2**16, int(item.LUTDescriptor[1])
    table = apply_voi(np.arange(first_map, first_map + entries, dtype=np.int64), view).astype(np.float64)
    return float(table.min()), float(table.max())


def _render_palette(frame: np.ndarray, ds: Dataset) -> np.ndarray:
    import numpy as np
    from pydicom.pixels.processing import apply_color_lut

    rgb = apply_color_lut(frame, ds)
    if rgb.dtype == np.uint8:
        return rgb
    descriptor = ds.RedPaletteColorLookupTableDescriptor
    entries, first_map = int(descriptor[0]) or 2**16, int(descriptor[1])
    full_table = apply_color_lut(np.arange(first_map, first_map + entries, dtype=np.int64), ds)
    # Some writers declare 16-bit entries but store 8-bit values; the whole table tells which.
    top = 255.0 if int(full_table.max()) <= 255 else 65535.0
    return scale_to_uint8(rgb.astype(np.float64), 0.0, top)
