"""Helpers of the sweep tests (tests/sweep/): real case files, sweep files, a progress recorder, store readers.

Process helpers for the served-model tests read ``/proc`` (pids, process groups, zombies).

A pytest plugin (registered in tests/conftest.py) with two fixtures: ``sweep_cases`` (six labelled
cases with their PNG files) and ``ray_cluster`` (a local Ray cluster on 2 CPUs, started by the first
test that asks for it and shut down when the session ends). The sweep tests take the test server
from :mod:`helpers.api` (``openai_server``, its key variable and fake key) and the tiny Qwen2-VL from
:mod:`helpers.models` (``tiny_qwen2_vl``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from helpers.images import write_png
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.sweep.progress import EntryOutcome, SweepProgress

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def sweep_cases(tmp_path: Path) -> Path:
    """Six labelled cases with PNG images, in a canonical JSONL file."""
    return write_cases(tmp_path / "data", 6)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A local Ray cluster on 2 CPUs for the session (workers inherit this process's environment)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


# ------------------------------------------------------------------------------------------- files


def write_cases(directory: Path, n: int = 6, *, images: bool = True) -> Path:
    """A canonical JSONL set of ``n`` cases labelled on all six dimensions, over two organ systems,
    each with its own PNG file beside it (or none). Response 2 is longer than response 1 in every case."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        if images:
            write_png(directory / f"img{i}.png", size=(16, 12), seed=i)
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


# ---------------------------------------------------------------------------------------- progress


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


# ----------------------------------------------------------------------------------------- results


def stored_rows(out: Path) -> list[tuple[str, str, str]]:
    """(judge fingerprint, case id, order) of every stored judgment."""
    with sqlite3.connect(out / "medrewardbench.sqlite") as db:
        return [(r[0], r[1], r[2]) for r in db.execute("SELECT judge_fingerprint, case_id, order_ FROM judgments")]


def judgments_of(out: Path, judge: str) -> list[dict[str, Any]]:
    """The rows of judgments.jsonl whose judge spec is ``judge``."""
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text("utf-8").splitlines()]
    return [row for row in rows if row["judge"] == judge]


# ------------------------------------------------------------------------------------ command line


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


# --------------------------------------------------------------------------------------- processes


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """The running processes of a process group."""
    members = []
    for name in os.listdir("/proc"):
        if name.isdigit() and process_alive(int(name)):
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                members.append(int(name))
    return members


def group_gone(pgid: int, pids: list[int], timeout: float) -> bool:
    """Wait until none of ``pids`` runs and the group no longer exists (``killpg`` finds nothing)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(process_alive(pid) for pid in pids):
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return True
        time.sleep(0.05)
    return False


def served_groups(out: Path) -> list[dict[str, Any]]:
    """The served process groups recorded in ``out/servers/running.json``."""
    path = out / "servers" / "running.json"
    if not path.exists():
        return []
    groups: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))["groups"]
    return groups


def processes_with_env(name: str, value: str) -> list[int]:
    """The running processes whose environment holds ``NAME=VALUE`` (of this user)."""
    wanted = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and process_alive(int(entry)):
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if wanted in environ.split(b"\0"):
                found.append(int(entry))
    return found
