"""Fingerprints: the hash of a configuration, and what identifies a local model inside one.

:func:`config_hash` is the SHA-256 under which judges' runs, generators' answers, juries and
difficulty filters are stored: it must stay byte-identical for the same settings (the stores key
their rows by it). A Hub id stays as it is; a local path becomes absolute, so the same directory
named two ways gives one fingerprint. File digests are SHA-256 over each file's name and bytes,
read in 1 MiB blocks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ADAPTER_FILES", "adapter_sha256", "config_hash", "files_sha256", "resolve_model_name"]

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


def config_hash(config: Mapping[str, Any]) -> str:
    """A stable hash of a JSON-serialisable mapping: SHA-256 over its sorted-key JSON.

    Args:
        config: everything that can change a model's outputs (no secrets).

    Returns:
        The hex digest; the same for the same settings in any key order.
    """
    payload = json.dumps(config, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
