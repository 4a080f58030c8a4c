"""Reports from stored runs: analyse once, write Markdown, CSV, JSON, XLSX and HTML.

:func:`render_reports` is what the ``report`` command calls: one report per data set found (a
results folder can hold runs on several data sets; each gets its own folder), or the one named by
``ReportSettings.data``. Runs are loaded by :mod:`medrewardbench.metrics.loading` (a ``cv``
output folder as its pooled held-out runs); this module only renders. The JSON holds the whole
analysis; the CSV is the same numbers in long format (one estimate per row) plus a pairwise CSV.
"""

from __future__ import annotations

import csv
import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.metrics.analysis import (
    DataSet,
    LoadedRun,
    resolve_group_fields,
)
from medrewardbench.metrics.loading import analyze_dataset, different_data_error, find_datasets
from medrewardbench.metrics.results import (
    DEFAULT_EPSILON,
    PAIRWISE_COLUMNS,
    STRATA,
    Analysis,
    ColumnTable,
    DimensionTable,
    Estimate,
    Sensitivity,
    number,
)
from medrewardbench.metrics.selective_section import SelectiveSettings
from medrewardbench.report.files import json_text
from medrewardbench.report.gallery import build_case_gallery
from medrewardbench.report.human import human_long_rows
from medrewardbench.report.probes import find_probe_files, load_probe_section

log = logging.getLogger(__name__)

FORMATS: tuple[str, ...] = ("md", "csv", "json", "xlsx", "html")
FILE_NAMES: dict[str, str] = {
    "md": "report.md",
    "csv": "analysis.csv",
    "pairwise_csv": "pairwise.csv",
    "json": "analysis.json",
    "xlsx": "report.xlsx",
    "html": "report.html",
}
CSV_COLUMNS: tuple[str, ...] = (
    "run_id",
    "judge",
    "label",
    "metric",
    "dimension",
    "group_field",
    "group",
    "order",
    "point",
    "low",
    "high",
    "n",
)


# --------------------------------------------------------------------------------------------
# JSON and CSV
# --------------------------------------------------------------------------------------------


def write_analysis_json(analysis: Analysis, path: str | Path) -> Path:
    """Write the analysis as indented JSON (keys sorted, UTF-8). Returns the path."""
    out = Path(path)
    out.write_text(json_text(analysis.to_json(), indent=2, sort_keys=True, ensure_ascii=False), encoding="utf-8")
    return out


def read_analysis_json(path: str | Path) -> Analysis:
    """Read an ``analysis.json`` written by :func:`write_analysis_json`.

    Raises:
        ResultsFormatError: the file holds another document or schema.
    """
    return Analysis.from_json(json.loads(Path(path).read_text("utf-8")))


_Value = Estimate | float | int


def analysis_csv_rows(analysis: Analysis) -> list[dict[str, Any]]:
    """The analysis in long format: one row per (run, metric, dimension, group, order) estimate.

    Args:
        analysis: the output of :func:`~medrewardbench.metrics.analysis.analyze`.

    Returns:
        Rows with the keys of :data:`CSV_COLUMNS` (missing values are None); the pooled column's
        dimension is ``all``. With a human ceiling, its rows follow those of the runs
        (:func:`~medrewardbench.report.human.human_long_rows`: ``judge`` is empty and ``label``
        names the judge, the human row, the annotator or ``annotators``).
    """
    rows: list[dict[str, Any]] = []
    for run in analysis.runs:
        base = {"run_id": run.run_id, "judge": run.judge, "label": run.label}

        def add(
            metric: str,
            table: ColumnTable[Any] | DimensionTable[Any] | Sequence[tuple[str, _Value]],
            base: dict[str, Any] = base,
            **where: str,
        ) -> None:
            if isinstance(table, ColumnTable):
                items: Sequence[tuple[str, _Value]] = table.columns()
            elif isinstance(table, DimensionTable):
                items = table.items()
            else:
                items = table
            for dimension, value in items:
                if isinstance(value, Estimate):
                    values = value.to_json()
                elif isinstance(value, float):
                    values = {"point": number(value), "low": None, "high": None, "n": None}
                else:
                    values = {"point": value, "low": None, "high": None, "n": None}
                rows.append(
                    {
                        **base,
                        "metric": metric,
                        "dimension": dimension,
                        "group_field": where.get("field"),
                        "group": where.get("group"),
                        "order": where.get("order"),
                        **values,
                    }
                )

        add("accuracy", run.accuracy)
        add("answered_accuracy", run.answered_accuracy)
        add("strict_accuracy", run.strict_accuracy)
        add("position_consistency", run.position.consistency)
        add("first_position_rate", run.position.first_position_rate)
        add("longer_preference", run.length.longer_preference)
        add("kappa", run.agreement.kappa)
        add("ac1", run.agreement.ac1)
        add("accuracy_expert_longer", run.length.accuracy_expert_longer)
        add("accuracy_expert_shorter", run.length.accuracy_expert_shorter)
        add("failure_rate", run.failure_rate)
        if run.tiers is not None:
            add("tier", run.tiers)
        for order, table in run.by_order.items():
            add("accuracy", table, order=order)
        add("coherence_with_overall", list(run.coherence.items()))
        for field_name, grouped in run.groups.items():
            for group, table in grouped.groups.items():
                add("accuracy", table, field=field_name, group=group)
            add("macro_accuracy", grouped.macro, field=field_name)
    if analysis.human is not None:
        rows += [{"judge": None, "order": None, **row} for row in human_long_rows(analysis.human)]
    if analysis.sensitivity is not None:
        rows += sensitivity_rows(analysis.sensitivity)
    return rows


