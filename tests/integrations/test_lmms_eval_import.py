"""import-lmms-eval: a hand-written --log_samples file, in lmms-eval 0.7's format, stored as a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data import load_benchmark
from medrewardbench.data.hub_folder import write_hub_data
from medrewardbench.integrations.lmms_eval import utils
from medrewardbench.integrations.lmms_eval.samples import read_samples
from medrewardbench.metrics.loading import analyze_paths

runner = CliRunner()
N_CASES = 8


def folder(root: Path) -> Path:
    write_hub_data(load_benchmark("demo").cases[:N_CASES], root)
    (root / "README.md").write_text("---\nlicense: other\n---\n")
    return root


def output_for(index: int, target: dict[str, str]) -> str:
    """Right on even cases, every verdict flipped on odd ones, and one answer with no verdict at all."""
    if index == 5:
        return "I cannot tell from this image."
    letters = target if index % 2 == 0 else {d: ("B" if v == "A" else "A") for d, v in target.items()}
    return "Both are plausible.\n" + json.dumps(letters)


def log_samples(out: Path, data: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The two files lmms-eval --log_samples writes for one model, built with the task's own functions."""
    rows: list[dict[str, Any]] = []
    records = []
    doc_id = 0
    for index, case in enumerate(load_benchmark(str(data)).cases):
        for order in ("original", "swapped"):
            doc = {"id": case.case_id, "question": case.question, "response_1": case.response_1,
                   "response_2": case.response_2, "labels": dict(case.labels), "order": order}  # fmt: skip
            target = json.loads(utils.doc_to_target(doc))
            text = output_for(index, target)
            metrics = utils.process_results(doc, [text])
            records.append(metrics["medrewardbench_accuracy"])
            rows.append({"doc_id": doc_id, "target": json.dumps(target), "input": utils.doc_to_text(doc),
                         "filtered_resps": text, "token_counts": [{"input_tokens": 900, "output_tokens": 40}],
                         "doc_hash": f"{doc_id:064x}", **metrics})  # fmt: skip
            doc_id += 1
    model_dir = out / "Qwen__Qwen2-VL-7B-Instruct"
    model_dir.mkdir(parents=True)
    samples = model_dir / "20261126_120000_samples_medrewardbench_pairwise.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (model_dir / "20261126_120000_results.json").write_text(json.dumps({
        "results": {"medrewardbench_pairwise": {"medrewardbench_accuracy,none": utils.aggregate_accuracy(records)}},
        "configs": {"medrewardbench_pairwise": {"generation_kwargs": {"max_new_tokens": 512, "temperature": 0}}},
        "config": {"model": "qwen2_vl", "model_args": "pretrained=Qwen/Qwen2-VL-7B-Instruct", "batch_size": "1"},
        "lmms_eval_version": "0.7.3", "date": "20261126_120000",
    }))  # fmt: skip
    return samples, records


def test_the_logged_outputs_become_a_run_with_lmms_evals_own_numbers(tmp_path: Path) -> None:
    data = folder(tmp_path / "set")
    samples, records = log_samples(tmp_path / "lmms_out", data)
    result = runner.invoke(
        app, ["import-lmms-eval", str(tmp_path / "lmms_out"), "--data", str(data), "--out", str(tmp_path / "results")],
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Stored 16 lmms-eval output(s) of qwen2_vl" in " ".join(result.output.split())
    analysis = analyze_paths([tmp_path / "results"], n_resamples=0)
    (run,) = analysis.runs
    assert run.judge == "lmms-eval:qwen2_vl(pretrained=Qwen/Qwen2-VL-7B-Instruct)"
    assert run.config["lmms_eval_version"] == "0.7.3" and run.config["generation_kwargs"]["max_new_tokens"] == 512
    assert run.accuracy.pooled.point == pytest.approx(
        utils.aggregate_accuracy(records)
    )  # the same parser, the same rule
    assert run.requests.failed == 2  # case 5 in both orders
    again = runner.invoke(
        app, ["import-lmms-eval", str(samples), "--data", str(data), "--out", str(tmp_path / "results")]
    )
    assert again.exit_code == 0 and len(analyze_paths([tmp_path / "results"], n_resamples=0).runs) == 1


def test_samples_of_another_task_or_other_data_are_refused_naming_the_file(tmp_path: Path) -> None:
    data = folder(tmp_path / "set")
    other = tmp_path / "other" / "20261126_samples_mmmu_val.jsonl"
    other.parent.mkdir()
    other.write_text(json.dumps({"doc_id": 0, "target": "A", "filtered_resps": "A", "mmmu_acc": {"id": "x"}}) + "\n")
    result = runner.invoke(app, ["import-lmms-eval", str(other), "--data", str(data), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "20261126_samples_mmmu_val.jsonl" in result.output and "row 1" in result.output
    samples, _ = log_samples(tmp_path / "lmms_out", data)
    fewer = tmp_path / "fewer"
    write_hub_data(load_benchmark("demo").cases[:3], fewer)
    (fewer / "README.md").write_text("---\nlicense: other\n---\n")
    result = runner.invoke(app, ["import-lmms-eval", str(samples), "--data", str(fewer), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "lacks" in result.output and not (tmp_path / "r").exists()
    logged = read_samples([samples])
    first = load_benchmark("demo").cases[0].case_id
    assert len(logged.outputs) == 2 * N_CASES and logged.outputs[(first, "swapped")].prompt_tokens == 900
