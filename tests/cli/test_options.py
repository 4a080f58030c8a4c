"""cli/options.py: the judge options that eval and the probes share, the model options build shares with them,
and how a command takes them."""

from __future__ import annotations

from dataclasses import fields

import pytest
import typer
from typer.testing import CliRunner

from medrewardbench.cli.options import (
    DEFAULT_JUDGE_FLAGS,
    DEFAULT_MODEL_FLAGS,
    JudgeFlags,
    ModelFlags,
    judge_flag_names,
    with_judge_flags,
    with_model_flags,
)
from medrewardbench.errors import JudgeSpecError
from medrewardbench.models.options import ApiSettings, JudgeOptions, LocalSettings


def test_a_command_gets_every_judge_option_packed_into_one_value() -> None:
    seen: list[JudgeFlags] = []
    app = typer.Typer()

    @app.command()
    @with_judge_flags
    def command(name: str = "x", judge_flags: JudgeFlags = DEFAULT_JUDGE_FLAGS, last: int = 0) -> None:
        """A command with the judge options between two of its own."""
        seen.append(judge_flags)
        assert (name, last) == ("y", 4)

    args = ["--name", "y", "--last", "4", "--timeout", "3", "--device", "cpu", "--structured", "--top-p", "0.9"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert seen == [JudgeFlags(timeout=3.0, device="cpu", structured=True, top_p=0.9)]
    options = seen[0].options(seed=11)
    assert (options.seed, options.api.timeout_s, options.local.device, options.api.structured) == (11, 3.0, "cpu", True)
    assert command.__doc__ == "A command with the judge options between two of its own."
    assert len(judge_flag_names()) == len(set(judge_flag_names())) == 17


def test_bad_judge_flags_are_refused_when_the_options_are_built() -> None:
    with pytest.raises(JudgeSpecError, match="--timeout must be a number of seconds greater than 0"):
        JudgeFlags(timeout=0).options(seed=0)


def test_a_command_without_the_parameter_or_with_its_own_judge_option_is_a_programming_error() -> None:
    def without(name: str = "x") -> None:
        """No judge_flags."""

    def clashing(timeout: float = 1.0, judge_flags: JudgeFlags = DEFAULT_JUDGE_FLAGS) -> None:
        """Its own --timeout."""

    with pytest.raises(TypeError, match="has no parameter judge_flags"):
        with_judge_flags(without)
    with pytest.raises(TypeError, match="declares judge options itself: timeout"):
        with_judge_flags(clashing)


def test_a_command_whose_models_answer_gets_the_model_options_only() -> None:
    seen: list[ModelFlags] = []
    app = typer.Typer()

    @app.command()
    @with_model_flags
    def command(template: str = "answer", model_flags: ModelFlags = DEFAULT_MODEL_FLAGS) -> None:
        """A command with its own --template (an answer prompt) beside the model options."""
        seen.append(model_flags)
        assert template == "mine"

    args = ["--template", "mine", "--base-url", "http://127.0.0.1:9/v1", "--max-retries", "2", "--batch-size", "3"]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert seen == [ModelFlags(base_url="http://127.0.0.1:9/v1", max_retries=2, batch_size=3)]
    options = seen[0].options(seed=5)
    assert (options.seed, options.api.base_url, options.api.max_retries, options.batch_size) == (
        5,
        "http://127.0.0.1:9/v1",
        2,
        3,
    )
    assert options.template == JudgeOptions().template  # the command's own prompt is not a model option
    judge_only = set(judge_flag_names()) - {"--batch-size", "--template"}
    for flag in ("--structured", "--adapter"):
        assert flag in judge_only
        refused = CliRunner().invoke(app, [flag, "x"] if flag == "--adapter" else [flag])
        assert refused.exit_code == 2 and "No such option" in refused.output
    with pytest.raises(TypeError, match="declares model options itself: timeout"):

        @with_model_flags
        def clashing(timeout: float = 1.0, model_flags: ModelFlags = DEFAULT_MODEL_FLAGS) -> None:
            """Its own --timeout."""


def test_the_judge_options_are_the_model_options_and_the_judges_own_built_alike() -> None:
    flags = JudgeFlags(
        template="pairwise-cot", concurrency=3, base_url="http://127.0.0.1:9/v1", timeout=7.0, max_retries=1,
        structured=True, logprobs=5, client_processes=2, device="cpu", dtype="float32", adapter="lora",
        force_prefix="{", temperature=0.5, top_p=0.9, max_tokens=64, batch_size=2,
    )  # fmt: skip
    assert flags.options(seed=3) == JudgeOptions(
        seed=3,
        template="pairwise-cot",
        concurrency=3,
        batch_size=2,
        temperature=0.5,
        top_p=0.9,
        max_tokens=64,
        api=ApiSettings(
            base_url="http://127.0.0.1:9/v1",
            timeout_s=7.0,
            max_retries=1,
            structured=True,
            client_processes=2,
            logprobs=5,
        ),
        local=LocalSettings(device="cpu", dtype="float32", adapter="lora", force_prefix="{"),
    )
    model_fields = {f.name for f in fields(ModelFlags)}
    assert model_fields < {f.name for f in fields(JudgeFlags)}
    assert {"template", "structured", "adapter"}.isdisjoint(model_fields)
