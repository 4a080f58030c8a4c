"""A real ``medrewardbench annotate serve`` process killed with SIGKILL mid-submit loses nothing it acknowledged,
on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.annotate import as_user, case_rows, free_port, make_project, start_serve_process, write_cases

from medrewardbench.annotate.service import Identity, Project
from medrewardbench.dimensions import DIMENSIONS


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def test_kill_9_mid_run_loses_no_acknowledged_submit(
    project_factory: Any, tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    directory = tmp_path / "proj"
    if backend == "sqlite":
        project = project_factory(directory, cases=40, per_case=3)
    else:
        url = request.getfixturevalue("pg_cluster").create_database()
        cases = write_cases(tmp_path / "input", case_rows(40))
        project = make_project(directory, cases, admin=None, db_url=url, per_case=3)
    cli = Identity.command_line()
    tokens = {name: project.create_api_token(cli, name) for name in ("alice", "bob", "carol")}
    work = {name: [row.public_id for row in project.queue(as_user(project, name)).rows] for name in tokens}
    project.close()
    port = free_port()
    server = start_serve_process(directory, port, tmp_path / "server.log")
    acknowledged: dict[str, dict[str, str]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def annotator(name: str) -> None:
        headers = {"authorization": f"Bearer {tokens[name]}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=10) as client:
            for index, pid in enumerate(work[name]):
                if stop.is_set():
                    return
                choices = {dim: "AB"[(index + position) % 2] for position, dim in enumerate(DIMENSIONS)}
                try:
                    response = client.put(f"/api/v1/assignments/{pid}/submission", json={"choices": choices})
                except httpx.HTTPError:
                    return  # the server is gone: this one was never acknowledged
                if response.status_code == 200:
                    with lock:
                        acknowledged[pid] = choices

    threads = [threading.Thread(target=annotator, args=(name,)) for name in tokens]
    for thread in threads:
        thread.start()
    total = sum(len(ids) for ids in work.values())
    deadline = time.monotonic() + 120
    while len(acknowledged) < total // 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(server.pid, signal.SIGKILL)
    server.wait(timeout=30)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert total // 2 <= len(acknowledged) < total, "the kill should land mid-run"

    reopened = Project.open(directory)
    try:
        lost = []
        for name in tokens:
            me = as_user(reopened, name)
            for pid in work[name]:
                if pid in acknowledged:
                    saved = reopened.case_view(me, pid).submission
                    if saved is None or dict(saved.choices) != acknowledged[pid]:
                        lost.append(pid)
        assert lost == [], f"{len(lost)} acknowledged submit(s) missing after kill -9"
    finally:
        reopened.close()
    # the project serves again after the crash
    again = start_serve_process(directory, free_port(), tmp_path / "server2.log")
    again.terminate()
    again.wait(timeout=30)
