"""The ``medrewardbench`` app: it only creates the typer app and adds the command modules beside it."""

from __future__ import annotations

import os
import sys
import warnings

import typer

from medrewardbench.cli.annotate import app as annotate_app
from medrewardbench.cli.build import app as build_app
from medrewardbench.cli.eval import eval_command
from medrewardbench.cli.export_results import export_results_command
from medrewardbench.cli.import_inspect import import_inspect_command
from medrewardbench.cli.import_lmms_eval import import_lmms_eval_command, lmms_eval_task_command
from medrewardbench.cli.import_reference import import_reference_command
from medrewardbench.cli.probe import app as probe_app
from medrewardbench.cli.push import push_command
from medrewardbench.cli.report import compare_command, leaderboard_command, report_command
from medrewardbench.cli.serve import serve_command
from medrewardbench.cli.support import plain_help
from medrewardbench.cli.sweep import sweep_command
from medrewardbench.cli.train import register_commands as register_training_commands
from medrewardbench.cli.validate import validate_command
from medrewardbench.utils.gcpolicy import freeze_for_exit

__all__ = ["app", "main", "quiet_library_warnings"]

app = typer.Typer(
    name="medrewardbench",
    help="Measure how well reward models and multimodal LLM judges agree with medical experts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("eval")(eval_command)
app.command("validate")(validate_command)
app.command("report")(report_command)
app.command("leaderboard")(leaderboard_command)
app.command("compare")(compare_command)
app.command("import-reference")(import_reference_command)
app.command("import-inspect")(import_inspect_command)
app.command("serve")(serve_command)
app.command("sweep")(sweep_command)
app.command("push")(push_command)
app.command("export-results")(export_results_command)
app.command("import-lmms-eval")(import_lmms_eval_command)
app.command("lmms-eval-task")(lmms_eval_task_command)
app.add_typer(annotate_app, name="annotate")
app.add_typer(build_app, name="build")
app.add_typer(probe_app, name="probe")
register_training_commands(app)
plain_help(app)  # last: every command and group added above gets click-style help pages


QUIET_LIBRARIES = r"(transformers|trl|peft|accelerate|torch)(\..*)?"
"""Libraries whose FutureWarnings (deprecations addressed to developers) users of the command line never see."""


def quiet_library_warnings() -> None:
    """Hide the FutureWarnings of the model libraries, unless the user asked for warnings (``python -W``)."""
    if not sys.warnoptions:
        warnings.filterwarnings("ignore", category=FutureWarning, module=QUIET_LIBRARIES)


def main() -> None:
    """Console entry point."""
    quiet_library_warnings()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers' own load bars would interleave with ours
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        app()
    finally:
        freeze_for_exit()


if __name__ == "__main__":
    main()
