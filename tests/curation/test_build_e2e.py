"""From questions to a labelled set, offline, on images that installed packages ship, then ``eval`` on the export.

Two differently shaped sources (a JSONL file with its own column names and relative image paths; a
parquet data set with Hugging Face Image structs in a fake local Hub cache), a difficulty filter
with a tiny local transformers model and an API model on the local test server, a pool of three
generators, pairs, three annotators' labels, both exports, and ``medrewardbench eval`` in a real
subprocess, whose report and ``leaderboard`` show the human-ceiling row. The same seed gives
byte-identical pairs and exports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers.curation import (
    FAKE_API_KEY,
    HF_MAP,
    VQA_MAP,
    api_flags,
    build_fake_hf_dataset,
    hf_parquet_bytes,
    project_store,
    write_vqa_source,
)
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data import load_benchmark
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def build(*args: str) -> str:
    result = runner.invoke(app, ["build", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def three_doctors(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two doctors agree; the third picks the other answer on overall and comprehensiveness."""
    rows = []
    for index, pair in enumerate(pairs):
        base = "A" if index % 3 else "B"
        other = "B" if base == "A" else "A"
        for annotator in ("dr_okafor", "dr_lindqvist", "dr_moreau"):
            labels = {dim: base for dim in DIMENSIONS}
            if annotator == "dr_moreau":
                labels.update(overall=other, comprehensiveness=other)
            order = "swapped" if (index + len(annotator)) % 2 else "original"
            rows.append(
                {"id": pair["id"], "annotator": annotator, "labels": labels, "order_shown": order, "seconds": 30}
            )
    return rows


