"""Which image files the rows of a data source may name (:class:`ImagePolicy`).

An image path in a data set could name a private image anywhere on the machine, which an API
judge would then upload. Every image path a row names is checked against an :class:`ImagePolicy`
when the row is read: by default it must resolve inside the data's own directory.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from medrewardbench.images.files import FileRefused, check_regular_file, check_stat

IMAGE_ROOTS_ENV = "MEDREWARDBENCH_IMAGE_ROOTS"
"""Environment variable: directories (``os.pathsep``-separated) image paths may point into."""

_LEFT_TO_DECODER = frozenset(("no such file", "permission denied", "broken symbolic link (its target does not exist)"))


def _real_dir(path: str | Path) -> str:
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def image_roots_from_env() -> tuple[str, ...]:
    """The directories listed in ``MEDREWARDBENCH_IMAGE_ROOTS`` (empty entries ignored).

    Returns:
        The directories as written.
    """
    raw = os.environ.get(IMAGE_ROOTS_ENV, "")
    return tuple(part for part in raw.split(os.pathsep) if part.strip())


@dataclass(frozen=True)
class ImagePolicy:
    """Which image files the rows of a source may name.

    By default an image path must resolve, after symbolic links, inside one of ``roots``: the
    directory of the data (added by each loader) and any directory the user allowed. With
    ``allow_external`` any path is accepted (the behaviour before this check existed).

    Attributes:
        roots: allowed directories, resolved (``os.path.realpath``).
        allow_external: accept image paths anywhere.
    """

    roots: tuple[str, ...] = ()
    allow_external: bool = False
    _real_parents: dict[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """Resolved directories, so that a data set with many images in few directories is cheap."""

    @classmethod
    def create(cls, allow_external: bool = False, image_roots: Iterable[str | Path] | None = None) -> ImagePolicy:
        """A policy from user settings; ``MEDREWARDBENCH_IMAGE_ROOTS`` is always added to the roots.

        Args:
            allow_external: accept image paths anywhere.
            image_roots: further directories image paths may point into.

        Returns:
            The policy (the data's own directory is added by the loader).
        """
        roots = [*(image_roots or ()), *image_roots_from_env()]
        return cls(tuple(dict.fromkeys(_real_dir(root) for root in roots)), allow_external)

    def with_roots(self, *roots: str | Path) -> ImagePolicy:
        """This policy with more allowed directories (the data's own directory).

        Args:
            roots: directories to add.

        Returns:
            A new policy.
        """
        added = tuple(_real_dir(root) for root in roots)
        return ImagePolicy(tuple(dict.fromkeys((*added, *self.roots))), self.allow_external)

    def check(self, path: str, max_bytes: int | None, size_hint: str = "") -> str | None:
        """Why a row may not name this image file, or None when it may.

        Only ``stat`` is used: the file is not opened. A missing or unreadable file is not
        reported here (validation decodes every image and reports it with the decoder's reason).

        Args:
            path: the absolute image path, as the row resolves it.
            max_bytes: the image size limit.
            size_hint: how to raise it, for the message.

        Returns:
            A one-line reason, or None.
        """
        try:
            entry: os.stat_result | None = os.lstat(path)
        except OSError:
            entry = None  # missing: containment is still checked, the rest is left to the decoder
        is_link = entry is None or stat.S_ISLNK(entry.st_mode)
        if not self.allow_external:
            real = os.path.realpath(path) if is_link else self._real_file(path)
            if not any(_inside(real, root) for root in self.roots):
                shown = real if real == os.path.normpath(path) else f"{path} -> {real}"
                return (
                    f"image path {shown} is outside the data directory ({', '.join(self.roots) or 'none'}); "
                    f"move the image into it, or allow it with --allow-external-images or by listing "
                    f"its directory in {IMAGE_ROOTS_ENV}"
                )
        try:
            if entry is not None and not is_link:
                check_stat(entry, max_bytes, size_hint)  # not a link: lstat describes the file itself
            else:
                check_regular_file(path, max_bytes, size_hint)
        except FileRefused as exc:
            message = str(exc)
            if message in _LEFT_TO_DECODER or message.startswith("cannot read file"):
                return None
            return f"image file {path}: {message}"
        return None

    def _real_file(self, path: str) -> str:
        """The real path of a file that is not itself a link: its directory resolved once."""
        parent, name = os.path.split(path)
        real_parent = self._real_parents.get(parent)
        if real_parent is None:
            real_parent = self._real_parents[parent] = os.path.realpath(parent)
        return os.path.join(real_parent, name)
