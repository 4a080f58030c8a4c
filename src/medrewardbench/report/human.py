"""The human ceiling in long format: one row per estimate, for ``analysis.csv`` and the spreadsheet.

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

from typing import Any

from medrewardbench.metrics.results import ColumnTable, Estimate, HumanCeiling, PanelAgreement, number

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
