"""Images below the Case: references, safe file reading, hashing, decoding (PIL formats and DICOM).

Layout (imports go one way, top to bottom of this list):

* :mod:`~medrewardbench.images.files`: regular files only, the byte and pixel caps;
* :mod:`~medrewardbench.images.pixels`: 8-bit scaling, RGB conversion, PNG encoding;
* :mod:`~medrewardbench.images.refs`: :class:`ImageRef`, the bytes behind it and their hash;
* :mod:`~medrewardbench.images.dicom`: DICOM rendering, windows (window/level);
* :mod:`~medrewardbench.images.decode`: :func:`load_image` for any reference.

Nothing here knows of cases, data sources or judges; the API judge's data URLs live with it
(:mod:`medrewardbench.models.api.images`).
"""

from medrewardbench.images.decode import image_size, load_image
from medrewardbench.images.dicom import DicomDisplay, dicom_display, is_dicom, looks_like_dicom, render_dicom_window
from medrewardbench.images.files import MAX_IMAGE_BYTES_ENV, MAX_IMAGE_PIXELS_ENV, FileRefused
from medrewardbench.images.pixels import encode_png
from medrewardbench.images.refs import (
    BUILTIN_IMAGES,
    SKIMAGE_BUILTINS,
    ImageRef,
    clear_hash_cache,
    image_content_hash,
    raw_image_bytes,
)

__all__ = [
    "BUILTIN_IMAGES",
    "MAX_IMAGE_BYTES_ENV",
    "MAX_IMAGE_PIXELS_ENV",
    "SKIMAGE_BUILTINS",
    "DicomDisplay",
    "FileRefused",
    "ImageRef",
    "clear_hash_cache",
    "dicom_display",
    "encode_png",
    "image_content_hash",
    "image_size",
    "is_dicom",
    "load_image",
    "looks_like_dicom",
    "raw_image_bytes",
    "render_dicom_window",
]
