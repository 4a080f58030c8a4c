"""The build store opens like the results store: one shared way (sqlitedb) of WAL, busy timeout and migrations."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from medrewardbench.curation import store as build_store
from medrewardbench.curation.store import BuildStore
from medrewardbench.errors import StoreError
from medrewardbench.utils.sqlitedb import MIGRATION_PREFIX

EXTRA = (*build_store.MIGRATIONS, ("build_test_notes", ("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)",)))


def test_the_build_store_is_wal_with_a_busy_timeout_and_named_migrations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "build.sqlite"
    opened: list[sqlite3.Connection] = []
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: opened.append(connect(*a, **k)) or opened[-1])
    with BuildStore(path) as store:
        assert store.applied_migrations() == ["label_details"]
        [db] = opened  # the store's own connection
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(build_store, "MIGRATIONS", EXTRA)
    with BuildStore(path) as store:
        assert store.applied_migrations() == ["label_details", "build_test_notes"]
    with sqlite3.connect(path) as db:
        assert (
            db.execute("SELECT COUNT(*) FROM meta WHERE key=?", (MIGRATION_PREFIX + "build_test_notes",)).fetchone()[0]
            == 1
        )
    monkeypatch.setattr(build_store, "MIGRATIONS", build_store.MIGRATIONS[:1])
    with pytest.raises(StoreError, match="written by a newer medrewardbench.*build_test_notes"):
        BuildStore(path)


def test_a_store_from_before_label_details_keeps_its_labels_and_gains_comments_and_adjudications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from medrewardbench.cases import Adjudication, Annotation

    path = tmp_path / "build.sqlite"
    monkeypatch.setattr(build_store, "MIGRATIONS", ())
    with BuildStore(path) as store, store.transaction() as db:  # a project labelled by the previous version
        db.execute(
            "INSERT INTO labels(pair_id, annotator, labels_json, order_shown, seconds, source, imported_at) "
            "VALUES ('p1', 'dr_a', '{\"overall\": 2}', 'swapped', 4.5, 'old.jsonl', 0)"
        )
    monkeypatch.undo()
    with BuildStore(path) as store:
        assert store.applied_migrations() == ["label_details"]
        (old,) = store.labels_for(["p1"])["p1"]
        assert old == Annotation("dr_a", {"overall": 2}, "swapped", 4.5)
        with store.transaction():
            store.upsert_labels([("p1", Annotation("dr_b", {"overall": 1}, comment="A is safer"), "new.jsonl")])
            store.replace_adjudications("p1", [Adjudication("overall", 2, "chief", "B names the lesion")], "new.jsonl")
        found = store.labels_for(["p1"])["p1"]
        assert [a.comment for a in found] == [None, "A is safer"]
        assert store.adjudications_for(["p1"])["p1"] == [Adjudication("overall", 2, "chief", "B names the lesion")]


def test_a_file_that_is_not_a_build_store_is_refused_in_words(tmp_path: Path) -> None:
    junk = tmp_path / "build.sqlite"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a usable build project store"):
        BuildStore(junk)


def test_scrubbed_json_writes_what_the_full_scrub_would_for_flat_records_and_scrubs_everything_else() -> None:
    import json

    from medrewardbench.curation.store_schema import json_text, scrubbed_json
    from medrewardbench.utils.secrets import REDACTED, register_secret, scrub_value

    secret = "store-json-secret-0123456789"
    register_secret(secret)
    values: list[object] = [
        {"attempts": 1, "retries": 0, "structured": False},
        {"latency": 0.125, "tokens": None, "nan": float("nan"), "big": 10**30},
        {},
        {secret: 1, "sk-abcdefghijklmnopqrstuvwx": 2},  # credential-shaped keys
        {"errors": ["HTTP 429", f"Bearer {secret}"], "attempts": 3},
        {"nested": {"key": secret}},
        {1: True, 2: 3},  # keys that are no strings become strings
        [1, 2, secret],
        f"plain {secret}",
    ]
    for value in values:
        assert scrubbed_json(value) == json_text(scrub_value(json.loads(json_text(value)))), value
    assert secret not in scrubbed_json({secret: 1}) and REDACTED in scrubbed_json({secret: 1})
