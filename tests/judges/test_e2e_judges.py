"""Real judges through the whole `eval` path: API judge against a real local server, local models,
and an API judge talking to `serve` running a tiny local model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.api import API_KEY_ENV, FAKE_API_KEY, longer_answer_responder
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def run_eval(*args: str) -> tuple[int, str, dict]:  # type: ignore[type-arg]
    result = runner.invoke(app, ["eval", *args], catch_exceptions=False)
    out = Path(args[args.index("--out") + 1])
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").exists() else {}
    return result.exit_code, result.output, metrics


def test_api_judge_end_to_end_on_the_demo_matches_the_longer_baseline(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.control.set_responder(longer_answer_responder)
    out = tmp_path / "out"
    code, output, metrics = run_eval(
        "--judge",
        "api:scripted-longer",
        "--judge",
        "baseline:longer",
        "--base-url",
        openai_server.base_url,
        "--api-key-env",
        API_KEY_ENV,
        "--concurrency",
        "8",
        "--out",
        str(out),
    )
    assert code == 0, output
    runs = {r["judge"]: r["metrics"] for r in metrics["runs"]}
    api, base = runs["api:scripted-longer"], runs["baseline:longer"]
    assert api["requests"]["failed"] == 0
    for dim in DIMENSIONS:
        # the scripted server answers "the longer one" (ties go to A), exactly what the baseline does
        assert api["dimensions"][dim]["accuracy"] == pytest.approx(base["dimensions"][dim]["accuracy"], abs=0.03)
    n_cases = metrics["datasets"][0]["n_cases"]
    assert len(openai_server.control.chat_requests()) == 2 * n_cases
    # the demo's PNG and JPEG files go out as they are; its DICOM images as PNG
    assert all(
        r.image_urls() and r.image_urls()[0].startswith(("data:image/png;base64,", "data:image/jpeg;base64,"))
        for r in openai_server.control.chat_requests()
    )
    stored = b"".join(p.read_bytes() for p in out.iterdir() if p.is_file())
    assert FAKE_API_KEY.encode() not in stored, "the API key must never reach stored results"
    # a rerun is served from the store: the server sees no new request
    openai_server.control.clear_requests()
    code, output, _ = run_eval(
        "--judge",
        "api:scripted-longer",
        "--base-url",
        openai_server.base_url,
        "--api-key-env",
        API_KEY_ENV,
        "--out",
        str(out),
    )
    assert code == 0 and openai_server.control.chat_requests() == []


def test_api_failures_are_stored_with_reasons_and_counted_wrong(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.control.set_default_output("I cannot decide between these answers.")
    out = tmp_path / "out"
    code, output, metrics = run_eval(
        "--judge",
        "api:unparseable",
        "--limit",
        "4",
        "--base-url",
        openai_server.base_url,
        "--api-key-env",
        API_KEY_ENV,
        "--out",
        str(out),
    )
    # a judge that failed every request makes eval fail, after storing and reporting the failures
    assert code == 1, output
    assert "api:unparseable: 8 of 8 requests failed" in output and "every request failed" in output
    m = metrics["runs"][0]["metrics"]
    assert m["dimensions"]["overall"]["accuracy"] == 0.0 and m["dimensions"]["overall"]["failure_rate"] == 1.0
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(r["failure"] and r["raw_output"] for r in rows)


def test_hf_judge_end_to_end_random_weights_fail_with_reasons(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output, metrics = run_eval(
        "--judge", f"hf:{tiny_qwen2_vl}", "--limit", "2", "--max-tokens", "12", "--out", str(out)
    )
    assert code == 1 and "4 of 4 requests failed" in output, output  # every request failed: stored, exit 1
    m = metrics["runs"][0]["metrics"]
    assert m["requests"]["judged"] == 4
    assert m["dimensions"]["overall"]["failure_rate"] == 1.0
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert all(r["failure"] for r in rows)


def test_hf_judge_constrained_on_reference_layout_gives_parsed_verdicts(
    tiny_llava: Path, reference_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    code, output, metrics = run_eval(
        "--data", str(reference_dir), "--judge", f"hf:{tiny_llava}#constrained", "--batch-size", "2", "--out", str(out)
    )
    assert code == 0, output
    m = metrics["runs"][0]["metrics"]
    assert m["requests"]["failed"] == 0
    for dim in DIMENSIONS:
        assert m["dimensions"][dim]["answered"] == m["dimensions"][dim]["n"] > 0
    assert set(m["by"]["organ_system"]) == {"brain", "chest"}


def test_api_judge_against_serve_running_a_tiny_local_model(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    from medrewardbench.models.generation import VLMGenerator
    from medrewardbench.serve import BackgroundServer, create_app

    generator = VLMGenerator.load(str(tiny_qwen2_vl), device="cpu", dtype="float32")
    with BackgroundServer(create_app(generator, model_name="tiny", constrained=True)) as server:
        code, output, metrics = run_eval(
            "--judge",
            "api:tiny",
            "--base-url",
            server.base_url,
            "--limit",
            "2",
            "--max-tokens",
            "80",
            "--out",
            str(tmp_path / "out"),
        )
    assert code == 0, output
    m = metrics["runs"][0]["metrics"]
    assert m["requests"] == {"judged": 4, "failed": 0}
    assert all(m["dimensions"][d]["answered"] == 4 for d in DIMENSIONS)
