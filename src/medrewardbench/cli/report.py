"""``medrewardbench report``, ``leaderboard`` and ``compare``: stored runs in, tables and files out.

A results folder may hold runs made on several data sets (a quick ``eval --limit 5`` into
``results/``): ``report`` and ``leaderboard`` then show each data set in its own section, and
``--data FINGERPRINT`` picks one. A ``cv`` output folder is read as its pooled held-out runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.rule import Rule
from rich.text import Text

from medrewardbench.cli.options import BootstrapOpt as BootOpt
from medrewardbench.cli.options import CiOpt, RecalibrateOpt, RiskDeltaOpt, RiskOpt
from medrewardbench.cli.support import console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import split_list as _split
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.metrics.results import DEFAULT_EPSILON

if TYPE_CHECKING:
    from medrewardbench.metrics.corrected import CorrectedEstimates

RunPaths = Annotated[
    list[Path], typer.Argument(metavar="RUN_DIR...", help="results directories, store files or cv output folders")
]
SeedOpt = Annotated[int, typer.Option("--seed", metavar="N", help="seed of the bootstrap")]
EpsilonOpt = Annotated[
    float,
    typer.Option(
        "--epsilon",
        min=0.0,
        max=1.0,
        metavar="MARGIN",
        help="the stand-in test's cost-benefit margin in winning probability (the alt-test's epsilon; "
        "0.1 = strict, 0.2 = the paper's rule of thumb for experts)",
    ),
]
JudgeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--judge", "-j", metavar="SPEC|RUN_ID", help="only these judges (repeatable)", show_default="every run"
    ),
]
DataSetOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        metavar="FINGERPRINT",
        help="only the runs on this data set: a fingerprint prefix (4+ characters) or the data set's name",
        show_default="every data set, each in its own section",
    ),
]


TitleOpt = Annotated[
    str | None,
    typer.Option(
        "--title",
        metavar="TEXT",
        help="the report's title (HTML, Markdown, spreadsheet and the leaderboard's heading)",
        show_default="the data set's name",
    ),
]


def _section(name: str, n_cases: int, data_hash: str, several: bool) -> None:
    if several:
        console.print(Rule(f"{terminal_safe(name)}: {n_cases} cases, data {data_hash[:12]}", style="dim"))


def report_command(
    runs: RunPaths,
    formats: Annotated[
        str, typer.Option("--format", "-f", metavar="LIST", help="comma-separated: md,csv,json,xlsx,html")
    ] = "md,csv,json,xlsx,html",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="DIR",
            help="where to write (a folder per data set inside it when there are several)",
            show_default="the first RUN_DIR",
        ),
    ] = None,
    judge: JudgeOpt = None,
    data: DataSetOpt = None,
    ci: CiOpt = 0.95,
    bootstrap: BootOpt = 2000,
    seed: SeedOpt = 0,
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            metavar="FIELD",
            help="also group by this field (repeatable; site or metadata.site)",
            show_default="organ_system only",
        ),
    ] = None,
    cases_per_judge: Annotated[
        int, typer.Option("--cases-per-judge", metavar="N", help="wrongly judged cases of each judge the HTML shows")
    ] = 50,
    epsilon: EpsilonOpt = DEFAULT_EPSILON,
    risk: RiskOpt = 0.10,
    risk_delta: RiskDeltaOpt = 0.10,
    recalibrate: RecalibrateOpt = "none",
    title: TitleOpt = None,
    viewer: Annotated[
        bool,
        typer.Option(
            "--viewer/--no-viewer",
            help="embed the per-case viewer in report.html: every case, every judge's prompt, raw output and "
            "verdicts (about 40 MB at 1,026 cases x 32 judges)",
        ),
    ] = True,
    labels: Annotated[
        str | None,
        typer.Option(
            "--labels",
            metavar="FILE",
            help="doctors' labels on a slice of the pool (annotate export): adds the corrected estimates "
            "(estimates.md, estimates.json)",
        ),
    ] = None,
) -> None:
    """Render stored runs as reports: report.md, report.html, report.xlsx, analysis.json/csv (no judge is called)."""
    from medrewardbench.metrics.selective_section import SelectiveSettings
    from medrewardbench.report.render import ReportSettings, render_reports
    from medrewardbench.report.terminal import fit_table, interval_leaderboard_table, labels_banner, sensitivity_banner

    out_dir = out or (runs[0] if runs[0].is_dir() else runs[0].parent)
    corrected = _corrected(runs, labels, judge, data, ci) if labels else None
    try:
        selective = SelectiveSettings(alpha=risk, delta=risk_delta, recalibration=recalibrate.strip().lower())
        rendered = render_reports(
            runs,
            out_dir,
            [f for f in _split([formats])],
            ReportSettings(
                judges=_split(judge) or None,
                data=data,
                confidence=ci,
                n_resamples=bootstrap,
                seed=seed,
                group_fields=_split(by),
                cases_per_judge=cases_per_judge,
                epsilon=epsilon,
                title=title,
                viewer=viewer,
                selective=selective,
            ),
        )
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    several = len(rendered) > 1
    if several:
        console.print(
            f"{len(rendered)} data sets: one report folder each in {out_dir}/ (or pick one with --data FINGERPRINT)",
            highlight=False,
            markup=False,
        )
    for report in rendered:
        _section(report.name, report.analysis.dataset.n_cases, report.data_hash, several)
        console.print(labels_banner(report.analysis.dataset.labels))
        _print_banner(sensitivity_banner(report.analysis))
        console.print(fit_table(interval_leaderboard_table(report.analysis, name=title), console.width))
        files = dict(report.files)
        if corrected is not None and corrected[0] == report.data_hash:
            from medrewardbench.report.estimates import (
                ESTIMATES_DROP_ORDER,
                add_to_reports,
                estimates_table,
                write_estimates,
            )

            console.print(fit_table(estimates_table(corrected[1]), console.width, ESTIMATES_DROP_ORDER))
            try:
                add_to_reports(corrected[1], report.files)
            except ValueError as exc:
                console.print(f"warning: {exc}", highlight=False, markup=False)
            files.update(write_estimates(corrected[1], report.out_dir))
        for kind, path in files.items():
            console.print(f"{kind:>13}: {path}", highlight=False, markup=False)


def _corrected(
    runs: list[Path], labels: str, judge: list[str] | None, data: str | None, ci: float
) -> tuple[str, CorrectedEstimates]:
    """(data fingerprint, corrected estimates) for ``--labels``; a clear exit when they cannot be made."""
    from medrewardbench.metrics.corrected import load_corrected

    try:
        return load_corrected(runs, labels, judges=_split(judge) or None, data=data, confidence=ci)
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(f"--labels: {exc}") from exc


def leaderboard_command(
    results: Annotated[
        list[Path],
        typer.Argument(metavar="RESULTS_DIR...", help="results directories (searched recursively) or cv folders"),
    ],
    judge: JudgeOpt = None,
    data: DataSetOpt = None,
    ci: CiOpt = 0.95,
    bootstrap: BootOpt = 2000,
    seed: SeedOpt = 0,
    epsilon: EpsilonOpt = DEFAULT_EPSILON,
    risk: RiskOpt = 0.10,
    risk_delta: RiskDeltaOpt = 0.10,
    recalibrate: RecalibrateOpt = "none",
    title: TitleOpt = None,
) -> None:
    """Rank every run found, with intervals and tiers, baseline rows included: one table per data set."""
    from medrewardbench.metrics.loading import analyze_dataset, find_datasets
    from medrewardbench.report.terminal import fit_table, interval_leaderboard_table, labels_banner, sensitivity_banner

    try:
        datasets = find_datasets(results, judges=_split(judge) or None, data=data)
        analyses = [
            analyze_dataset(d, confidence=ci, n_resamples=bootstrap, seed=seed, epsilon=epsilon) for d in datasets
        ]
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    several = len(analyses) > 1
    for dataset, analysis in zip(datasets, analyses, strict=True):
        _section(dataset.name, dataset.n_cases, dataset.data_hash, several)
        console.print(labels_banner(analysis.dataset.labels))
        _print_banner(sensitivity_banner(analysis))
        console.print(fit_table(interval_leaderboard_table(analysis, name=title), console.width))


def compare_command(
    run_a: Annotated[str, typer.Argument(metavar="A", help="a run directory, or a judge spec / run id in --results")],
    run_b: Annotated[str, typer.Argument(metavar="B", help="a run directory, or a judge spec / run id in --results")],
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="where to look up specs and run ids")
    ] = Path("results"),
    data: DataSetOpt = None,
    ci: CiOpt = 0.95,
    bootstrap: BootOpt = 2000,
    seed: SeedOpt = 0,
    epsilon: EpsilonOpt = DEFAULT_EPSILON,
) -> None:
    """Paired comparison of two judges on the same cases: paired case bootstrap and case sign-flip test, per dimension.

    With per-annotator labels, also whether each judge can stand in for an annotator (the alt-test).

    A judge spec that names several runs (other seeds or settings) is an error that lists their run
    ids: name one by its run id.
    """
    from medrewardbench.metrics.analysis import DataSet, judge_labels
    from medrewardbench.metrics.loading import analyze_dataset, analyze_paths, find_datasets
    from medrewardbench.report.terminal import (
        comparison_table,
        fit_table,
        labels_banner,
        sensitivity_banner,
        verdict_table,
    )

    try:
        if Path(run_a).exists() and Path(run_b).exists():
            analysis = analyze_paths(
                [Path(run_a), Path(run_b)],
                data=data,
                confidence=ci,
                n_resamples=bootstrap,
                seed=seed,
                epsilon=epsilon,
            )
            labels = [r.label for r in analysis.runs]
            if len(labels) != 2:
                raise _fail(
                    f"compare needs exactly one run in each directory; found {len(labels)}: " + ", ".join(labels)
                )
            label_a, label_b = labels
        else:
            datasets = find_datasets([results], judges=[run_a, run_b], data=data)

            def named(dataset: DataSet, key: str) -> list[str]:
                return [b.record.run_id for b in dataset.runs if key in (b.record.judge_spec, b.record.run_id)]

            both = [d for d in datasets if named(d, run_a) and named(d, run_b)]
            if not both:
                raise _fail(f"no data set in {results} holds runs of both {run_a!r} and {run_b!r}")
            if len(both) > 1:
                listed = "; ".join(f"{d.data_hash[:12]} ({d.name}, {d.n_cases} cases)" for d in both)
                raise _fail(f"both judges have runs on several data sets: {listed}; choose one with --data")
            dataset = both[0]
            for key in (run_a, run_b):
                ids = named(dataset, key)
                if len(ids) > 1:
                    runs = [b for b in dataset.runs if b.record.run_id in ids]
                    shown = judge_labels([b.data for b in runs])
                    listed = "; ".join(f"{b.record.run_id} ({label})" for b, label in zip(runs, shown, strict=True))
                    raise _fail(f"{key!r} names {len(ids)} runs: {listed}; name one by its run id")
            chosen = {named(dataset, run_a)[0], named(dataset, run_b)[0]}
            if len(chosen) != 2:
                raise _fail(f"{run_a!r} and {run_b!r} name the same run")
            pair = DataSet(
                dataset.data_hash,
                dataset.name,
                dataset.n_cases,
                tuple(b for b in dataset.runs if b.record.run_id in chosen),
            )
            analysis = analyze_dataset(pair, confidence=ci, n_resamples=bootstrap, seed=seed, epsilon=epsilon)
            by_id = {r.run_id: r.label for r in analysis.runs}
            label_a, label_b = by_id[named(dataset, run_a)[0]], by_id[named(dataset, run_b)[0]]
    except (MedRewardBenchError, ValueError) as exc:
        raise _fail(str(exc)) from exc
    console.print(labels_banner(analysis.dataset.labels))
    _print_banner(sensitivity_banner(analysis))
    console.print(fit_table(comparison_table(analysis, label_a, label_b), console.width))
    verdicts = verdict_table(analysis, [label_a, label_b])
    if verdicts is not None:
        console.print(fit_table(verdicts, console.width))


def _print_banner(banner: Text | None) -> None:
    if banner is not None:
        console.print(banner)
