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
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.cases import Case
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.metrics.analysis import (
    DataSet,
    LoadedRun,
    case_difficulty_order,
    judge_labels,
    resolve_group_fields,
    select_wrong_cases,
)
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.loading import analyze_dataset, different_data_error, find_datasets, load_judged_cases
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
from medrewardbench.report.html import CaseGallery, CaseView, DoctorsView, JudgePicks, OrderOutcome, case_image
from medrewardbench.report.human import human_long_rows
from medrewardbench.store import StoredJudgment

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
    text = json.dumps(analysis.to_json(), indent=2, sort_keys=True, ensure_ascii=False)
    out.write_text(text + "\n", encoding="utf-8")
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
# Cases judged wrong
# --------------------------------------------------------------------------------------------


def _rationale(stored: StoredJudgment | None, quoted: Sequence[str]) -> str | None:
    """The judge's own reason for its verdict, when its answer gave one (the templates ask for one)."""
    if stored is None:
        return None
    reason = stored.extra.get("reason") if isinstance(stored.extra, Mapping) else None
    if isinstance(reason, str) and reason.strip():
        return reason.strip()
    if not stored.raw_output:
        return None
    from medrewardbench.parsing import parse_verdicts

    parsed = parse_verdicts(stored.raw_output, quoted=quoted)
    return parsed.reason.strip() if parsed.reason and parsed.reason.strip() else None


def gallery_from_parts(
    runs: Sequence[RunData],
    judgments: Mapping[str, Mapping[tuple[str, str], StoredJudgment]],
    cases: Mapping[str, Case] | None,
    *,
    case_hashes: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    per_judge: int = 50,
    dimension: str = "overall",
) -> CaseGallery:
    """Assemble the gallery of cases judges got wrong, with every judge's picks on each of them.

    Args:
        runs: runs on one data set (their labels decide right and wrong).
        judgments: run id -> (case id, order) -> stored judgment (for raw outputs, failures and
            the judges' reasons).
        cases: case id -> the case as loaded from the data source, or None when the source could
            not be loaded (texts and images are then left out, and ``notes`` should say why).
        case_hashes: case id -> content hash recorded at judging time; a case whose loaded
            content hashes differently gets a note.
        notes: notes about the whole section.
        per_judge: at most this many wrongly judged cases per judge select a case for the gallery.
        dimension: the dimension that decides right and wrong.

    Returns:
        The gallery: cases in the order "missed by most judges first", each with every judge's
        picks in both orders (``JudgePicks.wrong`` marks the judges that missed it).
    """
    labels = judge_labels(runs)
    selection = select_wrong_cases(runs, per_judge=per_judge, dimension=dimension)
    if not runs:
        return CaseGallery((), {}, dimension, per_judge, tuple(notes))
    first = runs[0]
    chosen = {i for indices in selection.values() for i in indices}
    order = [i for i in case_difficulty_order(runs, dimension) if i in chosen]
    by_judge = {
        label: [first.case_ids[i] for i in selection[run.run_id]] for label, run in zip(labels, runs, strict=True)
    }
    wrong_sets = {run.run_id: set(selection[run.run_id]) for run in runs}
    organ = first.groups.get("organ_system", ("unknown",) * first.n_cases)
    views = []
    for i in order:
        case_id = first.case_ids[i]
        case = cases.get(case_id) if cases is not None else None
        quoted = [case.question, case.response_1, case.response_2] if case is not None else []
        case_labels = {d: int(first.labels[i, j]) for j, d in enumerate(DIMENSIONS) if first.labels[i, j] > 0}
        picks = []
        for label, run in zip(labels, runs, strict=True):
            outcomes = []
            for order_ in run.orders:
                stored = judgments.get(run.run_id, {}).get((case_id, order_.value))
                verdict_row = run.verdicts[i, 0 if order_.value == "original" else 1]
                verdicts = {
                    d: (int(v) if v > 0 else None) for d, v in zip(DIMENSIONS, verdict_row.tolist(), strict=True)
                }
                outcomes.append(
                    OrderOutcome(
                        order=order_.value,
                        verdicts=verdicts,
                        raw_output=None if stored is None else stored.raw_output,
                        failure=None if stored is None else stored.failure,
                        rationale=_rationale(stored, quoted),
                    )
                )
            picks.append(JudgePicks(label, tuple(outcomes), wrong=i in wrong_sets[run.run_id]))
        views.append(_case_view(case_id, organ[i], case_labels, cases, case_hashes, tuple(picks)))
    return CaseGallery(tuple(views), by_judge, dimension, per_judge, tuple(notes))


