"""The report's tables, built once from declarative column lists; each format only writes them.

A :class:`Column` says what one column of a table shows: its machine name (``key``: the
spreadsheet's header and the HTML template's field), the header Markdown and HTML print, how to
get the value from a row (``value``), what kind of value it is (``kind``: decides how each format
writes it: text with an interval in Markdown and HTML, the number and its bounds in the
spreadsheet) and in which formats it appears (``shown_in``). :func:`report_tables` walks the
analysis once and returns every :class:`Table`; :mod:`~medrewardbench.report.markdown`,
:mod:`~medrewardbench.report.html` and :mod:`~medrewardbench.report.xlsx` only write them.

Adding a metric to a table is one :class:`Column` in that table's list below (and, for the HTML,
one cell in the template that names the column's ``key``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import (
    AltTest,
    Analysis,
    Estimate,
    HumanCeiling,
    JudgeVerdict,
    LeaderboardRow,
    RunAnalysis,
    number,
)
from medrewardbench.report.format import (
    MISSING,
    coefficient,
    coefficient_estimate,
    dollars,
    estimate,
    percent,
    ratio,
    verdict,
)

R = TypeVar("R")

MD = "md"
HTML = "html"
XLSX = "xlsx"
EVERYWHERE: frozenset[str] = frozenset({MD, HTML, XLSX})
PAGES: frozenset[str] = frozenset({MD, HTML})
"""Markdown and HTML: the formats that print text."""
SHEET: frozenset[str] = frozenset({XLSX})
PERCENT_FORMAT = "0.0%"
RATIO_FORMAT = "0.00"


class Kind(Enum):
    """What a column holds; each format writes each kind its own way."""

    TEXT = "text"
    """text (Markdown escapes it; left-aligned)"""
    JUDGE = "judge"
    """a :class:`Judge` (Markdown marks baselines and the human row)"""
    COUNT = "count"
    """an integer"""
    TIER = "tier"
    """a tier number, or None (printed ``–``)"""
    FLAG = "flag"
    """a bool (spreadsheet only)"""
    PERCENT = "percent"
    """a fraction, printed in percent"""
    ESTIMATE = "estimate"
    """an :class:`Estimate` or None, printed in percent with its interval"""
    POINT = "point"
    """an :class:`Estimate` or None, printed in percent without its interval"""
    COUNTED = "counted"
    """an :class:`Estimate`, printed ``"61.8 (34)"``: point in percent, then n"""
    TIERED = "tiered"
    """a :class:`Tiered` estimate: an interval and the tier on that dimension"""
    COEFFICIENT = "coefficient"
    """a coefficient (two decimals), a float or an :class:`Estimate`'s point"""
    COEFFICIENT_ESTIMATE = "coefficient_estimate"
    """an :class:`Estimate` of a coefficient, printed with its interval"""
    RATIO = "ratio"
    """an :class:`Estimate` of a ratio (two decimals) or None"""
    DOLLARS = "dollars"
    """dollars, or NaN when unknown"""
    VERDICT = "verdict"
    """an :class:`AltTest`: the verdict with its winning rate"""
    REASONS = "reasons"
    """(reason, count) pairs, most frequent first"""


LEFT: frozenset[Kind] = frozenset({Kind.TEXT, Kind.JUDGE, Kind.VERDICT, Kind.REASONS})
"""Kinds aligned left in Markdown; every other kind is a number, aligned right."""


@dataclass(frozen=True)
class Judge:
    """A judge's name in a table: baselines and the human row are marked by each format."""

    label: str
    is_baseline: bool = False
    human: bool = False


@dataclass(frozen=True)
class Tiered:
    """An estimate and the judge's tier on that dimension (None without tiers)."""

    estimate: Estimate
    tier: int | None


@dataclass(frozen=True)
class Column(Generic[R]):
    """One column of a table.

    ``bounds`` names the spreadsheet columns that hold an estimate's interval (``key`` holds its
    point); ``count`` names the one that holds a :attr:`Kind.COUNTED` estimate's n.
    """

    key: str
    header: str
    value: Callable[[R], Any]
    kind: Kind = Kind.TEXT
    shown_in: frozenset[str] = EVERYWHERE
    bounds: tuple[str, str] | None = None
    count: str | None = None
    blank: str = MISSING
    """what Markdown and HTML print for a missing value"""
    strong: bool = False
    """Markdown prints the value in bold"""

    def text(self, value: Any) -> str:
        """A value of this column as Markdown and HTML print it (before Markdown's escaping)."""
        return self.blank if value is None else text(self.kind, value)

    def cell_keys(self) -> list[str]:
        """The spreadsheet columns this column fills."""
        return [self.key, *(self.bounds or ()), *([self.count] if self.count else [])]


