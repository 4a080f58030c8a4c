"""What identifies a local model in a judge's configuration: its resolved name and the digest of its files.

A Hub id stays as it is; a local path becomes absolute, so the same directory named two ways gives
one fingerprint. File digests are SHA-256 over each file's name and bytes, read in 1 MiB blocks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ADAPTER_FILES", "adapter_sha256", "files_sha256", "resolve_model_name"]

ADAPTER_FILES: tuple[str, ...] = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")
"""The files of a PEFT adapter directory that decide its outputs."""


def resolve_model_name(name_or_path: str) -> str:
    """The absolute path of a local model directory or file; a Hub id (no such path) unchanged.

    Args:
        name_or_path: a Hub id or a path (``~`` is expanded).

    Returns:
        The resolved path, or the name as given.
    """
    path = Path(name_or_path).expanduser()
    return str(path.resolve()) if path.exists() else name_or_path


def files_sha256(paths: Sequence[Path], *, size_only_over: int | None = None) -> str:
    """SHA-256 over files, in the order given: each file's name, then its bytes.

    Args:
        paths: the files; those that do not exist are skipped.
        size_only_over: files larger than this many bytes contribute their name and size only
            (a checkpoint of several GB is not read to fingerprint a run); None reads every file.

    Returns:
        64 lowercase hex characters (``sha256(b"")`` when no file exists).
    """
    digest = hashlib.sha256()
    for path in paths:
        if not path.is_file():
            continue
        digest.update(path.name.encode())
        size = path.stat().st_size
        if size_only_over is not None and size > size_only_over:
            digest.update(str(size).encode())
            continue
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def adapter_sha256(directory: str) -> str | None:
    """SHA-256 over a local adapter's config and weights (:data:`ADAPTER_FILES`), or None for a Hub id.

    Args:
        directory: the adapter directory, or a Hub id.

    Returns:
        The digest, or None when ``directory`` is not a local directory.
    """
    root = Path(directory)
    if not root.is_dir():
        return None
    return files_sha256([root / name for name in ADAPTER_FILES])
