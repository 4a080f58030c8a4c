"""``medrewardbench compare`` of two runs that hold the same verdicts: a difference of 0.0 either way round."""

from __future__ import annotations

from pathlib import Path

from helpers.api import API_KEY_ENV
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.evaluation.store import Store
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def test_compare_of_identical_runs_prints_zero_without_a_sign_in_either_order(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    # the server answers every request alike, so two templates give two runs with the same verdicts
    for template in ("pairwise", "pairwise-cot"):
        args = ["eval", "--judge", "api:judge-model", "--template", template, "--limit", "4", "--out", str(tmp_path),
                "--base-url", openai_server.base_url, "--api-key-env", API_KEY_ENV, "--quiet"]  # fmt: skip
        result = runner.invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    with Store.in_dir(tmp_path) as store:
        run_ids = [run.run_id for run in store.runs()]
    assert len(run_ids) == 2
    for a, b in (run_ids, run_ids[::-1]):  # one of the two orders reads the stored difference negated
        args = ["compare", a, b, "--results", str(tmp_path), "--bootstrap", "200"]
        result = runner.invoke(app, args, env={"COLUMNS": "200"}, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "-0.0" not in result.output
        assert result.output.count("0.0 [0.0, 0.0]") == 7  # six dimensions and all of them pooled
