"""Helpers of the sweep tests: real case files, sweep files, a progress recorder, store readers."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.sweep.progress import EntryOutcome, SweepProgress

__all__ = [
    "API_KEY_ENV",
    "FAKE_KEY",
    "RecordingProgress",
    "cli_env",
    "judgments_of",
    "stored_rows",
    "verdict",
    "write_cases",
    "write_sweep",
]

API_KEY_ENV = "MRB_SWEEP_TEST_KEY"
FAKE_KEY = "sk-sweepFAKE0123456789abcdefLEAKCHECK"
ROOT = Path(__file__).resolve().parents[2]


def _png(index: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), (40 + index * 7 % 200, 90, 200 - index * 5 % 150)).save(buffer, format="PNG")
    return buffer.getvalue()


def write_cases(directory: Path, n: int = 6, *, images: bool = True) -> Path:
    """A canonical JSONL set of ``n`` cases labelled on all six dimensions, over two organ systems,
    each with its own PNG file beside it (or none). Response 2 is longer than response 1 in every case."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        if images:
            (directory / f"img{i}.png").write_bytes(_png(i))
        rows.append(
            {
                "id": f"c{i:03d}",
                "image": f"img{i}.png" if images else None,
                "question": f"What does image {i} show?",
                "response_1": f"Short answer {i}.",
                "response_2": f"A longer and more detailed answer number {i}, with findings.",
                "labels": {d: 1 + (i + j) % 2 for j, d in enumerate(DIMENSIONS)},
                "organ_system": "chest" if i % 2 else "brain",
            }
        )
    path = directory / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def write_sweep(path: Path, text: str) -> Path:
    """Write a sweep file (the text is dedented)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def verdict(letter: str, reason: str = "scripted") -> str:
    """A complete verdict naming ``letter`` on every dimension."""
    return json.dumps({**{d: letter for d in DIMENSIONS}, "reason": reason})


@dataclass
class RecordingProgress(SweepProgress):
    """Records every call; ``on_advance`` may act on them (kill a worker, a server...)."""

    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    advanced: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    workers: dict[str, list[int]] = field(default_factory=dict)
    servers: dict[str, list[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    finished: list[EntryOutcome] = field(default_factory=list)
    on_advance: Any = None

    def stage(self, text: str) -> None:
        self.calls.append(("stage", (text,)))

    def entry_started(self, name: str, total: int, already_done: int) -> None:
        self.calls.append(("entry_started", (name, total, already_done)))

    def advance(self, name: str, n: int, node: str | None = None) -> None:
        self.advanced[name] = self.advanced.get(name, 0) + n
        label = node or "local"
        self.nodes[label] = self.nodes.get(label, 0) + n
        if self.on_advance is not None:
            self.on_advance(self, name)

    def entry_finished(self, outcome: EntryOutcome) -> None:
        self.finished.append(outcome)

    def server_started(self, name: str, pid: int, port: int, log_path: str) -> None:
        self.servers.setdefault(name, []).append(pid)

    def worker_started(self, name: str, node: str, pid: int) -> None:
        self.workers.setdefault(name, []).append(pid)

    def note(self, text: str) -> None:
        self.notes.append(text)


def stored_rows(out: Path) -> list[tuple[str, str, str]]:
    """(judge fingerprint, case id, order) of every stored judgment."""
    with sqlite3.connect(out / "medrewardbench.sqlite") as db:
        return [(r[0], r[1], r[2]) for r in db.execute("SELECT judge_fingerprint, case_id, order_ FROM judgments")]


def judgments_of(out: Path, judge: str) -> list[dict[str, Any]]:
    """The rows of judgments.jsonl whose judge spec is ``judge``."""
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text("utf-8").splitlines()]
    return [row for row in rows if row["judge"] == judge]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a ``medrewardbench`` subprocess: this checkout first on the path, offline."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def cli(*args: str) -> list[str]:
    """The command line of ``medrewardbench ARGS`` run by this interpreter."""
    return [sys.executable, "-m", "medrewardbench.cli", *args]
