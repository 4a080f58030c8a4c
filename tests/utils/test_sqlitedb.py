"""The one write transaction both SQLite stores use: the write lock at the start, commit, or roll back."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from medrewardbench.utils.sqlitedb import open_database, transaction

SCHEMA = "CREATE TABLE IF NOT EXISTS t (v INTEGER);"


def test_a_transaction_holds_the_write_lock_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite"
    with closing(open_database(path, SCHEMA, 1, ())) as db, closing(sqlite3.connect(path, timeout=0)) as other:
        with transaction(db):
            db.execute("SELECT COUNT(*) FROM t").fetchone()  # it has only read so far
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO t VALUES (1)")
        other.execute("BEGIN IMMEDIATE")  # released at the commit
        assert other.execute("SELECT v FROM t").fetchall() == [(1,)]
        other.rollback()


def test_a_transaction_rolls_back_when_its_block_raises_and_joins_an_open_one(tmp_path: Path) -> None:
    with closing(open_database(tmp_path / "x.sqlite", SCHEMA, 1, ())) as db:
        with pytest.raises(KeyboardInterrupt), transaction(db):
            db.execute("INSERT INTO t VALUES (1)")
            raise KeyboardInterrupt
        assert db.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 0 and not db.in_transaction
        db.execute("INSERT INTO t VALUES (2)")  # an implicit transaction the block joins
        with transaction(db):
            db.execute("INSERT INTO t VALUES (3)")
        assert not db.in_transaction
        assert [r[0] for r in db.execute("SELECT v FROM t ORDER BY v")] == [2, 3]