def _case_view(
    case_id: str,
    organ: str,
    labels: dict[str, int],
    cases: Mapping[str, Case] | None,
    case_hashes: Mapping[str, str] | None,
    picks: tuple[JudgePicks, ...],
) -> CaseView:
    if cases is None:
        return CaseView(case_id, organ, labels, picks=picks)
    case = cases.get(case_id)
    if case is None:
        return CaseView(case_id, organ, labels, notes=("This case is no longer in the data source.",), picks=picks)
    notes: list[str] = []
    image = None
    if case.image.kind == "none":
        notes.append("This case has no image.")
    else:
        try:
            image = case_image(case.image, modality=case.modality)
        except (MedRewardBenchError, OSError, ValueError) as exc:
            notes.append(f"The image could not be loaded: {exc}")
    if case_hashes is not None and case_id in case_hashes:
        try:
            changed = case.content_hash() != case_hashes[case_id]
        except (MedRewardBenchError, OSError):
            changed = False
        if changed:
            notes.append(
                "Warning: this case has changed in the data source since it was judged; "
                "the text and image shown are the current ones."
            )
    return CaseView(
        case_id,
        organ,
        labels,
        case.question,
        case.response_1,
        case.response_2,
        image,
        tuple(notes),
        picks,
        DoctorsView.of(case),
    )


def build_case_gallery(bundles: Sequence[LoadedRun], *, per_judge: int = 50, dimension: str = "overall") -> CaseGallery:
    """The cases judges got wrong, with raw outputs, texts and images.

    Raw outputs come from the stores; texts and images are re-loaded from the runs' data source
    (``RunRecord.dataset_source``).

    If the source cannot be loaded (moved, in-memory, offline Hub), the cases are shown without
    question, answers and image, and the section says why.

    Args:
        bundles: loaded runs on one data set (a pooled run reads each of its parts' stores).
        per_judge: at most this many wrongly judged cases per judge select a case.
        dimension: the dimension that decides right and wrong.

    Returns:
        The gallery.
    """
    runs = [b.data for b in bundles]
    selection = select_wrong_cases(runs, per_judge=per_judge, dimension=dimension)
    wanted = {runs[0].case_ids[i] for indices in selection.values() for i in indices} if runs else set()
    loaded = load_judged_cases(bundles, wanted)
    return gallery_from_parts(
        runs,
        loaded.judgments,
        loaded.cases,
        case_hashes=loaded.case_hashes,
        notes=loaded.notes,
        per_judge=per_judge,
        dimension=dimension,
    )


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
    title: str = "Med-RewardBench report"
    """report title"""
    epsilon: float = DEFAULT_EPSILON
    """the stand-in test's cost-benefit margin (:mod:`medrewardbench.metrics.alttest`)"""


def _write_report(dataset: DataSet, out: Path, formats: Sequence[str], settings: ReportSettings) -> RenderedReport:
    fields = resolve_group_fields(dataset, settings.group_fields)
    analysis = analyze_dataset(
        dataset,
        confidence=settings.confidence,
        n_resamples=settings.n_resamples,
        seed=settings.seed,
        group_fields=fields,
        alpha=settings.alpha,
        epsilon=settings.epsilon,
    )
    title = settings.title
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
        path.write_text(render_markdown(analysis, title=title), encoding="utf-8")
        written["md"] = path
    if "xlsx" in formats:
        from medrewardbench.report.xlsx import write_xlsx

        written["xlsx"] = write_xlsx(analysis, out / FILE_NAMES["xlsx"])
    if "html" in formats:
        from medrewardbench.report.html import write_html

        gallery = build_case_gallery(
            dataset.runs, per_judge=settings.cases_per_judge, dimension=settings.case_dimension
        )
        written["html"] = write_html(
            analysis, out / FILE_NAMES["html"], gallery, title=title, run_dates=run_dates(dataset.runs)
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
    """
    _check_formats(formats)
    datasets = find_datasets(paths, judges=settings.judges, data=settings.data)
    out = Path(out_dir)
    return [
        _write_report(dataset, out if len(datasets) == 1 else out / dataset_folder(dataset), formats, settings)
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
    return _write_report(datasets[0], Path(out_dir), formats, settings).files
