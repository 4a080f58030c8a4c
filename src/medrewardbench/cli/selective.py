"""``medrewardbench annotate pick`` and ``annotate plan``: the doctors' time where it counts.

    medrewardbench annotate pick RESULTS --judge SPEC|RUN_ID -k 50 -r 100 --new PROJECT [--per-case 1]
    medrewardbench annotate pick RESULTS --judge SPEC|RUN_ID -k 50 -r 100 --into PROJECT
    medrewardbench annotate plan RESULTS --judge SPEC|RUN_ID -k 50 [--labels labelled.jsonl] [--half-width 0.03]

``pick`` puts the K pairs the judge was least sure of and a uniform random slice of R from the
rest into an annotation project, with the slice's design recorded on every item (it comes back
in the export's ``metadata.selection``). ``plan`` says how many random labels give an interval of
a given half-width on the judge's agreement with the doctors over the whole pool, by
prediction-powered inference and by the labels alone: before any label from the judge's
confidences, after some from the slice so far (``--labels``). ``report RESULTS --labels FILE``
then shows the corrected estimates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from medrewardbench.cli.options import CiOpt
from medrewardbench.cli.support import console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import split_list as _split
from medrewardbench.errors import MedRewardBenchError, require

ResultsArg = Annotated[
    list[Path], typer.Argument(metavar="RESULTS...", help="results directories or store files holding the judge's run")
]
JudgeOpt = Annotated[
    str, typer.Option("--judge", "-j", metavar="SPEC|RUN_ID", help="the judge whose confidences pick the pairs")
]
LeastOpt = Annotated[
    int,
    typer.Option("--least-confident", "-k", min=0, metavar="K", help="pairs the judge is least sure of (all labelled)"),
]
SeedOpt = Annotated[int, typer.Option("--seed", metavar="N", help="seed of the tie-break order and the random slice")]
RankOpt = Annotated[
    str,
    typer.Option(
        "--rank-by", metavar="mean|DIMENSION", help="the confidence that ranks pairs: the mean of the six, or one"
    ),
]
DataSetOpt = Annotated[
    str | None,
    typer.Option("--data", metavar="FINGERPRINT", help="the data set, when the judge has runs on several"),
]


def _check_new_project(project: Path) -> None:
    """Refuse, before anything is read, a directory that already holds a project or cannot be written."""
    from medrewardbench.annotate.config import CONFIG_FILE
    from medrewardbench.utils.outdir import check_output_dir

    check_output_dir(project, option="--new")
    if (project / CONFIG_FILE).exists():
        raise _fail(f"--new {project} already holds an annotation project; add to it with --into {project}")


def _say(text: str) -> None:
    console.print(terminal_safe(text), highlight=False, markup=False, soft_wrap=True)


def pick_command(
    results: ResultsArg,
    judge: JudgeOpt,
    least_confident: LeastOpt = 50,
    random: Annotated[
        int, typer.Option("--random", "-r", min=0, metavar="R", help="a uniform random slice of the other pairs")
    ] = 100,
    seed: SeedOpt = 0,
    rank_by: RankOpt = "mean",
    data: DataSetOpt = None,
    new: Annotated[Path | None, typer.Option("--new", metavar="PROJECT", help="create this project")] = None,
    into: Annotated[Path | None, typer.Option("--into", metavar="PROJECT", help="add to this existing project")] = None,
    per_case: Annotated[int, typer.Option("--per-case", min=1, max=1000, help="--new: annotators per pair")] = 3,
    db: Annotated[str | None, typer.Option("--db", help="--new: database URL (default: SQLite in PROJECT)")] = None,
    name: Annotated[str | None, typer.Option("--name", help="--new: display name")] = None,
) -> None:
    """Pick the K least confident pairs of a judge's run and a random slice of R into an annotation project.

    The slice's design (run, judge fingerprint, K, R, seed, pool size, each pair's stratum) is
    recorded on every item and comes back in the export, where ``report --labels`` reads it.
    """
    if (new is None) == (into is None):
        raise _fail("give --new PROJECT (create one) or --into PROJECT (add to one), not both or neither")
    try:
        for module in (
            ("sqlalchemy", "alembic", "psycopg") if db and db.startswith("postgresql") else ("sqlalchemy", "alembic")
        ):
            require(module, "annotate", "annotation projects")
        if new is not None:
            _check_new_project(new)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    from medrewardbench.annotate.pick import (
        add_picked_cases,
        design_from_run,
        load_pick_run,
        pick_new_project,
        picked_cases,
    )
    from medrewardbench.annotate.service import Project

    project: Any = None
    try:
        run = load_pick_run(results, judge, data)
        design = design_from_run(run, least_confident=least_confident, random=random, seed=seed, ranked_by=rank_by)
        cases = picked_cases(run, design)
        if new is not None:
            project = pick_new_project(new, cases, design, per_case=per_case, db_url=db, seed=seed, name=name)
            where, added, tagged = new, len(cases), 0
        else:
            assert into is not None
            project = Project.open(into)
            outcome = add_picked_cases(project, cases, design, run.data.case_ids)
            where, added, tagged = into, outcome.added, outcome.tagged
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    finally:
        if project is not None:
            project.close()
    from medrewardbench.metrics.confidence import case_verdicts

    source = case_verdicts(run.data).source
    _say(
        f"Picked {design.least_confident} least confident + {design.random} random of {design.pool_size} pairs "
        f"of {run.record.judge_spec} ({run.record.run_id}; confidence from {source}); design {design.design_id}"
    )
    _say(f"{'Created' if new is not None else 'Updated'} {where}/: {added} pair(s) added, {tagged} already there")
    _say(f"Next: medrewardbench annotate user add NAME --role annotator --project {where}")


def plan_command(
    results: ResultsArg,
    judge: JudgeOpt,
    least_confident: LeastOpt = 50,
    seed: SeedOpt = 0,
    rank_by: RankOpt = "mean",
    data: DataSetOpt = None,
    labels: Annotated[
        str | None,
        typer.Option("--labels", metavar="FILE", help="the doctors' labels so far (annotate export): plan from them"),
    ] = None,
    half_width: Annotated[
        list[str] | None,
        typer.Option("--half-width", metavar="H", help="half-widths to plan for (repeat or comma-separate)"),
    ] = None,
    dimension: Annotated[
        str, typer.Option("--dimension", metavar="pooled|DIMENSION", help="the agreement planned for")
    ] = "pooled",
    ci: CiOpt = 0.95,
    as_json: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
) -> None:
    """How many doctors' labels give an interval of a given half-width: by PPI and by the labels alone.

    Without --labels the plan takes the judge's confidences as calibrated (optimistic for an
    overconfident judge); with them it uses the variances measured on the random slice so far.
    """
    from medrewardbench.metrics.budget import plan_after, plan_before
    from medrewardbench.metrics.corrected import load_single_run

    try:
        widths = [float(x) for x in _split(half_width)] or [0.02, 0.03, 0.05, 0.1]
    except ValueError as exc:
        raise _fail(f"--half-width must be numbers: {exc}") from exc
    if any(not 0 < w < 1 for w in widths):
        raise _fail("--half-width must be between 0 and 1 (exclusive)")
    try:
        run = load_single_run(results, judge, data)
        if labels is None:
            plan = plan_before(
                run.data,
                least_confident=least_confident,
                half_widths=widths,
                dimension=dimension,
                ranked_by=rank_by,
                seed=seed,
                confidence=ci,
            )
        else:
            from medrewardbench.data import load_benchmark
            from medrewardbench.metrics.corrected import doctor_labels

            doctors = doctor_labels(load_benchmark(labels).cases, labels)
            plan = plan_after(run.data, doctors, half_widths=widths, dimension=dimension, confidence=ci)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    if as_json:
        sys.stdout.write(json.dumps(plan.to_json(), indent=2) + "\n")
        return
    from medrewardbench.report.estimates import BUDGET_DROP_ORDER, budget_table
    from medrewardbench.report.terminal import fit_table

    console.print(fit_table(budget_table(plan), console.width, BUDGET_DROP_ORDER))
