"""Images as the people who may see them get them: an annotator their own cases', an admin any item's.

Nothing is ever served as stored: DICOM and formats browsers cannot show are rendered to PNG,
and every other image is re-encoded to pixels only (their metadata could unblind the review).
Rendered images and DICOM display settings are cached in memory, bounded in count and bytes.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from medrewardbench.annotate.config import InvalidInput, NotFound
from medrewardbench.annotate.db import ImageBlob, Item
from medrewardbench.annotate.services.base import PUBLIC_ID, Identity, ProjectContext, own_assignment, require_admin
from medrewardbench.cases import ImageRef
from medrewardbench.errors import ImageError

_IMAGE_CACHE_BYTES = 128 * 1024 * 1024
_IMAGE_CACHE_ITEMS = 64
THUMBNAIL_SIZE = 96
"""The longest side, in pixels, of the thumbnails of the queue."""


class ImageService:
    """The images of a project's items, checked against the caller and cached once rendered.

    Args:
        context: the open project.
    """

    def __init__(self, context: ProjectContext):
        self.context = context
        self._images: OrderedDict[tuple[int, float | None, float | None, int], tuple[bytes, str]] = OrderedDict()
        self._image_bytes = 0
        self._images_lock = threading.Lock()
        self._displays: dict[int, Any] = {}

    def assignment_image(
        self,
        identity: Identity,
        assignment_id: str,
        center: float | None = None,
        width: float | None = None,
        thumbnail: bool = False,
    ) -> tuple[bytes, str]:
        """The image of one of the caller's assignments, ready for a browser.

        Args:
            identity: the caller.
            assignment_id: the assignment's public id.
            center: DICOM window center (with ``width``); None for the default rendering.
            width: DICOM window width.
            thumbnail: a small copy (longest side :data:`THUMBNAIL_SIZE`) for the queue, default rendering.

        Returns:
            (bytes, media type). DICOM and formats browsers cannot show are rendered to PNG.

        Raises:
            NotFound: no such assignment, or it has no image.
            InvalidInput: a window on an image that is not DICOM, or an invalid window.
        """
        with self.context.db.read() as s:
            _, item = own_assignment(s, identity, assignment_id)
            image_id = item.image_id
        if image_id is None:
            raise NotFound("this case has no image")
        if thumbnail:
            if center is not None or width is not None:
                raise InvalidInput("a thumbnail has the default window only")
            return self._render(image_id, None, None, THUMBNAIL_SIZE)
        return self._render(image_id, center, width)

    def item_image(
        self, identity: Identity, item_id: str, center: float | None = None, width: float | None = None
    ) -> tuple[bytes, str]:
        """An item's image, for an admin (adjudication).

        Args:
            identity: an admin.
            item_id: the item's public id.
            center: DICOM window center.
            width: DICOM window width.

        Returns:
            (bytes, media type).

        Raises:
            Forbidden: not an admin.
            NotFound: no such item, or it has no image.
        """
        require_admin(identity)
        if not PUBLIC_ID.match(item_id):
            raise NotFound("no such item image")
        with self.context.db.read() as s:
            image_id = s.scalar(select(Item.image_id).where(Item.public_id == item_id))
        if image_id is None:
            raise NotFound("no such item image")
        return self._render(image_id, center, width)

    def _render(self, image_id: int, center: float | None, width: float | None, size: int = 0) -> tuple[bytes, str]:
        """The browser image (``size`` > 0: a thumbnail of that longest side), from the cache when there."""
        for value, name in ((center, "center"), (width, "width")):
            if value is not None and not math.isfinite(value):
                raise InvalidInput(f"{name}: the window {name} must be a finite number")
        key = (image_id, center, width, size)
        with self._images_lock:
            cached = self._images.get(key)
            if cached is not None:
                self._images.move_to_end(key)
                return cached
        with self.context.db.read() as s:
            blob = s.get(ImageBlob, image_id)
            if blob is None:
                raise NotFound("no such image")
            data, name = bytes(blob.data), blob.name
        result = _browser_image(data, name, center, width)
        if size:
            result = _thumbnail(result[0], size), "image/png"
        with self._images_lock:
            if key not in self._images:
                self._images[key] = result
                self._image_bytes += len(result[0])
            while len(self._images) > _IMAGE_CACHE_ITEMS or self._image_bytes > _IMAGE_CACHE_BYTES:
                _, (evicted, _media) = self._images.popitem(last=False)
                self._image_bytes -= len(evicted)
        return result

    def dicom_display(self, s: Session, image_id: int) -> Any:
        """How a DICOM image is shown (units, default window, range), or None for another image.

        Args:
            s: an open session.
            image_id: the image's row id.

        Returns:
            A :class:`medrewardbench.images.dicom.DicomDisplay`, or None.
        """
        from medrewardbench.images import dicom_display, is_dicom

        with self._images_lock:
            if image_id in self._displays:
                return self._displays[image_id]
        image = s.get(ImageBlob, image_id)
        if image is None:
            return None
        ref = ImageRef.from_bytes(image.data, image.name)
        try:
            found = dicom_display(ref) if is_dicom(ref) else None
        except ImageError:
            found = None
        with self._images_lock:
            self._displays[image_id] = found
        return found


def _thumbnail(png: bytes, size: int) -> bytes:
    """A browser PNG scaled down to at most ``size`` pixels on its longest side (never up)."""
    import io

    from PIL import Image

    from medrewardbench.images.pixels import encode_png, to_rgb

    with Image.open(io.BytesIO(png)) as opened:
        small = opened.copy() if opened.mode in ("L", "RGB") else to_rgb(opened)
    small.thumbnail((size, size))
    return encode_png(small, compress_level=6)


def _browser_image(data: bytes, name: str, center: float | None, width: float | None) -> tuple[bytes, str]:
    """Stored image bytes as a PNG a browser shows, windowed when it is DICOM and a window is given."""
    from medrewardbench.annotate.media import pixels_only_png
    from medrewardbench.images import encode_png, is_dicom, load_image, render_dicom_window

    ref = ImageRef.from_bytes(data, name)
    try:
        dicom = is_dicom(ref)
        if (center is None) != (width is None):
            raise InvalidInput("give both the window center and the window width")
        if center is not None and width is not None:
            if not dicom:
                raise InvalidInput("window/level applies to DICOM images only")
            return encode_png(render_dicom_window(ref, center, width), compress_level=1), "image/png"
        if dicom:
            return encode_png(load_image(ref), compress_level=1), "image/png"
        # never the stored bytes: their metadata (EXIF, XMP, text chunks) could unblind the review
        return pixels_only_png(data, f"image {name!r}"), "image/png"
    except ImageError as exc:
        raise InvalidInput(str(exc)) from exc
    except (OSError, ValueError, SyntaxError) as exc:  # PIL's header errors on a corrupt file
        raise InvalidInput(f"the image cannot be shown ({type(exc).__name__}: {exc})") from exc
