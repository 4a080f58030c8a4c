"""export-results: Every Eval Ever records (validated against the vendored schema) and Hub .eval_results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.runs import ScriptedJudge, make_cases
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data import load_benchmark, write_canonical
from medrewardbench.evaluation.runner import run_judge
from medrewardbench.evaluation.store import Store
from medrewardbench.judges import build_judge
from medrewardbench.metrics.loading import analyze_dataset, find_datasets
from medrewardbench.report.identity import UNPINNED_API, judge_identity
from medrewardbench.report.interop import InteropError, export_results, validate_eee

jsonschema = pytest.importorskip("jsonschema")
runner = CliRunner()
REVISION = "0123456789abcdef0123456789abcdef01234567"


class ConfiguredJudge(ScriptedJudge):
    """A scripted judge that stores the configuration a real back end would."""

    def __init__(self, spec: str, policy: str, config: dict[str, Any]):
        super().__init__(spec, policy)
        self._config = config

    def config(self) -> dict[str, object]:
        return dict(self._config)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("interop")
    data_file = write_canonical(make_cases(12), root / "data" / "cases.jsonl")
    (root / "data" / "dataset.json").write_text(
        json.dumps({"name": "chest-12", "labels": {"provenance": "expert majority of 3 radiologists",
                                                   "kind": "expert_majority", "raters": 3}})
    )  # fmt: skip
    benchmark = load_benchmark(str(data_file))
    judges = [
        ConfiguredJudge("api:gpt-4o", "planted",
                        {"spec": "api:gpt-4o", "kind": "api", "model": "gpt-4o", "base_url": "https://api.openai.com/v1"}),
        ConfiguredJudge("hf:Qwen/Qwen2-VL-2B-Instruct", "oracle",
                        {"spec": "hf:Qwen/Qwen2-VL-2B-Instruct", "kind": "hf", "model": "Qwen/Qwen2-VL-2B-Instruct",
                         "model_revision": REVISION}),
        ScriptedJudge("test:broken", "broken"),
        build_judge("baseline:longer"),
    ]  # fmt: skip
    with Store.in_dir(root / "results") as store:
        for judge in judges:
            run_judge(judge, benchmark, store)
        store.set_label_provenance(store.runs()[0].data_hash, benchmark.labels)  # as 'eval' does
    return root / "results"


def test_judges_are_named_with_what_pins_them() -> None:
    api = judge_identity(
        "gpt-4o", "api:gpt-4o", {"kind": "api", "model": "gpt-4o", "base_url": "https://api.openai.com/v1"}
    )
    assert (api.model_id, api.pinned, api.how, api.deployment) == (
        "openai/gpt-4o",
        False,
        UNPINNED_API,
        "externally_managed",
    )
    dated = judge_identity("x", "api:gpt-4o-2024-08-06", {"kind": "api", "model": "gpt-4o-2024-08-06"})
    assert dated.pinned and dated.pin == "gpt-4o-2024-08-06" and dated.how == "dated API snapshot"
    sonnet = "claude-3-5-sonnet-20241022"
    claude = judge_identity(
        "c", f"api:{sonnet}", {"kind": "api", "model": sonnet, "base_url": "https://api.anthropic.com/v1"}
    )
    assert claude.pinned and claude.developer == "anthropic"
    assert not judge_identity("g", "api:gemini-1.5-pro-002", {"kind": "api", "model": "gemini-1.5-pro-002"}).pinned
    hub = judge_identity("q", "hf:Qwen/Qwen2-VL-2B-Instruct", {"kind": "hf", "model": "Qwen/Qwen2-VL-2B-Instruct",
                                                               "model_revision": REVISION})  # fmt: skip
    assert hub.pinned and hub.pin == REVISION and hub.how == "Hub revision" and hub.availability == "open_weights"
    local = judge_identity("l", "hf:/models/mine", {"kind": "hf", "model": "/models/mine", "model_revision": None})
    assert not local.pinned and local.model_id == "local/mine" and "without a recorded Hub revision" in local.how
    assert judge_identity("b", "baseline:longer", {"spec": "baseline:longer"}).pinned


def test_every_eval_ever_records_validate_and_their_instances_add_up_to_the_scores(
    results: Path, tmp_path: Path
) -> None:
    (dataset,) = find_datasets([results])
    analysis = analyze_dataset(dataset, n_resamples=200, seed=3)
    summary = export_results(analysis, dataset, tmp_path / "out", formats="eee", source_organization="test lab")
    assert summary.validated and summary.runs == 4
    aggregates = sorted((tmp_path / "out" / "every_eval_ever").rglob("*-*-*-*-*[0-9a-f].json"))
    assert len(aggregates) == 4
    by_model = {}
    for path in aggregates:
        record = json.loads(path.read_text())
        assert validate_eee(record)
        by_model[record["model_info"]["id"]] = (path, record)
    path, api = by_model["openai/gpt-4o"]
    assert api["model_info"]["additional_details"]["pinned"] == "false"
    assert api["model_info"]["additional_details"]["pinned_how"] == UNPINNED_API
    assert by_model["Qwen/Qwen2-VL-2B-Instruct"][1]["model_info"]["additional_details"]["pin"] == REVISION
    run = analysis.run("api:gpt-4o")
    results_by_name = {r["evaluation_name"]: r for r in api["evaluation_results"]}
    overall = results_by_name["accuracy/overall"]
    interval = overall["score_details"]["uncertainty"]["confidence_interval"]
    assert overall["score_details"]["score"] == pytest.approx(run.accuracy["overall"].point, abs=1e-6)
    assert (interval["lower"], interval["upper"]) == pytest.approx(
        (run.accuracy["overall"].low, run.accuracy["overall"].high), abs=1e-6
    )
    assert overall["score_details"]["uncertainty"]["num_bootstrap_samples"] == 200
    source = overall["source_data"]
    assert source["source_type"] == "other" and source["additional_details"]["labels_kind"] == "expert_majority"
    assert "expert majority of 3 radiologists" in source["additional_details"]["labels_provenance"]
    samples = path.with_name(path.stem + "_samples.jsonl")
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert api["detailed_evaluation_results"]["total_rows"] == len(rows) == 12 * 2 * 6
    for row in rows[:30]:
        assert validate_eee(row, instance=True)
    for dim in ("overall", "accuracy"):
        scores = [r["evaluation"]["score"] for r in rows if r["evaluation_name"] == f"accuracy/{dim}"]
        assert sum(scores) / len(scores) == pytest.approx(run.accuracy[dim].point, abs=1e-9)
    broken = json.loads(by_model["test/broken"][0].with_name(by_model["test/broken"][0].stem + "_samples.jsonl")
                        .read_text().splitlines()[0])  # fmt: skip
    assert broken["evaluation"]["is_correct"] is False and "server said no" in broken["error"]


def test_hub_eval_results_need_a_dataset_id_and_carry_interval_provenance_and_pin(
    results: Path, tmp_path: Path
) -> None:
    (dataset,) = find_datasets([results], judges=["api:gpt-4o", "hf:Qwen/Qwen2-VL-2B-Instruct"])
    analysis = analyze_dataset(dataset, n_resamples=200, seed=3)
    with pytest.raises(InteropError, match="--dataset-id"):
        export_results(analysis, dataset, tmp_path / "a", formats="hub")
    skipped = export_results(analysis, dataset, tmp_path / "b", formats="all")
    assert skipped.skipped_hub and not (tmp_path / "b" / "hub_eval_results").exists()
    export_results(analysis, dataset, tmp_path / "c", formats="hub", dataset_id="lab/chest-12@abc123")
    api = yaml.safe_load(
        (tmp_path / "c" / "hub_eval_results" / "openai--gpt-4o" / ".eval_results" / "medrewardbench.yaml").read_text()
    )
    assert [e["dataset"]["task_id"] for e in api] == ["accuracy", "relevance", "comprehensiveness", "creativity",
                                                     "responsiveness", "overall", "all"]  # fmt: skip
    pooled = api[-1]
    assert pooled["dataset"] == {"id": "lab/chest-12", "task_id": "all", "revision": "abc123"}
    assert pooled["value"] == pytest.approx(analysis.run("api:gpt-4o").accuracy.pooled.point * 100, abs=0.01)
    assert "95% CI" in pooled["notes"] and "expert majority of 3 radiologists" in pooled["notes"]
    assert "NOT pinned" in pooled["notes"] and "date" in pooled
    qwen = tmp_path / "c" / "hub_eval_results" / "Qwen--Qwen2-VL-2B-Instruct" / ".eval_results" / "medrewardbench.yaml"
    assert f"pinned (Hub revision: {REVISION})" in qwen.read_text()


def test_a_record_the_schema_refuses_is_reported_by_field() -> None:
    with pytest.raises(InteropError, match="model_info"):
        validate_eee({"schema_version": "0.3.0", "evaluation_id": "x", "retrieved_timestamp": "1",
                      "source_metadata": {"source_type": "evaluation_run", "source_organization_name": "o",
                                          "evaluator_relationship": "third_party"},
                      "model_info": {"name": "m"}, "eval_library": {"name": "n", "version": "1"},
                      "evaluation_results": []})  # fmt: skip


def test_the_command_writes_both_formats(results: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["export-results", str(results), "--out", str(tmp_path / "out"), "--dataset-id", "lab/chest-12",
         "--bootstrap", "100", "--judge", "api:gpt-4o", "--organization", "test lab"],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "validated against the vendored schema" in said and "144 instance record(s)" in said
    assert f"unpinned judge: api:gpt-4o: {UNPINNED_API}" in said
    assert len(list((tmp_path / "out" / "hub_eval_results").rglob("medrewardbench.yaml"))) == 1
    bad = runner.invoke(app, ["export-results", str(results), "--out", str(tmp_path / "x"), "--dataset-id", "nope"])
    assert bad.exit_code == 2 and "expected OWNER/NAME" in bad.output


def test_an_lmms_eval_run_is_named_by_its_model_args() -> None:
    qwen = "pretrained=Qwen/Qwen2-VL-7B-Instruct"
    pinned = judge_identity("q", "lmms-eval:q", {"kind": "lmms-eval", "model_args": f"{qwen},revision={REVISION}"})
    assert (pinned.model_id, pinned.pinned, pinned.pin) == ("Qwen/Qwen2-VL-7B-Instruct", True, REVISION)
    loose = judge_identity("q", "lmms-eval:q", {"kind": "lmms-eval", "model_args": f"{qwen},revision=main"})
    assert not loose.pinned and "revision=COMMIT" in loose.how
