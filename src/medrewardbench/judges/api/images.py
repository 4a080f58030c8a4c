"""Images for the API judge: ``data:`` URLs, sent as they are where possible, cached per content."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

from medrewardbench.cases import ImageRef

INLINE_IMAGE_BYTES = 1 << 20
"""Images that can go out as they are and are at most this size are prepared on the event loop."""


class DataUrlCache:
    """A small thread-safe LRU of image data URLs keyed by image content hash.

    Encoding that needs decoding (decode, PNG, base64) runs in worker threads; concurrent requests
    for the same image wait for one encoding instead of repeating it.
    """

    def __init__(self, size: int = 32, passthrough: bool = True) -> None:
        self._size = max(size, 0)
        self.passthrough = passthrough
        self._entries: OrderedDict[str, str] = OrderedDict()
        # the same ImageRef object again (both orders of a case, cases sharing an image) is answered
        # on the event loop without hashing its bytes in a worker thread; holding the reference keeps
        # its id from being reused while the entry lives
        self._by_identity: OrderedDict[int, tuple[ImageRef, str]] = OrderedDict()
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def lookup(self, image: ImageRef) -> str | None:
        """The data URL of this very object if it was encoded recently (cheap; call on the loop)."""
        with self._lock:
            entry = self._by_identity.get(id(image))
            if entry is None or entry[0] is not image:
                return None
            self._by_identity.move_to_end(id(image))
            self.hits += 1
            return entry[1]

    def count_miss(self) -> None:
        """Count a miss that was served without :meth:`get` (an image sent as it is)."""
        with self._lock:
            self.misses += 1

    def remember(self, image: ImageRef, url: str) -> None:
        """Let :meth:`lookup` answer for this object."""
        if not self._size:
            return
        with self._lock:
            self._by_identity[id(image)] = (image, url)
            self._by_identity.move_to_end(id(image))
            while len(self._by_identity) > self._size:
                self._by_identity.popitem(last=False)

    def get(self, image: ImageRef) -> str:
        """The data URL of ``image``, encoding it on a miss (call from a worker thread)."""
        from medrewardbench.images.decode import passthrough_data_url, to_data_url

        key = image.content_hash()
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return cached
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                cached = self._entries.get(key)
                if cached is not None:
                    self.hits += 1
                    return cached
                self.misses += 1
            url = (passthrough_data_url(image) if self.passthrough else None) or to_data_url(image, compress_level=1)
            with self._lock:
                if self._size:
                    self._entries[key] = url
                    while len(self._entries) > self._size:
                        self._entries.popitem(last=False)
                self._key_locks.pop(key, None)
        return url


def inline_data_url(image: ImageRef) -> str | None:
    """A small file that can go out as it is, read and encoded on the calling thread; else ``None``.

    Args:
        image: the image reference.

    Returns:
        The file's own bytes as a data URL when it is at most :data:`INLINE_IMAGE_BYTES` and
        :func:`passthrough_data_url` accepts it; ``None`` otherwise (the caller then encodes it
        in a worker thread, which also reports any problem with the file).
    """
    from medrewardbench.images.decode import passthrough_data_url

    if image.kind == "bytes" and image.data is not None:
        size = len(image.data)
    elif image.kind == "path":
        try:
            size = os.stat(image.location).st_size
        except OSError:
            return None  # the worker path reports the problem
    else:
        return None
    return passthrough_data_url(image) if size <= INLINE_IMAGE_BYTES else None
