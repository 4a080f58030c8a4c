"""``medrewardbench build``: construct a benchmark, from questions to a labelled set, in one project directory.

    medrewardbench build import PROJECT SOURCE [--map FIELD=COLUMN,...] [--set FIELD=VALUE] [--source-name NAME]
    medrewardbench build filter PROJECT --model SPEC ... --max-correct K [--grader SPEC]
    medrewardbench build responses PROJECT --generator SPEC ...
    medrewardbench build pairs PROJECT --seed N [--length-balance] [--per-question 1] --out pairs.jsonl
    medrewardbench build labels PROJECT FILE
    medrewardbench build export PROJECT --format canonical|reference|questions|hub --out PATH
    medrewardbench build report PROJECT [--out DIR]

Commands that write hold the project directory's lock (another one stops at once with exit status
75, or waits with ``--wait``); the generation steps are resumable and stop on Ctrl-C with exit
status 130 after storing what finished. The library is :mod:`medrewardbench.curation`.

Why one module of this size: one typer group of seven thin commands (import, filter, responses,
pairs, labels, export, report) with many options; each command only parses, calls curation/ and
prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from medrewardbench.cli.errors import command_errors
from medrewardbench.cli.options import (
    DEFAULT_MODEL_FLAGS,
    ExternalImagesOpt,
    ForceReplaceOpt,
    ModelFlags,
    VerboseOpt,
    with_model_flags,
)
from medrewardbench.cli.progress import RichProgress
from medrewardbench.cli.support import (
    console,
    err_console,
    nonempty_path,
    nonempty_text,
    terminal_safe,
)
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.cli.support import split_option as _split_option
from medrewardbench.utils.secrets import install_log_scrubber

__all__ = ["app"]

EXIT_ALL_FAILED = 1
"""A generator failed every request (its failures are stored)."""

app = typer.Typer(
    name="build",
    help="Build a benchmark: questions in, difficulty filter, response pool, pairs, labels, export.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ProjectArg = Annotated[
    Path, typer.Argument(help="the project directory (created by 'build import')", parser=nonempty_path("PROJECT"))
]
WaitOpt = Annotated[
    bool, typer.Option("--wait", help="if another process is using the project, wait for it instead of stopping")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")]
TemplateOpt = Annotated[str, typer.Option("--template", help="the answer prompt: answer | FILE")]
SeedOpt = Annotated[int, typer.Option("--seed", help="seed of sampling (sent to API servers)")]
FreshOpt = Annotated[bool, typer.Option("--fresh", help="forget the stored answers of these configurations")]
RetryOpt = Annotated[bool, typer.Option("--retry-failures", help="ask again where a stored answer failed")]


def _options(seed: int, flags: ModelFlags) -> Any:
    """The models' options; sampling settings no server accepts are refused by ``JudgeOptions`` itself."""
    nonempty_text(flags.api_key_env, "--api-key-env")
    return flags.options(seed)