@dataclass(frozen=True)
class Table(Generic[R]):
    """Rows and the columns that show them; ``footer`` holds rows given as key -> value (the human row)."""

    name: str
    columns: tuple[Column[R], ...]
    rows: tuple[R, ...]
    footer: tuple[dict[str, Any], ...] = ()

    def shown(self, where: str) -> list[Column[R]]:
        """The columns one format shows, in order."""
        return [c for c in self.columns if where in c.shown_in]

    def values(self, where: str) -> list[list[Any]]:
        """The values of every row, then of the footer rows (None where a footer row has none)."""
        columns = self.shown(where)
        rows = [[c.value(row) for c in columns] for row in self.rows]
        return rows + [[extra.get(c.key) for c in columns] for extra in self.footer]

    def records(self, where: str = HTML) -> list[dict[str, str]]:
        """Every row as key -> text (the HTML template's fields)."""
        columns = self.shown(where)
        return [{c.key: c.text(c.value(row)) for c in columns} for row in self.rows]


# --------------------------------------------------------------------------------------------
# How each kind reads
# --------------------------------------------------------------------------------------------


def text(kind: Kind, value: Any) -> str:
    """A value as Markdown and HTML print it (before Markdown's escaping).

    Args:
        kind: the column's kind.
        value: the value its getter returned (None prints ``–`` for numbers).

    Returns:
        The text.
    """
    if kind in (Kind.ESTIMATE, Kind.TIERED):
        return estimate(value.estimate if isinstance(value, Tiered) else value)
    if kind is Kind.PERCENT:
        return percent(value)
    if kind is Kind.POINT:
        return MISSING if value is None else percent(value.point)
    if kind is Kind.COUNTED:
        return f"{percent(value.point)} ({value.n})"
    if kind is Kind.COEFFICIENT:
        return coefficient(value.point if isinstance(value, Estimate) else value)
    if kind is Kind.COEFFICIENT_ESTIMATE:
        return MISSING if value is None else coefficient_estimate(value)
    if kind is Kind.RATIO:
        return ratio(value)
    if kind is Kind.DOLLARS:
        return dollars(value)
    if kind is Kind.TIER:
        return str(value) if value else MISSING
    if kind is Kind.VERDICT:
        return verdict(value)
    if kind is Kind.JUDGE:
        return str(value.label)
    if kind is Kind.REASONS:
        return "; ".join(f"{reason} ({n})" for reason, n in value)
    return MISSING if value is None else str(value)


def cells(column: Column[Any], value: Any) -> list[Any]:
    """A value as the spreadsheet writes it: one cell, or the point and its bounds or its n.

    Args:
        column: the column.
        value: the value its getter returned.

    Returns:
        The cells (numbers rounded as the files write them; None for missing).
    """
    kind = column.kind
    if kind in (Kind.ESTIMATE, Kind.POINT, Kind.RATIO, Kind.COUNTED, Kind.COEFFICIENT_ESTIMATE):
        if value is None:
            return [None] * len(column.cell_keys())
        out = [number(value.point)]
        if column.bounds:
            out += [number(value.low), number(value.high)]
        if column.count:
            out.append(value.n)
        return out
    if kind is Kind.JUDGE:
        return [value.label]
    if kind is Kind.TIER:
        return [value if isinstance(value, int) else None]
    if kind in (Kind.PERCENT, Kind.COEFFICIENT, Kind.DOLLARS):
        return [None if value is None else number(value)]
    return [value]


def number_formats(column: Column[Any]) -> list[str | None]:
    """The spreadsheet's number format of each cell a column fills (None: the default; an n has none)."""
    shown = None
    if column.kind in (Kind.ESTIMATE, Kind.POINT, Kind.PERCENT, Kind.COUNTED):
        shown = PERCENT_FORMAT
    elif column.kind is Kind.RATIO:
        shown = RATIO_FORMAT
    return [shown, *([shown] * len(column.bounds or ())), *([None] if column.count else [])]


# --------------------------------------------------------------------------------------------
# The tables
# --------------------------------------------------------------------------------------------


def per_dimension(get: Callable[[R, str], Any], dimension: str) -> Callable[[R], Any]:
    """A column's getter for one dimension: ``get(row, dimension)``."""
    return lambda row: get(row, dimension)


def _tier(row: LeaderboardRow, dimension: str) -> int | None:
    return None if row.tiers is None else row.tiers[dimension]


def _row_accuracy(row: LeaderboardRow, dimension: str) -> Estimate:
    return row.accuracy[dimension]


def _tiered(run: RunAnalysis, dimension: str) -> Tiered:
    return Tiered(run.accuracy[dimension], None if run.tiers is None else run.tiers[dimension])


def _kappa(run: RunAnalysis, dimension: str) -> Estimate:
    return run.agreement.kappa[dimension]


