"""``medrewardbench eval``: judge every case in both orders, store, report agreement with the experts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from medrewardbench.cli.progress import RichProgress
from medrewardbench.cli.support import DataOpt, ExternalImagesOpt, OrgansOpt, console, err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.cli.support import split_list as _split
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.dimensions import Order
from medrewardbench.errors import EvaluationInterrupted, MedRewardBenchError, OutputLockedError
from medrewardbench.evaluation import EvaluationResult, RunHealth, evaluate
from medrewardbench.judges.options import ApiSettings, JudgeOptions, LocalSettings
from medrewardbench.judges.registry import BASELINE_SPECS
from medrewardbench.secrets import install_log_scrubber, scrub

EXIT_JUDGE_FAILED = 1
"""eval: a judge failed every request (its failures are stored)."""
EXIT_BUSY = 75
"""eval: another process is using the output directory (EX_TEMPFAIL: try again later)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT), after storing what had finished."""


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
    try:
        options = JudgeOptions(
            seed=seed,
            template=template,
            concurrency=concurrency,
            batch_size=batch_size,
            temperature=temperature,
            top_p=top_p,
            max_tokens=max_tokens,
            api=ApiSettings(
                base_url=base_url,
                api_key_env=api_key_env,
                timeout_s=timeout,
                max_retries=max_retries,
                structured=structured,
                client_processes=client_processes,
            ),
            local=LocalSettings(device=device, dtype=dtype, adapter=adapter, force_prefix=force_prefix),
        )
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
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
    console.print(
        leaderboard_table(result.leaderboard, title=f"Leaderboard: {benchmark_name}", human=result.analysis.human)
    )
    failed = sum(s.failed for s in result.summaries)
    console.print(
        f"Results in {result.out_dir}/ (store {result.files['store'].name}, judgments.jsonl, metrics.json, "
        f"metrics.csv). Requests judged now: {sum(s.judged for s in result.summaries)}, "
        f"from store: {sum(s.reused for s in result.summaries)}, failed now: {failed}.",
        highlight=False,
    )
    if benchmark_name.startswith("medrewardbench-demo"):
        console.print(
            "[dim]The demo labels, and the three made-up raters behind the human (leave-one-out) row, are "
            "illustrative, written by the medrewardbench authors, not expert annotations: use the demo to try "
            "the tool, not to rank judges.[/]"
        )
