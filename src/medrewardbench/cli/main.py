"""The ``medrewardbench`` command. Thin: parses flags, calls the library, prints."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from medrewardbench.cli.annotate import app as annotate_app
from medrewardbench.cli.support import console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.cli.support import split_list as _split
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.dimensions import Order
from medrewardbench.errors import EvaluationInterrupted, MedRewardBenchError, OutputLockedError
from medrewardbench.evaluation import EvaluationResult, ProgressSink, RunHealth, evaluate
from medrewardbench.judges.registry import BASELINE_SPECS, JudgeOptions
from medrewardbench.runner import RunSummary
from medrewardbench.secrets import install_log_scrubber, scrub

EXIT_JUDGE_FAILED = 1
"""eval: a judge failed every request (its failures are stored)."""
EXIT_BUSY = 75
"""eval: another process is using the output directory (EX_TEMPFAIL: try again later)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT), after storing what had finished."""

app = typer.Typer(
    name="medrewardbench",
    help="Measure how well reward models and multimodal LLM judges agree with medical experts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _RateColumn(TextColumn):
    def __init__(self) -> None:
        super().__init__("")

    def render(self, task: Task) -> Text:

        speed = task.finished_speed or task.speed
        return Text("-- req/s" if speed is None else f"{speed:,.1f} req/s", style="progress.data.speed")


class RichProgress(ProgressSink):
    """Progress bars on stderr: requests judged, rate and ETA."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _RateColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err_console,
            disable=not enabled,
            transient=False,
        )
        self.task: TaskID | None = None

    def start(self, judge_spec: str, total: int, already_done: int) -> None:
        if not self.progress.live.is_started:
            self.progress.start()
        self.task = self.progress.add_task(judge_spec, total=total, completed=already_done)
        # the rate must reflect new work only: restart the speed estimate after the stored part
        self.progress.reset(self.task, total=total, completed=already_done)

    def advance(self, n: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)

    def finish(self, summary: RunSummary) -> None:
        if self.task is not None:
            self.progress.update(
                self.task,
                description=f"{summary.run.judge_spec} ({summary.judged} judged, {summary.reused} from store)",
            )

    def stage(self, text: str) -> None:
        if self.enabled:
            err_console.print(f"{text} ...", highlight=False, markup=False)

    def close(self) -> None:
        if self.progress.live.is_started:
            self.progress.stop()


DataOpt = Annotated[
    str,
    typer.Option(
        "--data",
        "-d",
        help="demo | DIR in the reference layout | hf:[OWNER/NAME[@REV]] | canonical .jsonl/.parquet",
    ),
]
OrgansOpt = Annotated[
    list[str] | None, typer.Option("--organs", help="organ systems to keep (repeat or comma-separate)")
]
ExternalImagesOpt = Annotated[
    bool,
    typer.Option(
        "--allow-external-images",
        help="accept image paths outside the data's directory (or list directories in MEDREWARDBENCH_IMAGE_ROOTS)",
    ),
]


