"""cli/options.py: the judge options that eval and the probes share, and how a command takes them."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from medrewardbench.cli.options import DEFAULT_JUDGE_FLAGS, JudgeFlags, judge_flag_names, with_judge_flags
from medrewardbench.errors import JudgeSpecError


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
