"""Loading stored runs for the reports: find, select, group by data set, analyse; the cases judged wrong.

Every command that reads stored runs (``report``, ``leaderboard``, ``compare``, ``sweep``) loads
them here, so :mod:`medrewardbench.report` only renders. A ``cv`` output folder is read as its
pooled held-out runs (:func:`~medrewardbench.metrics.heldout.load_cv_bundles`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from medrewardbench.cases import Case
from medrewardbench.errors import MedRewardBenchError, StoreError
from medrewardbench.evaluation.store import Store, StoredJudgment
from medrewardbench.metrics.analysis import (
    DataSet,
    LoadedRun,
    analyze,
    group_by_data,
    load_run_bundles,
    select_data,
)
from medrewardbench.metrics.heldout import is_cv_folder, load_cv_bundles
from medrewardbench.metrics.results import DEFAULT_EPSILON, STRATA, Analysis
from medrewardbench.metrics.selective_section import SelectiveSettings

log = logging.getLogger(__name__)


def select_bundles(bundles: Sequence[LoadedRun], judges: Sequence[str] | None) -> list[LoadedRun]:
    """Keep the runs whose judge spec or run id is named; all of them when ``judges`` is None.

    Args:
        bundles: loaded runs.
        judges: judge specs or run ids.

    Returns:
        The selected runs in their original order.

    Raises:
        StoreError: a name matches no run (the message lists the available ones).
    """
    if not judges:
        return list(bundles)
    wanted = list(dict.fromkeys(judges))
    unknown = [name for name in wanted if not any(name in (b.record.judge_spec, b.record.run_id) for b in bundles)]
    if unknown:
        available = ", ".join(sorted({b.record.judge_spec for b in bundles}))
        raise StoreError(f"no run of {', '.join(map(repr, unknown))}; available judges: {available}")
    return [b for b in bundles if b.record.judge_spec in wanted or b.record.run_id in wanted]


def load_bundles(paths: Sequence[str | Path]) -> list[LoadedRun]:
    """Every run under the given paths; a ``cv`` output folder gives its pooled held-out runs.

    Args:
        paths: run directories (searched recursively), store files, or ``cv`` output folders.

    Returns:
        The runs, each once (by run id), in the order found.

    Raises:
        StoreError: a path does not exist, a store is unusable, or no run was found.
    """
    cv_folders = [Path(p) for p in paths if Path(p).is_dir() and is_cv_folder(p)]
    others = [p for p in paths if Path(p) not in cv_folders]
    found = [bundle for folder in cv_folders for bundle in load_cv_bundles(folder)]
    if others or not found:
        found += load_run_bundles(others)
    seen: set[str] = set()
    bundles = []
    for bundle in found:
        if bundle.record.run_id not in seen:
            seen.add(bundle.record.run_id)
            bundles.append(bundle)
    return bundles


def find_datasets(
    paths: Sequence[str | Path], *, judges: Sequence[str] | None = None, data: str | None = None
) -> list[DataSet]:
    """The runs under ``paths``, optionally only some judges, grouped by data set.

    Args:
        paths: run directories, store files or ``cv`` output folders.
        judges: judge specs or run ids to keep; None keeps all.
        data: a data fingerprint prefix or data set name (``--data``); None keeps every data set.

    Returns:
        One :class:`~medrewardbench.metrics.analysis.DataSet` per data fingerprint.

    Raises:
        StoreError: no runs, unknown judges, or ``data`` names no data set.
    """
    return select_data(group_by_data(select_bundles(load_bundles(paths), judges)), data)


def analyze_dataset(
    dataset: DataSet,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    group_fields: Sequence[str] = (STRATA,),
    alpha: float = 0.05,
    epsilon: float = DEFAULT_EPSILON,
    selective: SelectiveSettings | None = None,
) -> Analysis:
    """Analyse the runs of one data set (with its name and its labels' provenance).

    Args:
        dataset: the runs.
        confidence: interval coverage.
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.
        group_fields: metadata fields to break accuracy down by.
        alpha: level for tiers and significance marks (and the stand-in test's false discovery rate).
        epsilon: the stand-in test's cost-benefit margin.
        selective: calibration and abstention settings (default: risk 0.10, delta 0.10).

    Returns:
        The :func:`~medrewardbench.metrics.analysis.analyze` result.
    """
    return analyze(
        [b.data for b in dataset.runs],
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        group_fields=group_fields,
        alpha=alpha,
        dataset_name=dataset.name,
        labels=dataset.labels,
        epsilon=epsilon,
        selective=selective,
    )


def different_data_error(datasets: Sequence[DataSet]) -> StoreError:
    """The error for runs on several data sets where one was needed: every data set with its runs."""
    parts = [
        f"data {d.data_hash[:12]} ({d.name}, {d.n_cases} cases): {', '.join(b.record.run_id for b in d.runs)}"
        for d in datasets
    ]
    return StoreError(
        "these runs were made on different data and cannot share one table "
        "(data fingerprints differ): " + "; ".join(parts) + "; choose one with --data FINGERPRINT"
    )


def analyze_paths(
    paths: Sequence[str | Path],
    *,
    judges: Sequence[str] | None = None,
    data: str | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    group_fields: Sequence[str] = (STRATA,),
    alpha: float = 0.05,
    epsilon: float = DEFAULT_EPSILON,
    selective: SelectiveSettings | None = None,
) -> Analysis:
    """Load the runs under ``paths`` (optionally only some judges) and analyse them: one data set.

    Args:
        paths: run directories, store files or ``cv`` output folders.
        judges: judge specs or run ids to keep; None keeps all.
        data: the data set to analyse (fingerprint prefix or name) when the runs cover several.
        confidence: interval coverage.
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.
        group_fields: metadata fields to break accuracy down by.
        alpha: level for tiers and significance marks.
        epsilon: the stand-in test's cost-benefit margin.
        selective: calibration and abstention settings (default: risk 0.10, delta 0.10).

    Returns:
        The :func:`~medrewardbench.metrics.analysis.analyze` result.

    Raises:
        StoreError: no runs, unknown judges, or runs on several data sets and no ``data`` choosing one.
    """
    datasets = find_datasets(paths, judges=judges, data=data)
    if len(datasets) > 1:
        raise different_data_error(datasets)
    return analyze_dataset(
        datasets[0],
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        group_fields=group_fields,
        alpha=alpha,
        epsilon=epsilon,
        selective=selective,
    )


@dataclass(frozen=True)
class JudgedCases:
    """Some cases as the stores and the data source hold them: what the report's gallery shows of them."""

    judgments: dict[str, dict[tuple[str, str], StoredJudgment]]
    """run id -> (case id, order) -> stored judgment (raw outputs, failures, the judges' reasons)"""
    case_hashes: dict[str, str]
    """case id -> content hash recorded at judging time"""
    cases: dict[str, Case] | None
    """case id -> the case re-loaded from the runs' data source; None when it could not be loaded"""
    notes: tuple[str, ...]
    """why texts and images are missing, when they are"""


def load_judged_cases(bundles: Sequence[LoadedRun], wanted: set[str]) -> JudgedCases:
    """Read the stored judgments and hashes of ``wanted`` cases, and the cases from the runs' data source.

    Only the wanted cases are read from the stores; the data source
    (``RunRecord.dataset_source``) is read once. If it cannot be loaded (moved, in-memory,
    offline Hub), ``cases`` is None and ``notes`` says why.

    Args:
        bundles: loaded runs on one data set (a pooled run reads each of its parts' stores).
        wanted: case ids.

    Returns:
        The judgments, hashes, cases and notes.
    """
    judgments: dict[str, dict[tuple[str, str], StoredJudgment]] = {}
    case_hashes: dict[str, str] = {}
    for bundle in bundles:
        found: dict[tuple[str, str], StoredJudgment] = {}
        for store_path, record in bundle.sources:
            with Store(store_path) as store:
                found.update(
                    {(j.case_id, j.order.value): j for j in store.iter_judgments_for_run(record, sorted(wanted))}
                )
                for row in store.iter_case_rows(record.data_hash, sorted(wanted)):
                    case_hashes.setdefault(row[0], row[1])
        judgments[bundle.record.run_id] = found
    notes: list[str] = []
    cases: dict[str, Case] | None = None
    if bundles and wanted:
        source = bundles[0].record.dataset_source
        try:
            from medrewardbench.data.sources import find_cases

            cases = find_cases(source, wanted)  # one reading of the source, keeping only these cases
        except (MedRewardBenchError, OSError, ValueError) as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            notes.append(
                f"The data source {source!r} could not be loaded ({first_line}); questions, answers "
                "and images are not shown."
            )
            log.warning("report: cannot reload %s: %s", source, exc)
    return JudgedCases(judgments, case_hashes, cases, tuple(notes))
