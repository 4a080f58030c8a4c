"""Rich tables for the terminal. Built here, printed by the CLI.

Judge labels, group names and titles come from data and stored runs: they are put in the tables
as plain :class:`rich.text.Text` (never parsed as markup) with control characters escaped.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from medrewardbench.data.provenance import LabelProvenance
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import Analysis, ColumnTable, Estimate, HumanCeiling, LeaderboardRow, RunAnalysis
from medrewardbench.report.format import (
    METRIC,
    MISSING,
    coefficient,
    detectable_sentence,
    dollars,
    estimate,
    fraction,
    p_value,
    percent,
    points,
    ratio,
    small_sample_banner,
    verdict,
)
from medrewardbench.report.tables import answering, never_answered
from medrewardbench.utils.safe_text import terminal_safe
from medrewardbench.utils.shorten import shorten_distinct

_SHORT = {
    "accuracy": "acc",
    "relevance": "rel",
    "comprehensiveness": "comp",
    "creativity": "crea",
    "responsiveness": "resp",
    "overall": "overall",
}
POOLED_LABEL = "all"
"""How the pooled column is labelled in terminal tables."""
POSITION_NOTE = (
    "consist. = same winner in both orders; 1st-pos = share of picks of the answer shown first "
    "(50 = no position bias); both pooled over the six dimensions"
)
FAIL_NOTE = "fail = verdicts not given (the request failed or left the dimension undecided), in % of those counted"
"""Caption text for the ``fail`` column (pooled over the six dimensions, like the score)."""
HUMAN_NOTE = (
    "vs annot. = agreement with the majority of the other annotators, each annotator left out in turn (all "
    "dimensions pooled); {label} = each annotator against that same majority: not a judge, not ranked"
)
"""Caption text for the human-ceiling column and row (``{label}`` is the row's name)."""
STAND_IN_NOTE = (
    "÷ human = vs annot. over the human row (1.00 = as often as an annotator); stands in = the alternative annotator "
    "test on all dimensions (ε = {eps:g}): can stand in for an annotator, cannot, or too few cases to tell"
)
NOT_A_JUDGE = "not a judge"
"""What the human-ceiling row shows where a judge's score would be."""


DROP_ORDER: tuple[str, ...] = (
    "1st-pos",
    "consist.",
    "kappa",
    "$/1k cases",
    "÷ human",
    "agree original|agree swapped",
    "agree answered",
    "p case test",
    "pairs",
    "fail",
    "n req",
    "n",
    "acc|rel|comp|crea|resp",
    "overall",
    "cost",
    "macro over organs",
    "cases A/B better",
    "p bootstrap",
    "vs annot.",
)
"""Columns a narrow terminal leaves out, first left out first (a header is matched by its first word;
``a|b`` leaves out a group together, as the dimensions).

Never left out: rank, tier, judge, the score with its interval, the verdict (stands in for an
annotator?), and a comparison's agreements and difference: the numbers a reader came for.
"""
ABBREVIATIONS = {"stands in for an annotator?": "stands in?", "macro over organs": "macro", "dimension": "dim."}
"""Shorter headers, tried before any column is left out."""
NAME_COLUMNS = ("judge", "name")
"""Columns of names: cut in the middle (keeping what tells them apart) where the table is too wide."""
NAME_WIDTH = 48
"""Names are cut to this before any column is left out."""
MIN_NAME_WIDTH = 18
"""... and down to this after."""
NARROW_NOTE = "left out to fit: {columns} (in the `report` files, or widen the terminal)"


def _header(column: Column) -> str:
    header = column.header
    return header.plain if isinstance(header, Text) else str(header)


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _width(table: Table) -> int:
    console = Console(width=100_000, emoji=False)
    return Measurement.get(console, console.options, table).maximum


def _without(table: Table, dropped: set[int]) -> Table:
    narrow = copy.copy(table)
    narrow.columns = [column for i, column in enumerate(table.columns) if i not in dropped]
    return narrow


def _names_shortened(table: Table, width: int) -> Table:
    narrow = copy.copy(table)
    narrow.columns = []
    for column in table.columns:
        if _header(column) in NAME_COLUMNS:
            column = copy.copy(column)
            texts = [_plain(cell) for cell in column._cells]
            column._cells = [Text(t) for t in shorten_distinct(texts, width)]
        narrow.columns.append(column)
    return narrow


def _names_to_fit(table: Table, width: int, floor: int) -> Table:
    """The name columns cut in the middle until the table fits ``width``, none under ``floor`` characters."""
    room = max((len(_plain(cell)) for c in table.columns if _header(c) in NAME_COLUMNS for cell in c._cells), default=0)
    fitted = table
    while room > floor and _width(fitted) > width:
        room = max(floor, room - (_width(fitted) - width))
        fitted = _names_shortened(table, room)
    return fitted


def fit_table(table: Table, width: int | None, drop_order: Sequence[str] = DROP_ORDER) -> RenderableType:
    """The table narrowed to ``width`` terminal columns, with a line saying what was left out.

    First long headers are abbreviated and names (the judge column) cut in the middle to
    :data:`NAME_WIDTH` characters, keeping what tells them apart; then columns are left out in
    ``drop_order``; then names are cut further, to :data:`MIN_NAME_WIDTH`. A column not in
    ``drop_order`` is never left out.

    Args:
        table: a table built by this module.
        width: the terminal's width (None: as wide as the table needs).
        drop_order: headers (their starts) of the columns that may be left out, first left out first.

    Returns:
        The table when it fits; otherwise the narrowed table and, when columns were left out, one
        line under it naming them.
    """
    if width is None or _width(table) <= width:
        return table
    fitted = copy.copy(table)
    fitted.columns = []
    for column in table.columns:
        short = ABBREVIATIONS.get(_header(column))
        if short is not None:
            column = copy.copy(column)
            column.header = short
        fitted.columns.append(column)
    fitted = _names_to_fit(fitted, width, NAME_WIDTH)
    headers = [_header(c) for c in table.columns]
    dropped: set[int] = set()
    for prefix in drop_order:
        if _width(_without(fitted, dropped)) <= width:
            break
        group = prefix.split("|")
        dropped |= {i for i, h in enumerate(headers) if any(h == p or h.startswith(p + " ") for p in group)}
    fitted = _names_to_fit(_without(fitted, dropped), width, MIN_NAME_WIDTH)
    if not dropped:
        return fitted
    left_out = ", ".join(headers[i] for i in sorted(dropped))
    return Group(fitted, Text(NARROW_NOTE.format(columns=left_out), style="dim"))


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


def leaderboard_table(
    rows: Sequence[LeaderboardRow], title: str = "Leaderboard", human: HumanCeiling | None = None
) -> Table:
    """Ranked judges: the score, each dimension, failures and position measures (in %).

    Args:
        rows: the leaderboard rows, ranked.
        title: the table title.
        human: the analysis' human ceiling: adds each judge's agreement with the annotators'
            leave-one-out majorities and, apart from the judges, the human (leave-one-out) row.

    Returns:
        The table.
    """
    table = Table(title=_title(title), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("judge")
    table.add_column("score", justify="right", style="bold")
    for dim in DIMENSIONS:
        table.add_column(_SHORT[dim], justify="right")
    table.add_column("fail", justify="right")
    table.add_column("consist.", justify="right")
    table.add_column("1st-pos", justify="right")
    if human is not None:
        table.add_column("vs annot.", justify="right")
    for row in rows:
        table.add_row(
            str(row.rank),
            plain(row.judge),
            percent(row.score.point),
            *(percent(row.accuracy[d].point) for d in DIMENSIONS),
            percent(row.failure_rate),
            percent(row.consistency),
            percent(row.first_position_rate),
            *([percent(None if row.vs_annotators is None else row.vs_annotators.point)] if human is not None else []),
        )
    table.caption = (
        f"{METRIC} in %, failures counted wrong; score = all six dimensions pooled; acc ... overall = the six "
        f"dimensions; {FAIL_NOTE}; {POSITION_NOTE}"
    )
    if human is not None:
        table.add_section()
        blanks = [MISSING] * (len(DIMENSIONS) + 3)
        table.add_row("–", plain(human.label), NOT_A_JUDGE, *blanks, percent(human.human.pooled.point), style="italic")
        table.caption += "; " + HUMAN_NOTE.format(label=human.label)
    return table


def dimension_table(run: RunAnalysis) -> Table:
    """One run per dimension: agreement with the labels (all and answered), failures, per order, position."""
    table = Table(title=_title(f"{run.label}: {METRIC} (%)"), title_justify="left")
    for name in ("dimension", "agree", "agree when answered", "fail", "n"):
        table.add_column(name, justify="left" if name == "dimension" else "right")
    for order in run.by_order:
        table.add_column(f"agree {order}", justify="right")
    table.add_column("consist.", justify="right")
    table.add_column("1st-pos", justify="right")
    for column, label in (*((d, d) for d in DIMENSIONS), (None, POOLED_LABEL)):

        def cell(table_: ColumnTable[Estimate], column: str | None = column) -> str:
            return percent((table_.pooled if column is None else table_[column]).point)

        n = run.n_counted.pooled if column is None else run.n_counted[column]
        failure_rate = run.failure_rate.pooled if column is None else run.failure_rate[column]
        table.add_row(
            label,
            cell(run.accuracy),
            cell(run.answered_accuracy),
            percent(failure_rate),
            str(n),
            *(cell(by_order) for by_order in run.by_order.values()),
            cell(run.position.consistency),
            cell(run.position.first_position_rate),
        )
    return table


def group_table(run: RunAnalysis, field: str) -> Table:
    """One run: agreement with the labels per group of a metadata field (rows) and dimension (columns)."""
    grouped = run.groups[field]
    table = Table(title=_title(f"{run.label}: {METRIC} (%) by {field}"), title_justify="left")
    table.add_column(plain(field))
    table.add_column("n req", justify="right")
    for dim in DIMENSIONS:
        table.add_column(_SHORT[dim], justify="right")
    for group, cells in grouped.groups.items():
        table.add_row(plain(group), str(cells["overall"].n), *(percent(cells[d].point) for d in DIMENSIONS))
    if field == "organ_system":
        table.add_row("macro (mean of groups)", "", *(percent(grouped.macro[d].point) for d in DIMENSIONS))
    return table


def reference_table(run: RunAnalysis) -> Table:
    """Agreement per organ system as the reference implementation lays it out (``{dimension}_acc``, fractions)."""
    table = Table(title=_title(f"{run.judge}: {METRIC} per organ system (reference layout)"), title_justify="left")
    table.add_column("modality")
    for dim in DIMENSIONS:
        table.add_column(f"{dim}_acc", justify="right")
    for group, cells in run.groups["organ_system"].groups.items():
        table.add_row(plain(group), *(fraction(cells[d].point) for d in DIMENSIONS))
    table.add_row("all (micro)", *(fraction(run.accuracy[d].point) for d in DIMENSIONS))
    return table


def interval_leaderboard_table(analysis: Analysis, title: str | None = None, *, name: str | None = None) -> Table:
    """The analysed leaderboard: score with interval, tier, macro, failures and position measures.

    Args:
        analysis: the analysis.
        title: the whole heading (replaces the default one).
        name: what the default heading names (``report --title``); None: the data set's name.

    Judges that never answered are listed below the ranked rows, unranked, with their most
    frequent failure reason.
    """
    settings = analysis.settings
    ci = round(100 * settings.confidence)
    name = name or analysis.dataset.name or ""
    failed = [row for row in analysis.leaderboard if never_answered(row)]
    analysis = answering(analysis)
    table = Table(
        title=_title(title or f"Leaderboard: {name} ({ci}% intervals, tiers at alpha={settings.alpha})"),
        title_justify="left",
    )
    table.add_column("#", justify="right")
    table.add_column("tier", justify="right")
    table.add_column("judge", no_wrap=True)
    table.add_column(f"score [{ci}% CI]", justify="right", style="bold", no_wrap=True)
    table.add_column("macro over organs", justify="right")
    table.add_column("overall", justify="right")
    table.add_column("fail", justify="right")
    table.add_column("consist.", justify="right")
    table.add_column("1st-pos", justify="right")
    table.add_column("kappa", justify="right")
    with_cost = any(row.has_cost for row in analysis.leaderboard)
    if with_cost:
        table.add_column("cost", justify="right")
        table.add_column("$/1k cases", justify="right")
    human = analysis.human
    if human is not None:
        table.add_column(f"vs annot. [{ci}% CI]", justify="right")
        table.add_column("÷ human", justify="right")
        table.add_column("stands in for an annotator?")
    for row in analysis.leaderboard:
        label = row.label + (" (baseline)" if row.is_baseline else "")
        costs = [dollars(row.cost_usd), dollars(row.cost_per_1000_cases)] if with_cost else []
        vs_annotators = (
            [estimate(row.vs_annotators), ratio(row.normalised), row.verdict or MISSING] if human is not None else []
        )
        table.add_row(
            str(row.rank),
            "" if row.tier is None else str(row.tier),
            plain(label),
            estimate(row.score),
            estimate(row.macro),
            estimate(row.accuracy["overall"]),
            percent(row.failure_rate),
            percent(row.consistency),
            percent(row.first_position_rate),
            coefficient(row.kappa_overall),
            *costs,
            *vs_annotators,
        )
    table.caption = (
        f"score = {METRIC} (%) over all six dimensions pooled, failures counted wrong; judges sharing a tier are not "
        f"significantly different from that tier's leader (paired bootstrap, Holm-corrected); macro = the score "
        f"averaged over organ systems; {FAIL_NOTE}; {POSITION_NOTE}; kappa = Cohen's kappa with the labels on the "
        "overall dimension (0 = chance, 1 = perfect)"
    )
    if with_cost:
        table.caption += "; cost = the run's stored judgments at the sweep's prices, $/1k cases per case judged"
    if human is not None:
        table.add_section()
        blanks = [MISSING] * (6 + (2 if with_cost else 0))
        table.add_row(
            "–",
            MISSING,
            plain(human.label),
            NOT_A_JUDGE,
            *blanks,
            estimate(human.human.pooled),
            "1.00",
            MISSING,
            style="italic",
        )
        table.caption += "; " + HUMAN_NOTE.format(label=human.label) + "; " + STAND_IN_NOTE.format(eps=human.epsilon)
    if failed:
        table.add_section()
        for row in failed:
            reasons = list(analysis.run(row.run_id).failures.items())[:1]
            reason = f"never answered: {reasons[0][0]}" if reasons else "never answered"
            reason = reason if len(reason) <= 70 else reason[:69] + "…"
            table.add_row("–", "failed", plain(row.label), plain(reason), style="dim")
        table.caption += "; failed = every request failed: not ranked, in no tier"
    sentence = detectable_sentence(analysis.sensitivity, human=human is not None)
    if sentence:
        table.caption += ". " + sentence
    return table


def sensitivity_banner(analysis: Analysis) -> Text | None:
    """The "too few cases to rank" warning for the terminal (bold yellow), or None when the data suffice."""
    banner = small_sample_banner(analysis.sensitivity)
    return None if banner is None else Text(banner, style="bold yellow")


def verdict_table(analysis: Analysis, labels: Sequence[str]) -> Table | None:
    """Can each judge stand in for an annotator, per dimension and pooled (None without per-annotator labels)."""
    human = analysis.human
    if human is None:
        return None
    verdicts = [human.verdict(label) for label in labels]
    table = Table(
        title=_title(f"Can the judge stand in for an annotator? (alt-test, ε = {human.epsilon:g})"),
        title_justify="left",
    )
    table.add_column("dimension")
    for label in labels:
        table.add_column(plain(label))
    for column in (POOLED_LABEL, *DIMENSIONS):
        key = "all" if column == POOLED_LABEL else column
        table.add_row(column, *(verdict(None if v is None else v.tests[key]) for v in verdicts))
    reasons = [f"{label}: {v.tests.pooled.reason}" for label, v in zip(labels, verdicts, strict=True) if v is not None]
    table.caption = (
        "ω = share of annotators the judge beats (Benjamini–Yekutieli across annotators); it can stand in when "
        "ω ≥ 0.5. All dimensions: " + "; ".join(reasons)
    )
    return table


def comparison_table(analysis: Analysis, judge_a: str, judge_b: str) -> Table:
    """Paired tests of two judges per dimension: agreement of each, difference with interval, p-values."""
    ci = round(100 * analysis.settings.confidence)
    table = Table(title=_title(f"{judge_a}  vs  {judge_b} (paired, same cases)"), title_justify="left")
    for name in (
        "dimension",
        "agree A",
        "agree B",
        f"A - B [{ci}% CI]",
        "p bootstrap",
        "cases A/B better",
        "p case test",
        "pairs",
    ):
        table.add_column(name, justify="left" if name == "dimension" else "right")
    for comparison in analysis.pairwise.between(judge_a, judge_b):
        table.add_row(
            POOLED_LABEL if comparison.is_pooled else comparison.column,
            percent(comparison.acc_a),
            percent(comparison.acc_b),
            estimate(comparison.difference),
            p_value(comparison.p_bootstrap, resamples=analysis.settings.n_resamples),
            f"{comparison.cases_a_better}/{comparison.cases_b_better}",
            p_value(comparison.p_case),
            str(comparison.n_pairs),
            style="bold" if comparison.significant else None,
        )
    table.caption = (
        "Both tests take the case as their unit: the bootstrap resamples cases (both orders and every "
        "dimension together); the case test is the sign-flip test of each case's difference in correct "
        "requests (exact distribution, mid-p). Cases A/B better = cases where A (B) got more of them right; "
        "bold = significant after Holm correction (bootstrap, as the tiers)."
    )
    sensitivity = analysis.sensitivity
    if sensitivity is not None and sensitivity.between_judges.pooled == sensitivity.between_judges.pooled:
        n = sensitivity.n_cases.pooled
        table.caption += (
            f" With {n} cases, differences under {points(sensitivity.between_judges.pooled)} points between these "
            "two judges (all dimensions) cannot be detected (80 % power, two-sided 5 %)."
        )
    return table


def labels_banner(labels: LabelProvenance) -> Text:
    """The labels' provenance as one line for the terminal (bold orange when not expert labels).

    Args:
        labels: where the labels come from.

    Returns:
        The text.
    """
    return Text(terminal_safe(labels.banner(), keep_newlines=False), style="" if labels.by_experts else "bold yellow")
