"""``probe counterfactual`` and ``probe bias`` on the demo: the files, the lines, the errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.api import longer_answer_responder
from helpers.curation import api_flags
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data import load_benchmark
from medrewardbench.evaluation.store import Store
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def test_counterfactual_on_the_demo_writes_json_page_store_and_export(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, output = cli(
        "probe", "counterfactual", "--data", "demo", "--judge", "baseline:longer", "--judge", "baseline:first",
        "--out", str(out), "--types", "negation,omitted,paraphrase", "--severities", "3,4",
        "--export", str(tmp_path / "pairs.jsonl"), "--bootstrap", "200",
    )  # fmt: skip
    assert code == 0, output
    assert "baseline:longer: detects" in output and "baseline:first: detects 50% of errors" in output
    document = json.loads((out / "probe-counterfactual.json").read_text())
    assert document["probe"] == "counterfactual"
    assert document["data"]["source"].startswith("probe:counterfactual(")
    assert set(document["pairs_per_type"]) == {"negation", "omitted", "paraphrase"}
    assert document["pairs"]["skipped"]["paraphrase"]["no phrase of the paraphrase table"] > 0
    judges = {j["judge"]: j for j in document["judges"]}
    assert judges["baseline:first"]["detection"]["all"]["point"] == 0.5
    assert {"low", "high", "n"} <= set(judges["baseline:longer"]["critical_miss"])
    assert (out / "probe-counterfactual.html").read_text().startswith("<!doctype html>")
    with Store.in_dir(out) as store:
        assert {r.judge_spec for r in store.runs()} == {"baseline:longer", "baseline:first"}
    exported = load_benchmark(str(tmp_path / "pairs.jsonl"))
    assert len(exported) == sum(document["pairs_per_type"].values())


def test_bias_on_the_demo_prints_one_line_per_judge(tmp_path: Path) -> None:
    code, output = cli("probe", "bias", "--out", str(tmp_path), "--bootstrap", "200", "--limit", "10")
    assert code == 0, output
    lines = [line for line in output.splitlines() if line.startswith("baseline:") and "position-flip" in line]
    assert len(lines) == 5, output
    assert any(line.startswith("baseline:first: position-flip 100% · longer-picked 50%") for line in lines)
    document = json.loads((tmp_path / "probe-bias.json").read_text())
    assert document["n_parents"] == 10 and len(document["cards"]) == 5
    assert [row["bias"] for row in document["cards"][0]["rows"]] == [
        "position", "length", "authority", "image_mention", "confident", "markdown", "self_preference",
    ]  # fmt: skip
    assert (tmp_path / "probe-bias.html").exists()


def test_bad_input_is_one_line_with_status_2(tmp_path: Path) -> None:
    code, output = cli("probe", "counterfactual", "--out", str(tmp_path), "--types", "colour")
    assert code == 2 and "unknown counterfactual type(s) colour" in output
    code, output = cli("probe", "counterfactual", "--out", str(tmp_path), "--severities", "9")
    assert code == 2 and "--severities: '9' is not a severity level" in output
    code, output = cli("probe", "bias", "--out", str(tmp_path), "--dimension", "beauty", "--limit", "2", "-q")
    assert code == 2 and "unknown dimension 'beauty'" in output
    code, output = cli("probe", "counterfactual", "--out", str(tmp_path), "--rewriter", "hf:x", "--limit", "1")
    assert code == 2 and "the rewriter must be api:MODEL" in output


def test_bias_on_a_built_set_measures_self_preference_from_builds_generator_metadata(
    paired: tuple[Path, list[dict[str, Any]]], tmp_path: Path, answer_server: OpenAIServer
) -> None:
    _, pairs = paired  # build's pairs: answers written by api:gen-a and api:gen-b
    answer_server.control.set_responder(longer_answer_responder)  # a gen-a judge that prefers the longer answer
    out = tmp_path / "probe"
    code, output = cli(
        "probe", "bias", "--data", str(tmp_path / "pairs.jsonl"), "--judge", "api:gen-a", "--out", str(out),
        "--bootstrap", "200", *api_flags(answer_server),
    )  # fmt: skip
    assert code == 0, output
    card = json.loads((out / "probe-bias.json").read_text())["cards"][0]
    row = next(r for r in card["rows"] if r["bias"] == "self_preference")
    own = [1 if p["metadata"]["build"]["response_1"]["generator"] == "api:gen-a" else 2 for p in pairs]
    longer = [1 if len(p["response_1"]) > len(p["response_2"]) else 2 for p in pairs]
    ties = sum(len(p["response_1"]) == len(p["response_2"]) for p in pairs)
    assert row["rate"]["n"] == 2 * (len(pairs) - ties)
    picked_own = sum(
        o == g for o, g, p in zip(own, longer, pairs, strict=True) if len(p["response_1"]) != len(p["response_2"])
    )
    assert row["rate"]["successes"] == 2 * picked_own
    assert "family 'gen-a'" in row["note"]
    assert "self-preference" in output and "self-preference n/m" not in output


def test_the_rewriter_flag_adds_api_paraphrases_from_the_local_server(
    tmp_path: Path, answer_server: OpenAIServer
) -> None:
    answer_server.control.set_responder(lambda body: "In other words: " + body["messages"][0]["content"][-60:])
    code, output = cli(
        "probe", "counterfactual", "--limit", "3", "--types", "reorder", "--judge", "baseline:shorter",
        "--rewriter", "api:paraphraser", "--out", str(tmp_path), "--bootstrap", "200", *api_flags(answer_server),
    )  # fmt: skip
    assert code == 0, output
    document = json.loads((tmp_path / "probe-counterfactual.json").read_text())
    assert document["pairs"]["made"]["api_paraphrase"] == 3
    assert document["pairs_per_type"]["api_paraphrase"] == 3
    over = document["judges"][0]["over_penalisation"]["api_paraphrase"]
    assert over["n"] == 3 and over["low"] <= over["point"] <= over["high"]
    assert len([r for r in answer_server.control.chat_requests() if r.body["model"] == "paraphraser"]) == 3


def test_a_probe_into_an_eval_directory_leaves_its_files_describing_the_users_data(tmp_path: Path) -> None:
    code, output = cli("eval", "--data", "demo", "--judge", "baseline:first", "--out", str(tmp_path), "-q")
    assert code == 0, output
    before = {name: (tmp_path / name).read_bytes() for name in ("metrics.json", "metrics.csv", "judgments.jsonl")}
    code, output = cli("probe", "bias", "--limit", "3", "--judge", "baseline:first", "--out", str(tmp_path), "-q")
    assert code == 0, output
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    with Store.in_dir(tmp_path) as store:
        assert len({run.data_hash for run in store.runs()}) == 2  # the probe's runs are in the same store
    code, output = cli("report", str(tmp_path), "--out", str(tmp_path / "report"), "--bootstrap", "100")
    assert code == 0, output
