"""``medrewardbench validate``: check a data source and print every problem at once."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from medrewardbench.cli.options import ExternalImagesOpt, OrgansOpt
from medrewardbench.cli.support import console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.data.benchmark import summarize_warnings
from medrewardbench.data.validate import SourceSummary
from medrewardbench.errors import MedRewardBenchError


def validate_command(
    source: Annotated[str, typer.Argument(metavar="SOURCE", help="a data source, as for eval --data")] = "demo",
    organs: OrgansOpt = None,
    allow_external_images: ExternalImagesOpt = False,
) -> None:
    """Check a data source and print every problem and warning at once, then a summary.

    Exit status 1 when there is any problem (a row or a source that cannot be used); warnings (cases
    without labels, dimensions labelled null or left undecided by the annotators) are listed and
    counted, and leave the status 0.
    """
    from medrewardbench.data.validate import check_source

    shown = escape(terminal_safe(source or repr(source), keep_newlines=False))
    try:
        report = check_source(
            source, organs=_split_option(organs, "--organs"), allow_external_images=allow_external_images
        )
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    for problem in report.errors:
        console.print(terminal_safe(str(problem), keep_newlines=False), highlight=False, soft_wrap=True, markup=False)
    for warning in report.warnings:
        console.print(
            "warning: " + terminal_safe(str(warning), keep_newlines=False),
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    if report.errors:
        also = f" and {len(report.warnings)} warning(s)" if report.warnings else ""
        err_console.print(f"[bold red]{len(report.errors)} problem(s)[/]{also} in {shown}", highlight=False)
        raise typer.Exit(1)
    if report.warnings:
        console.print(f"[green]ok[/]: {shown} has no problems; {len(report.warnings)} warning(s):", highlight=False)
        for line in summarize_warnings(report.warnings, max_lines=len(report.warnings)):
            console.print(
                "  " + terminal_safe(line, keep_newlines=False), highlight=False, markup=False, soft_wrap=True
            )
    else:
        console.print(f"[green]ok[/]: {shown} has no problems", highlight=False)
    if report.summary is not None:
        _print_summary(report.summary)


def _print_summary(summary: SourceSummary) -> None:
    """Cases, organ systems, label coverage per dimension, images decoded and how many are DICOM."""
    from medrewardbench.report.terminal import labels_banner

    organs = ", ".join(f"{terminal_safe(name)} {n}" for name, n in summary.organ_systems.items())
    lines = [
        f"  {summary.cases} cases of {terminal_safe(summary.name)}, "
        f"{len(summary.organ_systems)} organ systems: {organs}",
        "  labelled cases per dimension: "
        + ", ".join(
            f"{dim} {n}/{summary.cases}" + ("" if n == summary.cases else f" ({100 * n / summary.cases:.0f} %)")
            for dim, n in summary.labelled.items()
        ),
        f"  images: {summary.decoded} of {summary.images} decoded, {summary.dicom} DICOM"
        + ("" if summary.images == summary.cases else f" ({summary.cases - summary.images} cases without an image)"),
    ]
    for line in lines:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(labels_banner(summary.labels))
