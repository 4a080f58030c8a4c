"""``eval --logprobs N`` on the demo data: each verdict's probability is stored and becomes the confidence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from helpers.api import API_KEY_ENV
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.dimensions import Order
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import load_run_data
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def test_eval_with_logprobs_stores_a_probability_for_every_verdict(openai_server: OpenAIServer, tmp_path: Path) -> None:
    openai_server.control.set_letter_probability(0.9)  # the default answer names A everywhere
    args = ["eval", "--judge", "api:judge-model", "--limit", "4", "--base-url", openai_server.base_url,
            "--api-key-env", API_KEY_ENV, "--logprobs", "5", "--out", str(tmp_path), "--quiet"]  # fmt: skip
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert all((r.body or {}).get("top_logprobs") == 5 for r in openai_server.control.chat_requests())
    with Store.in_dir(tmp_path) as store:
        [run] = store.runs()
        assert run.config["logprobs"] == 5
        rows = store.judgments_for_run(run)
        assert len(rows) == 8
        for row in rows:  # "A" at 0.9 is response_1 in the original order, response_2 swapped
            expected = 0.9 if row.order is Order.ORIGINAL else 0.1
            assert row.preferences and all(abs(p - expected) < 1e-6 for p in row.preferences.values())
        verdicts = case_verdicts(load_run_data(store, run, preferences=True))
    assert verdicts.source == "probability"
    np.testing.assert_allclose(verdicts.p_first, 0.5, atol=1e-6)  # a judge that always picks the first shown


def test_eval_without_logprobs_stores_none(openai_server: OpenAIServer, tmp_path: Path) -> None:
    args = ["eval", "--judge", "api:judge-model", "--limit", "2", "--base-url", openai_server.base_url,
            "--api-key-env", API_KEY_ENV, "--out", str(tmp_path), "--quiet"]  # fmt: skip
    assert runner.invoke(app, args, catch_exceptions=False).exit_code == 0
    with Store.in_dir(tmp_path) as store:
        [run] = store.runs()
        assert "logprobs" not in run.config
        assert all(row.preferences == {} for row in store.judgments_for_run(run))
        assert case_verdicts(load_run_data(store, run, preferences=True)).source == "order agreement"


def test_the_report_calibrates_on_the_stored_probabilities(openai_server: OpenAIServer, tmp_path: Path) -> None:
    import json

    openai_server.control.set_letter_probability(0.8)
    args = ["eval", "--judge", "api:judge-model", "--limit", "6", "--base-url", openai_server.base_url,
            "--api-key-env", API_KEY_ENV, "--logprobs", "5", "--out", str(tmp_path), "--quiet"]  # fmt: skip
    assert runner.invoke(app, args, catch_exceptions=False).exit_code == 0
    report = runner.invoke(
        app, ["report", str(tmp_path), "--out", str(tmp_path / "r"), "--bootstrap", "100"], catch_exceptions=False
    )
    assert report.exit_code == 0, report.output
    analysis = json.loads((tmp_path / "r" / "analysis.json").read_text())
    [judge] = analysis["selective"]["judges"]
    assert judge["source"] == "probability"  # not order agreement: the report read the probabilities
