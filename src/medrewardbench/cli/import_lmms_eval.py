"""``medrewardbench import-lmms-eval``: store lmms-eval's logged samples of ``medrewardbench_pairwise`` as a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medrewardbench.cli.options import DataOpt, OutDirOpt
from medrewardbench.cli.support import console
from medrewardbench.cli.support import fail as _fail
from medrewardbench.errors import MedRewardBenchError


def import_lmms_eval_command(
    samples: Annotated[
        list[Path], typer.Argument(help="lmms-eval --log_samples files (*_samples_*.jsonl) or folders holding them")
    ],
    data: DataOpt = "demo",
    name: Annotated[
        str | None, typer.Option("--name", help="the judge's name (default: lmms-eval's model and its arguments)")
    ] = None,
    template: Annotated[str, typer.Option("--template", help="the template the task used")] = "pairwise",
    out: OutDirOpt = Path("results"),
) -> None:
    """Store lmms-eval's per-sample outputs of the medrewardbench_pairwise task as a run.

    Each output is read by medrewardbench's own parser; --data must be the set the task ran on
    (the Hub folder or repository its dataset_path named). The cases lmms-eval did not log are left
    out of the run, as 'eval --limit' would.
    """
    from medrewardbench.data import load_benchmark
    from medrewardbench.data.benchmark import Benchmark
    from medrewardbench.evaluation.job import evaluate
    from medrewardbench.integrations.lmms_eval.samples import LmmsEvalSamplesJudge, read_samples

    try:
        logged = read_samples(samples)
        judge = LmmsEvalSamplesJudge(logged, name=name, template=template)
        benchmark = load_benchmark(data)
        covered = judge.covered_case_ids()
        unknown = sorted(covered - set(benchmark.case_ids()))
        if unknown:
            shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            raise _fail(f"the samples name case(s) that --data {data} lacks: {shown}; pass the set the task ran on")
        if len(covered) < len(benchmark):
            benchmark = Benchmark(
                benchmark.name,
                benchmark.source,
                [c for c in benchmark if c.case_id in covered],
                labels=benchmark.labels,
            )
        result = evaluate(benchmark, [judge.spec], out, judge_factory=lambda _spec, _options: judge)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    summary = result.summaries[0]
    run = result.runs[0]
    console.print(
        f"Stored {len(logged.outputs)} lmms-eval output(s) of {logged.model} as run {run.run_id} in {out}/ "
        f"({summary.judged} request(s) stored, {summary.failed} of them without a usable verdict; "
        f"lmms-eval {logged.lmms_eval_version}).",
        highlight=False,
    )


def lmms_eval_task_command(
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="the task folder to write (--include_path)")],
    dataset: Annotated[
        str,
        typer.Option(
            "--dataset", metavar="PATH_OR_ID", help="a Hub dataset folder (build export --format hub) or its Hub id"
        ),
    ],
    task: Annotated[str, typer.Option("--task", help="the task's name (--tasks)")] = "medrewardbench_pairwise",
) -> None:
    """Write the lmms-eval task folder (YAML and utils.py) for a set of yours.

    Run it with: lmms-eval --include_path DIR --tasks TASK --log_samples --output_path OUT ...
    """
    from medrewardbench.integrations.lmms_eval import write_task_folder

    try:
        written = write_task_folder(out, dataset, task=task)
    except (ValueError, OSError) as exc:
        raise _fail(str(exc)) from exc
    console.print(
        f"wrote {written} and {written.parent / 'utils.py'}; run: lmms-eval --include_path {out} --tasks {task} "
        "--log_samples --output_path lmms_out --model ... --model_args ...",
        highlight=False,
    )
