"""Free-text generation for the response pool: resumable and fingerprinted like judging, on the shared machinery."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from helpers.curation import API_KEY_ENV, FAKE_API_KEY, api_flags, api_options, imported_project, project_store

from medrewardbench.cases import ImageRef
from medrewardbench.curation.generation import GenerationProgress, GenerationSummary
from medrewardbench.curation.generators import (
    ApiTextGenerator,
    GenerationRequest,
    build_generator,
    load_answer_template,
)
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.curation.store import STORE_FILENAME
from medrewardbench.errors import JudgeSpecError
from medrewardbench.models.api.chat import ChatClient
from medrewardbench.prompts import TemplateError
from medrewardbench.testing.openai_server import OpenAIServer


class Recorder(GenerationProgress):
    def __init__(self) -> None:
        self.started: list[tuple[str, int, int]] = []
        self.advanced = 0
        self.finished: list[GenerationSummary] = []

    def start(self, judge_spec: str, total: int, already_done: int) -> None:
        self.started.append((judge_spec, total, already_done))

    def advance(self, n: int) -> None:
        self.advanced += n

    def finish_generation(self, summary: GenerationSummary) -> None:
        self.finished.append(summary)


def responses(server: OpenAIServer, project: Path, specs: list[str], **kwargs):  # type: ignore[no-untyped-def]
    options = kwargs.pop("options", None) or api_options(server)
    template = kwargs.pop("template", None) or load_answer_template()
    with open_project(project) as store:
        return run_responses(store, specs, options=options, template=template, **kwargs)


def test_the_pool_is_resumable_and_keyed_by_generator_fingerprint(answer_server: OpenAIServer, tmp_path: Path) -> None:
    project = imported_project(tmp_path)
    progress = Recorder()
    first = responses(answer_server, project, ["api:gen-a", "api:gen-b"], progress=progress)
    # 6 questions, 5 different contents (v1 and v2 share the CT image but not the question): 6 requests each
    assert [s.generated for s in first] == [6, 6] and len(answer_server.control.chat_requests()) == 12
    assert progress.started == [("api:gen-a", 6, 0), ("api:gen-b", 6, 0)] and progress.advanced == 12
    # every request carried the question's image as a data URL and the answer prompt
    request = answer_server.control.chat_requests()[0]
    assert request.image_urls()[0].startswith("data:image/png;base64,")
    assert (
        "Is there a mass in the liver?" in request.user_text()
        and "Begin your reply with that answer" in request.user_text()
    )
    answer_server.control.clear_requests()
    again = responses(answer_server, project, ["api:gen-a", "api:gen-b"])
    assert answer_server.control.chat_requests() == [] and [s.reused for s in again] == [6, 6]
    # another sampling setting is another generator configuration: asked again
    hotter = responses(answer_server, project, ["api:gen-a"], options=api_options(answer_server, temperature=0.7))
    assert hotter[0].generated == 6 and hotter[0].fingerprint != first[0].fingerprint
    with project_store(project) as store:
        specs = store.generator_specs()
        assert sorted(specs.values()) == ["api:gen-a", "api:gen-a", "api:gen-b"]
        # the pool holds configurations; pairs never put two of one spec together
        assert [spec for _, spec in store.pool()] == ["api:gen-a", "api:gen-b", "api:gen-a"]
        config = store.generator_config(first[0].fingerprint)
    assert config["template"] == "answer" and len(config["template_sha256"]) == 64
    assert {"model", "base_url", "temperature", "top_p", "max_tokens", "seed"} <= set(config)


def test_the_fingerprint_holds_spec_model_template_sampling_and_seed(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    template = load_answer_template()
    other = tmp_path / "answer.txt"
    other.write_text("### user\nQuestion: {{question}}\nAnswer briefly.", encoding="utf-8")
    base = ApiTextGenerator("m", api_options(answer_server), template).fingerprint()
    variants = [
        ApiTextGenerator("m2", api_options(answer_server), template),
        ApiTextGenerator("m", api_options(answer_server), load_answer_template(str(other))),
        ApiTextGenerator("m", api_options(answer_server, temperature=0.5), template),
        ApiTextGenerator("m", api_options(answer_server, seed=1), template),
        ApiTextGenerator("m", api_options(answer_server, max_tokens=64), template),
    ]
    assert len({base, *(v.fingerprint() for v in variants)}) == 6
    # settings that change how requests are sent, not what comes back, are not part of it
    assert (
        ApiTextGenerator("m", api_options(answer_server, max_retries=5, concurrency=3), template).fingerprint() == base
    )


def test_failures_are_stored_with_reasons_and_retried_on_request(answer_server: OpenAIServer, tmp_path: Path) -> None:
    project = imported_project(tmp_path)
    answer_server.control.script_faults("400", None, "500", "500", "500")  # one 4xx, then a 5xx past the retries
    [summary] = responses(answer_server, project, ["api:flaky"], options=api_options(answer_server, concurrency=1))
    assert (summary.generated, summary.failed, summary.stored_failures) == (6, 2, 2)
    reasons = dict(summary.reasons)
    assert any(r.startswith("HTTP 400") for r in reasons) and "HTTP 500 after 2 retries" in reasons
    answer_server.control.clear_requests()
    [unchanged] = responses(answer_server, project, ["api:flaky"])
    assert answer_server.control.chat_requests() == [] and unchanged.stored_failures == 2
    [retried] = responses(answer_server, project, ["api:flaky"], retry_failures=True)
    assert len(answer_server.control.chat_requests()) == 2 and (retried.generated, retried.stored_failures) == (2, 0)


def test_the_api_key_never_reaches_the_store(answer_server: OpenAIServer, tmp_path: Path) -> None:
    project = imported_project(tmp_path)
    answer_server.control.set_echo_authorization(True)  # a leaky proxy repeats the key in every answer
    answer_server.control.script_faults("500", "500", "500")  # ... and in error messages
    responses(answer_server, project, ["api:leaky"], options=api_options(answer_server, concurrency=1))
    stored = b"".join(p.read_bytes() for p in project.iterdir() if p.is_file())
    assert FAKE_API_KEY.encode() not in stored
    with closing(sqlite3.connect(project / STORE_FILENAME)) as db:
        texts = [row[0] for row in db.execute("SELECT text FROM generations WHERE text IS NOT NULL")]
    assert texts and all("***" in text for text in texts)


def test_the_generator_shares_the_api_judges_machinery(answer_server: OpenAIServer) -> None:
    generator = build_generator("api:m", api_options(answer_server, concurrency=3), load_answer_template())
    assert isinstance(generator, ApiTextGenerator) and isinstance(generator.chat, ChatClient)
    assert generator.concurrency == 3 and generator.chat.retry_policy.max_retries == 2
    image = ImageRef.builtin("pydicom:CT_small.dcm")  # a DICOM goes out as a PNG, as for judges

    async def ask() -> list:  # type: ignore[type-arg]
        try:
            return await generator.generate_batch(
                [GenerationRequest("k1", {"question": "Is it normal?", "answer_format": ""}, image)]
            )
        finally:
            await generator.aclose()

    [result] = asyncio.run(ask())
    assert result.failure is None and result.text and result.extra["attempts"] == 1
    assert answer_server.control.chat_requests()[0].image_urls()[0].startswith("data:image/png;base64,")
    with pytest.raises(JudgeSpecError, match="KIND:NAME"):
        build_generator("gpt-4o", api_options(answer_server), load_answer_template())
    with pytest.raises(JudgeSpecError, match="needs an API key"):
        build_generator(
            "api:m", api_options(answer_server, base_url=None, api_key_env="MRB_UNSET_KEY"), load_answer_template()
        )
    with pytest.raises(TemplateError, match="neither a shipped template"):
        load_answer_template("nonsense")


def test_a_local_transformers_model_answers_through_vlm_generator(tiny_llava_dir: Path, tmp_path: Path) -> None:
    from medrewardbench.models.options import JudgeOptions, LocalSettings

    project = imported_project(tmp_path)
    options = JudgeOptions(max_tokens=12, batch_size=4, local=LocalSettings(device="cpu"))
    spec = f"hf:{tiny_llava_dir}"
    with open_project(project) as store:
        [summary] = run_responses(store, [spec], options=options, template=load_answer_template())
        config = store.generator_config(summary.fingerprint)
        hashes = [q.content_hash for chunk in store.iter_questions() for q in chunk]
        stored = store.generations(summary.fingerprint, hashes).values()
        answers = [(g.text, g.failure, g.completion_tokens) for g in stored]
    assert summary.generated == 6 and summary.spec == spec
    assert config["kind"] == "hf" and config["sampling"]["max_new_tokens"] == 12 and config["chat_template_sha256"]
    assert all((text and text.strip()) or failure == "empty answer" for text, failure, _ in answers)
    assert any(text for text, _, _ in answers)
    with open_project(project) as store:  # greedy decoding: a second run is served from the store
        [again] = run_responses(store, [spec], options=options, template=load_answer_template())
    assert again.generated == 0 and again.reused == 6


def _stored_answers(project: Path) -> int:
    try:
        with sqlite3.connect(project / "build.sqlite", timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM generations").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_ctrl_c_stores_what_finished_a_second_command_is_refused_and_a_rerun_resumes(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    rows = [
        {"qid": f"q{i}", "q": f"Is finding number {i} present?", "ans": "yes", "img": "images/ct.png", "body": "chest"}
        for i in range(40)
    ]
    project = imported_project(tmp_path, rows)
    answer_server.control.set_latency(0.25)
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
    command = [sys.executable, "-m", "medrewardbench.cli", "build", "responses", str(project), "-g", "api:slow",
               *api_flags(answer_server), "--concurrency", "2", "-q"]  # fmt: skip
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while _stored_answers(project) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    # while it runs, another command on the same project stops at once with exit status 75
    busy = subprocess.run(
        [
            sys.executable,
            "-m",
            "medrewardbench.cli",
            "build",
            "pairs",
            str(project),
            "--out",
            str(tmp_path / "p.jsonl"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert busy.returncode == 75, busy.stderr
    assert "is using" in busy.stderr and "--wait" in busy.stderr
    assert first.poll() is None, first.communicate()[1]
    first.send_signal(signal.SIGINT)
    _, stderr = first.communicate(timeout=60)
    assert first.returncode == 130, stderr
    stored = _stored_answers(project)
    assert f"interrupted: {stored} of 40 requests stored; rerun the same command to resume" in stderr
    assert 6 <= stored < 40
    answer_server.control.set_latency(0.0)
    answer_server.control.clear_requests()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _stored_answers(project) == 40
    assert len(answer_server.control.chat_requests()) == 40 - stored  # only what was missing
    assert API_KEY_ENV  # the key variable was passed by name, never by value