def sensitivity_rows(sensitivity: Sensitivity) -> list[dict[str, Any]]:
    """The smallest detectable differences as CSV rows (``point`` = the difference, ``n`` = cases).

    Metrics ``detectable_vs_chance``, ``detectable_between_judges`` and ``detectable_vs_human`` per
    column, and ``detectable_vs_chance`` per organ system (all dimensions).
    """
    empty = dict.fromkeys(("run_id", "judge", "label", "group_field", "group", "order", "low", "high"))
    rows: list[dict[str, Any]] = []
    tables = [
        ("detectable_vs_chance", sensitivity.vs_chance),
        ("detectable_between_judges", sensitivity.between_judges),
    ]
    if sensitivity.vs_human is not None:
        tables.append(("detectable_vs_human", sensitivity.vs_human))
    for metric, table in tables:
        for column, value in table.columns():
            n = sensitivity.n_cases[column]
            rows.append({**empty, "metric": metric, "dimension": column, "point": number(value), "n": n})
    for group, value in sensitivity.by_group.items():
        rows.append(
            {
                **empty,
                "metric": "detectable_vs_chance",
                "dimension": "all",
                "group_field": sensitivity.group_field,
                "group": group,
                "point": number(value),
            }
        )
    return rows


def _write_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    return path


def write_analysis_csv(analysis: Analysis, path: str | Path) -> Path:
    """Write :func:`analysis_csv_rows` as CSV. Returns the path."""
    return _write_csv(analysis_csv_rows(analysis), CSV_COLUMNS, Path(path))


def write_pairwise_csv(analysis: Analysis, path: str | Path) -> Path:
    """Write every pairwise comparison (one row per pair and column) as CSV. Returns the path."""
    return _write_csv([c.to_json() for c in analysis.pairwise.comparisons], PAIRWISE_COLUMNS, Path(path))


# --------------------------------------------------------------------------------------------
# Everything
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderedReport:
    """The report files of one data set."""

    name: str
    data_hash: str
    out_dir: Path
    files: dict[str, Path]
    """format -> written path (keys ``md``, ``csv``, ``pairwise_csv``, ``json``, ``xlsx``, ``html``)"""
    analysis: Analysis


def run_dates(bundles: Sequence[LoadedRun]) -> dict[str, str]:
    """Run id -> the UTC date an eval last registered it (a pooled run: the latest of its parts)."""
    dates = {}
    for bundle in bundles:
        stamps = [record.updated_at for _, record in bundle.sources if record.updated_at is not None]
        if stamps:
            dates[bundle.record.run_id] = time.strftime("%Y-%m-%d", time.gmtime(max(stamps)))
    return dates


def dataset_folder(dataset: DataSet) -> str:
    """The folder name of a data set's report when a report covers several: ``NAME-FINGERPRINT8``."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", dataset.name).strip("-.") or "data"
    return f"{slug[:40]}-{dataset.data_hash[:8]}"


@dataclass(frozen=True)
class ReportSettings:
    """What a report covers and how it is analysed: one object for every way of rendering one.

    The ``report`` command, ``sweep`` and the library calls build one and pass it to
    :func:`render_reports` or :func:`render_report`.
    """

    judges: Sequence[str] | None = None
    """judge specs or run ids to include; None includes every run"""
    data: str | None = None
    """one data set to report (fingerprint prefix or name); None reports each of them"""
    confidence: float = 0.95
    """interval coverage"""
    n_resamples: int = 2000
    """bootstrap resamples"""
    seed: int = 0
    """bootstrap seed"""
    group_fields: Sequence[str] = (STRATA,)
    """metadata fields to break accuracy down by (organ_system always)"""
    alpha: float = 0.05
    """level for tiers and significance marks"""
    cases_per_judge: int = 50
    """how many wrongly judged cases of each judge the HTML gallery takes"""
    case_dimension: str = "overall"
    """the dimension that decides which cases count as wrong in the HTML"""
    title: str | None = None
    """report title; None: the data set's name (:func:`~medrewardbench.report.tables.report_title`)"""
    epsilon: float = DEFAULT_EPSILON
    """the stand-in test's cost-benefit margin (:mod:`medrewardbench.metrics.alttest`)"""
    viewer: bool = True
    """whether the HTML embeds the per-case viewer (every case, every judge: :mod:`medrewardbench.report.viewer`)"""
    selective: SelectiveSettings | None = None
    """calibration and abstention settings (None: risk 0.10, delta 0.10, no recalibration)"""


