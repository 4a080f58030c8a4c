"""Exports as downloads, for the admin pages and the admin API alike (each recorded in the audit log)."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

from fastapi.responses import Response

from medrewardbench.annotate.config import NotFound
from medrewardbench.annotate.service import Identity, Project

EXPORT_FILES: dict[str, tuple[str, str]] = {
    "canonical.jsonl": ("canonical", "application/x-ndjson"),
    "canonical.parquet": ("canonical", "application/vnd.apache.parquet"),
    "reference.zip": ("reference", "application/zip"),
    "release.zip": ("canonical", "application/zip"),
    "questions.jsonl": ("questions", "application/x-ndjson"),
}
"""Downloads: the file name -> (export format, media type). ``release.zip`` is the canonical export with
its dataset card (``labelled.jsonl`` and ``dataset.json``): unzipped, ``eval --data`` reads it with its
provenance."""


def export_response(project: Project, me: Identity, filename: str, client: str) -> Response:
    """An export as a download.

    Args:
        project: the open project.
        me: the caller (the export service refuses anyone but an admin).
        filename: one of :data:`EXPORT_FILES`.
        client: the caller's address, for the audit log.

    Returns:
        The file, as an attachment named after the project.

    Raises:
        NotFound: no such export.
        Forbidden: not an admin.
        InvalidInput: an export that does not fit the project's mode.
    """
    if filename not in EXPORT_FILES:
        raise NotFound(f"no export named {filename!r}; use one of {', '.join(EXPORT_FILES)}")
    fmt, media = EXPORT_FILES[filename]
    zipped = filename.endswith(".zip")
    with tempfile.TemporaryDirectory(prefix="mrb-export-") as tmp:
        folder = Path(tmp) / "export"
        target = folder if fmt == "reference" else (folder / "labelled.jsonl" if zipped else Path(tmp) / filename)
        summary = project.exports.export(me, fmt, target)
        if zipped:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
                for path in sorted(folder.rglob("*")):
                    if path.is_file():
                        archive.write(path, path.relative_to(folder).as_posix())
            data = buffer.getvalue()
        else:
            data = target.read_bytes()
    project.records.record_export(me, filename, summary.items, client)
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in project.settings.name) or "project"
    return Response(
        data,
        media_type=media,
        headers={"content-disposition": f'attachment; filename="{stem}-{filename}"'},
    )
