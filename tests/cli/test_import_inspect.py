"""inspect task -> log -> ``import-inspect`` -> ``report``: the numbers ``eval`` gives for the same answers.

The same scripted judge answers both routes, from the prompt text alone: an ``api:`` judge through
the real test OpenAI server (``eval``), and inspect's mock model (``inspect_ai.eval`` of the
medrewardbench/pairwise task). Both must have been shown the same prompt and the same image bytes,
store the same verdicts and failures under the same case hashes, and yield the same analysis,
intervals, paired tests and human ceiling included.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")

from helpers.api import API_KEY_ENV
from helpers.data import build_canonical_set
from helpers.inspect_runs import MockJudge, api_responder, run_task, stored_rows
from inspect_ai.log import read_eval_log
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.evaluation.store import Store, judgment_fingerprint
from medrewardbench.metrics.loading import analyze_paths
from medrewardbench.testing.openai_server import OpenAIServer

# inspect_ai's model retry passes tenacity a deprecated argument, once per request
pytestmark = pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")
runner = CliRunner()
IDENTITY = {"label", "judge", "run_id", "config", "metadata", "usage"}
"""What may differ between the two runs of the same answers: who answered, and the token counts."""


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def _without_identity(record: Any) -> dict[str, Any]:
    return {k: v for k, v in record.to_json().items() if k not in IDENTITY}


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (intervals not computed)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["demo", "canonical"])
def test_an_imported_inspect_log_gives_what_eval_gives_for_the_same_answers(
    source: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    # the demo has per-annotator labels (the human ceiling); the canonical set every image form
    # (PNG path, DICOM, embedded bytes, a builtin image, none) and partial labels
    data = "demo" if source == "demo" else str(build_canonical_set(tmp_path / "data"))
    out = tmp_path / "results"
    openai_server.control.set_responder(api_responder)
    code, output = cli(
        "eval", "--data", data, "--judge", "api:judge-model", "--base-url", openai_server.base_url,
        "--api-key-env", API_KEY_ENV, "--max-retries", "0", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert code == 0, output
    judge = MockJudge()
    log = run_task(tmp_path / "logs", judge, data=data)

    code, output = cli("import-inspect", str(log), "--out", str(out))
    assert code == 0, output
    assert "Stored inspect:mockllm/model as run" in output.replace("\n", " ")

    # the same prompts and image bytes reached both models
    sent = sorted((r.texts()[0], r.user_text(), tuple(r.image_urls())) for r in openai_server.control.chat_requests())
    assert sorted(judge.seen) == sent
    assert len(sent) == 2 * (34 if source == "demo" else 5)
    assert any(images for _, _, images in sent) and (source == "demo" or any(not i for _, _, i in sent))

    with Store.in_dir(out) as store:
        runs = {r.judge_spec: r for r in store.runs()}
        api, inspect = runs["api:judge-model"], runs["inspect:mockllm/model"]
        assert api.data_hash == inspect.data_hash and api.orders == inspect.orders == (Order.ORIGINAL, Order.SWAPPED)
        api_rows, inspect_rows = store.judgments_for_run(api), store.judgments_for_run(inspect)
        assert stored_rows(api_rows) == stored_rows(inspect_rows)
        assert all(
            j.fingerprint == judgment_fingerprint(inspect.judge_fingerprint, j.case_hash, j.order) for j in inspect_rows
        )
        # every shape of answer occurred: clean, failed as a whole, failed on some dimensions
        assert any(j.failure is None and not j.dimension_failures for j in inspect_rows)
        assert any(j.failure is not None for j in inspect_rows)
        assert any(j.failure is None and j.dimension_failures for j in inspect_rows)
        config = inspect.config
        assert config["model"] == "mockllm/model" and config["inspect_version"]
        assert config["task"] == "medrewardbench/pairwise" and config["template"] == "pairwise"
        assert "generate_config" in config and inspect.metadata["inspect_logs"] == [str(log)]

    analysis = analyze_paths([out], n_resamples=300, seed=7)
    by_judge = {r.judge: r for r in analysis.runs}
    assert _same(_without_identity(by_judge["api:judge-model"]), _without_identity(by_judge["inspect:mockllm/model"]))
    scores = {row.judge: row for row in analysis.leaderboard}
    assert _same(
        {k: v for k, v in scores["api:judge-model"].to_json().items() if k not in IDENTITY | {"rank"}},
        {k: v for k, v in scores["inspect:mockllm/model"].to_json().items() if k not in IDENTITY | {"rank"}},
    )
    assert (analysis.human is not None) is (source == "demo")

    # inspect's own per-dimension metric is eval's headline accuracy (failures counted wrong)
    metrics = read_eval_log(str(log), header_only=True).results.scores[0].metrics  # type: ignore[union-attr]
    for dimension in DIMENSIONS:
        if dimension in metrics:
            point = by_judge["inspect:mockllm/model"].accuracy[dimension].point
            assert metrics[dimension].value == pytest.approx(point, abs=5e-7)  # the analysis keeps 6 decimals

    code, output = cli("report", str(out), "--format", "json,md", "--bootstrap", "200")
    assert code == 0, output
    document = json.loads((out / "analysis.json").read_text()) if (out / "analysis.json").exists() else None
    assert document is None or {r["judge"] for r in document["runs"]} >= {"api:judge-model", "inspect:mockllm/model"}
    assert "inspect:mockllm/model" in (out / "report.md").read_text()
    code, output = cli(
        "compare", "api:judge-model", "inspect:mockllm/model", "--results", str(out), "--bootstrap", "200"
    )
    assert code == 0, output


@pytest.mark.slow
def test_importing_the_same_log_twice_writes_nothing_and_a_retry_log_replaces_errors(tmp_path: Path) -> None:
    data = str(build_canonical_set(tmp_path / "data"))
    # the first eval: the provider refuses case c3's requests (inspect records sample errors)
    refusing = MockJudge(error_when="Describe the colour.")
    first = run_task(tmp_path / "logs", refusing, data=data, eval_fail_on_error=False)
    out = tmp_path / "results"
    code, output = cli("import-inspect", str(first), "--out", str(out), "--quiet")
    assert code == 0, output
    with Store.in_dir(out) as store:
        (run,) = store.runs()
        rows = {(j.case_id, j.order.value): j for j in store.judgments_for_run(run)}
    assert len(rows) == 10
    assert rows[("c3", "original")].failure == "inspect: RuntimeError('the provider refused the request (scripted)')"
    assert rows[("c3", "original")].verdicts == {}

    code, output = cli("import-inspect", str(first), "--out", str(out))
    assert code == 0, output
    assert "0 judgments written, 10 already stored" in " ".join(output.split())

    # a second eval without the refusals, imported with the first: its samples win
    second = run_task(tmp_path / "logs", MockJudge(), data=data)
    code, output = cli("import-inspect", str(first), str(second), "--out", str(out))
    assert code == 0, output
    assert "10 judgments written" in " ".join(output.split())
    with Store.in_dir(out) as store:
        (run,) = store.runs()
        rows = {(j.case_id, j.order.value): j for j in store.judgments_for_run(run)}
        assert not (rows[("c3", "original")].failure or "").startswith("inspect:")
        assert run.metadata["inspect_logs"] == [str(first), str(second)]
