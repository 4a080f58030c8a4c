"""The report's tables, built once from declarative column lists; each format only writes them.

Each table below is a list of :class:`~medrewardbench.report.columns.Column` over one kind of row
(a leaderboard row, a run, a stand-in test). :func:`report_tables` walks the analysis once and
returns every :class:`~medrewardbench.report.columns.Table`;
:mod:`~medrewardbench.report.markdown`, :mod:`~medrewardbench.report.html` and
:mod:`~medrewardbench.report.xlsx` only write them.

Adding a metric to a table is one :class:`~medrewardbench.report.columns.Column` in that table's
list (and, for the HTML, one cell in the template naming the column's ``key``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import (
    Analysis,
    Estimate,
    LeaderboardRow,
    PairwiseComparison,
    RunAnalysis,
    number,
)
from medrewardbench.report.columns import (
    EVERYWHERE,
    HTML,
    MD,
    PAGES,
    SHEET,
    Column,
    Judge,
    Kind,
    PValue,
    Table,
    Tiered,
    per_dimension,
)
from medrewardbench.report.human import HumanTables, human_tables

DEFAULT_NAME = "Med-RewardBench"
"""The name a report carries when its data set has none."""
SHOWN_NAMES: dict[str, str] = {"medrewardbench-demo": f"{DEFAULT_NAME} demo", "demo": f"{DEFAULT_NAME} demo"}
"""Data set names as a title shows them (the built-in demo's machine name reads as words)."""
ANSWERED_HEADER = "Agreement when answered"
"""agreement with the labels over the answered requests only (the column keyed ``answered_acc``)"""


def report_title(name: str | None) -> str:
    """The title a report takes by default: its data set's name (Med-RewardBench data keeps its own).

    Args:
        name: the data set's name as its runs recorded it (the benchmark's name: ``"demo"``,
            ``"Med-RewardBench"``, a release's folder or file stem); None when unknown.

    Returns:
        ``"<name> report"``; the built-in demo (``medrewardbench-demo``) reads ``"Med-RewardBench
        demo report"`` and a missing name ``"Med-RewardBench report"``.
    """
    shown = name or DEFAULT_NAME
    return f"{SHOWN_NAMES.get(shown, shown)} report"


def never_answered(row: LeaderboardRow) -> bool:
    """A judge that failed every request: listed apart, not ranked, in no tier."""
    return row.failure_rate >= 1.0


def answering(analysis: Analysis) -> Analysis:
    """The analysis whose leaderboard holds only the judges that answered at least once.

    Every ranked table and chart of a report is built from it; the judges left out are listed
    apart (:func:`failed_table`). Ranks are unchanged: a judge that never answered scores 0 and
    ranks last.
    """
    if not any(never_answered(row) for row in analysis.leaderboard):
        return analysis
    return replace(analysis, leaderboard=tuple(row for row in analysis.leaderboard if not never_answered(row)))


def _tier(row: LeaderboardRow, dimension: str) -> int | None:
    return None if row.tiers is None else row.tiers[dimension]


def _row_accuracy(row: LeaderboardRow, dimension: str) -> Estimate:
    return row.accuracy[dimension]


def _tiered(run: RunAnalysis, dimension: str) -> Tiered:
    return Tiered(run.accuracy[dimension], None if run.tiers is None else run.tiers[dimension])


def _kappa(run: RunAnalysis, dimension: str) -> Estimate:
    return run.agreement.kappa[dimension]


def _judge(row: LeaderboardRow | RunAnalysis) -> Judge:
    return Judge(row.label, row.is_baseline)


def _label(row: RunAnalysis) -> str:
    return row.label


def leaderboard_columns(analysis: Analysis) -> tuple[Column[LeaderboardRow], ...]:
    """The leaderboard: one row per judge in rank order (and the human row below them)."""
    conf = round(100 * analysis.settings.confidence)
    with_cost = any(row.has_cost for row in analysis.leaderboard)
    cost_shown = EVERYWHERE if with_cost else SHEET
    columns: list[Column[LeaderboardRow]] = [
        Column("rank", "#", lambda r: r.rank, Kind.COUNT),
        Column("tier", "Tier", lambda r: r.tier, Kind.TIER),
        Column("judge", "Judge", _judge, Kind.JUDGE),
        Column("run_id", "Run", lambda r: r.run_id, shown_in=SHEET),
        Column("baseline", "Baseline", lambda r: r.is_baseline, Kind.FLAG, SHEET),
        Column("score", f"Score [{conf} % CI]", lambda r: r.score, Kind.ESTIMATE, bounds=("score_low", "score_high")),
        Column("macro", "Macro over organs", lambda r: r.macro, Kind.ESTIMATE),
        *[Column(f"{d}_acc", d, per_dimension(_row_accuracy, d), Kind.POINT, SHEET) for d in DIMENSIONS],
        *[Column(f"{d}_tier", d, per_dimension(_tier, d), Kind.COUNT, SHEET) for d in DIMENSIONS],
        Column("response_rate", "Response rate", lambda r: 1.0 - r.failure_rate, Kind.PERCENT),
        Column("answered_acc", ANSWERED_HEADER, lambda r: r.answered_accuracy, Kind.PERCENT),
        # the page shows the response rate in its place (100 − failed; the Failures section has the rest)
        Column("failure_rate", "Failed", lambda r: r.failure_rate, Kind.PERCENT, frozenset({MD}) | SHEET),
        Column("consistency", "Consistent", lambda r: r.consistency, Kind.PERCENT),
        Column("first_position_rate", "1st pos.", lambda r: r.first_position_rate, Kind.PERCENT),
        Column("longer_preference", "Longer", lambda r: r.longer_preference, Kind.PERCENT, frozenset({HTML}) | SHEET),
        Column("kappa_overall", "κ overall", lambda r: r.kappa_overall, Kind.COEFFICIENT, SHEET),
        Column("cost_usd", "Cost", lambda r: r.cost_usd, Kind.DOLLARS, cost_shown),
        Column("cost_per_1000_cases", "$ per 1,000 cases", lambda r: r.cost_per_1000_cases, Kind.DOLLARS, cost_shown),
    ]
    if analysis.selective is not None:
        risk = f"{100 * analysis.selective.alpha:g}"
        # the page has no room for it beside the human ceiling's three columns at 1,280 px: there
        # the section "Calibration and abstention" shows it
        shown = frozenset({MD}) | SHEET if analysis.human is not None else EVERYWHERE
        columns.append(
            Column("coverage_at_risk", f"Coverage at risk {risk} %", lambda r: r.coverage_at_risk, Kind.PERCENT, shown)
        )
    if analysis.human is not None:
        columns += [
            Column(
                "vs_annotators",
                f"Vs annotators [{conf} % CI]",
                lambda r: r.vs_annotators,
                Kind.ESTIMATE,
                bounds=("vs_annotators_low", "vs_annotators_high"),
            ),
            Column(
                "normalised",
                "÷ human [CI]",
                lambda r: r.normalised,
                Kind.RATIO,
                bounds=("normalised_low", "normalised_high"),
            ),
            Column("stands_in", "Stands in for an annotator?", lambda r: r.verdict),
        ]
    return tuple(columns)


HUMAN_RUN_NOTE = "not a judge: each annotator against the majority of the others"


def leaderboard_table(analysis: Analysis) -> Table[LeaderboardRow]:
    """The leaderboard; with a human ceiling, the human row as its footer."""
    footer: tuple[dict[str, Any], ...] = ()
    human = analysis.human
    if human is not None:
        ceiling = human.human.pooled
        footer = (
            {
                "tier": "not a judge",
                "judge": Judge(human.label, human=True),
                "run_id": HUMAN_RUN_NOTE,
                "vs_annotators": ceiling,
                "normalised": Estimate(1.0, math.nan, math.nan, 0),
            },
        )
    return Table("leaderboard", leaderboard_columns(analysis), tuple(analysis.leaderboard), footer)


def dimensions_table(analysis: Analysis) -> Table[RunAnalysis]:
    """Each dimension's agreement with its interval and the judge's tier on it."""
    return Table(
        "dimensions",
        (
            Column("judge", "Judge", _label),
            *[
                Column(
                    d,
                    d.capitalize(),
                    per_dimension(_tiered, d),
                    Kind.TIERED,
                )
                for d in DIMENSIONS
            ],
        ),
        tuple(analysis.ranked_runs()),
    )


def agreement_table(analysis: Analysis) -> Table[RunAnalysis]:
    """Agreement beyond chance: Cohen's kappa per dimension, Gwet's AC1, coherence."""
    return Table(
        "agreement",
        (
            Column("judge", "Judge", _label),
            *[Column(d, f"κ {d}", per_dimension(_kappa, d), Kind.COEFFICIENT, PAGES) for d in DIMENSIONS],
            Column(
                "kappa_overall",
                "κ overall [CI]",
                lambda r: r.agreement.kappa["overall"],
                Kind.COEFFICIENT_ESTIMATE,
                frozenset({HTML}),
            ),
            Column("ac1", "AC1 overall", lambda r: r.agreement.ac1["overall"], Kind.COEFFICIENT, frozenset({MD})),
            Column(
                "ac1_overall",
                "AC1 overall [CI]",
                lambda r: r.agreement.ac1["overall"],
                Kind.COEFFICIENT_ESTIMATE,
                frozenset({HTML}),
            ),
            Column("coherence", "Coherence", lambda r: r.coherence.get("accuracy"), Kind.PERCENT, frozenset({HTML})),
        ),
        tuple(analysis.ranked_runs()),
    )


def position_table(analysis: Analysis) -> Table[RunAnalysis]:
    """Position bias: same winner in both orders, picks of the first shown, agreement per order."""

    def in_order(order: str) -> Callable[[RunAnalysis], Estimate | None]:
        return lambda r: r.by_order[order].pooled if order in r.by_order else None

    return Table(
        "position",
        (
            Column("judge", "Judge", _label),
            Column(
                "consistency",
                "Consistent",
                lambda r: r.position.consistency.pooled,
                Kind.ESTIMATE,
                bounds=("consistency_low", "consistency_high"),
            ),
            Column(
                "first_position_rate",
                "Picks first shown",
                lambda r: r.position.first_position_rate.pooled,
                Kind.ESTIMATE,
                bounds=("first_position_low", "first_position_high"),
            ),
            Column("strict_accuracy", "Strict agreement", lambda r: r.strict_accuracy.pooled, Kind.ESTIMATE),
            Column("accuracy_original", "Original order", in_order("original"), Kind.ESTIMATE, blank="not run"),
            Column("accuracy_swapped", "Swapped order", in_order("swapped"), Kind.ESTIMATE, blank="not run"),
        ),
        tuple(analysis.ranked_runs()),
    )


def length_table(analysis: Analysis) -> Table[RunAnalysis]:
    """Length bias: picks of the longer answer, agreement when the labelled winner is longer or shorter."""
    dataset = analysis.dataset
    return Table(
        "length",
        (
            Column("judge", "Judge", _label),
            Column(
                "longer_preference",
                "Picks the longer",
                lambda r: r.length.longer_preference.pooled,
                Kind.ESTIMATE,
                bounds=("longer_preference_low", "longer_preference_high"),
            ),
            Column(
                "labels_longer_rate",
                "Labelled winner longer",
                lambda r: dataset.expert_longer_rate["overall"],
                Kind.PERCENT,
                SHEET,
            ),
            Column(
                "agreement_labels_longer",
                "Overall agreement, labelled winner longer (n)",
                lambda r: r.length.accuracy_expert_longer["overall"],
                Kind.COUNTED,
                count="n_labels_longer",
            ),
            Column(
                "agreement_labels_shorter",
                "Overall agreement, labelled winner shorter (n)",
                lambda r: r.length.accuracy_expert_shorter["overall"],
                Kind.COUNTED,
                count="n_labels_shorter",
            ),
            Column(
                "coherence_overall_accuracy",
                "Coherence",
                lambda r: r.coherence.get("accuracy"),
                Kind.PERCENT,
                SHEET,
            ),
            Column(
                "labels_coherence_overall_accuracy",
                "Labels' coherence",
                lambda r: dataset.expert_coherence.get("accuracy"),
                Kind.PERCENT,
                SHEET,
            ),
        ),
        tuple(analysis.ranked_runs()),
    )


def failures_table(analysis: Analysis) -> Table[RunAnalysis]:
    """The judges that failed some requests: how often, and why (Markdown lists 3 reasons, HTML 5)."""
    return Table(
        "failures",
        (
            Column("judge", "Judge", _label),
            Column("rate", "Failed", lambda r: r.failure_rate.pooled, Kind.PERCENT),
            Column(
                "reasons",
                "Most frequent reasons (count)",
                lambda r: list(r.failures.items())[:3],
                Kind.REASONS,
                frozenset({MD}),
            ),
            Column(
                "reasons_html",
                "Most frequent reasons (count)",
                lambda r: list(r.failures.items())[:5],
                Kind.REASONS,
                frozenset({HTML}),
            ),
        ),
        tuple(r for r in analysis.ranked_runs() if r.failures),
    )


def pairwise_table(analysis: Analysis) -> Table[PairwiseComparison]:
    """The pairs of judges that differ significantly on the score, largest differences first.

    Markdown lists them; the HTML draws every pair as a matrix and the spreadsheet, CSV and JSON
    hold every pair on every column (:data:`~medrewardbench.metrics.results.PAIRWISE_COLUMNS`).
    """
    pairs = analysis.pairwise.on_score()
    significant = sorted((c for c in pairs if c.significant), key=lambda c: -abs(number(c.diff) or 0.0))
    resamples = analysis.settings.n_resamples
    only_md = frozenset({MD})
    return Table(
        "pairwise",
        (
            Column("a", "Judge A", lambda c: c.a, shown_in=only_md),
            Column("b", "Judge B", lambda c: c.b, shown_in=only_md),
            Column("diff", "A − B (points)", lambda c: c.difference, Kind.SIGNED, only_md),
            Column(
                "p_bootstrap_holm",
                "Holm p (bootstrap)",
                lambda c: PValue(c.p_bootstrap_holm, resamples),
                Kind.P_VALUE,
                only_md,
            ),
            Column("p_case_holm", "Holm p (case test)", lambda c: PValue(c.p_case_holm), Kind.P_VALUE, only_md),
        ),
        tuple(significant),
    )


def _top_reasons(run: RunAnalysis, n: int) -> list[tuple[str, int]]:
    return list(run.failures.items())[:n]


def failed_table(analysis: Analysis) -> Table[RunAnalysis]:
    """The judges that never answered: not ranked, with their most frequent failure reasons."""
    failed = {row.label for row in analysis.leaderboard if never_answered(row)}
    return Table(
        "failed",
        (
            Column("judge", "Judge", _judge, Kind.JUDGE),
            Column("run_id", "Run", lambda r: r.run_id, shown_in=SHEET),
            Column("rate", "Failed", lambda r: r.failure_rate.pooled, Kind.PERCENT),
            Column("reason", "Most frequent reason", lambda r: _top_reasons(r, 1), Kind.REASONS),
            Column("reasons", "Other reasons (count)", lambda r: _top_reasons(r, 5)[1:], Kind.REASONS, PAGES),
        ),
        tuple(run for run in analysis.runs if run.label in failed),
    )


@dataclass(frozen=True)
class ReportTables:
    """Every table of a report, built once from one analysis."""

    leaderboard: Table[LeaderboardRow]
    dimensions: Table[RunAnalysis]
    agreement: Table[RunAnalysis]
    position: Table[RunAnalysis]
    length: Table[RunAnalysis]
    """the spreadsheet writes position and length side by side, on one sheet"""
    failures: Table[RunAnalysis]
    pairwise: Table[PairwiseComparison]
    """the significant differences on the score"""
    failed: Table[RunAnalysis]
    """the judges that never answered (listed apart, not ranked)"""
    human: HumanTables | None
    """the human ceiling's and the stand-in test's tables (:mod:`~medrewardbench.report.human`); None without
    per-annotator labels"""


def report_tables(analysis: Analysis) -> ReportTables:
    """Build every table of the report: the one walk of the analysis that every format shares.

    Args:
        analysis: the output of :func:`~medrewardbench.metrics.analysis.analyze` (or its file).

    Returns:
        The tables: the ranked ones hold the judges that answered at least once (:func:`answering`),
        ``failed`` the others.
    """
    failed = failed_table(analysis)
    analysis = answering(analysis)
    human = analysis.human
    board = analysis.leaderboard
    return ReportTables(
        leaderboard=leaderboard_table(analysis),
        dimensions=dimensions_table(analysis),
        agreement=agreement_table(analysis),
        position=position_table(analysis),
        length=length_table(analysis),
        failures=failures_table(analysis),
        pairwise=pairwise_table(analysis),
        failed=failed,
        human=None if human is None else human_tables(human, board, analysis.settings.confidence),
    )
