"""The ``medrewardbench`` app: it only creates the typer app and adds the command modules beside it (lazily)."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Collection
from importlib import import_module
from typing import Any

import typer

from medrewardbench.cli.support import plain_help
from medrewardbench.utils.gcpolicy import freeze_for_exit

__all__ = ["COMMANDS", "build_app", "main", "quiet_library_warnings"]  # and `app`, built on first use

COMMANDS: dict[str, tuple[str, str, str]] = {
    "eval": ("command", "medrewardbench.cli.eval", "eval_command"),
    "validate": ("command", "medrewardbench.cli.validate", "validate_command"),
    "report": ("command", "medrewardbench.cli.report", "report_command"),
    "leaderboard": ("command", "medrewardbench.cli.report", "leaderboard_command"),
    "compare": ("command", "medrewardbench.cli.report", "compare_command"),
    "import-reference": ("command", "medrewardbench.cli.import_reference", "import_reference_command"),
    "import-inspect": ("command", "medrewardbench.cli.import_inspect", "import_inspect_command"),
    "serve": ("command", "medrewardbench.cli.serve", "serve_command"),
    "sweep": ("command", "medrewardbench.cli.sweep", "sweep_command"),
    "push": ("command", "medrewardbench.cli.push", "push_command"),
    "export-results": ("command", "medrewardbench.cli.export_results", "export_results_command"),
    "import-lmms-eval": ("command", "medrewardbench.cli.import_lmms_eval", "import_lmms_eval_command"),
    "lmms-eval-task": ("command", "medrewardbench.cli.import_lmms_eval", "lmms_eval_task_command"),
    "annotate": ("group", "medrewardbench.cli.annotate", "app"),
    "build": ("group", "medrewardbench.cli.build", "app"),
    "probe": ("group", "medrewardbench.cli.probe", "app"),
    "train": ("group", "medrewardbench.cli.train", "train_app"),
    "cv": ("command", "medrewardbench.cli.train", "cv_command"),
}
"""Every command and group: its kind, module and attribute, in the order the help lists them.

The modules are imported only when their command is built: a run of ``eval`` imports and builds
``eval`` alone (typer builds every parameter of every command it is given, and the other command
modules import much that ``eval`` never uses), which takes a fifth off the start-up."""


def build_app(names: Collection[str] | None = None) -> typer.Typer:
    """The ``medrewardbench`` typer app with every command, or only the named ones.

    Args:
        names: the commands and groups to add (keys of :data:`COMMANDS`); None for all.

    Returns:
        The app; a group even with one command in it (``medrewardbench eval ...``).
    """
    app = typer.Typer(
        name="medrewardbench",
        help="Measure how well reward models and multimodal LLM judges agree with medical experts.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for name, (kind, module, attribute) in COMMANDS.items():
        if names is not None and name not in names:
            continue
        target: Any = getattr(import_module(module), attribute)
        if kind == "group":
            app.add_typer(target, name=name)
        else:
            app.command(name)(target)
    if names is not None and len(app.registered_commands) + len(app.registered_groups) == 1:
        app.callback()(_group)  # typer runs a lone command as the app itself; this keeps the group
    plain_help(app)  # last: every command and group added above gets click-style help pages
    return app


def _group() -> None:
    """Measure how well reward models and multimodal LLM judges agree with medical experts."""


_FULL_APP: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    """``app``: the app with every command, built on first use (tests, the documentation, ``--help``)."""
    global _FULL_APP
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _FULL_APP is None:
        _FULL_APP = build_app()
    return _FULL_APP


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
    # the command named first is built alone; anything else (no command, --help, a typo) gets them all
    named = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in COMMANDS else None
    command_app = build_app([named]) if named else __getattr__("app")
    try:
        command_app()
    finally:
        freeze_for_exit()


if __name__ == "__main__":
    main()
