"""``--ray``: every entry in a Ray actor on a real local cluster (2 CPUs), the driver the only writer.

One cluster serves the whole session (``ray_cluster``). A sweep with baseline, API (the local test
server) and tiny transformers judges gives the same ``judgments.jsonl``, byte for byte, with and
without Ray; killing a worker mid-sweep still ends with every judgment stored exactly once, and
takes its served model's process group with it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.api import API_KEY_ENV, verdict_json
from helpers.sweep import (
    RecordingProgress,
    cli,
    cli_env,
    group_gone,
    processes_with_env,
    stored_rows,
    write_cases,
    write_sweep,
)

from medrewardbench.errors import MissingExtraError, install_command
from medrewardbench.sweep import DataMismatchError, SweepOptions, load_sweep, load_sweep_data, run_sweep
from medrewardbench.sweep.ray_backend import JudgeWorker, WorkerPayload, ray_module
from medrewardbench.testing.openai_server import OpenAIServer

pytestmark = pytest.mark.slow

MARKER = "MEDREWARDBENCH_TEST_MARKER"


def _prefers_longer(body: dict[str, Any]) -> str:
    """An answer that depends on the prompt (so a request judged for the wrong case would show)."""
    text = "\n".join(part.get("text", "") for m in body["messages"] for part in m["content"] if isinstance(part, dict))
    a = text.partition("[Answer A]")[2].partition("[End of Answer A]")[0]
    b = text.partition("[Answer B]")[2].partition("[End of Answer B]")[0]
    return verdict_json("A" if len(a) >= len(b) else "B", f"compared {len(a)} and {len(b)} characters")


def _sweep(
    tmp_path: Path, server: OpenAIServer, cases: Path, *, tiny_model: Path | None = None, name: str = "s"
) -> Path:
    local = ""
    if tiny_model is not None:
        local = (
            f"  - {{judge: 'hf:{tiny_model}#constrained', device: cpu, max_tokens: 120, batch_size: 2, "
            "resources: {num_cpus: 1}}\n"
        )
    return write_sweep(
        tmp_path / f"{name}.yaml",
        f"data: {cases}\nreport: {{n_resamples: 20}}\njudges:\n"
        "  - judge: baseline:longer\n  - judge: baseline:random\n"
        f"  - {{judge: 'api:ray-model', base_url: '{server.base_url}', api_key_env: {API_KEY_ENV}, "
        "concurrency: 3, max_retries: 2, backoff_base_s: 0.01}\n" + local,
    )


def test_a_ray_sweep_stores_byte_identical_judgments_and_reports_per_node_progress(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path, tiny_qwen2_vl: Path, ray_cluster: Any
) -> None:
    openai_server.control.set_responder(_prefers_longer)
    config = load_sweep(_sweep(tmp_path, openai_server, sweep_cases, tiny_model=tiny_qwen2_vl))
    local = run_sweep(config, SweepOptions(out_dir=tmp_path / "local", report=False))
    assert all(o.status == "done" and o.stored == 12 for o in local.outcomes)
    progress = RecordingProgress()
    clustered = run_sweep(config, SweepOptions(out_dir=tmp_path / "ray", ray="auto", report=False), progress=progress)
    assert all(o.status == "done" and o.judged == 12 for o in clustered.outcomes), clustered.outcomes
    local_bytes = (tmp_path / "local" / "judgments.jsonl").read_bytes()
    assert (tmp_path / "ray" / "judgments.jsonl").read_bytes() == local_bytes
    assert len(local_bytes.splitlines()) == 48
    # every entry ran in its own worker process, none in the driver, and the driver counted per node
    assert set(progress.workers) == {e.name for e in config.judges}
    assert all(len(pids) == 1 and os.getpid() not in pids for pids in progress.workers.values())
    assert "local" not in progress.nodes and sum(progress.nodes.values()) == 48
    assert all(o.nodes and "local" not in o.nodes for o in clustered.outcomes)
    summary = json.loads((tmp_path / "ray" / "sweep.json").read_text("utf-8"))
    assert sum(summary["nodes"].values()) == 48
    # resume on the cluster sends nothing
    requests = len(openai_server.control.chat_requests())
    again = run_sweep(config, SweepOptions(out_dir=tmp_path / "ray", ray="auto", report=False))
    assert all(o.judged == 0 and o.reused == 12 for o in again.outcomes)
    assert len(openai_server.control.chat_requests()) == requests


def test_a_killed_worker_is_restarted_and_every_judgment_is_stored_exactly_once(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path, ray_cluster: Any
) -> None:
    openai_server.control.set_responder(_prefers_longer)
    openai_server.control.set_latency(0.15)
    config = load_sweep(_sweep(tmp_path, openai_server, sweep_cases))
    local = run_sweep(config, SweepOptions(out_dir=tmp_path / "local", report=False))
    assert all(o.stored == 12 for o in local.outcomes)
    killed: list[int] = []

    def kill_the_api_worker(progress: RecordingProgress, name: str) -> None:
        if name == "api:ray-model" and progress.advanced[name] >= 4 and not killed:
            pid = progress.workers[name][-1]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    progress = RecordingProgress(on_advance=kill_the_api_worker)
    out = tmp_path / "ray"
    result = run_sweep(config, SweepOptions(out_dir=out, ray="auto", report=False), progress=progress)
    assert killed
    api = next(o for o in result.outcomes if o.name == "api:ray-model")
    assert api.status == "done" and api.stored == 12, (api.status, api.error)
    assert len(progress.workers["api:ray-model"]) == 2 and killed[0] in progress.workers["api:ray-model"]
    assert any("died" in note and "sending" in note for note in progress.notes)
    keys = stored_rows(out)
    assert len(keys) == len(set(keys)) == 36  # every judgment once
    assert (out / "judgments.jsonl").read_bytes() == (tmp_path / "local" / "judgments.jsonl").read_bytes()


def test_a_worker_that_loads_other_data_refuses_to_judge(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path, ray_cluster: Any
) -> None:
    config = load_sweep(_sweep(tmp_path, openai_server, sweep_cases))
    payload = WorkerPayload(entry=config.judges[0], data=config.data, data_hash="0" * 64)
    with pytest.raises(DataMismatchError, match="data fingerprint .* the driver 000000000000"):
        JudgeWorker(payload)
    # through a sweep: the driver was given other cases than the workers read from the source
    other = load_sweep_data(load_sweep(_sweep(tmp_path, openai_server, write_cases(tmp_path / "other", 5), name="o")))
    result = run_sweep(config, SweepOptions(out_dir=tmp_path / "out", ray="auto", report=False), benchmark=other)
    assert all(o.status == "failed" for o in result.outcomes)
    assert all("every node must read the same data" in (o.error or "") for o in result.outcomes), result.outcomes
    assert openai_server.control.chat_requests() == []


def test_without_ray_installed_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    # the command fits how this copy was installed ('.[ray]' from a checkout, the name from an index)
    expected = r"the 'ray' extra\)\. Install it with: " + re.escape(install_command("ray"))
    with pytest.raises(MissingExtraError, match=expected):
        ray_module()


def test_the_command_line_joins_a_running_cluster_with_one_flag(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path, ray_cluster: Any
) -> None:
    sweep = _sweep(tmp_path, openai_server, sweep_cases)
    address = ray_cluster.get_runtime_context().gcs_address
    done = subprocess.run(
        cli("sweep", str(sweep), "--out", str(tmp_path / "out"), "--ray", address, "--no-report"),
        env=cli_env(**{API_KEY_ENV: "sk-test"}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Ray worker on" in done.stderr and "requests judged per node:" in done.stdout
    assert len(stored_rows(tmp_path / "out")) == 36


def test_a_served_entry_starts_its_server_inside_its_worker_and_its_log_comes_back(
    tmp_path: Path, sweep_cases: Path, tiny_qwen2_vl: Path, ray_cluster: Any
) -> None:
    serve = f"{sys.executable} -m medrewardbench.cli serve hf:{{model}}#constrained --port {{port}} --device cpu"
    sweep = write_sweep(
        tmp_path / "served.yaml",
        f"""
        data: {sweep_cases}
        judges:
          - name: tiny
            judge: api:{tiny_qwen2_vl}
            max_tokens: 120
            serve: {{command: "{serve}", gpus: 0, ready_timeout: 120, stop_timeout: 10}}
        """,
    )
    config = load_sweep(sweep)
    assert config.judges[0].ray_resources() == {"num_cpus": 1.0, "num_gpus": 0.0}
    progress = RecordingProgress()
    out = tmp_path / "out"
    result = run_sweep(config, SweepOptions(out_dir=out, ray="auto", report=False), progress=progress)
    assert result.outcomes[0].status == "done" and result.outcomes[0].judged == 12
    assert "tiny" in progress.workers and "tiny" not in progress.servers  # started by the worker, not here
    log = (out / "servers" / "tiny.log").read_text("utf-8")
    assert log.count("=== medrewardbench sweep: starting") == 1 and "server stopped" in log
    # resume: the driver plans it, finds everything stored, and starts no worker and no server
    again_progress = RecordingProgress()
    again = run_sweep(config, SweepOptions(out_dir=out, ray="auto", report=False), progress=again_progress)
    assert again.outcomes[0].judged == 0 and again.outcomes[0].reused == 12 and not again_progress.workers


def test_a_killed_worker_takes_its_served_process_group_with_it(
    tmp_path: Path, sweep_cases: Path, ray_cluster: Any
) -> None:
    # the server: a shell leading the test server and a grandchild `sleep`, all marked for this test
    serve = (
        f"sh -c 'sleep 600 | exec {sys.executable} -m medrewardbench.testing.openai_server --port {{port}} "
        "--latency 0.3'"
    )
    sweep = write_sweep(
        tmp_path / "served.yaml",
        f"""
        data: {sweep_cases}
        judges:
          - name: srv
            judge: api:served-model
            concurrency: 1
            max_retries: 0
            serve: {{command: "{serve}", gpus: 0, ready_timeout: 60, stop_timeout: 5, env: {{{MARKER}: "{tmp_path}"}}}}
        """,
    )
    killed: dict[str, Any] = {}

    def kill_the_worker(progress: RecordingProgress, name: str) -> None:
        if name == "srv" and progress.advanced[name] >= 2 and not killed:
            tree = processes_with_env(MARKER, str(tmp_path))  # the supervisor, the shell, sleep, the server
            groups = {os.getpgid(pid) for pid in tree}
            os.kill(progress.workers[name][-1], signal.SIGKILL)
            killed.update(tree=tree, gone=all(group_gone(pgid, tree, timeout=10) for pgid in groups))

    progress = RecordingProgress(on_advance=kill_the_worker)
    try:
        result = run_sweep(
            load_sweep(sweep), SweepOptions(out_dir=tmp_path / "out", ray="auto", report=False), progress=progress
        )
    finally:
        survivors = processes_with_env(MARKER, str(tmp_path))
        for pid in survivors:  # cleaned up, then reported below
            os.kill(pid, signal.SIGKILL)
    assert len(killed["tree"]) == 4 and killed["gone"], killed
    srv = result.outcomes[0]
    assert srv.status == "done" and srv.stored == 12 and len(progress.workers["srv"]) == 2  # restarted, new server
    assert survivors == []  # and that one stopped at the end
