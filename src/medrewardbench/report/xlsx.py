"""The spreadsheet report, laid out like the reference Med-RewardBench output.

Reference layout: one sheet per judge (named after it, at most 31 characters), one row per organ
system with the columns ``modality``, ``model`` and ``{dimension}_acc`` for the six dimensions,
values as fractions. This writer keeps that layout, adds an ``all_acc`` column (the pooled score)
and ``n_cases``, and closes each judge sheet with an ``all`` row (every case) and a ``macro`` row
(mean over organ systems). More sheets: ``leaderboard`` (first), then after the judges ``pairwise``,
``position_length``, ``human_ceiling`` and ``about`` (the data set, where its labels come from,
what the numbers mean). When the data has per-annotator labels, the leaderboard gains
``vs_annotators`` columns and, below the judges, the ``human (leave-one-out)`` row (not a judge,
not ranked), and the ``human_ceiling`` sheet holds every number of the human ceiling in long format
(it is absent otherwise). With them, the leaderboard also gains ``normalised`` (vs_annotators over the
human row) and ``stands_in`` (the alternative annotator test on all dimensions), and the ``stand_in``
sheet holds every judge's verdict per dimension. The ``about`` sheet says what the cases can detect.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import PAIRWISE_COLUMNS, POOLED, Analysis, ColumnTable, Estimate, number
from medrewardbench.report.columns import XLSX, Table, cells, number_formats
from medrewardbench.report.format import METRIC, STAND_IN_METHOD, detectable_sentence, small_sample_banner
from medrewardbench.report.human import human_long_rows
from medrewardbench.report.tables import answering, report_tables, report_title
from medrewardbench.utils.shorten import middle_ellipsis

SUMMARY_SHEETS: tuple[str, ...] = (
    "leaderboard",
    "pairwise",
    "position_length",
    "human_ceiling",
    "stand_in",
    "never_answered",
    "about",
)
HUMAN_COLUMNS: tuple[str, ...] = (
    "label",
    "run_id",
    "metric",
    "dimension",
    "group_field",
    "group",
    "point",
    "low",
    "high",
    "n",
)
"""Columns of the ``human_ceiling`` sheet."""
STAND_IN_COLUMNS: tuple[str, ...] = (
    "judge",
    "run_id",
    "dimension",
    "verdict",
    "reason",
    "winning_rate",
    "advantage",
    "n_annotators",
    "n_cases",
    "detectable_margin",
    "epsilon",
)
"""Columns of the ``stand_in`` sheet: the alternative annotator test per judge and column."""
MAX_SHEET_NAME = 31
_FORBIDDEN = re.compile(r"[\[\]:*?/\\]")
FRACTION = "0.0000"
PERCENT = "0.0%"


def sheet_names(labels: Sequence[str], reserved: Sequence[str] = SUMMARY_SHEETS) -> list[str]:
    r"""Valid, unique Excel sheet names for judge labels.

    Excel forbids ``[]:*?/\``, a leading or trailing apostrophe and names over 31 characters,
    and compares names case-insensitively. Long labels are cut in the middle, keeping their ends.

    Args:
        labels: judge labels.
        reserved: names already taken by other sheets.

    Returns:
        One name per label, in order.
    """
    taken = {name.lower() for name in reserved}
    names = []
    for label in labels:
        base = _FORBIDDEN.sub("_", label).strip("'").strip() or "judge"
        # cut in the middle: labels of one model differ in their ends (a port, a seed)
        name = middle_ellipsis(base, MAX_SHEET_NAME)
        counter = 2
        while name.lower() in taken:
            suffix = f"~{counter}"
            name = middle_ellipsis(base, MAX_SHEET_NAME - len(suffix)) + suffix
            counter += 1
        taken.add(name.lower())
        names.append(name)
    return names


def _style_header(sheet: Any, bold: Any, widths: Sequence[int]) -> None:
    for cell in sheet[1]:
        cell.font = bold
    sheet.freeze_panes = "A2"
    for index, width in enumerate(widths, start=1):
        sheet.column_dimensions[_column_letter(index)].width = width


def _column_letter(index: int) -> str:
    letters = ""
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


def _format_columns(sheet: Any, first_row: int, columns: Sequence[int], number_format: str) -> None:
    for row in sheet.iter_rows(min_row=first_row):
        for index in columns:
            row[index - 1].number_format = number_format


def _points(table: ColumnTable[Estimate]) -> list[float | None]:
    """The six dimensions' points, then the pooled one, as written to cells."""
    return [number(value.point) for _, value in table.columns()]


def _write_table(sheet: Any, table: Table[Any], beside: Table[Any] | None = None, *, footer_gap: bool = False) -> int:
    """Write a built table's spreadsheet columns: header row, rows, then its footer rows.

    Args:
        sheet: the worksheet (empty).
        table: the table.
        beside: a table over the same rows whose columns follow (its first column, the judge, is not repeated).
        footer_gap: leave an empty row before the footer rows.

    Returns:
        The number of columns written.
    """
    parts = [(table, table.shown(XLSX))] + ([] if beside is None else [(beside, beside.shown(XLSX)[1:])])
    columns = [c for _, shown in parts for c in shown]
    sheet.append([key for c in columns for key in c.cell_keys()])
    values = [table.values(XLSX)] + ([] if beside is None else [[v[1:] for v in beside.values(XLSX)]])
    n_rows = len(table.rows)
    for index, row in enumerate(zip(*values, strict=True)):
        if footer_gap and index == n_rows:
            sheet.append([])
        flat = [v for part in row for v in part]
        sheet.append([cell for c, v in zip(columns, flat, strict=True) for cell in cells(c, v)])
    formats = [f for c in columns for f in number_formats(c)]
    for shown_format in dict.fromkeys(f for f in formats if f is not None):
        _format_columns(sheet, 2, [i for i, f in enumerate(formats, start=1) if f == shown_format], shown_format)
    return len(formats)


