"""``medrewardbench import-reference``: store the reference implementation's judge outputs as a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medrewardbench.cli.options import OrgansOpt, OutDirOpt
from medrewardbench.cli.support import console
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.dimensions import Order
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.evaluation.job import evaluate


def import_reference_command(
    outputs: Annotated[Path, typer.Argument(help="reference judge output JSONL file, or a directory of them")],
    data: Annotated[str, typer.Option("--data", "-d", help="the reference-layout data the outputs were made on")],
    name: Annotated[str | None, typer.Option("--name", help="judge name to show (default: the path)")] = None,
    out: OutDirOpt = Path("results"),
    organs: OrgansOpt = None,
) -> None:
    """Store the reference implementation's judge outputs as a run and print its accuracy table.

    Verdicts are read with the reference's own normalisation rules and the original order only,
    so the per-organ, per-dimension accuracy equals what the reference code reports.
    """
    from medrewardbench.data import load_benchmark
    from medrewardbench.judges.reference_outputs import ReferenceOutputJudge
    from medrewardbench.report.terminal import reference_table

    try:
        benchmark = load_benchmark(data, organs=_split_option(organs, "--organs"))
        judge = ReferenceOutputJudge(str(outputs), name=name)
        result = evaluate(
            benchmark, [judge.spec], out, orders=(Order.ORIGINAL,), judge_factory=lambda _spec, _opts: judge
        )
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    run = result.runs[0]
    console.print(reference_table(result.analysis.run(run.run_id)))
    summary = result.summaries[0]
    console.print(
        f"Stored as run {run.run_id} in {out}/ ({summary.judged} cases imported, {summary.failed} without a "
        "usable verdict, counted wrong as in the reference).",
        highlight=False,
    )
