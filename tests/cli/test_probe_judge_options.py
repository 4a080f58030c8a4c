"""The four probe commands take eval's judge options, declared once in cli/options.py, and pass them on.

Each probe runs against the local OpenAI-compatible server (what the requests carry, what the
stored run records) and, for the local-model options that need a model to show, with its job
function replaced by one that records the :class:`JudgeOptions` the command built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers.api import API_KEY_ENV
from helpers.cases import make_case
from typer.testing import CliRunner

from medrewardbench.cases import Annotation
from medrewardbench.cli import app
from medrewardbench.cli.options import judge_flag_names
from medrewardbench.data import write_canonical
from medrewardbench.evaluation.store import Store
from medrewardbench.models.options import JudgeOptions
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()

PROBES = ("grounding", "counterfactual", "bias", "harm")

# what each probe needs besides the judge options to run small and fast
SMALL = {
    "grounding": ["--limit", "1", "--controls", "no-image"],
    "counterfactual": ["--limit", "1", "--types", "negation"],
    "bias": ["--limit", "1"],
    "harm": [],
}
JOB = {  # the function each probe command hands its JudgeOptions to
    "grounding": "medrewardbench.probes.derive.run_probe",
    "counterfactual": "medrewardbench.probes.pairs.run_probe",
    "bias": "medrewardbench.probes.pairs.run_probe",
    "harm": "medrewardbench.evaluation.job.evaluate",
}


def _command(*path: str) -> Any:
    """The click command typer makes of ``medrewardbench PATH...``."""
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def _options_by_flag(command: Any) -> dict[str, Any]:
    return {param.opts[0]: param for param in command.params}


def _flagged_data(tmp_path: Path) -> Path:
    """Two pairs, the first with its longer answer flagged severe by a doctor (what probe harm needs)."""
    cases = [
        make_case(i, labels={"overall": 1}, annotations=(Annotation("dr_a", {"overall": 1}, harm={2: "severe"}),))
        for i in range(2)
    ]
    return write_canonical(cases, tmp_path / "flagged.jsonl")


def _data(probe: str, tmp_path: Path) -> list[str]:
    return ["--data", str(_flagged_data(tmp_path))] if probe == "harm" else ["--data", "demo"]


@pytest.mark.parametrize("probe", PROBES)
def test_each_probe_declares_every_judge_option_of_eval_alike(probe: str) -> None:
    eval_options, probe_options = _options_by_flag(_command("eval")), _options_by_flag(_command("probe", probe))
    for flag in ["--judge", *judge_flag_names()]:
        ours, evals = probe_options[flag], eval_options[flag]
        alike = ("opts", "secondary_opts", "help", "default", "show_default", "metavar", "is_flag", "required")
        assert [getattr(ours, a) for a in alike] == [getattr(evals, a) for a in alike], flag


@pytest.mark.parametrize("probe", PROBES)
def test_each_probes_help_lists_the_judge_options_eval_lists(probe: str) -> None:
    def listed(*args: str) -> set[str]:
        result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "240", "NO_COLOR": "1"})
        assert result.exit_code == 0, result.output
        return {flag for flag in judge_flag_names() if f" {flag} " in result.output}

    assert listed("eval") == set(judge_flag_names())
    assert listed("probe", probe) == listed("eval")
    assert {"--timeout", "--max-retries", "--device", "--batch-size", "--max-tokens"} <= listed("probe", probe)


@pytest.mark.parametrize("probe", PROBES)
def test_api_options_reach_the_requests_and_the_stored_runs(
    probe: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.control.script_faults("500")  # the first request fails once: --max-retries 1 sends it again
    args = ["probe", probe, *_data(probe, tmp_path), *SMALL[probe], "--judge", "api:judge-model",
            "--out", str(tmp_path / "out"), *([] if probe == "harm" else ["--bootstrap", "100"]), "-q",
            "--base-url", openai_server.base_url, "--api-key-env", API_KEY_ENV, "--max-tokens", "37",
            "--temperature", "0.25", "--top-p", "0.5", "--timeout", "7.5", "--max-retries", "1",
            "--concurrency", "3", "--logprobs", "2", "--structured"]  # fmt: skip
    result = runner.invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    requests = openai_server.control.chat_requests()
    assert requests and all(
        (r.body or {}).get("max_tokens") == 37
        and r.body["temperature"] == 0.25
        and r.body["top_p"] == 0.5
        and r.body["top_logprobs"] == 2
        and r.response_format is not None
        for r in requests
    )
    with Store.in_dir(tmp_path / "out") as store:
        runs = store.runs()
        judged = sum(len(store.judgments_for_run(run)) for run in runs)
        assert runs and all(
            (run.metadata["timeout_s"], run.metadata["max_retries"], run.metadata["concurrency"]) == (7.5, 1, 3)
            for run in runs
        )
        assert all(run.metadata["api_key_env"] == API_KEY_ENV for run in runs)
        assert not any(row.failure for run in runs for row in store.judgments_for_run(run))
    assert len(requests) == judged + 1  # every request answered, one of them on its retry
    written = json.loads((tmp_path / "out" / f"probe-{probe}.json").read_text())
    assert "api:judge-model" in json.dumps(written["judges"] if "judges" in written else written["cards"])


class _Built(Exception):
    """Stops a probe once it has handed its options to the job."""


@pytest.mark.parametrize("probe", PROBES)
def test_local_model_options_reach_the_judges_options(
    probe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[JudgeOptions] = []

    def job(*args: Any, options: JudgeOptions, **kwargs: Any) -> Any:
        built.append(options)
        raise _Built

    monkeypatch.setattr(JOB[probe], job)
    args = ["probe", probe, *_data(probe, tmp_path), *SMALL[probe], "--judge", "baseline:first",
            "--out", str(tmp_path / "out"), "--seed", "5", "--device", "cpu", "--batch-size", "3",
            "--dtype", "float32", "--adapter", "some/adapter", "--force-prefix", "{", "--template", "pairwise-cot",
            "--max-tokens", "64", "--timeout", "9", "--max-retries", "0", "--client-processes", "2"]  # fmt: skip
    with pytest.raises(_Built):
        runner.invoke(app, args, catch_exceptions=False)
    [options] = built
    assert (options.seed, options.template, options.batch_size, options.max_tokens) == (5, "pairwise-cot", 3, 64)
    local = options.local
    assert (local.device, local.dtype, local.adapter, local.force_prefix) == ("cpu", "float32", "some/adapter", "{")
    assert (options.api.timeout_s, options.api.max_retries, options.api.client_processes) == (9.0, 0, 2)
