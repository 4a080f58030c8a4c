"""``medrewardbench import-inspect``: store eval logs of the ``medrewardbench/pairwise`` inspect task as runs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from medrewardbench.cli.errors import command_errors
from medrewardbench.cli.options import OutDirOpt, QuietOpt
from medrewardbench.cli.support import console, err_console, terminal_safe

if TYPE_CHECKING:
    from medrewardbench.integrations.inspect.importing import ImportSummary

LogsArg = Annotated[
    list[Path],
    typer.Argument(
        metavar="LOG...",
        help="inspect eval logs (.eval or .json) of the medrewardbench/pairwise task, or folders of logs "
        "(inspect's --log-dir; other tasks' logs in them are passed over)",
    ),
]
DataOverrideOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        "-d",
        metavar="SOURCE",
        help="where the data is now, when not where the task read it (the task's organs and limit still apply)",
        show_default="the task's data argument",
    ),
]
WaitOpt = Annotated[
    bool, typer.Option("--wait", help="when another process works in --out, wait for it", show_default="off")
]


def import_inspect_command(
    logs: LogsArg,
    out: OutDirOpt = Path("results"),
    data: DataOverrideOpt = None,
    wait: WaitOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Store inspect eval logs of the medrewardbench/pairwise task as runs, read as `eval` reads a judge.

    Logs of one model and configuration on the same data make one run (pass the logs of a split or
    retried eval together). The run's configuration holds the model, its generate config and
    inspect's version; report, leaderboard and compare read it like any run.
    """
    from medrewardbench.integrations.inspect.importing import import_logs

    def say_waiting(pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        err_console.print(f"waiting for {holder} to finish with {out}/ ...", highlight=False, markup=False)

    with command_errors(write_errors=True, out=out):
        summaries = import_logs(logs, out, data=data, wait=wait, on_wait=say_waiting)
    if quiet:
        return
    with command_errors():
        _print_summaries(out, summaries)


def _print_summaries(out: Path, summaries: list[ImportSummary]) -> None:
    """The agreement table of each imported run, and what was stored."""
    from medrewardbench.evaluation.store import Store
    from medrewardbench.metrics.analysis import analyze
    from medrewardbench.metrics.core import load_run_data
    from medrewardbench.report.terminal import dimension_table, fit_table

    with Store.in_dir(out) as store:
        for summary in summaries:
            run = summary.run
            analysis = analyze(
                [load_run_data(store, run)],
                n_resamples=0,
                group_fields=["organ_system"],
                dataset_name=run.dataset_name,
                labels=store.label_provenance(run.data_hash),
            )
            console.print(fit_table(dimension_table(analysis.run(run.run_id)), console.width))
            console.print(
                f"Stored {terminal_safe(run.judge_spec)} as run {run.run_id} in {out}/ from "
                f"{len(summary.logs)} log(s): {summary.written} judgments written, {summary.unchanged} already "
                f"stored, {summary.failed} without a usable verdict (counted wrong), {summary.not_in_logs} "
                "cases and orders in no log (not stored).",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    console.print(f"Next: medrewardbench report {out}", highlight=False, markup=False)