def _say_waiting(project: Path) -> Callable[[int | None], None]:
    def say(pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        err_console.print(f"waiting for {holder} to finish with {project}/ ...", highlight=False, markup=False)

    return say


def _errors(sink: RichProgress | None = None, out: Path | None = None) -> AbstractContextManager[None]:
    """The one handler of :mod:`medrewardbench.cli.errors`, where a failed write is an error too.

    Args:
        sink: the progress bars, closed before a message.
        out: the command's output, named when writing it fails.
    """
    return command_errors(sink=sink, write_errors=True, out=out)


def _cell(value: object) -> str:
    return escape(terminal_safe(str(value), keep_newlines=False))


def _generation_table(title: str, summaries: Sequence[Any]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("generator", "questions", "from store", "answered now", "failed now", "failed in all"):
        table.add_column(column, justify="left" if column == "generator" else "right")
    for s in summaries:
        table.add_row(
            _cell(s.spec), str(s.total), str(s.reused), str(s.generated), str(s.failed), str(s.stored_failures)
        )
    return table


def _report_failures(summaries: Sequence[Any], what: str = "answer(s)", *, stop_when_all_failed: bool = True) -> None:
    for s in summaries:
        if not s.stored_failures:
            continue
        reasons = "; ".join(f"{terminal_safe(r)} ({n})" for r, n in s.reasons)
        err_console.print(
            f"{terminal_safe(s.spec)}: {s.stored_failures} stored {what} failed. Most common: {reasons}. "
            "Rerun with --retry-failures to ask again.",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    dead = [s.spec for s in summaries if s.all_failed]
    if dead and stop_when_all_failed:
        raise _fail(
            f"every request failed for {', '.join(dead)}; the failures are stored (see the reasons above), "
            "fix the cause and rerun with --retry-failures",
            EXIT_ALL_FAILED,
        )


def _print_filter(summary: Any, project: Path, quiet: bool) -> None:
    """The filter's outcome: models and grader apart, their failures, and a last line that says what happened.

    The decisions are stored even when a model or the grader failed everything (its answers count as
    wrong): the last line says so, and the exit status is then :data:`EXIT_ALL_FAILED`.
    """
    if not quiet:
        table = _generation_table("Filter models (answer every question)", summary.models)
        if summary.grader is not None:
            table.add_section()
            grader = summary.grader
            table.add_row(
                f"grader: {_cell(grader.spec)}", str(grader.total), str(grader.reused), str(grader.generated),
                str(grader.failed), str(grader.stored_failures), style="italic",
            )  # fmt: skip
            table.caption = "grader: grades the filter models' open answers against the reference (one row per answer)"
        console.print(table)
    _report_failures(summary.models, stop_when_all_failed=False)
    if summary.grader is not None:
        _report_failures([summary.grader], "grading(s)", stop_when_all_failed=False)
    failures = ""
    if summary.failed_answers:
        answers = summary.failed_answers - summary.failed_gradings
        failures = (
            f"; {summary.failed_answers} answer(s) could not be scored and count as wrong "
            f"({answers} not answered, {summary.failed_gradings} not graded)"
        )
    decisions = (
        f"decided {summary.decided} question(s), decisions stored: kept {summary.kept} "
        f"({summary.unscored} of them without a reference answer), dropped {summary.dropped} "
        f"(more than {summary.max_correct} model(s) right){failures}."
    )
    dead = [s.spec for s in summary.models if s.all_failed]
    if summary.grader is not None and summary.grader.all_failed:
        dead.append(f"the grader {summary.grader.spec}")
    if dead:
        console.print(decisions, highlight=False, markup=False)
        raise _fail(
            f"every request failed for {', '.join(dead)}: the decisions are stored, but count those answers as wrong; "
            "fix the cause and rerun with --retry-failures",
            EXIT_ALL_FAILED,
        )
    console.print(f"{decisions} See 'medrewardbench build report {_cell(project)}'.", highlight=False)


# ------------------------------------------------------------------------------------- commands


@app.command("import")
def import_command(
    project: ProjectArg,
    source: Annotated[str, typer.Argument(help="a .jsonl/.json/.parquet file, a directory, or hf:OWNER/NAME[@REV]")],
    map_: Annotated[
        list[str] | None,
        typer.Option("--map", help="FIELD=COLUMN pairs, comma-separated or repeated (question=Question,answer=...)"),
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="FIELD=VALUE given to every row (organ_system=chest)")
    ] = None,
    source_name: Annotated[
        str | None, typer.Option("--source-name", help="the name questions record as their source")
    ] = None,
    include: Annotated[
        list[str] | None, typer.Option("--include", help="only files whose path in the source matches (data/test-*)")
    ] = None,
    allow_external_images: ExternalImagesOpt = False,
    wait: WaitOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Import questions into a project (created when missing), validating every row."""
    from medrewardbench.curation.importer import ColumnMapping, import_questions
    from medrewardbench.curation.project import open_project

    _setup_logging(verbose)
    if not source.strip():
        raise _fail("SOURCE is empty; give a file, a directory or hf:OWNER/NAME")
    nonempty_text(source_name, "--source-name")
    with _errors():
        mapping = ColumnMapping.parse(_split_option(map_, "--map") or [], _split_option(set_, "--set") or [])
        with open_project(project, create=True, wait=wait, on_wait=_say_waiting(project)) as store:
            summary = import_questions(
                store,
                source,
                mapping,
                source_name=source_name,
                include=_split_option(include, "--include") or (),
                allow_external_images=allow_external_images,
            )
            total = store.count_questions()
        renamed = ""
        if summary.renamed:
            renamed = f", {summary.renamed} renamed to {summary.source}/ID (their ids were taken)"
        already = f", {summary.already} already in the project" if summary.already else ""
        console.print(
            f"{_cell(summary.source)}: imported {summary.imported} question(s) from {len(summary.files)} file(s)"
            f"{already}{renamed}; the project has {total}.",
            highlight=False,
        )
        if summary.dropped_columns:
            console.print(
                f"[dim]columns left out (neither text, numbers nor booleans): "
                f"{_cell(', '.join(sorted(summary.dropped_columns)))}[/]",
                highlight=False,
            )


@app.command("filter")
@with_model_flags
def filter_command(
    project: ProjectArg,
    model: Annotated[list[str], typer.Option("--model", "-m", help="a small model's spec (api: or hf:), repeatable")],
    max_correct: Annotated[
        int, typer.Option("--max-correct", "-k", min=0, help="keep a question when at most K models get it right")
    ],
    grader: Annotated[str | None, typer.Option("--grader", help="the spec that grades open answers")] = None,
    force: Annotated[
        bool, typer.Option("--force", help="run even when K is at least the number of models (nothing can be dropped)")
    ] = False,
    template: TemplateOpt = "answer",
    grade_template: Annotated[str, typer.Option("--grade-template", help="grade | FILE")] = "grade",
    seed: SeedOpt = 0,
    model_flags: ModelFlags = DEFAULT_MODEL_FLAGS,
    fresh: FreshOpt = False,
    retry_failures: RetryOpt = False,
    wait: WaitOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Small models answer every question; keep those at most K of them get right."""
    from medrewardbench.curation.filtering import load_grade_template, run_filter
    from medrewardbench.curation.generators import load_answer_template
    from medrewardbench.curation.project import open_project

    _setup_logging(verbose)
    install_log_scrubber()
    from medrewardbench.cli.build_progress import BuildProgress

    sink = BuildProgress(enabled=not quiet)
    nonempty_text(grader, "--grader")
    with _errors(sink):
        specs = _split_option(model, "--model") or []
        options = _options(seed, model_flags)
        answer_prompt = load_answer_template(template)
        grade_prompt = load_grade_template(grade_template)
        with open_project(project, wait=wait, on_wait=_say_waiting(project)) as store:
            summary = run_filter(
                store,
                specs,
                max_correct,
                grader_spec=grader,
                options=options,
                template=answer_prompt,
                grade_template=grade_prompt,
                fresh=fresh,
                retry_failures=retry_failures,
                progress=sink,
                force=force,
            )
        sink.close()
        _print_filter(summary, project, quiet)


@app.command("responses")
@with_model_flags
def responses_command(
    project: ProjectArg,
    generator: Annotated[
        list[str], typer.Option("--generator", "-g", help="a generator's spec (api: or hf:), repeatable")
    ],
    template: TemplateOpt = "answer",
    seed: SeedOpt = 0,
    model_flags: ModelFlags = DEFAULT_MODEL_FLAGS,
    fresh: FreshOpt = False,
    retry_failures: RetryOpt = False,
    wait: WaitOpt = False,
    quiet: QuietOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """The response pool: every generator answers every kept question (resumable)."""
    from medrewardbench.curation.generators import load_answer_template
    from medrewardbench.curation.pool import run_responses
    from medrewardbench.curation.project import open_project

    _setup_logging(verbose)
    install_log_scrubber()
    from medrewardbench.cli.build_progress import BuildProgress

    sink = BuildProgress(enabled=not quiet)
    with _errors(sink):
        specs = _split_option(generator, "--generator") or []
        options = _options(seed, model_flags)
        prompt = load_answer_template(template)
        with open_project(project, wait=wait, on_wait=_say_waiting(project)) as store:
            summaries = run_responses(
                store,
                specs,
                options=options,
                template=prompt,
                fresh=fresh,
                retry_failures=retry_failures,
                progress=sink,
            )
            pool = [spec for _, spec in store.pool()]
            undecided = 0
            if store.active_filter() is not None:
                undecided = store.count_questions() - store.count_decisions()
        sink.close()
        if not quiet:
            console.print(_generation_table("Response pool", summaries))
        console.print(f"the pool holds {len(pool)} generator(s): {_cell(', '.join(pool))}", highlight=False)
        if undecided > 0:
            err_console.print(
                f"{undecided} question(s) were imported after the last 'build filter' and are not in the pool; "
                "run 'build filter' again to decide them",
                highlight=False,
            )
        _report_failures(summaries)


@app.command("pairs")
def pairs_command(
    project: ProjectArg,
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="the pairs file (.jsonl, .json or .parquet)", parser=nonempty_path("--out")),
    ],
    seed: Annotated[int, typer.Option("--seed", help="seed of every random choice")] = 0,
    per_question: Annotated[int, typer.Option("--per-question", min=1, help="pairs per question")] = 1,
    length_balance: Annotated[
        bool, typer.Option("--length-balance", help="keep 'the predicted winner is the longer answer' near 50 %")
    ] = False,
    near_duplicate: Annotated[
        float, typer.Option("--near-duplicate", help="word 3-shingle Jaccard from which answers are near duplicates")
    ] = 0.8,
    wait: WaitOpt = False,
) -> None:
    """Sample two responses per question from different generators, as canonical cases without labels."""
    from medrewardbench.curation.pairs import sample_pairs
    from medrewardbench.curation.project import open_project

    with _errors(out=out), open_project(project, wait=wait, on_wait=_say_waiting(project)) as store:
        summary = sample_pairs(
            store,
            out,
            seed=seed,
            per_question=per_question,
            length_balance=length_balance,
            near_duplicate_jaccard=near_duplicate,
        )
        share = summary.longer_share
        console.print(
            f"wrote {summary.pairs} pair(s) to {_cell(out)} from {summary.questions} question(s); "
            f"{summary.without_pair} without two usable, different answers; "
            f"{summary.duplicates_skipped} duplicate candidate pair(s) skipped.",
            highlight=False,
        )
        console.print(
            "responses per generator: " + _cell(", ".join(f"{k} {v}" for k, v in sorted(summary.generators.items()))),
            highlight=False,
        )
        if share is not None:
            console.print(
                f"pairs with a predicted winner (closed questions, one answer right): {summary.longer_predicted} "
                f"longer, {summary.shorter_predicted} shorter ({share:.0%} longer)",
                highlight=False,
            )


@app.command("labels")
def labels_command(
    project: ProjectArg,
    file: Annotated[
        Path,
        typer.Argument(
            help="label rows (id, annotator, labels, ...) or an annotate export", parser=nonempty_path("FILE")
        ),
    ],
    wait: WaitOpt = False,
) -> None:
    """Attach per-annotator labels to the project's pairs."""
    from medrewardbench.curation.labels import attach_labels
    from medrewardbench.curation.project import open_project

    with _errors(), open_project(project, wait=wait, on_wait=_say_waiting(project)) as store:
        summary = attach_labels(store, file)
        total = store.count_labels()
        console.print(
            f"attached {summary.labels} label(s) from {len(summary.annotators)} annotator(s) to {summary.pairs} "
            f"pair(s), with {summary.comments} comment(s) and {summary.adjudications} adjudication(s); the project "
            f"holds {total} label(s) and {store.count_adjudications()} adjudication(s).",
            highlight=False,
        )
        if summary.annotation_projects:
            names = ", ".join(_cell(name) for name in summary.annotation_projects)
            console.print(
                f"annotation project(s) {names}: kept for the dataset card of 'build export'", highlight=False
            )


@app.command("export")
def export_command(
    project: ProjectArg,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="a .jsonl/.json/.parquet file, or a directory (reference, hub)",
            parser=nonempty_path("--out"),
        ),
    ],
    format_: Annotated[str, typer.Option("--format", help="canonical | reference | questions | hub")] = "canonical",
    name: Annotated[str | None, typer.Option("--name", help="the data set's name in dataset.json")] = None,
    provenance: Annotated[
        str | None, typer.Option("--provenance", help="declare where the labels come from (dataset.json)")
    ] = None,
    labelled_only: Annotated[bool, typer.Option("--labelled-only", help="leave out pairs without labels")] = False,
    force: ForceReplaceOpt = False,
    license_: Annotated[
        str | None, typer.Option("--license", help="hub: the licence identifier in README.md (e.g. cc-by-4.0)")
    ] = None,
    languages: Annotated[
        list[str] | None, typer.Option("--language", help="hub: a language of the texts (ISO 639-1; repeatable)")
    ] = None,
) -> None:
    """Write the labelled set (canonical, the reference layout, or a Hub dataset folder) and its card; or the questions.

    Files already at --out (an earlier export, its dataset.json) are replaced only with --force.
    --format hub writes a folder for 'medrewardbench push DIR OWNER/NAME'.
    """
    from medrewardbench.curation.export import export_dataset
    from medrewardbench.curation.project import open_project

    nonempty_text(name, "--name")
    nonempty_text(provenance, "--provenance")
    nonempty_text(license_, "--license")
    if labelled_only and format_ == "questions":
        raise _fail("--labelled-only applies to the canonical and reference exports; questions carry no labels")
    if (license_ is not None or languages) and format_ != "hub":
        raise _fail("--license and --language apply to --format hub only")
    if languages and not all(code.strip() for code in languages):
        raise _fail("--language: give a language code such as en")
    with _errors(out=out), open_project(project, lock=False) as store:
        if labelled_only and store.count_pairs() and not store.count_labels():
            raise _fail(
                "--labelled-only: no pair has labels yet, so the export would be empty; attach labels with "
                f"'medrewardbench build labels {project} FILE' first"
            )
        summary = export_dataset(
            store,
            format_,
            out,
            name=name,
            provenance=provenance,
            labelled_only=labelled_only,
            force=force,
            license=license_,
            languages=[code.strip() for code in languages] if languages else ("en",),
        )
        if format_ == "questions":
            console.print(f"wrote {summary.cases} question(s) to {_cell(out)}", highlight=False)
            return
        console.print(
            f"wrote {summary.cases} case(s) ({summary.labelled} labelled; {summary.adjudicated} label(s) adjudicated; "
            f"{summary.undecided} dimension(s) without a strict majority or an adjudication, left unlabelled) to "
            f"{_cell(out)}; dataset card {_cell(summary.card)}",
            highlight=False,
        )
        if format_ == "hub":
            console.print(f"publish it with: medrewardbench push {_cell(out)} OWNER/NAME", highlight=False)