def write_xlsx(analysis: Analysis, path: str | Path, *, title: str | None = None) -> Path:
    """Write the spreadsheet report.

    Args:
        analysis: the output of :func:`medrewardbench.metrics.analysis.analyze`.
        path: the ``.xlsx`` file to write.
        title: the workbook's title (its document property and the ``about`` sheet's first row); None:
            the data set's name (:func:`~medrewardbench.report.tables.report_title`).

    Returns:
        The path written.
    """
    import openpyxl  # a core dependency, imported here to keep the command line quick to start
    from openpyxl.styles import Font

    bold = Font(bold=True)
    workbook = openpyxl.Workbook()
    tables = report_tables(analysis)
    analysis = answering(analysis)
    ordered = analysis.ranked_runs()
    dataset = analysis.dataset
    human = analysis.human
    shown_title = report_title(dataset.name) if title is None else title
    workbook.properties.title = shown_title
    sheet = workbook.active
    sheet.title = "leaderboard"
    width = _write_table(sheet, tables.leaderboard, footer_gap=True)
    _style_header(sheet, bold, [6, 5, 34, 30, 9] + [11] * (width - 5))

    names = sheet_names([r.label for r in ordered])
    for name, run in zip(names, ordered, strict=True):
        judge_sheet = workbook.create_sheet(name)
        judge_sheet.append(["modality", "model", *[f"{d}_acc" for d in DIMENSIONS], f"{POOLED}_acc", "n_cases"])
        organ = run.groups.get("organ_system")
        sizes = dataset.groups.get("organ_system", {})
        for group, estimates in ({} if organ is None else organ.groups).items():
            judge_sheet.append([group, run.label, *_points(estimates), sizes.get(group)])
        judge_sheet.append([POOLED, run.label, *_points(run.accuracy), dataset.n_cases])
        if organ is not None:
            judge_sheet.append(["macro", run.label, *_points(organ.macro), None])
        for cell in judge_sheet[judge_sheet.max_row - (1 if organ is not None else 0)]:
            cell.font = bold
        _style_header(judge_sheet, bold, [24, 30] + [18] * 7 + [9])
        _format_columns(judge_sheet, 2, range(3, 10), FRACTION)

    if tables.failed.rows:
        failed = workbook.create_sheet("never_answered")
        _write_table(failed, tables.failed)
        _style_header(failed, bold, [34, 30, 9, 80])

    pairwise = workbook.create_sheet("pairwise")
    pair_columns = list(PAIRWISE_COLUMNS)
    pairwise.append(pair_columns)
    for comparison in analysis.pairwise.comparisons:
        record = comparison.to_json()
        pairwise.append([record[c] for c in pair_columns])
    _style_header(pairwise, bold, [30, 30, 18] + [12] * 13)
    _format_columns(pairwise, 2, range(4, 9), FRACTION)

    position = workbook.create_sheet("position_length")
    width = _write_table(position, tables.position, tables.length)
    _style_header(position, bold, [34] + [14] * (width - 1))

    if human is not None:
        human_sheet = workbook.create_sheet("human_ceiling")
        human_sheet.append(list(HUMAN_COLUMNS))
        for record in human_long_rows(human):
            human_sheet.append([record[c] for c in HUMAN_COLUMNS])
        _style_header(human_sheet, bold, [34, 30, 30, 18, 14, 22, 10, 10, 10, 8])
    if tables.human is not None:
        stand_in = workbook.create_sheet("stand_in")
        _write_table(stand_in, tables.human.stand_in_tests)
        _style_header(stand_in, bold, [34, 30, 18, 28, 80, 12, 12, 12, 10, 16, 9])
    about = workbook.create_sheet("about")
    sensitivity = analysis.sensitivity
    detectable = [
        ("detectable", detectable_sentence(sensitivity, human=human is not None) or "not computed"),
        ("too_small_to_rank", small_sample_banner(sensitivity) or "no"),
    ]
    if human is not None:
        method = STAND_IN_METHOD.format(epsilon=f"{human.epsilon:g}", q=f"{analysis.settings.alpha:g}")
        detectable.append(("stand_in", method))
    for key, value in (
        ("title", shown_title),
        ("dataset", dataset.name or ""),
        ("data_fingerprint", dataset.data_hash),
        ("cases", dataset.n_cases),
        ("labels", dataset.labels.banner()),
        ("labels_kind", dataset.labels.kind),
        ("metric", f"{METRIC}: the share of judgments naming the labelled winner; failures count as wrong"),
        ("columns", "{dimension}_acc: the metric on that dimension (the reference layout's names); all_acc: pooled"),
        (
            "intervals",
            f"{round(100 * analysis.settings.confidence)} % case bootstrap, "
            f"{analysis.settings.n_resamples} resamples, seed {analysis.settings.seed}",
        ),
        *detectable,
    ):
        about.append([key, value])
    about.column_dimensions["A"].width = 18
    about.column_dimensions["B"].width = 120
    for cell in about["A"]:
        cell.font = bold

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    workbook.save(out)
    return out