def _test(found: JudgeVerdict, dimension: str) -> AltTest:
    return found.tests[dimension]


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
        Column("answered_acc", "Answered", lambda r: r.answered_accuracy, Kind.PERCENT),
        Column("failure_rate", "Failed", lambda r: r.failure_rate, Kind.PERCENT),
        Column("consistency", "Consistent", lambda r: r.consistency, Kind.PERCENT),
        Column("first_position_rate", "1st pos.", lambda r: r.first_position_rate, Kind.PERCENT),
        Column("longer_preference", "Longer", lambda r: r.longer_preference, Kind.PERCENT, frozenset({HTML}) | SHEET),
        Column("kappa_overall", "κ overall", lambda r: r.kappa_overall, Kind.COEFFICIENT, SHEET),
        Column("cost_usd", "Cost", lambda r: r.cost_usd, Kind.DOLLARS, cost_shown),
        Column("cost_per_1000_cases", "$ per 1,000 cases", lambda r: r.cost_per_1000_cases, Kind.DOLLARS, cost_shown),
    ]
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


@dataclass(frozen=True)
class StandIn:
    """A judge's row of the stand-in table: its leaderboard row and its alternative annotator tests."""

    row: LeaderboardRow
    found: JudgeVerdict


def stand_in_table(human: HumanCeiling, board: Sequence[LeaderboardRow]) -> Table[StandIn]:
    """Can a judge stand in for an annotator? The verdict on all dimensions, then per dimension."""
    rows = []
    for row in board:
        found = human.verdict(row.label)
        if found is not None:
            rows.append(StandIn(row, found))

    def pooled(r: StandIn) -> AltTest:
        return r.found.tests.pooled

    return Table(
        "stand_in",
        (
            Column("judge", "Judge", lambda r: _judge(r.row), Kind.JUDGE),
            Column("verdict", "All dimensions", lambda r: pooled(r).verdict, strong=True),
            Column("omega", "ω (winning rate)", lambda r: pooled(r).winning_rate, Kind.COEFFICIENT),
            Column("rho", "ρ (advantage)", lambda r: pooled(r).advantage, Kind.COEFFICIENT),
            Column("reason", "Why", lambda r: pooled(r).reason),
        ),
        tuple(rows),
    )


def stand_in_dimensions_table(human: HumanCeiling, board: Sequence[LeaderboardRow]) -> Table[JudgeVerdict]:
    """Each judge's stand-in verdict per dimension, with its winning rate."""
    found = (human.verdict(row.label) for row in board)
    return Table(
        "stand_in_dimensions",
        (
            Column("judge", "Judge", lambda v: v.label),
            *[Column(d, d.capitalize(), per_dimension(_test, d), Kind.VERDICT) for d in DIMENSIONS],
        ),
        tuple(v for v in found if v is not None),
    )


@dataclass(frozen=True)
class StandInTest:
    """One alternative annotator test: a judge's verdict on one column."""

    found: JudgeVerdict
    column: str
    test: AltTest


def stand_in_tests_table(human: HumanCeiling) -> Table[StandInTest]:
    """Every stand-in test, one row per judge and column, judges in the analysis' order."""
    rows = [StandInTest(found, column, test) for found in human.verdicts for column, test in found.tests.columns()]
    return Table(
        "stand_in_tests",
        (
            Column("judge", "Judge", lambda r: r.found.label),
            Column("run_id", "Run", lambda r: r.found.run_id),
            Column("dimension", "Dimension", lambda r: r.column),
            Column("verdict", "Verdict", lambda r: r.test.verdict),
            Column("reason", "Why", lambda r: r.test.reason),
            Column("winning_rate", "ω (winning rate)", lambda r: r.test.winning_rate, Kind.COEFFICIENT),
            Column("advantage", "ρ (advantage)", lambda r: r.test.advantage, Kind.COEFFICIENT),
            Column("n_annotators", "Annotators", lambda r: r.test.n_annotators, Kind.COUNT),
            Column("n_cases", "Cases", lambda r: r.test.n_cases, Kind.COUNT),
            Column("detectable_margin", "Detectable margin", lambda r: r.test.detectable_margin, Kind.COEFFICIENT),
            Column("epsilon", "ε", lambda r: human.epsilon),
        ),
        tuple(rows),
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
    stand_in: Table[StandIn] | None
    """None without per-annotator labels"""
    stand_in_dimensions: Table[JudgeVerdict] | None
    stand_in_tests: Table[StandInTest] | None
    """every test in long format (the spreadsheet's ``stand_in`` sheet)"""


def report_tables(analysis: Analysis) -> ReportTables:
    """Build every table of the report: the one walk of the analysis that every format shares.

    Args:
        analysis: the output of :func:`~medrewardbench.metrics.analysis.analyze` (or its file).

    Returns:
        The tables.
    """
    human = analysis.human
    board = analysis.leaderboard
    return ReportTables(
        leaderboard=leaderboard_table(analysis),
        dimensions=dimensions_table(analysis),
        agreement=agreement_table(analysis),
        position=position_table(analysis),
        length=length_table(analysis),
        failures=failures_table(analysis),
        stand_in=None if human is None else stand_in_table(human, board),
        stand_in_dimensions=None if human is None else stand_in_dimensions_table(human, board),
        stand_in_tests=None if human is None else stand_in_tests_table(human),
    )
