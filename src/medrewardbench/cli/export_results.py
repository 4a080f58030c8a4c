"""``medrewardbench export-results``: stored runs in the Every Eval Ever schema and the Hub's ``.eval_results``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medrewardbench.cli.options import BootstrapOpt, CiOpt
from medrewardbench.cli.report import DataSetOpt, JudgeOpt, RunPaths, SeedOpt
from medrewardbench.cli.support import console, nonempty_text
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import split_list as _split
from medrewardbench.errors import MedRewardBenchError


def export_results_command(
    runs: RunPaths,
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="where to write")],
    format_: Annotated[
        str, typer.Option("--format", "-f", help="eee (Every Eval Ever) | hub (.eval_results) | all")
    ] = "all",
    judge: JudgeOpt = None,
    data: DataSetOpt = None,
    dataset_id: Annotated[
        str | None,
        typer.Option("--dataset-id", metavar="OWNER/NAME[@REV]", help="the data set's Hub id, for local data"),
    ] = None,
    organization: Annotated[
        str, typer.Option("--organization", help="who ran the evaluation (Every Eval Ever's source organization)")
    ] = "unknown",
    source_url: Annotated[
        str | None, typer.Option("--source-url", help="where the evidence is published (the Hub entries' source)")
    ] = None,
    ci: CiOpt = 0.95,
    bootstrap: BootstrapOpt = 2000,
    seed: SeedOpt = 0,
) -> None:
    """Write stored runs so that other tools can read them: Every Eval Ever records and Hub .eval_results.

    Each judge is named with its pinned revision or dated snapshot; an unpinned API model is marked.
    """
    from medrewardbench.metrics.loading import analyze_dataset, different_data_error, find_datasets
    from medrewardbench.report.interop import export_results

    nonempty_text(organization, "--organization")
    nonempty_text(dataset_id, "--dataset-id")
    if dataset_id is not None and len(dataset_id.partition("@")[0].split("/")) != 2:
        raise _fail(f"--dataset-id {dataset_id!r}: expected OWNER/NAME or OWNER/NAME@REVISION")
    try:
        datasets = find_datasets(runs, judges=_split(judge) or None, data=data)
        if len(datasets) > 1:
            raise different_data_error(datasets)
        analysis = analyze_dataset(datasets[0], confidence=ci, n_resamples=bootstrap, seed=seed)
        summary = export_results(
            analysis,
            datasets[0],
            out,
            formats=format_,
            dataset_id=dataset_id,
            source_organization=organization,
            source_url=source_url,
        )
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    checked = "validated against the vendored schema" if summary.validated else "NOT validated (no jsonschema)"
    console.print(
        f"wrote {len(summary.paths)} file(s) for {summary.runs} run(s) to {out} "
        f"({summary.instances} instance record(s); Every Eval Ever records {checked})",
        highlight=False,
    )
    for line in summary.unpinned:
        console.print(f"unpinned judge: {line}", highlight=False)
    if summary.skipped_hub:
        console.print(f"Hub .eval_results not written: {summary.skipped_hub}", highlight=False)