@app.command("report")
def report_command(
    project: ProjectArg,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="where report.md, report.csv, decisions.csv go (PROJECT/report)",
            parser=nonempty_path("--out"),
        ),
    ] = None,
) -> None:
    """Where the project stands: what the filter dropped per source and organ system, the pool, pairs, labels."""
    from medrewardbench.curation.project import open_project
    from medrewardbench.curation.report import GROUP_COLUMNS, build_report, write_report
    from medrewardbench.utils.outdir import check_output_dir

    out_dir = out or Path(project) / "report"
    with _errors(out=out_dir), open_project(project, lock=False) as store:
        check_output_dir(out_dir)
        report = build_report(store, str(project))
        files = write_report(report, store, out_dir)
        table = Table(title=f"Questions: {_cell(project)}", title_justify="left")
        for column in GROUP_COLUMNS:
            table.add_column(
                column.replace("_", " "), justify="left" if column in ("source", "organ_system") else "right"
            )
        for group in report.groups:
            table.add_row(*[_cell(group[c]) for c in GROUP_COLUMNS])
        totals = report.totals
        table.add_row("all", "", *[str(totals[c]) for c in GROUP_COLUMNS[2:]], style="bold")
        console.print(table)
        if report.models:
            models = Table(title="Filter models", title_justify="left")
            for column in ("generator", "answers", "correct", "failed"):
                models.add_column(column, justify="left" if column == "generator" else "right")
            for m in report.models:
                models.add_row(_cell(m["generator"]), str(m["answers"]), str(m["correct"]), str(m["failed"]))
            console.print(models)
        if report.pool:
            pool = Table(title="Response pool", title_justify="left")
            for column in ("generator", "answers", "failed", "missing"):
                pool.add_column(column, justify="left" if column == "generator" else "right")
            for p in report.pool:
                pool.add_row(_cell(p["generator"]), str(p["answers"]), str(p["failed"]), str(p["missing"]))
            console.print(pool)
        console.print(
            f"pairs: {report.pairs}; labels: {report.labels} from {len(report.annotators)} annotator(s)"
            + (f" on {report.labelled_pairs} pair(s)" if report.labels else ""),
            highlight=False,
        )
        for dim, tally in report.longer_wins.items():
            total = tally["longer"] + tally["shorter"]
            console.print(f"  longer response wins on {dim}: {tally['longer']} of {total}", highlight=False)
        console.print("written: " + ", ".join(_cell(p) for p in files), highlight=False)
