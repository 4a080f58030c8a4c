"""The human ceiling's tables: for the pages (:func:`human_tables`) and in long format (:func:`human_long_rows`).

:func:`human_tables` builds the tables the Markdown and HTML reports show: judges and the human
row against the leave-one-out majorities, the agreement between annotators per dimension and per
organ system, and each annotator against the others.

:func:`human_long_rows` gives one row per estimate, for ``analysis.csv`` and the spreadsheet.

Metrics (``metric``), with ``label`` naming whose number it is:

* ``vs_annotators``: agreement with the annotators' leave-one-out majorities; one row set per judge
  and one for the human row (``label`` = ``human (leave-one-out)``).
* ``gap_to_human``: a judge's ``vs_annotators`` minus the human row's, paired.
* ``normalised_to_human``: a judge's ``vs_annotators`` divided by the human row's (1 = as often as an
  annotator), interval from the same resamples.
* ``stand_in_winning_rate`` and ``stand_in_advantage``: the alternative annotator test's omega (``n`` =
  annotators tested) and rho (``n`` = cases); the verdict itself is in ``analysis.json`` and the
  spreadsheet's ``stand_in`` sheet.
* ``annotator_vs_others``: one annotator (``label``) against the majority of the others.
* ``annotator_pairwise_agreement``, ``annotator_fleiss_kappa``, ``annotator_krippendorff_alpha``:
  agreement between the annotators (``label`` = ``annotators``), over every case and per group of
  the organ-system field (``group_field``, ``group``).

Every metric has a row per dimension and one for the pooled column (``dimension`` = ``all``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import (
    POOLED,
    AltTest,
    AnnotatorAgreement,
    ColumnTable,
    Estimate,
    HumanCeiling,
    JudgeVerdict,
    LeaderboardRow,
    PanelAgreement,
    number,
)
from medrewardbench.report.columns import Column, Group, Judge, Kind, Table, per_dimension
from medrewardbench.report.format import few_cases

PANEL_LABEL = "annotators"
"""The ``label`` of the rows that describe agreement between annotators."""


def _rows(metric: str, table: ColumnTable[Estimate], **where: Any) -> list[dict[str, Any]]:
    return [{"metric": metric, "dimension": column, **where, **value.to_json()} for column, value in table.columns()]


def _panel(panel: PanelAgreement, **where: Any) -> list[dict[str, Any]]:
    return [
        *_rows("annotator_pairwise_agreement", panel.percent_agreement, **where),
        *_rows("annotator_fleiss_kappa", panel.fleiss_kappa, **where),
        *_rows("annotator_krippendorff_alpha", panel.krippendorff_alpha, **where),
    ]


def human_long_rows(human: HumanCeiling) -> list[dict[str, Any]]:
    """Every number of the human ceiling as rows.

    Args:
        human: the analysis' human ceiling.

    Returns:
        Rows with ``run_id`` (judges only), ``label``, ``metric``, ``dimension``, ``group_field``,
        ``group`` and the estimate's ``point``, ``low``, ``high``, ``n`` (None where not applicable).
    """
    empty = {"run_id": None, "group_field": None, "group": None}
    rows: list[dict[str, Any]] = _rows("vs_annotators", human.human, **empty, label=human.label)
    for judge in human.judges:
        where = {**empty, "run_id": judge.run_id, "label": judge.label}
        rows += _rows("vs_annotators", judge.agreement, **where)
        rows += _rows("gap_to_human", judge.gap, **where)
        if judge.normalised is not None:
            rows += _rows("normalised_to_human", judge.normalised, **where)
        found = human.verdict(judge.label)
        if found is not None:
            for column, test in found.tests.columns():
                for metric, value, n in (
                    ("stand_in_winning_rate", test.winning_rate, test.n_annotators),
                    ("stand_in_advantage", test.advantage, test.n_cases),
                ):
                    point = {"point": number(value), "low": None, "high": None, "n": n}
                    rows.append({"metric": metric, "dimension": column, **where, **point})
    for annotator in human.annotators_vs_others:
        rows += _rows("annotator_vs_others", annotator.vs_others, **empty, label=annotator.annotator)
    rows += _panel(human.agreement, **empty, label=PANEL_LABEL)
    for group, panel in human.by_group.items():
        rows += _panel(panel, run_id=None, label=PANEL_LABEL, group_field=human.group_field, group=group)
    return rows


# --------------------------------------------------------------------------------------------
# The tables the pages show
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VsAnnotators:
    """A row against the leave-one-out majorities: the human row or a judge."""

    judge: Judge
    agreement: ColumnTable[Estimate]
    gap: Estimate | None
    """judge minus human, paired (None for the human row)"""
    normalised: Estimate | None


@dataclass(frozen=True)
class PanelRow:
    """The agreement between annotators on one column, or over one group's cases."""

    name: str
    panel: PanelAgreement


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
            Column("judge", "Judge", lambda r: Judge(r.row.label, r.row.is_baseline), Kind.JUDGE),
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
class HumanTables:
    """The human ceiling's and the stand-in test's tables, built once for every format."""

    vs_annotators: Table[VsAnnotators]
    panel: Table[str]
    """rows: the columns (six dimensions, then pooled); values from the panel of every case"""
    groups: Table[PanelRow]
    annotators: Table[AnnotatorAgreement]
    stand_in: Table[StandIn]
    stand_in_dimensions: Table[JudgeVerdict]
    stand_in_tests: Table[StandInTest]
    """every stand-in test in long format (the spreadsheet's ``stand_in`` sheet)"""