def _write_report(
    dataset: DataSet,
    out: Path,
    formats: Sequence[str],
    settings: ReportSettings,
    probe_files: Mapping[str, Path] | None = None,
) -> RenderedReport:
    fields = resolve_group_fields(dataset, settings.group_fields)
    analysis = analyze_dataset(
        dataset,
        confidence=settings.confidence,
        n_resamples=settings.n_resamples,
        seed=settings.seed,
        group_fields=fields,
        alpha=settings.alpha,
        epsilon=settings.epsilon,
        selective=settings.selective,
    )
    title = settings.title
    specs = list(dict.fromkeys(run.judge for run in analysis.runs))
    probes = load_probe_section(probe_files, dataset.data_hash, specs, out) if probe_files else None
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    if "json" in formats:
        written["json"] = write_analysis_json(analysis, out / FILE_NAMES["json"])
    if "csv" in formats:
        written["csv"] = write_analysis_csv(analysis, out / FILE_NAMES["csv"])
        written["pairwise_csv"] = write_pairwise_csv(analysis, out / FILE_NAMES["pairwise_csv"])
    if "md" in formats:
        from medrewardbench.report.markdown import render_markdown

        path = out / FILE_NAMES["md"]
        path.write_text(render_markdown(analysis, title=title, probes=probes), encoding="utf-8")
        written["md"] = path
    if "xlsx" in formats:
        from medrewardbench.report.xlsx import write_xlsx

        written["xlsx"] = write_xlsx(analysis, out / FILE_NAMES["xlsx"], title=title)
    if "html" in formats:
        from medrewardbench.report.html import write_html

        gallery = build_case_gallery(
            dataset.runs, per_judge=settings.cases_per_judge, dimension=settings.case_dimension
        )
        from medrewardbench.report.viewer import MAX_CELLS, fits, viewer_data

        with_viewer = settings.viewer and fits(dataset.runs)
        if settings.viewer and not with_viewer:
            log.warning(
                "report: the per-case viewer is left out of report.html: more than %d cases x judges", MAX_CELLS
            )

        written["html"] = write_html(
            analysis,
            out / FILE_NAMES["html"],
            gallery,
            title=title,
            run_dates=run_dates(dataset.runs),
            viewer=viewer_data(dataset.runs) if with_viewer else None,
            probes=probes,
        )
    return RenderedReport(dataset.name, dataset.data_hash, out, written, analysis)


def _check_formats(formats: Sequence[str]) -> None:
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown report format(s) {', '.join(unknown)}; choose from {', '.join(FORMATS)}")


def render_reports(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    formats: Sequence[str] = FORMATS,
    settings: ReportSettings = ReportSettings(),
) -> list[RenderedReport]:
    """Analyse the runs found under ``paths`` and write the requested files, one report per data set.

    With runs on one data set (or ``settings.data`` naming one) the files go into ``out_dir``; with
    several, each data set's files go into ``out_dir/NAME-FINGERPRINT8/`` (:func:`dataset_folder`).
    Probe files (``probe-*.json``) beside the runs add a Probes section to the Markdown and HTML
    of the data they were run on (:mod:`medrewardbench.report.probes`).

    Args:
        paths: run directories (searched for stores), store files, or ``cv`` output folders.
        out_dir: where to write (created if needed).
        formats: any of ``md``, ``csv`` (also writes pairwise.csv), ``json``, ``xlsx``, ``html``.
        settings: which runs, how to analyse them, the HTML gallery's size and the title.

    Returns:
        One :class:`RenderedReport` per data set, in the order found.

    Raises:
        ValueError: an unknown format, or a ``group_fields`` entry no case has a value for.
        StoreError: no runs, unknown judges, or ``data`` names no data set.
        ProbeFileError: a probe file beside the runs that lacks a field the report shows.
    """
    _check_formats(formats)
    datasets = find_datasets(paths, judges=settings.judges, data=settings.data)
    out = Path(out_dir)
    probe_files = find_probe_files(paths)
    return [
        _write_report(
            dataset, out if len(datasets) == 1 else out / dataset_folder(dataset), formats, settings, probe_files
        )
        for dataset in datasets
    ]


def render_report(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    formats: Sequence[str] = FORMATS,
    settings: ReportSettings = ReportSettings(),
) -> dict[str, Path]:
    """The report of one data set (see :func:`render_reports`): its files in ``out_dir``.

    Returns:
        Format -> written path (keys ``md``, ``csv``, ``pairwise_csv``, ``json``, ``xlsx``, ``html``).

    Raises:
        ValueError: an unknown format.
        StoreError: no runs, unknown judges, or runs made on different data without ``data`` choosing one.
    """
    _check_formats(formats)
    datasets = find_datasets(paths, judges=settings.judges, data=settings.data)
    if len(datasets) > 1:
        raise different_data_error(datasets)
    return _write_report(datasets[0], Path(out_dir), formats, settings, find_probe_files(paths)).files
