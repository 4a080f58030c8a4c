"""``medrewardbench eval``: judge every case in both orders, store, report agreement with the experts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from medrewardbench.cli.progress import RichProgress
from medrewardbench.cli.support import console, err_console, terminal_safe
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


JUDGE_HELP = (
    "judge spec, repeatable: baseline:random|first|second|longer|shorter, api:MODEL (OpenAI-compatible "
    "endpoint), hf:MODEL_OR_PATH (local transformers model; append #constrained to decode only the verdict "
    "JSON, which a small or random-weight model needs), rm:MODEL_OR_PATH (reward model), reference:PATH "
    "(replayed reference outputs), instant: (harness benchmarks)"
)


def eval_command(
    data: Annotated[
        str,
        typer.Option(
            "--data",
            "-d",
            metavar="SOURCE",
            help="demo | DIR in the reference layout | hf:[OWNER/NAME[@REV]] | canonical .jsonl/.json/.parquet file "
            "or directory",
        ),
    ] = "demo",
    judge: Annotated[
        list[str] | None,
        typer.Option("--judge", "-j", metavar="SPEC", help=JUDGE_HELP, show_default="every baseline:"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", help="output directory (store and files)")] = Path(
        "results"
    ),
    orders: Annotated[
        str, typer.Option("--orders", metavar="ORDERS", help="presentation orders: both | original | swapped")
    ] = "both",
    organs: Annotated[
        list[str] | None,
        typer.Option(
            "--organs", metavar="LIST", help="organ systems to keep (repeat or comma-separate)", show_default="all"
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, metavar="N", help="the first N cases only", show_default="all cases"),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="seed for every random choice")] = 0,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="forget stored judgments of these judges", show_default="off")
    ] = False,
    retry_failures: Annotated[
        bool, typer.Option("--retry-failures", help="judge again requests that failed before", show_default="off")
    ] = False,
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            metavar="FIELD",
            help="also group by this field (repeatable): a case field or a metadata key (site or metadata.site)",
            show_default="organ_system only",
        ),
    ] = None,
    template: Annotated[
        str, typer.Option("--template", metavar="NAME|FILE", help="judge prompt: pairwise | pairwise-cot | FILE")
    ] = "pairwise",
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            metavar="KIND[:N][=TEXT]",
            help="declare where the labels come from: expert-majority:N, single-expert, illustrative, "
            "model-generated or unknown, with an optional description after '=', or a dataset card (.json)",
            show_default="the data's dataset.json, else the source's own",
        ),
    ] = None,
    max_failure_rate: Annotated[
        float | None,
        typer.Option(
            "--max-failure-rate",
            min=0.0,
            max=1.0,
            metavar="RATE",
            help="exit with status 1 when a judge of this call failed more than this share of its requests (0-1)",
            show_default="only when every request failed",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, metavar="N", help="requests in flight (API judges)", show_default="8 for api:"
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            min=1,
            metavar="N",
            help="requests per batch (local models)",
            show_default="4 for hf:, 8 for rm:",
        ),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", metavar="URL", help="OpenAI-compatible endpoint", show_default="$OPENAI_BASE_URL or OpenAI's"
        ),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            metavar="NAME",
            help="environment variable holding the API key",
            show_default="OPENAI_API_KEY",
        ),
    ] = None,
    temperature: Annotated[
        float | None,
        typer.Option(
            "--temperature", metavar="T", help="sampling temperature", show_default="0 for hf:, server's for api:"
        ),
    ] = None,
    top_p: Annotated[
        float | None,
        typer.Option("--top-p", metavar="P", help="nucleus sampling", show_default="the model's or server's"),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            metavar="N",
            help="most tokens a judge may write",
            show_default="512 for hf:, server's for api:",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", metavar="SECONDS", help="per-request timeout (API judges)")
    ] = 120.0,
    max_retries: Annotated[
        int,
        typer.Option(
            "--max-retries", metavar="N", help="retries of a request on 429, 5xx, timeouts and dropped connections"
        ),
    ] = 6,
    structured: Annotated[
        bool, typer.Option("--structured", help="ask API judges for JSON-schema output", show_default="off")
    ] = False,
    client_processes: Annotated[
        int,
        typer.Option(
            "--client-processes", min=1, metavar="N", help="API judges: spread requests over N client processes"
        ),
    ] = 1,
    device: Annotated[
        str, typer.Option("--device", metavar="DEVICE", help="local models: auto | cpu | cuda | cuda:N")
    ] = ("auto"),
    dtype: Annotated[
        str, typer.Option("--dtype", metavar="DTYPE", help="local models: auto | float32 | bfloat16 | float16")
    ] = "auto",
    adapter: Annotated[
        str | None,
        typer.Option("--adapter", metavar="DIR", help="LoRA adapter directory for hf: judges", show_default="none"),
    ] = None,
    force_prefix: Annotated[
        str | None,
        typer.Option(
            "--force-prefix", metavar="TEXT", help="text the local model's answer must start with", show_default="none"
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="if another process is using --out, wait for it instead of stopping", show_default="off"
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="no progress bars or tables", show_default="off")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="log what the library does (INFO)", show_default="off")
    ] = False,
    allow_external_images: Annotated[
        bool,
        typer.Option(
            "--allow-external-images",
            help="accept image paths outside the data's directory (or list directories in MEDREWARDBENCH_IMAGE_ROOTS)",
            show_default="off",
        ),
    ] = False,
) -> None:
    """Judge every case in both answer orders and report agreement with the labels.

    Exit status: 0 when done; 1 when a judge failed every request (the failures are stored), or more
    than --max-failure-rate of them; 2 for bad input; 75 when another process is using --out (without
    --wait); 130 on Ctrl-C.
    """
    from medrewardbench.data import load_benchmark, nothing_to_measure, summarize_warnings
    from medrewardbench.data.provenance import parse_labels_option

    _setup_logging(verbose)
    install_log_scrubber()
    specs = _split_option(judge, "--judge") or list(BASELINE_SPECS)
    try:
        selected_orders = Order.parse_selection(orders)
        declared = parse_labels_option(labels) if labels is not None else None
        if not quiet:
            err_console.print(f"loading {terminal_safe(data)} ...", highlight=False, markup=False)
        benchmark = load_benchmark(
            data,
            organs=_split_option(organs, "--organs"),
            limit=limit,
            allow_external_images=allow_external_images,
        )
        if declared is not None:
            benchmark = benchmark.with_labels(declared)
        group_by = benchmark.resolve_group_fields(_split(by))
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    except KeyboardInterrupt:
        err_console.print(
            "interrupted while loading the data: no request was sent; rerun the same command to resume", highlight=False
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    unmeasurable = nothing_to_measure(benchmark.source, benchmark)  # its counts: nothing is read
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
    _warn_about_training_overlap(specs, adapter, benchmark.case_ids)
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
            group_by=group_by,
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
            _print_results(result, benchmark.name, group_by)
        _print_other_data(result)
        _print_failures(result.health)  # also with --quiet: failures are never silent
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
    too_many = [h for h in result.health if _too_many(h, max_failure_rate)]
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
    from medrewardbench.report.terminal import dimension_table, group_table, labels_banner, leaderboard_table

    this_call = {run.run_id for run in result.runs}
    if len(result.runs) == 1:
        analysed = next(r for r in result.analysis.runs if r.run_id in this_call)
        console.print(dimension_table(analysed))
        for field in analysed.groups:
            console.print(group_table(analysed, field))
    else:
        for field in [f for f in by if f != "organ_system"]:
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
