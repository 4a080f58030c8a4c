"""Rich tables for the terminal. Built here, printed by the CLI.

Judge labels, group names and titles come from data and stored runs: they are put in the tables
as plain :class:`rich.text.Text` (never parsed as markup) with control characters escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.safe_text import terminal_safe

_SHORT = {
    "accuracy": "acc",
    "relevance": "rel",
    "comprehensiveness": "comp",
    "creativity": "crea",
    "responsiveness": "resp",
    "overall": "overall",
}


def plain(value: object) -> Text:
    """Text from data for a table cell or title: no markup, control characters escaped.

    Args:
        value: any value (shown with ``str``).

    Returns:
        The text.
    """
    return Text(terminal_safe(str(value), keep_newlines=False))


def _title(text: str) -> Text:
    return Text(terminal_safe(text, keep_newlines=False), style="table.title")


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def leaderboard_table(rows: Sequence[Mapping[str, Any]], title: str = "Leaderboard") -> Table:
    """Ranked judges: mean accuracy, each dimension, failures and position consistency (in %)."""
    table = Table(title=_title(title), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("judge")
    table.add_column("mean", justify="right", style="bold")
    for dim in DIMENSIONS:
        table.add_column(_SHORT[dim], justify="right")
    table.add_column("fail", justify="right")
    table.add_column("consist.", justify="right")
    table.add_column("1st-pos", justify="right")
    for row in rows:
        table.add_row(
            str(row["rank"]),
            plain(row["judge"]),
            pct(row["mean_accuracy"]),
            *(pct(row[d]) for d in DIMENSIONS),
            pct(row["failure_rate"]),
            pct(row["consistency"]),
            pct(row["first_position_rate"]),
        )
    table.caption = (
        "accuracy in % vs. expert labels, failures counted wrong; consist. = same winner in both orders; "
        "1st-pos = share of picks of the answer shown first (50 = no position bias)"
    )
    return table


def dimension_table(judge: str, metrics: Mapping[str, Any]) -> Table:
    """One run: per dimension accuracy, answered accuracy, failure rate, per order, consistency."""
    table = Table(title=_title(f"{judge}: agreement with the experts"), title_justify="left")
    for name in ("dimension", "acc", "answered acc", "fail", "n"):
        table.add_column(name, justify="left" if name == "dimension" else "right")
    for order in metrics["by_order"]:
        table.add_column(f"acc {order}", justify="right")
    table.add_column("consist.", justify="right")
    table.add_column("1st-pos", justify="right")
    for dim in DIMENSIONS:
        cell = metrics["dimensions"][dim]
        table.add_row(
            dim,
            pct(cell["accuracy"]),
            pct(cell["answered_accuracy"]),
            pct(cell["failure_rate"]),
            str(cell["n"]),
            *(pct(metrics["by_order"][o][dim]["accuracy"]) for o in metrics["by_order"]),
            pct(metrics["position"][dim]["consistency"]),
            pct(metrics["position"][dim]["first_position_rate"]),
        )
    return table


def group_table(judge: str, field: str, metrics: Mapping[str, Any]) -> Table:
    """One run: accuracy per group of a metadata field (rows) and dimension (columns)."""
    table = Table(title=_title(f"{judge}: accuracy by {field}"), title_justify="left")
    table.add_column(plain(field))
    table.add_column("n req", justify="right")
    for dim in DIMENSIONS:
        table.add_column(_SHORT[dim], justify="right")
    for group, cells in metrics["by"][field].items():
        n_requests = cells["overall"]["n"]
        table.add_row(plain(group), str(n_requests), *(pct(cells[d]["accuracy"]) for d in DIMENSIONS))
    if field == "organ_system" and metrics.get("macro"):
        table.add_row("macro (mean of groups)", "", *(pct(metrics["macro"].get(d)) for d in DIMENSIONS))
    return table


def reference_table(judge: str, metrics: Mapping[str, Any]) -> Table:
    """Accuracy per organ system as the reference implementation lays it out: fractions, 4 decimals."""
    table = Table(title=_title(f"{judge}: accuracy per organ system (reference layout)"), title_justify="left")
    table.add_column("modality")
    for dim in DIMENSIONS:
        table.add_column(f"{dim}_acc", justify="right")

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{round(value, 4):.4f}"

    for group, cells in metrics["by"]["organ_system"].items():
        table.add_row(plain(group), *(fmt(cells[d]["accuracy"]) for d in DIMENSIONS))
    table.add_row("all (micro)", *(fmt(metrics["dimensions"][d]["accuracy"]) for d in DIMENSIONS))
    return table


def est(value: Mapping[str, Any] | None) -> str:
    """An estimate ``{point, low, high}`` (fractions) as ``"71.2 [68.0, 74.3]"``."""
    if not value or value.get("point") is None:
        return "-"
    low, high = value.get("low"), value.get("high")
    if low is None or high is None:
        return pct(value["point"])
    return f"{pct(value['point'])} [{pct(low)}, {pct(high)}]"


def interval_leaderboard_table(analysis: Mapping[str, Any], title: str | None = None) -> Table:
    """The analysed leaderboard: score with interval, tier, macro, failures and position measures."""
    settings = analysis["settings"]
    ci = round(100 * settings["confidence"])
    name = analysis.get("dataset", {}).get("name", "")
    table = Table(title=_title(title or f"Leaderboard: {name} ({ci}% intervals, tiers at alpha={settings['alpha']})"),
                  title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("tier", justify="right")
    table.add_column("judge")
    table.add_column(f"score [{ci}% CI]", justify="right", style="bold")
    table.add_column("macro over organs", justify="right")
    table.add_column("overall", justify="right")
    table.add_column("fail", justify="right")
    table.add_column("consist.", justify="right")
    table.add_column("1st-pos", justify="right")
    table.add_column("kappa", justify="right")
    for row in analysis["leaderboard"]:
        label = row["label"] + (" (baseline)" if row.get("is_baseline") else "")
        kappa = row.get("kappa_overall")
        table.add_row(
            str(row["rank"]),
            str(row["tier"]),
            plain(label),
            est(row["score"]),
            est(row.get("macro")),
            est(row["accuracy"].get("overall")),
            pct(row.get("failure_rate")),
            pct(row.get("consistency")),
            pct(row.get("first_position_rate")),
            "-" if kappa is None else f"{kappa:.2f}",
        )
    table.caption = (
        "score = accuracy (%) over all six dimensions, failures counted wrong; judges sharing a tier are not "
        "significantly different from that tier's leader (paired bootstrap, Holm-corrected)"
    )
    return table


def comparison_table(analysis: Mapping[str, Any], judge_a: str, judge_b: str) -> Table:
    """Paired tests of two judges per dimension: accuracies, difference with interval, p-values."""
    ci = round(100 * analysis["settings"]["confidence"])
    table = Table(title=_title(f"{judge_a}  vs  {judge_b} (paired, same cases)"), title_justify="left")
    for name in ("dimension", "acc A", "acc B", f"A - B [{ci}% CI]", "p bootstrap", "McNemar b/c", "p McNemar",
                 "pairs"):
        table.add_column(name, justify="left" if name == "dimension" else "right")
    for record in analysis["pairwise"]["comparisons"]:
        if {record["a"], record["b"]} != {judge_a, judge_b}:
            continue
        flip = record["a"] != judge_a
        diff = {"point": record["diff"], "low": record["low"], "high": record["high"]}
        if flip:
            diff = {"point": -record["diff"], "low": -record["high"], "high": -record["low"]}
        acc_a, acc_b = (record["acc_b"], record["acc_a"]) if flip else (record["acc_a"], record["acc_b"])
        b, c = (record["mcnemar_c"], record["mcnemar_b"]) if flip else (record["mcnemar_b"], record["mcnemar_c"])
        style = "bold" if record.get("significant") else None
        table.add_row(
            record["dimension"],
            pct(acc_a),
            pct(acc_b),
            est(diff),
            _p(record["p_bootstrap"]),
            f"{b}/{c}",
            _p(record["p_mcnemar"]),
            str(record["n_pairs"]),
            style=style,
        )
    table.caption = (
        "b = requests only A got right, c = only B got right; bold = significant after Holm correction. "
        "The bootstrap resamples cases (both orders together); McNemar treats requests as independent."
    )
    return table


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"
