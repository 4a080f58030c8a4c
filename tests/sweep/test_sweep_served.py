"""Served models: the sweep starts the server, waits for /v1/models, judges through it, and stops it.

The server is ``medrewardbench serve hf:TINY`` on CPU (the stand-in for vLLM), so the lifecycle runs
for real: a server that is never ready, one that exits at once, one that ignores SIGTERM, one that
dies while it is judged, and a sweep interrupted by Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.sweep import RecordingProgress, cli, cli_env, judgments_of, stored_rows, write_sweep

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
