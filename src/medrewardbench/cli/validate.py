"""``medrewardbench validate``: check a data source and print every problem at once."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from medrewardbench.cli.support import ExternalImagesOpt, OrgansOpt, console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.errors import MedRewardBenchError


def validate_command(
    source: Annotated[str, typer.Argument(help="a data source, as for eval --data")] = "demo",
    organs: OrgansOpt = None,
    allow_external_images: ExternalImagesOpt = False,
) -> None:
    """Check a data source and print every problem at once (exit 1 when there are any)."""
    from medrewardbench.data import validate_source

    shown = escape(terminal_safe(source or repr(source), keep_newlines=False))
    try:
        problems = validate_source(
            source, organs=_split_option(organs, "--organs"), allow_external_images=allow_external_images
        )
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    if not problems:
        console.print(f"[green]ok[/]: {shown} has no problems", highlight=False)
        return
    for problem in problems:
        console.print(terminal_safe(str(problem), keep_newlines=False), highlight=False, soft_wrap=True, markup=False)
    err_console.print(f"[bold red]{len(problems)} problem(s)[/] in {shown}", highlight=False)
    raise typer.Exit(1)
