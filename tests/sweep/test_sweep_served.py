"""Served models: the sweep starts the server, waits for /v1/models, judges through it, and stops it.

The server is ``medrewardbench serve hf:TINY`` on CPU (the stand-in for vLLM), so the lifecycle runs
for real: a server that is never ready, one that exits at once, one that ignores SIGTERM, one that
dies while it is judged, and a sweep interrupted by Ctrl-C or SIGTERM. A sweep killed with SIGKILL
(its server a shell leading the test server and a grandchild) takes every process of the group with
it; a group that outlives it because its supervisor was killed too is stopped by the next sweep.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.sweep import (
    RecordingProgress,
    cli,
    cli_env,
    group_gone,
    group_members,
    judgments_of,
    process_alive,
    served_groups,
    stored_rows,
    write_sweep,
)

from medrewardbench.sweep import SweepOptions, load_sweep, run_sweep

pytestmark = pytest.mark.slow

PYTHON = sys.executable
SERVE = f"{PYTHON} -m medrewardbench.cli serve hf:{{model}}#constrained --port {{port}} --device cpu"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def _served_sweep(
    tmp_path: Path, cases: Path, model: Path, command: str, *, ready_timeout: float = 120, stop_timeout: float = 10
) -> Path:
    return write_sweep(
        tmp_path / "sweep.yaml",
        f"""
        data: {cases}
        report: {{n_resamples: 20}}
        judges:
          - judge: baseline:longer
          - name: tiny
            judge: api:{model}
            max_tokens: 120
            concurrency: 1
            max_retries: 0
            serve:
              command: "{command}"
              ready_timeout: {ready_timeout}
              stop_timeout: {stop_timeout}
        """,
    )


def test_a_served_model_is_started_awaited_judged_through_and_stopped_with_its_log_kept(
    tmp_path: Path, sweep_cases: Path, tiny_qwen2_vl: Path
) -> None:
    out = tmp_path / "out"
    config = load_sweep(_served_sweep(tmp_path, sweep_cases, tiny_qwen2_vl, SERVE))
    progress = RecordingProgress()
    result = run_sweep(config, SweepOptions(out_dir=out), progress=progress)
    tiny = next(o for o in result.outcomes if o.name == "tiny")
    assert tiny.status == "done" and tiny.judged == 12 and tiny.failed == 0
    rows = judgments_of(out, f"api:{tiny_qwen2_vl}")
    assert len(rows) == 12 and all(row["prompt_tokens"] for row in rows)  # answered by the model, usage kept
    [pid] = progress.servers["tiny"]
    assert not _alive(pid)  # stopped
    log = (out / "servers" / "tiny.log").read_text("utf-8")
    assert log.count("=== medrewardbench sweep: starting") == 1 and "server stopped" in log
    assert "/v1/models" in log or "Uvicorn running" in log or "Application startup complete" in log
    with sqlite3.connect(out / "medrewardbench.sqlite") as db:
        config_json = db.execute("SELECT config_json FROM runs WHERE judge_spec LIKE 'api:%'").fetchone()[0]
    assert '"base_url": null' in config_json and "--port {port}" in config_json  # no port in the fingerprint
    # resume: everything is stored, so no server is started at all
    again = run_sweep(config, SweepOptions(out_dir=out, report=False), progress=RecordingProgress())
    assert next(o for o in again.outcomes if o.name == "tiny").judged == 0
    assert (out / "servers" / "tiny.log").read_text("utf-8").count("starting") == 1


@pytest.mark.parametrize(
    ("command", "timeout", "expected"),
    [
        # up, but never answering /v1/models; it even ignores SIGTERM, so it takes SIGKILL
        (
            f"{PYTHON} -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)' "
            "{port}",
            1.5,
            "did not answer GET /v1/models within 1.5 s (ready_timeout); it was stopped",
        ),
        # exits at once, saying why
        (
            f"{PYTHON} -c 'import sys; print(\"no GPU here\"); sys.exit(3)' {{port}}",
            60,
            "the server exited with code 3",
        ),
        ("/nonexistent/vllm serve {model} --port {port}", 60, "cannot start the server command '/nonexistent/vllm'"),
    ],
)
def test_a_server_that_never_becomes_ready_fails_its_entry_only_and_is_stopped(
    tmp_path: Path, sweep_cases: Path, command: str, timeout: float, expected: str
) -> None:
    out = tmp_path / "out"
    escaped = command.replace('"', '\\"')
    sweep = _served_sweep(tmp_path, sweep_cases, Path("some/model"), escaped, ready_timeout=timeout, stop_timeout=0.5)
    config = load_sweep(sweep)
    assert config.judges[1].serve is not None and config.judges[1].serve.ready_timeout_s == timeout
    progress = RecordingProgress()
    started = time.monotonic()
    result = run_sweep(config, SweepOptions(out_dir=out, report=False), progress=progress)
    assert time.monotonic() - started < 60
    outcomes = {o.name: o for o in result.outcomes}
    assert outcomes["baseline:longer"].status == "done" and outcomes["baseline:longer"].stored == 12
    assert outcomes["tiny"].status == "failed" and expected in (outcomes["tiny"].error or "")
    assert outcomes["tiny"].stored == 0
    for pid in progress.servers.get("tiny", []):
        assert not _alive(pid)
    if "exited with code 3" in expected:
        assert "no GPU here" in (outcomes["tiny"].error or "")  # the log's last lines are in the message
        assert "tiny.log" in (outcomes["tiny"].error or "")


def test_a_server_that_dies_mid_run_fails_its_entry_keeps_what_finished_and_a_rerun_completes(
    tmp_path: Path, sweep_cases: Path, tiny_qwen2_vl: Path
) -> None:
    out = tmp_path / "out"
    config = load_sweep(_served_sweep(tmp_path, sweep_cases, tiny_qwen2_vl, SERVE))
    killed: list[int] = []

    def kill_after_three(progress: RecordingProgress, name: str) -> None:
        if name == "tiny" and progress.advanced["tiny"] >= 3 and not killed:
            pid = progress.servers["tiny"][-1]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    progress = RecordingProgress(on_advance=kill_after_three)
    result = run_sweep(config, SweepOptions(out_dir=out, report=False), progress=progress)
    tiny = next(o for o in result.outcomes if o.name == "tiny")
    assert killed and tiny.status == "failed"
    assert "the server exited with signal 9" in (tiny.error or "") and "tiny.log" in (tiny.error or "")
    assert 3 <= tiny.stored < 12
    rows = judgments_of(out, f"api:{tiny_qwen2_vl}")
    assert len(rows) == tiny.stored and not any(row["failure"] for row in rows)  # no connection error stored
    # a rerun starts a new server and judges what is missing, each request once
    again = run_sweep(config, SweepOptions(out_dir=out, report=False), progress=RecordingProgress())
    tiny_again = next(o for o in again.outcomes if o.name == "tiny")
    assert tiny_again.status == "done" and tiny_again.judged == 12 - tiny.stored
    keys = stored_rows(out)
    assert len(keys) == len(set(keys)) == 24


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_sweep_stops_its_server_and_keeps_what_finished(
    tmp_path: Path, sweep_cases: Path, tiny_qwen2_vl: Path, signum: int
) -> None:
    out = tmp_path / "out"
    sweep = _served_sweep(tmp_path, sweep_cases, tiny_qwen2_vl, SERVE)
    process = subprocess.Popen(
        cli("sweep", str(sweep), "--out", str(out), "--no-report"),
        env=cli_env(COLUMNS="200"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    served = 0
    while time.monotonic() < deadline and process.poll() is None:
        try:
            served = sum(1 for fp, _, _ in stored_rows(out)) - 12
        except sqlite3.Error:
            served = -1
        if served >= 1:
            break
        time.sleep(0.2)
    assert served >= 1, "the served entry never stored a judgment"
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "rerun the same command to resume" in stderr
    pids = [int(line.split("(pid ")[1].split(",")[0]) for line in stderr.splitlines() if "started its server" in line]
    assert len(pids) == 1 and not _alive(pids[0])
    log = (out / "servers" / "tiny.log").read_text("utf-8")
    assert "server stopped" in log
    assert len(stored_rows(out)) >= 13  # the baseline and what the model judged are kept


# a shell leading a group of the stand-in server and a grandchild (the `sleep` keeping its stdin open)
SERVER_TREE = f"sh -c 'sleep 600 | exec {PYTHON} -m medrewardbench.testing.openai_server --port {{port}} --latency 0.3'"


def _start_killable_sweep(tmp_path: Path, sweep_cases: Path) -> tuple[subprocess.Popen[str], Path, dict[str, Any]]:
    """A ``sweep`` subprocess judging through a served tree, returned once the served entry stored a judgment."""
    out = tmp_path / "out"
    sweep = _served_sweep(tmp_path, sweep_cases, Path("served-model"), SERVER_TREE)
    process = subprocess.Popen(
        cli("sweep", str(sweep), "--out", str(out), "--no-report"),
        env=cli_env(COLUMNS="200"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(sqlite3.Error):
            if len(stored_rows(out)) > 12 and served_groups(out):
                break
        time.sleep(0.2)
    assert process.poll() is None and len(stored_rows(out)) > 12, "the served entry never stored a judgment"
    [group] = served_groups(out)
    return process, out, group


def _kill_tree(pids: list[int]) -> None:
    for pid in pids:
        if process_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_kill_9_of_the_sweep_takes_every_process_of_its_served_group_with_it(tmp_path: Path, sweep_cases: Path) -> None:
    process, out, group = _start_killable_sweep(tmp_path, sweep_cases)
    members = group_members(group["pgid"])
    try:
        assert group["pid"] == group["pgid"] and len(members) == 3  # the shell, sleep and the server
        assert group["sweep_pid"] == process.pid and process_alive(group["supervisor_pid"])
        process.kill()
        process.wait()
        assert group_gone(group["pgid"], members, timeout=5), [p for p in members if process_alive(p)]
        assert "the sweep is gone; stopping the server's process group" in (out / "servers" / "tiny.log").read_text()
    finally:
        _kill_tree(members)
        process.kill()
        process.communicate()


def test_a_group_outliving_a_killed_sweep_and_supervisor_is_stopped_at_the_next_start_and_only_it(
    tmp_path: Path, sweep_cases: Path
) -> None:
    process, out, group = _start_killable_sweep(tmp_path, sweep_cases)
    members = group_members(group["pgid"])
    # an unrelated process, recorded as if a pid of the leftover had been recycled for it
    unrelated = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        os.kill(group["supervisor_pid"], signal.SIGKILL)  # the supervisor cannot act...
        process.kill()  # ...when the sweep dies
        process.wait()
        time.sleep(1)
        assert len(members) == 3 and all(process_alive(pid) for pid in members)  # the leftover
        records = out / "servers" / "running.json"
        document = json.loads(records.read_text())
        document["groups"].append({**group, "pid": unrelated.pid, "pgid": unrelated.pid, "token": "recycled"})
        records.write_text(json.dumps(document))

        again = write_sweep(tmp_path / "again.yaml", f"data: {sweep_cases}\njudges:\n  - judge: baseline:longer\n")
        done = subprocess.run(
            cli("sweep", str(again), "--out", str(out), "--no-report", "-q"),  # the line shows even when quiet
            env=cli_env(COLUMNS="400"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        lines = [line for line in done.stderr.splitlines() if "left running" in line]
        assert len(lines) == 1, done.stderr[-3000:]
        assert lines[0].startswith("stopped the server of 'tiny' that an earlier sweep")
        assert (
            f"(pid {group['sweep_pid']}, gone)" in lines[0] and f"process group {group['pgid']}, 3 process" in lines[0]
        )
        assert group_gone(group["pgid"], members, timeout=15), [p for p in members if process_alive(p)]
        assert unrelated.poll() is None and process_alive(unrelated.pid)  # never touched
        assert served_groups(out) == []
    finally:
        _kill_tree(members)
        unrelated.kill()
        unrelated.wait()
        process.kill()
        process.communicate()
