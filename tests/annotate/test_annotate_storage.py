"""Storage: migrations, commits, concurrency and queues on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from helpers.annotate import ANNOTATORS, PASSWORD, make_project

from medrewardbench.annotate.db import Base, current_revision, make_engine, migrate
from medrewardbench.annotate.export import export_project
from medrewardbench.annotate.service import Identity, PairAnswer, Project
from medrewardbench.dimensions import DIMENSIONS


def answer(rng: random.Random) -> PairAnswer:
    return PairAnswer({dim: rng.choice("AB") for dim in DIMENSIONS}, seconds=rng.uniform(3, 30))


def test_migrations_build_exactly_the_schema_of_the_models(tmp_path: Path, db_url: str | None) -> None:
    url = db_url or f"sqlite:///{tmp_path / 'schema.db'}"
    migrate(url)
    migrate(url)  # a second run is a no-op
    assert current_revision(url) == "r0002"
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
    finally:
        engine.dispose()


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout_and_full_sync(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'pragmas.db'}"
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def test_a_project_survives_closing_and_reopening(
    tmp_path: Path, db_url: str | None, cases_file: Path, gold_file: Path
) -> None:
    project = make_project(
        tmp_path / "proj", cases_file, db_url=db_url, gold=str(gold_file), repeat_share=0.34, per_case=2
    )
    rng = random.Random(1)
    _token, alice = project.login("alice", PASSWORD, "127.0.0.1")
    queue = project.queue(alice)
    for row in queue.rows:
        project.submit_pair(alice, row.public_id, answer(rng))
    project.close()

    again = Project.open(tmp_path / "proj")
    try:
        assert again.settings.mode == "pairs" and again.settings.per_case == 2
        _token, alice_again = again.login("alice", PASSWORD, "127.0.0.1")
        reopened = again.queue(alice_again)
        assert reopened.done == reopened.total == queue.total
        assert [row.public_id for row in reopened.rows] == [row.public_id for row in queue.rows]
        users = {u.name: u for u in again.list_users()}
        assert set(users) == {*ANNOTATORS, "boss"}
        assert users["alice"].done == queue.total
        with again.db.read() as s:
            actions = dict(s.execute(sa.text("SELECT action, COUNT(*) FROM audit_log GROUP BY action")).all())
        assert actions["submit"] == queue.total and actions["project.create"] == 1
        assert actions["user.add"] == 4
    finally:
        again.close()


def test_a_submit_is_committed_before_it_returns(tmp_path: Path, db_url: str | None, cases_file: Path) -> None:
    project = make_project(tmp_path / "proj", cases_file, db_url=db_url, annotators=("alice",), admin=None)
    try:
        _token, alice = project.login("alice", PASSWORD, "127.0.0.1")
        row = project.queue(alice).rows[0]
        project.submit_pair(alice, row.public_id, PairAnswer({dim: "A" for dim in DIMENSIONS}, seconds=4))
        # a separate engine (another process would see the same) finds it at once
        outside = sa.create_engine(project.config.db_url)
        try:
            with outside.connect() as connection:
                choices = connection.execute(
                    sa.text(
                        "SELECT s.choices FROM submissions s JOIN assignments a ON a.id = s.assignment_id "
                        "WHERE a.public_id = :pid"
                    ),
                    {"pid": row.public_id},
                ).scalar_one()
        finally:
            outside.dispose()
        stored = json.loads(choices) if isinstance(choices, str) else choices
        assert set(stored) == set(DIMENSIONS) and set(stored.values()) <= {1, 2}
    finally:
        project.close()


def test_concurrent_submits_from_many_threads_lose_nothing(
    tmp_path: Path, db_url: str | None, cases_file: Path
) -> None:
    project = make_project(tmp_path / "proj", cases_file, db_url=db_url, per_case=3, repeat_share=0.34)
    try:
        work: list[tuple[Identity, str]] = []
        for name in ANNOTATORS:
            _token, identity = project.login(name, PASSWORD, "127.0.0.1")
            work.extend((identity, row.public_id) for row in project.queue(identity).rows)
        errors: list[BaseException] = []
        lock = threading.Lock()

        def worker(chunk: list[tuple[Identity, str]], seed: int) -> None:
            rng = random.Random(seed)
            for identity, pid in chunk:
                try:
                    project.submit_pair(identity, pid, answer(rng))
                    project.submit_pair(identity, pid, answer(rng))  # and change it at once
                except BaseException as exc:  # collected and asserted below
                    with lock:
                        errors.append(exc)

        threads = [threading.Thread(target=worker, args=(work[i::6], i)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with project.db.read() as s:
            count, revisions = s.execute(sa.text("SELECT COUNT(*), SUM(revision) FROM submissions")).one()
            audits = s.execute(sa.text("SELECT COUNT(*) FROM audit_log WHERE action = 'submit'")).scalar_one()
        assert count == len(work) and revisions == 2 * len(work) and audits == 2 * len(work)
    finally:
        project.close()


def test_adding_and_deactivating_annotators_keeps_started_work(
    tmp_path: Path, db_url: str | None, cases_file: Path
) -> None:
    project = make_project(tmp_path / "proj", cases_file, db_url=db_url, per_case=2, annotators=("alice", "bob"))
    cli = Identity.command_line()
    try:
        _token, alice = project.login("alice", PASSWORD, "127.0.0.1")
        first = project.queue(alice).rows[0].public_id
        project.submit_pair(alice, first, answer(random.Random(0)))
        project.add_user(cli, "carol", "annotator", PASSWORD)
        users = {u.name: u for u in project.list_users()}
        assert users["carol"].assigned > 0
        assert first in [row.public_id for row in project.queue(alice).rows]
        project.set_active(cli, "alice", False)
        assert [row.public_id for row in project.queue(alice).rows] == [first]
        export = export_project(project, "canonical", tmp_path / "out.jsonl")
        assert export.items == 6
        rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert sum(len(r.get("annotations", [])) for r in rows) == 1
        with pytest.raises(Exception, match="wrong user name or password"):
            project.login("alice", PASSWORD, "127.0.0.1")
    finally:
        project.close()