def _dimension_points(get: Any) -> list[Column[Any]]:
    def point(row: Any, dimension: str) -> Estimate:
        value: Estimate = get(row)[dimension]
        return value

    return [Column(d, d.capitalize(), per_dimension(point, d), Kind.POINT) for d in DIMENSIONS]


def _test(found: JudgeVerdict, dimension: str) -> AltTest:
    return found.tests[dimension]


def _group(row: PanelRow) -> Group:
    return Group(row.name, few_cases(row.panel.n_cases))


def _group_kappa(row: PanelRow, dimension: str) -> Estimate:
    return row.panel.fleiss_kappa[dimension]


def human_tables(human: HumanCeiling, board: Sequence[LeaderboardRow], confidence: float) -> HumanTables:
    """Build the human ceiling's tables.

    Args:
        human: the analysis' human ceiling.
        board: the leaderboard (judges in rank order).
        confidence: the intervals' coverage (for the headers).

    Returns:
        The tables.
    """
    conf = round(100 * confidence)
    rows = [VsAnnotators(Judge(human.label, human=True), human.human, None, Estimate(1.0, math.nan, math.nan, 0))]
    for row in board:
        judge = human.judge(row.label)
        if judge is not None:
            normalised = None if judge.normalised is None else judge.normalised.pooled
            rows.append(VsAnnotators(Judge(row.label, row.is_baseline), judge.agreement, judge.gap.pooled, normalised))
    vs_annotators: Table[VsAnnotators] = Table(
        "vs_annotators",
        (
            Column("judge", "Against the leave-one-out majorities", lambda r: r.judge, Kind.JUDGE),
            Column("all", f"All dimensions [{conf} % CI]", lambda r: r.agreement.pooled, Kind.ESTIMATE),
            Column("gap", "Gap to human (points)", lambda r: r.gap, Kind.SIGNED, blank=""),
            Column("normalised", "÷ human [CI]", lambda r: r.normalised, Kind.RATIO),
            *_dimension_points(lambda r: r.agreement),
        ),
        tuple(rows),
    )
    panel = human.agreement
    panel_table: Table[str] = Table(
        "panel",
        (
            Column("name", "Dimension", lambda c: "all (pooled)" if c == POOLED else c),
            Column("n", "n", lambda c: panel.percent_agreement[c].n, Kind.COUNT),
            Column("percent", f"Pairwise agreement [{conf} % CI]", lambda c: panel.percent_agreement[c], Kind.ESTIMATE),
            Column("kappa", "Fleiss' κ", lambda c: panel.fleiss_kappa[c], Kind.COEFFICIENT_ESTIMATE),
            Column("alpha", "Krippendorff's α", lambda c: panel.krippendorff_alpha[c], Kind.COEFFICIENT_ESTIMATE),
        ),
        tuple(column for column, _ in panel.percent_agreement.columns()),
    )
    groups: Table[PanelRow] = Table(
        "groups",
        (
            Column("name", human.group_field.replace("_", " "), _group, Kind.GROUP),
            Column("cases", "cases", lambda r: r.panel.n_cases, Kind.COUNT),
            Column("percent", "Pairwise agreement", lambda r: r.panel.percent_agreement.pooled, Kind.ESTIMATE),
            Column("kappa", "Fleiss' κ", lambda r: r.panel.fleiss_kappa.pooled, Kind.COEFFICIENT_ESTIMATE),
            Column("alpha", "Krippendorff's α", lambda r: r.panel.krippendorff_alpha.pooled, Kind.COEFFICIENT_ESTIMATE),
            *[Column(d, f"κ {d}", per_dimension(_group_kappa, d), Kind.COEFFICIENT) for d in DIMENSIONS],
        ),
        tuple(PanelRow(group, agreement) for group, agreement in human.by_group.items()),
    )
    annotators: Table[AnnotatorAgreement] = Table(
        "annotators",
        (
            Column("name", "Annotator", lambda a: a.annotator),
            Column("cases", "cases", lambda a: a.n_cases, Kind.COUNT),
            Column("all", f"All dimensions [{conf} % CI]", lambda a: a.vs_others.pooled, Kind.ESTIMATE),
            *_dimension_points(lambda a: a.vs_others),
        ),
        tuple(human.annotators_vs_others),
    )
    return HumanTables(
        vs_annotators,
        panel_table,
        groups,
        annotators,
        stand_in_table(human, board),
        stand_in_dimensions_table(human, board),
        stand_in_tests_table(human),
    )
