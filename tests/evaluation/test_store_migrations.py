"""Named schema migrations of the results store: applied once, in order, by one process, never unknown."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from medrewardbench.errors import StoreError
from medrewardbench.evaluation import store as store_module
from medrewardbench.evaluation.store import MIGRATION_PREFIX, Store

SHIPPED = store_module.MIGRATIONS
SHIPPED_NAMES = [name for name, _ in SHIPPED]
EXTRA = (
    *SHIPPED,
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
        assert store.applied_migrations() == [*SHIPPED_NAMES, "test_0001_notes", "test_0002_note_author"]
    assert _columns(path, "notes") == ["id", "text", "author"]
    with Store(path) as store:  # opening again changes nothing (an ALTER applied twice would raise)
        assert store.applied_migrations() == [*SHIPPED_NAMES, "test_0001_notes", "test_0002_note_author"]


def test_a_store_with_a_migration_this_version_does_not_know_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "medrewardbench.sqlite"
    monkeypatch.setattr(store_module, "MIGRATIONS", EXTRA)
    Store(path).close()
    monkeypatch.setattr(store_module, "MIGRATIONS", EXTRA[:-1])
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
    # each recorded once (meta lists its keys by name, not in the order they were applied)
    assert sorted(marks) == sorted(
        MIGRATION_PREFIX + name for name in [*SHIPPED_NAMES, "test_0001_notes", "test_0002_note_author"]
    )


def test_a_store_from_before_per_annotator_labels_reads_its_cases_without_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "medrewardbench.sqlite"
    before = SHIPPED[: SHIPPED_NAMES.index("cases_annotations")]  # and so before every later migration
    monkeypatch.setattr(store_module, "MIGRATIONS", before)
    with Store(path):  # the layout an older version wrote, with one case row in it
        pass
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO cases(data_hash, position, case_id, case_hash, labels_json, groups_json, len_1, len_2) "
            "VALUES ('d', 0, 'c1', 'h', '{\"overall\": 1}', '{}', 3, 4)"
        )
    assert "annotations_json" not in _columns(path, "cases")
    monkeypatch.setattr(store_module, "MIGRATIONS", SHIPPED)
    with Store(path) as store:
        assert store.applied_migrations() == SHIPPED_NAMES  # the missing ones, in their order
        [case] = store.cases("d")
    assert "annotations_json" in _columns(path, "cases")
    assert case.case_id == "c1" and case.labels == {"overall": 1} and case.annotations == ()


def test_label_provenance_comes_after_the_per_annotator_labels_and_a_store_without_it_reads_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SHIPPED_NAMES.index("label_provenance") > SHIPPED_NAMES.index("cases_annotations")
    path = tmp_path / "medrewardbench.sqlite"
    before = SHIPPED[: SHIPPED_NAMES.index("label_provenance")]  # a store with annotations, no provenance yet
    monkeypatch.setattr(store_module, "MIGRATIONS", before)
    with Store(path) as store:
        assert store.applied_migrations() == SHIPPED_NAMES[: len(before)]
    assert "annotations_json" in _columns(path, "cases") and _columns(path, "label_provenance") == []
    monkeypatch.setattr(store_module, "MIGRATIONS", SHIPPED)
    with Store(path) as store:
        assert store.applied_migrations() == SHIPPED_NAMES
        assert store.label_provenance("d").kind == "unknown"  # nothing declared before the table existed
    assert _columns(path, "label_provenance") == ["data_hash", "kind", "raters", "description", "declared_by"]
