"""``medrewardbench eval``: judge every case in both orders, store, report agreement with the experts.

The command is its steps in order: load the data (:func:`_load_data`), say what is about to be judged
(:func:`_announce`), warn about training overlap, judge and store (:func:`medrewardbench.evaluation.job.evaluate`),
print the tables and failures, and exit with the status the failures call for (:func:`_exit_on_failures`).
Errors and Ctrl-C go through the one handler of :mod:`medrewardbench.cli.errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from medrewardbench.cli.errors import command_errors
from medrewardbench.cli.options import (
    DEFAULT_JUDGE_FLAGS,
    DataOpt,
    ExternalImagesOpt,
    JudgeFlags,
    JudgeSpecsOpt,
    RiskDeltaOpt,
    RiskOpt,
    with_judge_flags,
)
from medrewardbench.cli.progress import RichProgress
from medrewardbench.cli.support import console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.cli.support import split_list as _split
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.dimensions import Order
from medrewardbench.evaluation.job import EvaluationResult, RunHealth, evaluate
from medrewardbench.judges.registry import BASELINE_SPECS
from medrewardbench.metrics.settings import SelectiveSettings
from medrewardbench.utils.secrets import install_log_scrubber

if TYPE_CHECKING:
    from medrewardbench.data.benchmark import Benchmark

EXIT_JUDGE_FAILED = 1
"""eval: a judge failed every request (its failures are stored)."""
INTERRUPTED_LOADING = "interrupted while loading the data: no request was sent; rerun the same command to resume"
INTERRUPTED_SAVING = "interrupted while saving the results: what was stored is kept; rerun the same command to resume"


_OutOpt = Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="output directory (store and files)")]
_OrdersOpt = Annotated[
    str, typer.Option("--orders", metavar="ORDERS", help="presentation orders: both | original | swapped")
]
_OrgansOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--organs", metavar="LIST", help="organ systems to keep (repeat or comma-separate)", show_default="all"
    ),
]
_LimitOpt = Annotated[
    int | None,
    typer.Option("--limit", min=1, metavar="N", help="the first N cases only", show_default="all cases"),
]
_SeedOpt = Annotated[int, typer.Option("--seed", metavar="N", help="seed for every random choice")]
_FreshOpt = Annotated[bool, typer.Option("--fresh", help="forget stored judgments of these judges", show_default="off")]
_RetryFailuresOpt = Annotated[
    bool, typer.Option("--retry-failures", help="judge again requests that failed before", show_default="off")
]
_ByOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--by",
        metavar="FIELD",
        help="also group by this field (repeatable): a case field or a metadata key (site or metadata.site)",
        show_default="organ_system only",
    ),
]
_LabelsOpt = Annotated[
    str | None,
    typer.Option(
        "--labels",
        metavar="KIND[:N][=TEXT]",
        help="declare where the labels come from: expert-majority:N, single-expert, illustrative, "
        "model-generated or unknown, with an optional description after '=', or a dataset card (.json)",
        show_default="the data's dataset.json, else the source's own",
    ),
]
_MaxFailureRateOpt = Annotated[
    float | None,
    typer.Option(
        "--max-failure-rate",
        min=0.0,
        max=1.0,
        metavar="RATE",
        help="exit with status 1 when a judge of this call failed more than this share of its requests (0-1)",
        show_default="only when every request failed",
    ),
]
_WaitOpt = Annotated[
    bool,
    typer.Option(
        "--wait", help="if another process is using --out, wait for it instead of stopping", show_default="off"
    ),
]
_QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars or tables", show_default="off")]
_VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="log what the library does (INFO)", show_default="off")
]


@with_judge_flags
def eval_command(
    data: DataOpt = "demo",
    judge: JudgeSpecsOpt = None,
    out: _OutOpt = Path("results"),
    orders: _OrdersOpt = "both",
    organs: _OrgansOpt = None,
    limit: _LimitOpt = None,
    seed: _SeedOpt = 0,
    fresh: _FreshOpt = False,
    retry_failures: _RetryFailuresOpt = False,
    by: _ByOpt = None,
    judge_flags: JudgeFlags = DEFAULT_JUDGE_FLAGS,
    labels: _LabelsOpt = None,
    max_failure_rate: _MaxFailureRateOpt = None,
    wait: _WaitOpt = False,
    quiet: _QuietOpt = False,
    verbose: _VerboseOpt = False,
    allow_external_images: ExternalImagesOpt = False,
    risk: RiskOpt = 0.10,
    risk_delta: RiskDeltaOpt = 0.10,
) -> None:
    """Judge every case in both answer orders and report agreement with the labels.

    Exit status: 0 when done; 1 when a judge failed every request (the failures are stored), or more
    than --max-failure-rate of them; 2 for bad input; 75 when another process is using --out (without
    --wait); 130 on Ctrl-C.
    """
    _setup_logging(verbose)
    install_log_scrubber()
    specs = _split_option(judge, "--judge") or list(BASELINE_SPECS)
    with command_errors(INTERRUPTED_LOADING):
        selected_orders = Order.parse_selection(orders)
        benchmark, group_by = _load_data(data, organs, limit, labels, by, allow_external_images, quiet=quiet)
    _announce(benchmark, selected_orders, quiet=quiet)
    _warn_about_training_overlap(specs, judge_flags.adapter, benchmark.case_ids)
    with command_errors(INTERRUPTED_LOADING, value_errors=False):
        options = judge_flags.options(seed)
    sink = RichProgress(enabled=not quiet)
    with command_errors(INTERRUPTED_SAVING, sink=sink, value_errors=False):
        result = evaluate(
            benchmark,
            specs,
            out,
            orders=selected_orders,
            options=options,
            group_by=group_by,
            fresh=fresh,
            retry_failures=retry_failures,
            progress=sink,
            wait=wait,
            on_wait=_say_waiting(out),
            selective=SelectiveSettings(alpha=risk, delta=risk_delta),
        )
    with command_errors(None, value_errors=False):  # everything is stored and written already
        if not quiet:
            _print_results(result, benchmark.name, group_by)
        _print_other_data(result)
        _print_failures(result.health)  # also with --quiet: failures are never silent
    _exit_on_failures(result.health, result.failed_judges, max_failure_rate)


def _load_data(
    data: str,
    organs: list[str] | None,
    limit: int | None,
    labels: str | None,
    by: list[str] | None,
    allow_external_images: bool,
    *,
    quiet: bool,
) -> tuple[Benchmark, list[str]]:
    """The benchmark (with the declared labels) and the fields to group by; a message when nothing can be measured."""
    from medrewardbench.data import load_benchmark, nothing_to_measure
    from medrewardbench.data.provenance import parse_labels_option

    declared = parse_labels_option(labels) if labels is not None else None
    if not quiet:
        err_console.print(f"loading {terminal_safe(data)} ...", highlight=False, markup=False)
    benchmark = load_benchmark(
        data,
        organs=_split_option(organs, "--organs"),
        limit=limit,
        allow_external_images=allow_external_images,
        keep=True,  # hashed at once by the job: a small set is not read and checked again
    )
    if declared is not None:
        benchmark = benchmark.with_labels(declared)
    group_by = benchmark.resolve_group_fields(_split(by))
    unmeasurable = nothing_to_measure(benchmark.source, benchmark)  # its counts: nothing is read
    if unmeasurable is not None:
        raise _fail(str(unmeasurable))
    return benchmark, group_by


def _announce(benchmark: Benchmark, orders: Sequence[Order], *, quiet: bool) -> None:
    """What is about to be judged: the data's name and size, the orders, the data's warnings."""
    if quiet:
        return
    from rich.markup import escape

    from medrewardbench.data import summarize_warnings

    err_console.print(
        f"[bold]{escape(terminal_safe(benchmark.name))}[/]: {len(benchmark)} cases, "
        f"{len(benchmark.organ_systems())} organ systems, orders: {', '.join(o.value for o in orders)}",
        highlight=False,
    )
    for line in summarize_warnings(benchmark.warnings):
        shown_line = escape(terminal_safe(line, keep_newlines=False))
        err_console.print(f"[yellow]warning:[/] {shown_line}", highlight=False)


def _say_waiting(out: Path) -> Callable[[int | None], None]:
    def say(pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        err_console.print(f"waiting for {holder} to finish with {out}/ ...", highlight=False, markup=False)

    return say


def _exit_on_failures(
    health: Sequence[RunHealth], every_request_failed: Sequence[RunHealth], max_failure_rate: float | None
) -> None:
    """Exit with status 1 when a judge failed every request, or more than --max-failure-rate of them."""
    if every_request_failed:
        names = ", ".join(h.judge_spec for h in every_request_failed)
        raise _fail(
            f"every request failed for {names}; the failures are stored (see the reasons above), "
            "fix the cause and rerun with --retry-failures",
            EXIT_JUDGE_FAILED,
        )
    too_many = [h for h in health if _too_many(h, max_failure_rate)]
    if too_many:
        shown = ", ".join(f"{h.judge_spec} ({100 * h.failure_rate:.1f} %)" for h in too_many)
        raise _fail(
            f"more than {100 * (max_failure_rate or 0):.1f} % of the requests failed for {shown} (--max-failure-rate); "
            "the failures are stored (see the reasons above); rerun with --retry-failures once fixed",
            EXIT_JUDGE_FAILED,
        )


def _too_many(health: RunHealth, max_failure_rate: float | None) -> bool:
    return max_failure_rate is not None and health.failure_rate > max_failure_rate


def _warn_about_training_overlap(
    specs: Sequence[str], adapter: str | None, case_ids: Sequence[str] | Callable[[], Sequence[str]]
) -> None:
    """Warn when a judge's adapter or reward model was trained on cases about to be evaluated.

    ``case_ids`` may be a callable that reads the ids (all the data): it is called only when a judge
    has a model to check.
    """
    models = [adapter] if adapter and any(spec.startswith("hf:") for spec in specs) else []
    models += [spec[len("rm:") :] for spec in specs if spec.startswith("rm:")]
    if not models:
        return
    from medrewardbench.train.card import training_overlap

    ids = case_ids() if callable(case_ids) else case_ids
    for model in models:
        overlap = training_overlap(model, ids)
        if overlap is None:
            continue
        advice = (
            f"evaluate on its held-out cases: --data {overlap.heldout_cases_file}"
            if overlap.heldout_cases_file
            else "evaluate on other data, or train with --folds K --fold I and evaluate on its heldout_cases.jsonl"
        )
        err_console.print(
            f"warning: {len(overlap.overlapping)} of the {overlap.n_evaluated} cases evaluated were in the training "
            f"data of {terminal_safe(str(overlap.model_dir))} (its training_card.json lists them, e.g. "
            f"{terminal_safe(overlap.overlapping[0])}); agreement on them measures what the model was trained on, not "
            f"what it learned: {terminal_safe(advice)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
            style="yellow",
        )


def _print_other_data(result: EvaluationResult) -> None:
    """Warn that the output directory also holds runs made on other data."""
    if not result.other_data:
        return
    listed = "; ".join(
        f"{terminal_safe(o.name)} ({o.n_cases} cases, {o.runs} run(s), data {o.data_hash[:12]})"
        for o in result.other_data
    )
    err_console.print(
        f"warning: {result.out_dir}/ also holds runs made on other data: {listed}. report and leaderboard show each "
        "data set in its own section (or one with --data FINGERPRINT); use another --out to keep them apart.",
        highlight=False,
        markup=False,
        soft_wrap=True,
        style="yellow",
    )


def _print_failures(health: Sequence[RunHealth]) -> None:
    """For every judge that failed anything: how many, the most common reasons with counts, what to try."""
    for h in health:
        if not h.failed:
            continue
        reasons = "; ".join(f"{terminal_safe(reason)} ({count})" for reason, count in list(h.reasons.items())[:3])
        more = len(h.reasons) - 3
        tail = f"; {more} other reason(s)" if more > 0 else ""
        err_console.print(
            f"{terminal_safe(h.judge_spec)}: {h.failed} of {h.stored} requests failed. Most common: {reasons}{tail}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        for hint in h.hints():
            err_console.print(f"  hint: {hint}", highlight=False, markup=False, soft_wrap=True)


def _print_results(result: EvaluationResult, benchmark_name: str, by: Sequence[str]) -> None:
    from medrewardbench.report.terminal import (
        dimension_table,
        fit_table,
        group_table,
        labels_banner,
        leaderboard_table,
    )

    this_call = {run.run_id for run in result.runs}
    if len(result.runs) == 1:
        analysed = next(r for r in result.analysis.runs if r.run_id in this_call)
        console.print(fit_table(dimension_table(analysed), console.width))
        for field in analysed.groups:
            console.print(fit_table(group_table(analysed, field), console.width))
    else:
        for field in [f for f in by if f != "organ_system"]:
            for analysed in result.analysis.runs:
                if analysed.run_id in this_call:
                    console.print(fit_table(group_table(analysed, field), console.width))
    leaderboard = leaderboard_table(
        result.leaderboard, title=f"Leaderboard: {benchmark_name}", human=result.analysis.human
    )
    console.print(fit_table(leaderboard, console.width))
    failed = sum(s.failed for s in result.summaries)
    console.print(
        f"Results in {result.out_dir}/ (store {result.files['store'].name}, judgments.jsonl, metrics.json, "
        f"metrics.csv). Requests judged now: {sum(s.judged for s in result.summaries)}, "
        f"from store: {sum(s.reused for s in result.summaries)}, failed now: {failed}.",
        highlight=False,
    )
    console.print(labels_banner(result.labels))
    if result.analysis.human is not None and result.labels.kind == "illustrative":
        console.print(
            "[dim]The annotators behind the human (leave-one-out) row are illustrative too (on the demo: three "
            "made-up raters), not real annotators.[/]"
        )
    console.print(
        f"Next: medrewardbench report {result.out_dir} (report.md, report.html with intervals and the cases judged "
        f"wrong, report.xlsx); medrewardbench leaderboard {result.out_dir}",
        highlight=False,
        soft_wrap=True,
    )