def test_from_two_sources_to_a_labelled_set_that_eval_reads(
    answer_server: OpenAIServer, tiny_llava_dir: Path, fake_hf_home: Path, tmp_path: Path
) -> None:
    jsonl = write_vqa_source(tmp_path / "vqa")
    build_fake_hf_dataset(fake_hf_home / "hub", "hospital/chest-vqa", {"data/test.parquet": hf_parquet_bytes()})
    project = tmp_path / "project"
    tiny = f"hf:{tiny_llava_dir}"
    generation = [*api_flags(answer_server), "--max-tokens", "16", "--device", "cpu", "-q"]

    # 1. questions from two differently shaped sources, pooled
    build("import", str(project), str(jsonl), "--map", VQA_MAP, "--source-name", "vqa")
    out = build("import", str(project), "hf:hospital/chest-vqa", "--map", HF_MAP, "--set", "modality=mixed")
    assert "imported 4 question(s)" in out and "the project has 10" in out

    # 2. the difficulty filter: a tiny local model and an API model; keep what neither gets right
    out = build("filter", str(project), "--model", tiny, "--model", "api:small-vlm", "--max-correct", "0", *generation)
    with project_store(project) as store:
        report_rows = store.group_counts()
        kept = sum(g.kept for g in report_rows)
        dropped = sum(g.dropped for g in report_rows)
        decision = store.decision("v1")
    assert kept >= 4 and dropped >= 1 and kept + dropped == 10, report_rows
    assert decision is not None and [e["generator"] for e in decision["evidence"]] == [tiny, "api:small-vlm"]
    assert f"kept {kept}" in out

    # 3. the response pool: three generators, one of them local
    build("responses", str(project), "-g", "api:gen-a", "-g", "api:gen-b", "-g", tiny, *generation)

    # 4. pairs, seeded and length-balanced; the same seed gives the same bytes
    build("pairs", str(project), "--seed", "3", "--length-balance", "--out", str(tmp_path / "pairs.jsonl"))
    build("pairs", str(project), "--seed", "3", "--length-balance", "--out", str(tmp_path / "again.jsonl"))
    assert (tmp_path / "pairs.jsonl").read_bytes() == (tmp_path / "again.jsonl").read_bytes()
    pairs = [json.loads(line) for line in (tmp_path / "pairs.jsonl").read_text().splitlines()]
    assert 3 <= len(pairs) <= kept
    for pair in pairs:
        build_meta = pair["metadata"]["build"]
        assert build_meta["response_1"]["generator"] != build_meta["response_2"]["generator"]
        assert "labels" not in pair

    # 5. three annotators' labels
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in three_doctors(pairs)))
    out = build("labels", str(project), str(labels))
    assert f"to {len(pairs)} pair(s)" in out

    # 6. both exports, twice each: byte-identical
    for name in ("first", "second"):
        build("export", str(project), "--format", "canonical", "--out", str(tmp_path / name / "labelled.jsonl"))
        build("export", str(project), "--format", "reference", "--out", str(tmp_path / name / "reference"))
    for path in sorted(p for p in (tmp_path / "first").rglob("*") if p.is_file()):
        twin = tmp_path / "second" / path.relative_to(tmp_path / "first")
        assert path.read_bytes() == twin.read_bytes(), path
    card = json.loads((tmp_path / "first" / "dataset.json").read_text())
    assert card["labels"]["provenance"] == "expert majority of 3 annotators" and card["cases"] == len(pairs)
    assert [s["name"] for s in card["construction"]["sources"]] == ["vqa", "chest-vqa"]
    benchmark = load_benchmark(str(tmp_path / "first" / "labelled.jsonl"))
    assert all(len(c.annotations) == 3 and set(c.labels) == set(DIMENSIONS) for c in benchmark.cases)
    reference = load_benchmark(str(tmp_path / "first" / "reference"))
    assert len(reference) == len(pairs)

    # 7. the report: what was dropped, per source and organ system
    out = build("report", str(project))
    assert (project / "report" / "report.md").is_file() and "dropped" in out

    # 8. eval reads the export, in a real subprocess
    results = tmp_path / "results"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "medrewardbench.cli", "eval", "--data", str(tmp_path / "first" / "labelled.jsonl"),
         "--judge", "baseline:longer", "--judge", "baseline:random", "--out", str(results), "--quiet"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    metrics = json.loads((results / "metrics.json").read_text())
    assert {r["judge"] for r in metrics["runs"]} == {"baseline:longer", "baseline:random"}
    assert metrics["datasets"][0]["n_cases"] == len(pairs)
    longer = next(r for r in metrics["runs"] if r["judge"] == "baseline:longer")["metrics"]
    assert longer["requests"]["failed"] == 0 and 0.0 <= longer["dimensions"]["overall"]["accuracy"] <= 1.0

    # 9. the report of that eval shows the human ceiling, from the store alone
    result = runner.invoke(app, ["report", str(results), "--out", str(tmp_path / "report"), "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    report = (tmp_path / "report" / "report.md").read_text("utf-8")
    human_row = next(line for line in report.splitlines() if "*human (leave-one-out)*" in line)
    assert human_row.startswith("| – | not a judge |") and "## Human ceiling" in report
    human = json.loads((tmp_path / "report" / "analysis.json").read_text("utf-8"))["human"]
    assert human["annotators"] == ["dr_lindqvist", "dr_moreau", "dr_okafor"] and human["n_cases"] == len(pairs)
    # dr_moreau always dissents on overall and comprehensiveness: there the other two agree with each
    # other (one target: dr_moreau against them, wrong) while each of them faces a 1-1 tie (no target);
    # on the four other dimensions all three agree (three targets, all right): 12 of 14 per case
    assert human["human"]["overall"]["point"] == 0.0 and human["human"]["overall"]["n"] == len(pairs)
    assert human["human"]["accuracy"]["point"] == 1.0
    assert human["human"]["all"]["point"] == round(12 / 14, 6) and human["human"]["all"]["n"] == 14 * len(pairs)
    assert {j["label"] for j in human["judges"]} == {"baseline:longer", "baseline:random"}
    result = runner.invoke(app, ["leaderboard", str(results), "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "human (leave-one-out)" in line)
    assert "not a judge" in row
    # and nothing the project or the exports hold carries the API key
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".parquet")
    assert FAKE_API_KEY.encode() not in written
