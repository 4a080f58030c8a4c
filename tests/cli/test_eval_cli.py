"""What ``eval`` tells a first-time user: where the labels come from, what failed and what to try,
when a run on other data joins a store, and when a trained model is evaluated on its own training cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.api import API_KEY_ENV
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.evaluation.job import RunHealth, failure_hint
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def canonical(tmp_path: Path, n: int = 4, name: str = "cases.jsonl") -> Path:
    rows = [
        {"id": f"c{i}", "question": f"q{i}?", "response_1": "short", "response_2": "a longer answer " * (i + 1),
         "labels": {d: 2 for d in ("accuracy", "overall")}, "organ_system": "chest"}
        for i in range(n)
    ]  # fmt: skip
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_demo_states_its_illustrative_labels_and_points_to_the_report(tmp_path: Path) -> None:
    code, output = cli("eval", "--judge", "baseline:longer", "--out", str(tmp_path))
    assert code == 0, output
    flat = output.replace("\n", " ")
    assert "Labels: illustrative, written by the medrewardbench authors" in flat
    assert f"medrewardbench report {tmp_path}" in flat
    dataset = json.loads((tmp_path / "metrics.json").read_text())["datasets"][0]
    assert dataset["labels"]["kind"] == "illustrative" and dataset["labels"]["declared_by"] == "built in"


def test_labels_of_unknown_provenance_say_so_and_labels_declares_them(tmp_path: Path) -> None:
    data = canonical(tmp_path)
    out = tmp_path / "out"
    code, output = cli("eval", "--data", str(data), "--judge", "baseline:longer", "--out", str(out))
    assert code == 0, output
    assert "Labels: unknown provenance. Nothing says who wrote these labels" in output.replace("\n", " ")
    code, output = cli(
        "eval", "--data", str(data), "--judge", "baseline:longer", "--out", str(out),
        "--labels", "expert-majority:3=three radiologists, majority vote",
    )  # fmt: skip
    assert code == 0, output
    assert "Labels: three radiologists, majority vote." in output
    labels = json.loads((out / "metrics.json").read_text())["datasets"][0]["labels"]
    assert labels == {
        "kind": "expert_majority",
        "raters": 3,
        "description": "three radiologists, majority vote",
        "declared_by": "--labels",
        "text": "three radiologists, majority vote",
    }
    code, output = cli("eval", "--data", str(data), "--judge", "baseline:shorter", "--out", str(out))
    assert code == 0 and "Labels: three radiologists" in output, "a later eval without --labels keeps what was declared"
    code, output = cli("eval", "--data", str(data), "--out", str(out), "--labels", "experts-ish")
    assert code == 2 and "unknown kind 'experts-ish'" in output and "expert-majority" in output


def test_a_dataset_card_beside_the_data_declares_the_labels(tmp_path: Path) -> None:
    data = canonical(tmp_path)
    (tmp_path / "dataset.json").write_text(
        json.dumps({"name": "chest-set", "labels": {"provenance": "a single radiologist", "kind": "single_expert"}})
    )
    code, output = cli("eval", "--data", str(data), "--judge", "baseline:longer", "--out", str(tmp_path / "out"))
    assert code == 0, output
    assert "Labels: a single radiologist." in output and "Leaderboard: chest-set" in output


def test_failures_name_their_reasons_with_hints_and_max_failure_rate_exits_1(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.control.script("", "", "", "")  # four of the six requests come back empty
    args = ["eval", "--judge", "api:judge-model", "--limit", "3", "--base-url", openai_server.base_url,
            "--api-key-env", API_KEY_ENV, "--max-retries", "0", "--concurrency", "1"]  # fmt: skip
    code, output = cli(*args, "--out", str(tmp_path / "a"), "--max-failure-rate", "0.5")
    flat = output.replace("\n", " ")
    assert code == 1, output
    assert "api:judge-model: 4 of 6 requests failed. Most common: empty output (4)" in flat
    assert "hint: unusable output: try --structured" in flat
    assert "more than 50.0 % of the requests failed for api:judge-model (66.7 %)" in flat
    code, output = cli(*args, "--out", str(tmp_path / "a"), "--max-failure-rate", "0.7", "--quiet")
    assert code == 0, output
    assert "4 of 6 requests failed" in output and "hint:" in output, "--quiet still names the failures"
    code, output = cli(*args, "--out", str(tmp_path / "a"), "--max-failure-rate", "1.5")
    assert code == 2 and "--max-failure-rate" in output


@pytest.mark.parametrize(
    ("reason", "spec", "expected"),
    [
        ("empty output", "hf:tiny", "try `#constrained`"),
        ("no per-dimension verdicts found: no JSON object", "hf:tiny", "try `#constrained`"),
        ("empty response", "api:gpt-4o", "try --structured"),
        ("HTTP 401: invalid api key", "api:gpt-4o", "check --api-key-env"),
        ("HTTP 404: model not found", "api:gpt-4o", "check the model name"),
        ("HTTP 429 after 6 retries", "api:gpt-4o", "lower --concurrency"),
        ("timeout after 6 retries", "api:gpt-4o", "raise --timeout"),
        ("connection error after 3 retries", "api:x", "is the server at --base-url running"),
        ("tie: equal scores", "rm:model", "ties"),
    ],
)
def test_failure_hints_fit_the_reason_and_the_judge(reason: str, spec: str, expected: str) -> None:
    hint = failure_hint(reason, spec)
    assert hint is not None and expected in hint


def test_no_hint_where_there_is_nothing_to_try() -> None:
    assert failure_hint("empty output", "rm:model") is None
    assert failure_hint("tie: equal lengths", "baseline:longer") is None, "a baseline's ties are not a reward model's"
    assert failure_hint("something nobody anticipated", "api:x") is None


def test_no_hint_suggests_structured_output_to_a_run_that_asked_for_it() -> None:
    hint = failure_hint("empty response", "api:gpt-4o", structured=True)
    assert hint is not None and "--structured" in hint and "try --structured" not in hint
    assert "--max-tokens" in hint
    health = RunHealth("r", "api:gpt-4o", 4, 4, {"empty response": 4}, structured=True)
    assert all("try --structured" not in h for h in health.hints())
    assert any("try --structured" in h for h in RunHealth("r", "api:gpt-4o", 4, 4, {"empty response": 4}).hints())


def test_eval_warns_when_a_trained_model_is_evaluated_on_its_training_cases(tmp_path: Path) -> None:
    model = tmp_path / "rm"
    model.mkdir()
    card = {"format": "medrewardbench-training-card", "version": 1, "method": "rm", "base_model": "base",
            "data": {"train_case_ids": ["c0", "c2", "other"]}, "fold": None}  # fmt: skip
    (model / "training_card.json").write_text(json.dumps(card))
    from medrewardbench.cli.eval import _warn_about_training_overlap
    from medrewardbench.cli.support import err_console

    with err_console.capture() as captured:
        _warn_about_training_overlap(["rm:" + str(model)], None, ["c0", "c1", "c2", "c3"])
        _warn_about_training_overlap(["hf:base"], str(model), ["c0", "c1"])
        _warn_about_training_overlap(["hf:base"], str(model), ["c1", "c3"])  # no overlap: silent
        _warn_about_training_overlap(["baseline:longer"], str(model), ["c0"])  # no adapter in play: silent
    text = captured.get().replace("\n", " ")
    assert "2 of the 4 cases evaluated were in the training data" in text
    assert "1 of the 2 cases evaluated were in the training data" in text
    assert text.count("warning:") == 2 and "train with --folds K --fold I" in text
