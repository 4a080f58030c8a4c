"""``--batch-api``: request file, upload, batch, polling and answers read like live ones, over real HTTP.

The test server's /v1/files and /v1/batches answer batches with its live answer logic, after a
delay and with failures injected per request; a killed sweep resumes polling the same batch and
never submits twice.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from helpers.api import API_KEY_ENV, FAKE_API_KEY, verdict_json
from helpers.sweep import cli, cli_env, judgments_of, stored_rows, write_sweep

from medrewardbench.evaluation.store import BatchSubmission, Store
from medrewardbench.metrics.cost import Price, recorded_cost
from medrewardbench.sweep import SweepOptions, load_sweep, run_sweep
from medrewardbench.testing.openai_server import OpenAIServer


def _sweep(tmp_path: Path, server: OpenAIServer, cases: Path, extra: str = "", name: str = "sweep.yaml") -> Path:
    return write_sweep(
        tmp_path / name,
        f"data: {cases}\nreport: {{n_resamples: 20}}\nbatch_api: {{poll_interval: 0.1{extra}}}\njudges:\n"
        f"  - {{judge: 'api:batched', base_url: '{server.base_url}', api_key_env: {API_KEY_ENV}, max_retries: 0, "
        "price: {input: 2, output: 8, batch_input: 1, batch_output: 4}}\n"
        "  - judge: baseline:longer\n",
    )


def _responder(body: dict[str, Any]) -> str:
    text = json.dumps(body["messages"])
    return verdict_json("A" if "image 1 " in text or "image 3 " in text else "B")


def test_the_test_server_speaks_the_files_and_batches_api_over_http(openai_server: OpenAIServer) -> None:
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="x", max_retries=0)
    line = {
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    }
    content = "\n".join(json.dumps({"custom_id": f"r{i}", **line}) for i in range(4)).encode()
    uploaded = client.files.create(file=("requests.jsonl", content), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == len(content)
    assert client.files.content(uploaded.id).content == content
    openai_server.control.batches.set_delay(0.3)
    openai_server.control.batches.fail_requests("r2", status=503)
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h", metadata={"k": "v"}
    )
    assert batch.status == "validating" and batch.metadata == {"k": "v"}
    time.sleep(0.1)
    assert client.batches.retrieve(batch.id).status == "in_progress"
    deadline = time.monotonic() + 10
    while (batch := client.batches.retrieve(batch.id)).status != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert batch.request_counts is not None and (batch.request_counts.completed, batch.request_counts.failed) == (3, 1)
    answers = [json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()]  # type: ignore[arg-type]
    assert {a["custom_id"] for a in answers} == {"r0", "r1", "r3"}
    assert answers[0]["response"]["body"]["usage"]["prompt_tokens"] == 1  # the live route's usage count
    errors = [json.loads(x) for x in client.files.content(batch.error_file_id).text.splitlines()]  # type: ignore[arg-type]
    assert [(e["custom_id"], e["response"]["status_code"]) for e in errors] == [("r2", 503)]
    # cancel, list, and a refused batch
    slow = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert client.batches.cancel(slow.id).status == "cancelled"
    assert [b.id for b in client.batches.list(limit=10)] == [slow.id, batch.id]
    with pytest.raises(openai.BadRequestError, match="input_file_id names no file"):
        client.batches.create(input_file_id="file-404", endpoint="/v1/chat/completions", completion_window="24h")
    assert openai_server.control.batches.counters == {
        "uploads": 1,
        "batches_created": 2,
        "lines_answered": 3,
        "lines_failed": 1,
        "cancels": 1,
    }
    assert sum(1 for r in openai_server.control.requests if r.method == "BATCH") == 4
    assert openai_server.control.chat_requests() == []


def test_batch_answers_are_read_exactly_like_live_ones_and_priced_at_batch_prices(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    openai_server.control.set_responder(_responder)
    config = load_sweep(_sweep(tmp_path, openai_server, sweep_cases))
    live = run_sweep(config, SweepOptions(out_dir=tmp_path / "live", report=False))
    assert live.outcomes[0].stored == 12 and len(openai_server.control.chat_requests()) == 12
    openai_server.control.clear_requests()
    result = run_sweep(config, SweepOptions(out_dir=tmp_path / "batch", batch_api=True))
    outcome = result.outcomes[0]
    assert outcome.status == "done" and outcome.judged == 12 and len(outcome.batch_ids) == 1
    assert openai_server.control.chat_requests() == []  # nothing went live
    assert openai_server.control.batches.counters["batches_created"] == 1
    assert _batch_listings(openai_server) == 0, "a new batch does not search the provider's batch list"
    live_rows = judgments_of(tmp_path / "live", "api:batched")
    batch_rows = judgments_of(tmp_path / "batch", "api:batched")
    assert batch_rows == live_rows  # same verdicts, raw outputs, failures, usage and fingerprints
    with Store.in_dir(tmp_path / "batch") as store:
        run = store.run(outcome.run_id)  # type: ignore[arg-type]
        judgments = store.judgments_for_run(run)
        [submission] = store.batch_submissions(run.judge_fingerprint)
        cost = recorded_cost(run.metadata)
    assert all(j.extra["batch_id"] == outcome.batch_ids[0] for j in judgments)
    assert all(j.extra["parse_method"] for j in judgments)
    assert submission.status == "ingested" and submission.batch_id == outcome.batch_ids[0]
    assert Path(submission.request_file).is_file() and len(submission.request_keys) == 12
    tokens = sum(j.prompt_tokens * 1 + j.completion_tokens * 4 for j in judgments) / 1e6  # type: ignore[operator]
    assert cost is not None and cost.usd == pytest.approx(tokens) and cost.price == Price(2, 8, 1, 4)
    # the request file holds exactly what live requests carry
    body = json.loads(Path(submission.request_file).read_text("utf-8").splitlines()[0])["body"]
    first_live = live_rows[0]
    assert body["model"] == "batched" and body["messages"][-1]["content"][0]["type"] in ("text", "image_url")
    assert first_live["fingerprint"] == batch_rows[0]["fingerprint"]


@pytest.mark.parametrize("mode", ["live", "store"])
def test_requests_the_batch_reports_as_failed_are_retried_live_or_stored_as_failures(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path, mode: str
) -> None:
    openai_server.control.batches.fail_requests("mrb-0", "mrb-5", status=500)
    config = load_sweep(_sweep(tmp_path, openai_server, sweep_cases, f", retry_failed: {mode}"))
    result = run_sweep(config, SweepOptions(out_dir=tmp_path / "out", batch_api=True, report=False))
    assert result.outcomes[0].stored == 12
    rows = judgments_of(tmp_path / "out", "api:batched")
    failed = [row for row in rows if row["failure"]]
    if mode == "live":
        assert len(openai_server.control.chat_requests()) == 2 and failed == []
    else:
        assert openai_server.control.chat_requests() == []
        assert len(failed) == 2 and all(row["failure"].startswith("HTTP 500: ") for row in failed)


def test_an_expired_batch_leaves_its_unanswered_requests_to_live_requests(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    openai_server.control.batches.set_outcome("expired", answered=5)
    result = run_sweep(
        load_sweep(_sweep(tmp_path, openai_server, sweep_cases)), SweepOptions(out_dir=tmp_path / "out", batch_api=True)
    )
    assert result.outcomes[0].stored == 12 and len(openai_server.control.chat_requests()) == 7
    assert not [row for row in judgments_of(tmp_path / "out", "api:batched") if row["failure"]]


def test_a_killed_sweep_resumes_polling_the_same_batch_and_never_submits_twice(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    openai_server.control.batches.set_delay(4.0)
    sweep = _sweep(tmp_path, openai_server, sweep_cases)
    out = tmp_path / "out"
    process = subprocess.Popen(
        cli("sweep", str(sweep), "--out", str(out), "--batch-api", "--no-report", "-q"),
        env=cli_env(**{API_KEY_ENV: FAKE_API_KEY}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    batch_id = None
    while batch_id is None and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
        try:
            with sqlite3.connect(out / "medrewardbench.sqlite", timeout=5) as db:
                row = db.execute("SELECT batch_id FROM batch_api_batches").fetchone()
        except sqlite3.Error:
            continue
        batch_id = row[0] if row else None
    assert batch_id is not None, process.stderr.read() if process.stderr else ""
    os.kill(process.pid, signal.SIGKILL)  # no cleanup at all
    process.wait(timeout=30)
    assert len(stored_rows(out)) <= 12  # the baseline at most: the batch is still running
    result = run_sweep(load_sweep(sweep), SweepOptions(out_dir=out, batch_api=True, report=False))
    assert result.outcomes[0].batch_ids == [batch_id] and result.outcomes[0].stored == 12
    counters = openai_server.control.batches.counters
    assert counters["batches_created"] == 1 and counters["uploads"] == 1
    assert openai_server.control.chat_requests() == []


def test_a_batch_created_by_a_process_killed_before_it_recorded_the_id_is_found_not_resubmitted(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    config = load_sweep(_sweep(tmp_path, openai_server, sweep_cases))
    out = tmp_path / "out"
    # a first sweep stops before anything is submitted: the baseline and the run are stored
    first = run_sweep(config, SweepOptions(out_dir=out, report=False, budget_usd=0.0))
    assert first.outcomes[0].stored == 0
    # ... then, as a killed process would have left it: a request file uploaded and a batch created
    # on the server, but only the upload recorded in the store
    requests = [
        {"custom_id": f"mrb-{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "batched", "messages": [{"role": "user", "content": f"case {i}"}]}}
        for i in range(2)
    ]  # fmt: skip
    request_file = out / "batches" / "left-behind.jsonl"
    request_file.parent.mkdir(parents=True, exist_ok=True)
    request_file.write_text("\n".join(json.dumps(r) for r in requests) + "\n", encoding="utf-8")
    client = openai.OpenAI(base_url=openai_server.base_url, api_key="x")
    uploaded = client.files.create(file=(request_file.name, request_file.read_bytes()), purpose="batch")
    created = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
    with Store.in_dir(out) as store:
        run = store.run(first.outcomes[0].run_id)  # type: ignore[arg-type]
        store.add_batch_submission(
            BatchSubmission(
                submission_id="killed-before-create",
                judge_fingerprint=run.judge_fingerprint,
                run_id=run.run_id,
                base_url=openai_server.base_url,
                request_file=str(request_file),
                request_keys=(("c000", "original", _hash(out, "c000")), ("c000", "swapped", _hash(out, "c000"))),
                input_file_id=uploaded.id,
                batch_id=None,
                status="uploaded",
            )
        )
    openai_server.control.clear_requests()
    result = run_sweep(config, SweepOptions(out_dir=out, batch_api=True, report=False))
    assert created.id in result.outcomes[0].batch_ids
    assert _batch_listings(openai_server) == 1, "searched for the resumed submission only, not for the new one"
    assert openai_server.control.batches.counters["batches_created"] == 2  # ours, and one for the other ten requests
    assert result.outcomes[0].stored == 12
    with Store.in_dir(out) as store:
        found = {s.submission_id: s for s in store.batch_submissions(run.judge_fingerprint)}
    assert found["killed-before-create"].batch_id == created.id and found["killed-before-create"].status == "ingested"
    assert openai_server.control.chat_requests() == []


def _batch_listings(server: OpenAIServer) -> int:
    return sum(1 for r in server.control.requests if r.method == "GET" and r.path.rstrip("/") == "/v1/batches")


def _hash(out: Path, case_id: str) -> str:
    with sqlite3.connect(out / "medrewardbench.sqlite") as db:
        return str(db.execute("SELECT case_hash FROM cases WHERE case_id=?", (case_id,)).fetchone()[0])


def test_the_batch_table_is_a_named_migration_and_keeps_its_rows(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        assert "batch_api_batches" in store.applied_migrations()
        submission = BatchSubmission(
            "sub-1", "fp", "run", None, "f.jsonl", (("c", "original", "h"),), None, None, "uploading"
        )
        store.add_batch_submission(submission)
        store.update_batch_submission("sub-1", input_file_id="file-9", status="uploaded")
        [back] = store.batch_submissions("fp", open_only=True)
        assert back.input_file_id == "file-9" and back.request_keys == (("c", "original", "h"),)
        store.update_batch_submission("sub-1", status="ingested")
        assert store.batch_submissions("fp", open_only=True) == []
        with pytest.raises(ValueError, match="cannot change run_id"):
            store.update_batch_submission("sub-1", run_id="other")


def test_the_batch_path_streams_requests_and_answers_in_bounded_pieces(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from medrewardbench.evaluation.runner import RunPlan
    from medrewardbench.sweep import batch_api

    def whole(self: RunPlan) -> None:
        raise AssertionError("the batch path read a whole entry's requests into memory")

    monkeypatch.setattr(RunPlan, "requests", property(whole))
    monkeypatch.setattr(batch_api, "STORE_EVERY", 5)  # answers stored 5 at a time as they are read
    openai_server.control.set_responder(_responder)
    config = load_sweep(_sweep(tmp_path, openai_server, sweep_cases, ", max_requests: 7"))
    result = run_sweep(config, SweepOptions(out_dir=tmp_path / "out", batch_api=True, report=False))
    outcome = result.outcomes[0]
    assert outcome.status == "done" and outcome.judged == 12 and len(outcome.batch_ids) == 2  # 7 + 5 requests
    assert len(set(stored_rows(tmp_path / "out"))) == len(stored_rows(tmp_path / "out"))
    # only the request files stay: the downloaded answers are read from disk, then removed
    assert sorted(p.suffix for p in (tmp_path / "out" / "batches").iterdir()) == [".jsonl", ".jsonl"]
    assert all(".output" not in p.name and ".part" not in p.name for p in (tmp_path / "out" / "batches").iterdir())
