"""``medrewardbench sweep``: many judges from one sweep file, on this machine or a Ray cluster."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from medrewardbench.cli.errors import command_errors
from medrewardbench.cli.options import QuietOpt, VerboseOpt
from medrewardbench.cli.support import console, err_console, nonempty_path, nonempty_text, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.utils.secrets import install_log_scrubber

EXIT_ENTRY_FAILED = 1
"""An entry could not finish, or failed every request (what finished is stored)."""
EXIT_BUDGET = 3
"""The budget stopped the sweep before every request was judged; rerun with a larger one to resume."""
INTERRUPTED_SWEEP = "interrupted: what finished is stored; rerun the same command to resume"


class _RichSweepProgress:
    """Progress bars on stderr: one per entry, with the nodes that judged it; notes as lines."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[where]}"),
            TimeElapsedColumn(),
            console=err_console,
            disable=not enabled,
        )
        self.tasks: dict[str, TaskID] = {}
        self.nodes: dict[str, dict[str, int]] = {}

    def _print(self, text: str) -> None:
        if self.enabled:
            err_console.print(terminal_safe(text), highlight=False, markup=False, soft_wrap=True)

    def stage(self, text: str) -> None:
        self._print(f"{text} ...")

    def entry_started(self, name: str, total: int, already_done: int) -> None:
        if not self.progress.live.is_started and self.enabled:
            self.progress.start()
        task = self.progress.add_task(terminal_safe(name), total=total, completed=already_done, where="")
        self.tasks[name] = task

    def advance(self, name: str, n: int, node: str | None = None) -> None:
        where = self.nodes.setdefault(name, {})
        label = node or "local"
        where[label] = where.get(label, 0) + n
        task = self.tasks.get(name)
        if task is not None:
            shown = ", ".join(f"{k}: {v}" for k, v in where.items()) if node else ""
            self.progress.update(task, advance=n, where=terminal_safe(shown))

    def entry_finished(self, outcome: Any) -> None:
        task = self.tasks.get(outcome.name)
        if task is not None:
            status = "" if outcome.status == "done" else f" [{outcome.status}]"
            self.progress.update(task, description=terminal_safe(f"{outcome.name}{status}"))

    def server_started(self, name: str, pid: int, port: int, log_path: str) -> None:
        self._print(f"{name}: started its server (pid {pid}, port {port}, log {log_path})")

    def worker_started(self, name: str, node: str, pid: int) -> None:
        self._print(f"{name}: Ray worker on {node} (pid {pid})")

    def note(self, text: str) -> None:
        if self.progress.live.is_started:
            self.progress.console.print(terminal_safe(text), highlight=False, markup=False, soft_wrap=True)
        else:
            self._print(text)

    def warning(self, text: str) -> None:
        if self.enabled:
            self.note(text)
        else:  # --quiet hides progress, not what the sweep did to processes on this machine
            err_console.print(terminal_safe(text), highlight=False, markup=False, soft_wrap=True)

    def close(self) -> None:
        if self.progress.live.is_started:
            self.progress.stop()


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def sweep_command(
    sweep_file: Annotated[
        Path, typer.Argument(help="the sweep file (YAML; see docs/sweep.md)", parser=nonempty_path("SWEEP_FILE"))
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="output directory", parser=nonempty_path("--out"))] = Path(
        "results"
    ),
    ray: Annotated[
        str | None,
        typer.Option("--ray", help="run every judge entry as a Ray actor: auto | local | ADDRESS (needs [ray])"),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="YAML/JSON: model -> {input, output} dollars per million tokens",
            parser=nonempty_path("--prices"),
        ),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option("--budget", help="stop dispatching before the cost would pass USD (a finite number >= 0)"),
    ] = None,
    batch_api: Annotated[
        bool, typer.Option("--batch-api", help="api: judges (not served) go through the provider's Batch API")
    ] = False,
    fresh: Annotated[bool, typer.Option("--fresh", help="forget stored judgments of these judges")] = False,
    retry_failures: Annotated[
        bool, typer.Option("--retry-failures", help="judge again requests that failed before")
    ] = False,
    check: Annotated[bool, typer.Option("--check", help="check the sweep file and stop")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="skip the final report")] = False,
    wait: Annotated[
        bool, typer.Option("--wait", help="if another process is using --out, wait for it instead of stopping")
    ] = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run many judges from one sweep file into one store, then write one leaderboard and report.

    Exit status: 0 when done; 1 when an entry failed (its server or worker) or failed every
    request; 2 for bad input; 3 when --budget stopped it early (rerun with a larger budget to
    resume); 75 when another process is using --out; 130 on Ctrl-C or SIGTERM.
    """
    from medrewardbench.sweep import SweepOptions, load_prices, load_sweep, load_sweep_data, run_sweep
    from medrewardbench.sweep.budget import check_budget, dollar_figures

    _setup_logging(verbose)
    install_log_scrubber()
    nonempty_text(ray, "--ray")
    with command_errors(INTERRUPTED_SWEEP):
        if budget is not None:
            check_budget(budget)
        config = load_sweep(sweep_file)
        table = load_prices(prices) if prices is not None else None
    if check:
        _print_check(config)
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # servers are stopped, what finished is stored
    sink = _RichSweepProgress(enabled=not quiet)
    try:
        with command_errors(INTERRUPTED_SWEEP):
            if not quiet:
                err_console.print(f"loading {terminal_safe(config.data.source)} ...", highlight=False, markup=False)
            benchmark = load_sweep_data(config)
        options = SweepOptions(
            out_dir=out,
            ray=ray,
            prices=table,
            budget_usd=budget,
            batch_api=batch_api,
            fresh=fresh,
            retry_failures=retry_failures,
            wait=wait,
            report=not no_report,
        )

        def say_waiting(pid: int | None) -> None:
            holder = f"pid {pid}" if pid is not None else "another process"
            err_console.print(f"waiting for {holder} to finish with {out}/ ...", highlight=False, markup=False)

        started = time.monotonic()
        with command_errors(INTERRUPTED_SWEEP, sink=sink, value_errors=False):
            result = run_sweep(config, options, benchmark=benchmark, progress=sink, on_wait=say_waiting)  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not quiet:
        _print_result(result, time.monotonic() - started)
    for outcome in result.outcomes:
        if outcome.status == "failed":
            err_console.print(
                f"error: {terminal_safe(outcome.name)}: {terminal_safe(outcome.error or 'failed')}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
    if result.failed_entries or result.all_failed:
        names = ", ".join(o.name for o in [*result.failed_entries, *result.all_failed])
        raise _fail(
            f"{names} did not finish or failed every request; what finished is stored, rerun to resume "
            "(--retry-failures to judge failed requests again)",
            EXIT_ENTRY_FAILED,
        )
    if result.budget_stopped:
        assert result.budget is not None
        left = ", ".join(f"{o.name} ({o.total - o.stored} left)" for o in result.budget_stopped)
        limit, spent = dollar_figures(result.budget.limit, result.budget.spent)
        err_console.print(
            f"stopped by the budget ({limit}; the stored judgments cost {spent}): {left}. "
            "Rerun with a larger --budget to resume.",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_BUDGET)


def _print_check(config: Any) -> None:
    from medrewardbench.report.terminal import fit_table

    title = f"{config.path}: {len(config.judges)} judges, {len(config.juries)} juries"
    table = Table(title=terminal_safe(title), title_justify="left")
    for column in ("name", "judge", "runs", "price ($/M in, out)"):
        table.add_column(column)
    for entry in config.judges:
        where = "served" if entry.is_served else ("local model" if entry.is_local_model else "")
        price = "" if entry.price is None else f"{entry.price.input:g}, {entry.price.output:g}"
        table.add_row(terminal_safe(entry.name), terminal_safe(entry.spec), where, price)
    for jury in config.juries:
        members = ", ".join(f"{name}" + (f" x{weight:g}" if weight != 1 else "") for name, weight in jury.members)
        table.add_row(terminal_safe(jury.name), terminal_safe(jury.spec), terminal_safe(members), "")
    console.print(fit_table(table, console.width))
    console.print(f"{config.path} is valid.", highlight=False)


def _print_result(result: Any, wall_s: float) -> None:
    from medrewardbench.report.terminal import fit_table, interval_leaderboard_table

    if result.analysis is not None:
        console.print(fit_table(interval_leaderboard_table(result.analysis), console.width))
    for jury in result.juries:
        abstained = ", ".join(f"{terminal_safe(name)}: {count}" for name, count in jury.abstentions.items())
        ties = sum(jury.no_majority.values())
        console.print(
            f"jury {terminal_safe(jury.name)}: {jury.judgments} judgments; abstentions (member votes not cast) "
            f"{abstained}; no majority on {ties} dimension(s) ({jury.failed} requests with none at all), counted wrong",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    nodes = result.nodes()
    if len(nodes) > 1 or any(node != "local" for node in nodes):
        console.print(
            "requests judged per node: " + ", ".join(f"{terminal_safe(k)}: {v}" for k, v in nodes.items()),
            highlight=False,
            markup=False,
        )
    if result.cost_usd is not None:
        console.print(
            f"cost: ${result.cost_usd:,.4f} for the entries with a price (requests asked again included; "
            "juries reuse their members' answers and add nothing)",
            highlight=False,
            markup=False,
        )
    for note in result.notes:
        console.print(terminal_safe(note), highlight=False, markup=False)
    judged = sum(o.judged for o in result.outcomes)
    reused = sum(o.reused for o in result.outcomes)
    report = result.files.get("report_md")
    console.print(
        f"Results in {result.out_dir}/ (store, judgments.jsonl, metrics.json, metrics.csv, sweep.json"
        + (f", report in {report.parent}/" if report is not None else "")
        + f"). Requests judged now: {judged}, from store: {reused}; {wall_s:.1f} s.",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