@app.command("eval")
def eval_command(
    data: DataOpt = "demo",
    judge: Annotated[
        list[str] | None,
        typer.Option("--judge", "-j", help="judge spec, repeatable (default: every baseline judge)"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory")] = Path("results"),
    orders: Annotated[str, typer.Option("--orders", help="both | original | swapped")] = "both",
    organs: OrgansOpt = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="first N cases only")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed for every random choice")] = 0,
    fresh: Annotated[bool, typer.Option("--fresh", help="forget stored judgments of these judges")] = False,
    retry_failures: Annotated[
        bool, typer.Option("--retry-failures", help="judge again requests that failed before")
    ] = False,
    by: Annotated[list[str] | None, typer.Option("--by", help="also group by this metadata field (repeatable)")] = None,
    template: Annotated[str, typer.Option("--template", help="pairwise | pairwise-cot | FILE")] = "pairwise",
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1)] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", min=1)] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint")] = None,
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="environment variable holding the API key")
    ] = None,
    temperature: Annotated[float | None, typer.Option("--temperature")] = None,
    top_p: Annotated[float | None, typer.Option("--top-p")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="per-request timeout, seconds")] = 120.0,
    max_retries: Annotated[int, typer.Option("--max-retries")] = 6,
    structured: Annotated[bool, typer.Option("--structured", help="ask for JSON-schema output")] = False,
    client_processes: Annotated[
        int, typer.Option("--client-processes", min=1, help="API judges: spread requests over N client processes")
    ] = 1,
    device: Annotated[str, typer.Option("--device", help="auto | cpu | cuda | cuda:N")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="auto | float32 | bfloat16 | float16")] = "auto",
    adapter: Annotated[str | None, typer.Option("--adapter", help="LoRA adapter directory")] = None,
    force_prefix: Annotated[
        str | None, typer.Option("--force-prefix", help="text the local model's answer must start with")
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="if another process is using --out, wait for it instead of stopping")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars or tables")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    allow_external_images: ExternalImagesOpt = False,
) -> None:
    """Judge every case in both answer orders and report agreement with the experts.

    Exit status: 0 when done; 1 when a judge failed every request (the failures are stored);
    2 for bad input; 75 when another process is using --out (without --wait); 130 on Ctrl-C.
    """
    from medrewardbench.data import load_benchmark, nothing_to_measure, summarize_warnings

    _setup_logging(verbose)
    install_log_scrubber()
    specs = _split_option(judge, "--judge") or list(BASELINE_SPECS)
    try:
        selected_orders = Order.parse_selection(orders)
        if not quiet:
            err_console.print(f"loading {terminal_safe(data)} ...", highlight=False, markup=False)
        benchmark = load_benchmark(
            data,
            organs=_split_option(organs, "--organs"),
            limit=limit,
            allow_external_images=allow_external_images,
        )
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    except KeyboardInterrupt:
        err_console.print(
            "interrupted while loading the data: no request was sent; rerun the same command to resume", highlight=False
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    unmeasurable = nothing_to_measure(benchmark.source, benchmark.cases)
    if unmeasurable is not None:
        raise _fail(str(unmeasurable))
    if not quiet:
        err_console.print(
            f"[bold]{escape(terminal_safe(benchmark.name))}[/]: {len(benchmark)} cases, "
            f"{len(benchmark.organ_systems())} organ systems, orders: {', '.join(o.value for o in selected_orders)}",
            highlight=False,
        )
        for line in summarize_warnings(benchmark.warnings):
            shown_line = escape(terminal_safe(line, keep_newlines=False))
            err_console.print(f"[yellow]warning:[/] {shown_line}", highlight=False)
    options = JudgeOptions(
        seed=seed,
        template=template,
        concurrency=concurrency,
        batch_size=batch_size,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        base_url=base_url,
        api_key_env=api_key_env,
        timeout_s=timeout,
        max_retries=max_retries,
        structured=structured,
        device=device,
        dtype=dtype,
        adapter=adapter,
        force_prefix=force_prefix,
        extra={"client_processes": client_processes} if client_processes > 1 else {},
    )
    sink = RichProgress(enabled=not quiet)

    def say_waiting(pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        err_console.print(f"waiting for {holder} to finish with {out}/ ...", highlight=False, markup=False)

    try:
        result = evaluate(
            benchmark,
            specs,
            out,
            orders=selected_orders,
            options=options,
            group_by=_split(by),
            fresh=fresh,
            retry_failures=retry_failures,
            progress=sink,
            wait=wait,
            on_wait=say_waiting,
        )
    except OutputLockedError as exc:
        raise _fail(str(exc), EXIT_BUSY) from exc
    except MedRewardBenchError as exc:
        raise _fail(scrub(str(exc))) from exc
    except KeyboardInterrupt as exc:
        sink.close()
        message = (
            str(exc)
            if isinstance(exc, EvaluationInterrupted)
            else "interrupted while saving the results: what was stored is kept; rerun the same command to resume"
        )
        err_console.print(message, highlight=False, markup=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        sink.close()
    try:
        if not quiet:
            _print_results(result, benchmark.name, by)
        _print_failures([h for h in result.health if h.all_failed or not quiet])
    except KeyboardInterrupt:  # everything is stored and written already
        raise typer.Exit(EXIT_INTERRUPTED) from None
    every_request_failed = result.failed_judges
    if every_request_failed:
        names = ", ".join(h.judge_spec for h in every_request_failed)
        raise _fail(
            f"every request failed for {names}; the failures are stored (see the reasons above), "
            "fix the cause and rerun with --retry-failures",
            EXIT_JUDGE_FAILED,
        )


def _print_failures(health: Sequence[RunHealth]) -> None:
    """For every judge that failed anything: how many, and the most common reasons with counts."""
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


def _print_results(result: EvaluationResult, benchmark_name: str, by: list[str] | None) -> None:
    from medrewardbench.report.terminal import dimension_table, group_table, leaderboard_table

    this_call = {run.run_id for run in result.runs}
    if len(result.runs) == 1:
        analysed = next(r for r in result.analysis.runs if r.run_id in this_call)
        console.print(dimension_table(analysed))
        for field in analysed.groups:
            console.print(group_table(analysed, field))
    else:
        for field in ["organ_system", *[f for f in _split(by) if f != "organ_system"]]:
            if field != "organ_system":
                for analysed in result.analysis.runs:
                    if analysed.run_id in this_call:
                        console.print(group_table(analysed, field))
    console.print(leaderboard_table(result.leaderboard, title=f"Leaderboard: {benchmark_name}"))
    failed = sum(s.failed for s in result.summaries)
    console.print(
        f"Results in {result.out_dir}/ (store {result.files['store'].name}, judgments.jsonl, metrics.json, "
        f"metrics.csv). Requests judged now: {sum(s.judged for s in result.summaries)}, "
        f"from store: {sum(s.reused for s in result.summaries)}, failed now: {failed}.",
        highlight=False,
    )
    if benchmark_name.startswith("medrewardbench-demo"):
        console.print(
            "[dim]The demo labels are illustrative, written by the medrewardbench authors, not expert "
            "annotations: use the demo to try the tool, not to rank judges.[/]"
        )


@app.command("validate")
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


RunPaths = Annotated[list[Path], typer.Argument(help="run directories or store files")]
CiOpt = Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="interval coverage")]
BootOpt = Annotated[int, typer.Option("--bootstrap", min=100, help="bootstrap resamples")]


@app.command("report")
def report_command(
    runs: RunPaths,
    formats: Annotated[str, typer.Option("--format", "-f", help="comma-separated: md,csv,json,xlsx,html")] = (
        "md,csv,json,xlsx,html"
    ),
    out: Annotated[Path | None, typer.Option("--out", "-o", help="where to write (default: the first run dir)")] = None,
    judge: Annotated[list[str] | None, typer.Option("--judge", "-j", help="only these judges (spec or run id)")] = None,
    ci: CiOpt = 0.95,
    bootstrap: BootOpt = 2000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    by: Annotated[list[str] | None, typer.Option("--by", help="also group by this metadata field")] = None,
    cases_per_judge: Annotated[int, typer.Option("--cases-per-judge", help="wrong cases shown in HTML")] = 50,
) -> None:
    """Render stored runs as reports (no judge is called)."""
    from medrewardbench.report.render import read_analysis_json, render_report
    from medrewardbench.report.terminal import interval_leaderboard_table

    out_dir = out or (runs[0] if runs[0].is_dir() else runs[0].parent)
    fields = ["organ_system", *[f for f in _split(by) if f != "organ_system"]]
    try:
        written = render_report(
            runs,
            out_dir,
            [f for f in _split([formats])],
            judges=_split(judge) or None,
            confidence=ci,
            n_resamples=bootstrap,
            seed=seed,
            group_fields=fields,
            cases_per_judge=cases_per_judge,
        )
        analysis = read_analysis_json(written["json"]) if "json" in written else None
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    if analysis is not None:
        console.print(interval_leaderboard_table(analysis))
    for kind, path in written.items():
        console.print(f"{kind:>13}: {path}", highlight=False, markup=False)


@app.command("leaderboard")
def leaderboard_command(
    results: Annotated[list[Path], typer.Argument(help="results directories (searched recursively)")],
    ci: CiOpt = 0.95,
    bootstrap: BootOpt = 2000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Rank every run found, with intervals and tiers, baseline rows included."""
    from medrewardbench.report.render import analyze_paths
    from medrewardbench.report.terminal import interval_leaderboard_table

    try:
        analysis = analyze_paths(results, confidence=ci, n_resamples=bootstrap, seed=seed)
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    console.print(interval_leaderboard_table(analysis))


@app.command("compare")
def compare_command(
    run_a: Annotated[str, typer.Argument(help="a run directory, or a judge spec / run id in --results")],
    run_b: Annotated[str, typer.Argument(help="a run directory, or a judge spec / run id in --results")],
    results: Annotated[Path, typer.Option("--results", help="where to look up specs and run ids")] = Path("results"),
    ci: CiOpt = 0.95,
    bootstrap: BootOpt = 2000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Paired comparison of two judges on the same cases: McNemar and a paired bootstrap, per dimension."""
    from medrewardbench.report.render import analyze_paths
    from medrewardbench.report.terminal import comparison_table

    try:
        if Path(run_a).exists() and Path(run_b).exists():
            analysis = analyze_paths([Path(run_a), Path(run_b)], confidence=ci, n_resamples=bootstrap, seed=seed)
            labels = [r.label for r in analysis.runs]
            if len(labels) != 2:
                raise _fail(
                    f"compare needs exactly one run in each directory; found {len(labels)}: " + ", ".join(labels)
                )
            label_a, label_b = labels
        else:
            analysis = analyze_paths([results], judges=[run_a, run_b], confidence=ci, n_resamples=bootstrap, seed=seed)
            by_key = {key: r.label for r in analysis.runs for key in (r.label, r.judge, r.run_id)}
            label_a, label_b = by_key[run_a], by_key[run_b]
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    console.print(comparison_table(analysis, label_a, label_b))


@app.command("import-reference")
def import_reference_command(
    outputs: Annotated[Path, typer.Argument(help="reference judge output JSONL file, or a directory of them")],
    data: Annotated[str, typer.Option("--data", "-d", help="the reference-layout data the outputs were made on")],
    name: Annotated[str | None, typer.Option("--name", help="judge name to show (default: the path)")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory")] = Path("results"),
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


@app.command("serve")
def serve_command(
    model: Annotated[str, typer.Argument(help="hf:MODEL_OR_PATH (append #constrained for verdict-only output)")],
    host: Annotated[str, typer.Option("--host", help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8000,
    device: Annotated[str, typer.Option("--device", help="auto | cpu | cuda | cuda:N")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="auto | float32 | bfloat16 | float16")] = "auto",
    adapter: Annotated[str | None, typer.Option("--adapter", help="LoRA adapter directory")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="default max new tokens")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Serve a local transformers vision-language model as an OpenAI-compatible endpoint."""
    from medrewardbench.serve import run_server

    _setup_logging(verbose)
    options = JudgeOptions(device=device, dtype=dtype, adapter=adapter, max_tokens=max_tokens)
    err_console.print(f"serving {model} on http://{host}:{port}/v1 (Ctrl-C to stop)", highlight=False)
    try:
        run_server(model, host=host, port=port, options=options)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc


app.add_typer(annotate_app, name="annotate")


def _register_training_commands() -> None:
    from medrewardbench.cli.train import register_commands

    register_commands(app)


_register_training_commands()


def main() -> None:
    """Console entry point."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers' own load bars would interleave with ours
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    app()


if __name__ == "__main__":
    main()
