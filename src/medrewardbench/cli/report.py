"""``medrewardbench report``, ``leaderboard`` and ``compare``: stored runs in, tables and files out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from medrewardbench.cli.support import console
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import split_list as _split
from medrewardbench.errors import MedRewardBenchError

RunPaths = Annotated[list[Path], typer.Argument(help="run directories or store files")]
CiOpt = Annotated[float, typer.Option("--ci", min=0.5, max=0.999, help="interval coverage")]
BootOpt = Annotated[int, typer.Option("--bootstrap", min=100, help="bootstrap resamples")]


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
