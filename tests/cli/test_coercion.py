"""Plain values turned without pydantic: the same results and the same errors as typer's own coercion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.testing import CliRunner

from medrewardbench.cli.coercion import PlainValues, plain_coercion
from medrewardbench.cli.main import build_app

TEXTS = ["", "x", " 12", "12 ", "0", "007", "12", "-3", "-0", "+5", "1_000", "1.5", "-0.25", ".5", "1.", "1e3"]
TEXTS += ["nan", "inf", "abc", "٣", "99999999999999999999", "1.0000000000000000001", "a,b", "hf:o/n@main"]


def every_parameter() -> list[tuple[str, Any, Any]]:
    """``(command path, click command, parameter)`` for every parameter of every command of the app."""
    found: list[tuple[str, Any, Any]] = []

    def walk(command: Any, path: str) -> None:
        for param in command.params:
            if hasattr(param, "type_descriptor"):
                found.append((f"{path} {param.name}".strip(), command, param))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(build_app()), "")
    return found


def outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    """What a coercion makes of a value: ``("value", result and its type)`` or ``("error", message)``."""
    try:
        result = runtime.coerce(value, param=param, ctx=ctx)
    except BadParameter as error:
        return "error", error.format_message()
    return "value", (repr(result), type(result), [type(x) for x in result] if isinstance(result, list) else None)


def samples(param: Any, tmp_path: Path) -> list[Any]:
    """Values the parameter may be given: texts, its default, paths that exist (file and folder) and not."""
    texts: list[Any] = [*TEXTS, str(tmp_path / "a-file"), str(tmp_path), str(tmp_path / "missing")]
    values: list[Any] = [None, param.default if not callable(param.default) else None, True, False, 3, 2.5]
    values += [Path(t) for t in texts[-3:]]
    if param.multiple or param.nargs == -1:
        return [*values, (), *((t,) for t in texts), tuple(texts[:3]), ("1", "2"), ["x"]]
    return [*values, *texts]


def test_every_parameter_of_every_command_coerces_as_typer_does(tmp_path: Path) -> None:
    """Each value gives the same Python value (and type) or the same error message on both paths."""
    (tmp_path / "a-file").write_text("x")
    params = every_parameter()
    plain = 0
    for path, command, param in params:
        param._runtime_param = None
        plain_coercion([param])
        fast = param._runtime_param
        if fast is None:
            continue
        plain += 1
        assert isinstance(fast, PlainValues), path
        full = build_runtime_param(param.type_descriptor)
        ctx = typer.Context(command)
        for value in samples(param, tmp_path):
            param._runtime_param = fast  # a fallback puts typer's own in its place: start afresh each time
            expected = outcome(full, value, param, ctx)
            assert outcome(fast, value, param, ctx) == expected, (path, value, expected)
        param._runtime_param = None
    assert plain > 0.9 * len(params), f"only {plain} of {len(params)} parameters take the plain path"


def test_a_parser_of_the_commands_own_or_a_clamp_keeps_typers_coercion() -> None:
    from typer.models import OptionInfo

    def descriptor(annotation: Any, **info: Any) -> Any:
        from typer._coercion import resolve_type_descriptor

        return resolve_type_descriptor(annotation, OptionInfo(**info))

    class Param:
        def __init__(self, d: Any) -> None:
            self.type_descriptor, self._runtime_param = d, None

    for d in (descriptor(Path, parser=Path), descriptor(int, min=0, clamp=True), descriptor(dict)):
        param = Param(d)
        plain_coercion([param])
        assert param._runtime_param is None


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--limit", "abc"], "Invalid value for '--limit'"),
        (["--limit", " 3"], None),  # not the plain form: typer's adapter takes it, and accepts it
        (["--logprobs", "99"], "Invalid value for '--logprobs'"),
        (["--risk", "2"], "Invalid value for '--risk'"),
        (["--timeout", "fast"], "Invalid value for '--timeout'"),
    ],
)
def test_bad_values_get_typers_own_errors(flags: list[str], message: str | None, tmp_path: Path) -> None:
    import medrewardbench.cli.eval as command

    seen: dict[str, Any] = {}

    def evaluate(*args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise typer.Exit(0)  # parsed and loaded: the rest is not this test's

    app = build_app(["eval"])
    original = command.evaluate
    command.evaluate = evaluate  # type: ignore[assignment]
    try:
        result = CliRunner().invoke(
            app, ["eval", "--data", "demo", "--judge", "random", "--out", str(tmp_path / "o"), *flags]
        )
    finally:
        command.evaluate = original  # type: ignore[assignment]
    if message is None:
        assert result.exit_code == 0, result.output
        assert seen, "the command did not reach the evaluation"
    else:
        assert result.exit_code == 2
        assert message in result.output


def test_a_quiet_eval_parses_its_flags_without_pydantic(tmp_path: Path) -> None:
    """typer would import pydantic and build an adapter per flag; plain values need neither."""
    probe = (
        "import sys\n"
        "sys.argv = ['medrewardbench', 'eval', '--data', 'demo', '--judge', 'api:m', '--limit', '4',\n"
        "            '--temperature', '0.5', '--organs', 'lung', '--quiet', '--out', sys.argv[1]]\n"
        "import medrewardbench.cli.eval as command\n"
        "def evaluate(*args, **kwargs):\n"
        "    print('PYDANTIC', 'pydantic' in sys.modules)\n"
        "    raise SystemExit(0)\n"
        "command.evaluate = evaluate\n"
        "from medrewardbench.cli.main import main\n"
        "main()\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "out")], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "PYDANTIC False" in done.stdout
