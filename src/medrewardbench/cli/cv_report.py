"""What ``cv`` prints: its headline and its held-out tables, from the report it wrote (``cv.json``).

Kept apart from :mod:`medrewardbench.cli.train` (the commands) because it only renders: it reads a
finished report and builds rich tables, so it can be tested and reused without training anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.table import Table

from medrewardbench.metrics.results import POOLED, Estimate, PairwiseComparison
from medrewardbench.report.format import METRIC, MISSING, estimate, interval, p_value, percent, signed_percent

__all__ = ["cv_headline", "cv_tables", "format_loss"]


def format_loss(value: float | None) -> str:
    """A training loss with four decimals (``-`` when unknown)."""
    return "-" if value is None else f"{value:.4f}"


def _interval(value: Estimate | None) -> str:
    """Agreement over its interval on a second line: ``79.4`` / ``[64.7, 91.2]``."""
    if value is None or not value.defined:
        return MISSING
    return f"{percent(value.point)}\n[dim]{interval(value.low, value.high)}[/]"


def _diff(comparison: PairwiseComparison | None) -> str:
    """A signed difference over its interval: ``+29.4`` / ``[+14.7, +41.2]``."""
    if comparison is None or comparison.diff != comparison.diff:
        return MISSING
    return f"{signed_percent(comparison.diff)}\n[dim]{interval(comparison.low, comparison.high, signed=True)}[/]"


def cv_headline(report: Mapping[str, Any]) -> str:
    """One line: the tuned model's pooled held-out score against the floor, the base and chance."""
    from medrewardbench.train.cv import CHANCE, HeldOutSummary

    summary = HeldOutSummary.from_json(report)
    tuned = summary.tuned.pooled
    resamples = report.get("n_resamples")
    parts = [f"held-out score {estimate(tuned)}"]
    for name, comparison in (
        (report.get("floor_judge") or "floor", summary.floor_comparison),
        (report.get("base_judge") or "base", summary.comparison),
    ):
        if comparison is None:
            continue
        test = comparison.pooled
        parts.append(
            f"{signed_percent(test.diff)} points vs {name} (p {p_value(test.p_bootstrap, resamples=resamples)})"
        )
    above = tuned.low > CHANCE if tuned.has_interval else tuned.point > CHANCE
    parts.append(f"{'above' if above else 'not above'} chance ({percent(CHANCE)})")
    return "; ".join(parts) + " (paired case bootstrap)"


def cv_tables(report: Mapping[str, Any]) -> list[Table]:
    """The held-out tables of a cv report (as written to cv.json): agreement, paired differences, folds.

    The first table gives each judge's held-out agreement with the labels, the base's failure rate
    beside its score; the second the differences of the tuned model from the base and from the
    baseline floor with the paired case bootstrap (the headline p-value) and the case sign-flip
    test; the third the folds.
    """
    from medrewardbench.train.cv import CHANCE, HeldOutSummary

    summary = HeldOutSummary.from_json(report)
    confidence = int(round(100 * report["confidence"]))
    resamples = report.get("n_resamples")
    base_name = report.get("base_judge") or "base"
    floor_name = report.get("floor_judge") or "floor"
    table = Table(
        title=f"{report['method']} cross-validation, {report['k']} folds: held-out {METRIC} (%) on "
        f"{report['data']['n_held_out_cases']} cases x 2 orders, {confidence}% intervals below each value",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        show_edge=False,
    )
    table.add_column("dimension", no_wrap=True)
    table.add_column("tuned", justify="right")
    if summary.base is not None:
        table.add_column("base", justify="right")
    if summary.floor is not None:
        table.add_column(f"floor ({floor_name.removeprefix('baseline:')})", justify="right")
    table.add_column("chance", justify="right")
    table.add_column("n", justify="right")
    for column, tuned in summary.tuned.columns():
        cells = [column, _interval(tuned)]
        if summary.base is not None:
            cells.append(_interval(summary.base[column]))
        if summary.floor is not None:
            cells.append(_interval(summary.floor[column]))
        cells += [percent(CHANCE), str(tuned.n)]
        table.add_row(*cells)
    failed = summary.base_failure_rate
    table.caption = (
        f"tuned: {report['tuned_judge']}; base: {base_name}"
        + ("" if summary.base is None or failed != failed else f" (failed {percent(failed)} % of its judgments)")
        + f"; floor: {floor_name}. Failures count as wrong; {POOLED} = the six dimensions pooled."
    )
    tables = [table]
    comparisons = [
        (name, c) for name, c in ((base_name, summary.comparison), (floor_name, summary.floor_comparison)) if c
    ]
    if comparisons:
        tests = Table(
            title=f"Tuned minus each comparison (points, paired case bootstrap, {confidence}% intervals)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            padding=(0, 1),
            show_edge=False,
        )
        tests.add_column("dimension", no_wrap=True)
        for name, _ in comparisons:
            tests.add_column(f"- {name}", justify="right")
            tests.add_column("p", justify="right")
            tests.add_column("p case", justify="right")
        for column, _ in summary.tuned.columns():
            cells = [column]
            for _, comparison in comparisons:
                test = comparison[column]
                cells += [_diff(test), p_value(test.p_bootstrap, resamples=resamples), p_value(test.p_case)]
            tests.add_row(*cells)
        tests.caption = (
            "p = paired case bootstrap (both orders and all dimensions of a case resampled together): the headline "
            "test; p case = the case-level sign-flip test of the same difference (mid-p)."
        )
        tables.append(tests)
    demo = report.get("labels", {}).get("kind") == "illustrative" or any(
        "illustrative" in str(n) for n in report.get("notes", [])
    )
    if demo:
        table.caption += " Labels of this data are illustrative, not expert annotations."
    folds = Table(
        title=f"Folds (score: held-out {METRIC} pooled over the six dimensions, %)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    for column_name in ("fold", "train", "held out", "loss first -> final", "score", "train s", "eval s"):
        folds.add_column(column_name, justify="left" if column_name == "fold" else "right")
    for fold in report["folds"]:
        losses = fold["losses"]
        loss_text = f"{format_loss(losses.get('first'))} -> {format_loss(losses.get('final'))}"
        folds.add_row(
            str(fold["index"]) + (" reused" if fold.get("reused_model") else ""),
            str(fold["n_train_cases"]),
            str(fold["n_eval_cases"]),
            loss_text,
            percent(fold["score"]),
            f"{fold['train_s']:.1f}",
            f"{fold['eval_s']:.1f}",
        )
    tables.append(folds)
    return tables
