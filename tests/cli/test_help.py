"""The --help pages: flags look like flags, every eval option says what it does and its default,
the judge kinds are listed, cv and report share option names, and train reads at 100 columns."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.cli.main import quiet_library_warnings
from medrewardbench.judges.registry import known_kinds

runner = CliRunner()
MARKER = re.compile(r"<(str|int|float|bool|path|list\[[^\]]*\]|[a-z]+ range)>", re.IGNORECASE)


def help_of(*command: str, columns: int = 200) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": str(columns)}, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def every_command() -> Iterator[tuple[str, ...]]:
    root = typer.main.get_command(app)

    def walk(command: object, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        yield path
        for name, child in sorted(getattr(command, "commands", {}).items()):
            yield from walk(child, (*path, name))

    yield from walk(root, ())


COMMANDS = list(every_command())


def test_the_walk_reaches_every_command_group() -> None:
    assert ("eval",) in COMMANDS and ("build", "export") in COMMANDS and ("train", "rm") in COMMANDS
    assert ("annotate", "user", "add") in COMMANDS and len(COMMANDS) > 30


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "medrewardbench")
def test_no_help_page_shows_type_markers(command: tuple[str, ...]) -> None:
    text = help_of(*command)
    assert not MARKER.search(text), MARKER.search(text)
    assert "{" not in text.splitlines()[1], "arguments read as NAME, not {name}"


def test_every_eval_option_has_a_description_and_a_default() -> None:
    command = typer.main.get_command(app).commands["eval"]  # type: ignore[attr-defined]
    options = [p for p in command.params if p.name != "help"]
    assert len(options) >= 30
    for option in options:
        assert option.help and len(option.help) > 8, option.name
        assert isinstance(option.show_default, str) or option.default is not None, option.name
    text = help_of("eval")
    assert text.count("[default:") == len(options)
    assert "--fresh " in text and "[default: (off)]" in text


def test_the_judge_option_lists_every_judge_kind_and_constrained_decoding() -> None:
    text = " ".join(help_of("eval").split("Options")[1].split())
    judge = text[text.index("--judge") : text.index("--out ")]
    for kind in known_kinds():
        assert f"{kind}:" in judge, kind
    assert "#constrained" in judge and "every baseline" in judge


def test_cv_takes_the_interval_options_of_report() -> None:
    cv, report = help_of("cv"), help_of("report")
    for flag in ("--ci", "--bootstrap"):
        assert flag in cv and flag in report
    assert "--confidence" not in cv and "--n-resamples" not in cv


@pytest.mark.parametrize("method", ["sft", "dpo", "rm"])
def test_train_help_reads_at_100_columns(method: str) -> None:
    text = help_of("train", method, columns=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "…" not in text, "option names are never cut"
    assert "--gradient-checkpointing" in text and "on|off" in text


def test_the_libraries_future_warnings_are_hidden_from_command_line_users() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        quiet_library_warnings()
        for module in ("transformers.modeling_utils", "trl.trainer", "peft.tuners"):
            warnings.warn_explicit("x is deprecated and will be removed", FutureWarning, "lib.py", 1, module=module)
        warnings.warn_explicit("ours", FutureWarning, "ours.py", 1, module="medrewardbench.metrics")
        warnings.warn_explicit("other", UserWarning, "lib.py", 2, module="transformers.modeling_utils")
    assert [str(w.message) for w in caught] == ["ours", "other"]


@pytest.mark.parametrize("argv", [["eval", "--help"], ["build", "responses", "--help"], ["cv", "--help"]])
def test_a_named_command_is_built_alone_with_the_same_help_as_in_the_whole_app(argv: list[str]) -> None:
    import subprocess
    import sys

    from medrewardbench.cli.main import COMMANDS, build_app

    runner = CliRunner()
    alone = runner.invoke(build_app([argv[0]]), argv)
    whole = runner.invoke(app, argv)
    assert alone.exit_code == whole.exit_code == 0
    assert alone.output == whole.output
    # the console entry imports the named command's module, not the others'
    probe = (
        "import sys; sys.argv = ['medrewardbench', *sys.argv[1:]]\n"
        "from medrewardbench.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('MODULES', sorted(m for m in sys.modules if m.startswith('medrewardbench.cli.')))"
    )
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.rpartition("MODULES ")[2].strip(" []\n").replace("'", "").split(", "))
    command_modules = {module for _, module, _ in COMMANDS.values()}
    assert loaded & command_modules == {COMMANDS[argv[0]][1]}


def test_eval_start_up_imports_nothing_that_only_other_jobs_or_error_hints_use() -> None:
    """Training, process pools and install hints are imported where used, not by every ``eval``."""
    import subprocess
    import sys

    probe = (
        "import sys; sys.argv = ['medrewardbench', 'eval', '--help']\n"
        "from medrewardbench.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('MODULES', sorted(sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.rpartition("MODULES ")[2].strip(" []\n").replace("'", "").split(", "))
    assert "medrewardbench.evaluation.job" in loaded  # the probe did load eval
    # (importlib.metadata itself comes with typer's pydantic adapters; our install hints no longer add it)
    assert not loaded & {"medrewardbench.train", "multiprocessing", "urllib.request"}
    # numpy comes with the analysis, after the requests: images and the id check import it where used
    assert "numpy" not in loaded


def test_a_quiet_eval_reaches_its_requests_without_rich_or_numpy(tmp_path: Path) -> None:
    """``eval --quiet`` prints nothing when all goes well: rich is imported on first print, numpy after the requests."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "sys.argv = ['medrewardbench', 'eval', '--data', 'demo', '--judge', 'api:m', '--quiet', '--out', sys.argv[1]]\n"
        "import medrewardbench.cli.eval as command\n"
        "def evaluate(*args, **kwargs):\n"
        "    print('MODULES', sorted(sys.modules))\n"
        "    raise SystemExit(0)\n"
        "command.evaluate = evaluate\n"
        "from medrewardbench.cli.main import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.rpartition("MODULES ")[2].strip(" []\n").replace("'", "").split(", "))
    assert "medrewardbench.data.canonical" in loaded  # the probe did load the data
    assert not {m for m in loaded if m.split(".")[0] in ("rich", "numpy")}
