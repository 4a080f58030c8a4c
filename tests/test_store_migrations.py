"""Named schema migrations of the results store: applied once, in order, by one process, never unknown."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from medrewardbench import store as store_module
from medrewardbench.errors import StoreError
from medrewardbench.store import MIGRATION_PREFIX, Store

EXTRA = (
    ("test_0001_notes", ("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)",)),
    ("test_0002_note_author", ("ALTER TABLE notes ADD COLUMN author TEXT",)),
)


def _columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def test_an_existing_store_gets_every_migration_once_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "medrewardbench.sqlite"
    monkeypatch.setattr(store_module, "MIGRATIONS", ())
    with Store(path) as store:  # a store of the base layout, as older versions wrote it
        assert store.applied_migrations() == []
    monkeypatch.setattr(store_module, "MIGRATIONS", EXTRA)
    with Store(path) as store:
        assert store.applied_migrations() == ["test_0001_notes", "test_0002_note_author"]
    assert _columns(path, "notes") == ["id", "text", "author"]
    with Store(path) as store:  # opening again changes nothing (an ALTER applied twice would raise)
        assert store.applied_migrations() == ["test_0001_notes", "test_0002_note_author"]


def test_a_store_with_a_migration_this_version_does_not_know_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "medrewardbench.sqlite"
    monkeypatch.setattr(store_module, "MIGRATIONS", EXTRA)
    Store(path).close()
    monkeypatch.setattr(store_module, "MIGRATIONS", EXTRA[:1])
    with pytest.raises(StoreError, match="written by a newer medrewardbench.*test_0002_note_author"):
        Store(path)


def test_a_failing_migration_leaves_nothing_half_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "medrewardbench.sqlite"
    broken = (("test_broken", ("CREATE TABLE half (id INTEGER)", "THIS IS NOT SQL")),)
    monkeypatch.setattr(store_module, "MIGRATIONS", broken)
    with pytest.raises(StoreError):
        Store(path)
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        marks = db.execute("SELECT key FROM meta WHERE key LIKE ?", (MIGRATION_PREFIX + "%",)).fetchall()
    assert "half" not in tables and marks == []


def _open_with_extra(path: str, barrier: multiprocessing.synchronize.Barrier) -> None:
    store_module.MIGRATIONS = EXTRA
    barrier.wait()
    Store(path).close()


def test_processes_opening_one_store_together_apply_each_migration_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "medrewardbench.sqlite"
    monkeypatch.setattr(store_module, "MIGRATIONS", ())  # the base layout; the workers add EXTRA
    Store(path).close()
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(6)
    workers = [context.Process(target=_open_with_extra, args=(str(path), barrier)) for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0] * 6
    with sqlite3.connect(path) as db:
        marks = [row[0] for row in db.execute("SELECT key FROM meta WHERE key LIKE ?", (MIGRATION_PREFIX + "%",))]
    assert marks == [MIGRATION_PREFIX + "test_0001_notes", MIGRATION_PREFIX + "test_0002_note_author"]
