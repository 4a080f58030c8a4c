"""The pooled held-out runs of a cross-validation folder, as runs a report can show.

``medrewardbench cv`` judges each fold's held-out cases with that fold's model, in a store of its
own (``OUT/fold-<i>/eval/``: each fold's cases are other data), and the comparison judges on all
held-out cases together (``OUT/baseline/``). :func:`load_cv_bundles` puts the folds' runs back
together into one run on the pooled held-out cases, each case judged by the model that never saw
it, beside the comparison runs, so that ``report OUT`` renders one held-out report (every
format, HTML included) instead of refusing runs made on different data.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import StoreError
from medrewardbench.evaluation.store import STORE_FILENAME, RunRecord, Store
from medrewardbench.metrics.analysis import LoadedRun, load_run_bundles
from medrewardbench.metrics.core import RunData, load_run_data
from medrewardbench.metrics.stats import NOT_RUN

__all__ = ["CV_FILE", "CV_FORMAT", "COMPARISON_DIR", "is_cv_folder", "load_cv_bundles"]

CV_FILE = "cv.json"
"""The report ``cv`` writes into its output folder."""
CV_FORMAT = "medrewardbench-cv"
COMPARISON_DIR = "baseline"
"""The folder of the runs on all held-out cases (the untuned base model, the baseline floor)."""


def is_cv_folder(path: str | Path) -> bool:
    """Whether a directory is the output folder of ``medrewardbench cv`` (it holds ``cv.json``)."""
    return (Path(path) / CV_FILE).is_file()


def _read_report(folder: Path) -> dict[str, Any]:
    path = folder / CV_FILE
    try:
        report = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: cannot read the cross-validation report: {exc}") from exc
    if not isinstance(report, dict) or report.get("format") != CV_FORMAT or not isinstance(report.get("folds"), list):
        raise StoreError(f"{path} is not a {CV_FORMAT} report")
    return report


def _fold_runs(folder: Path, report: Mapping[str, Any]) -> list[tuple[Path, RunRecord, RunData]]:
    found = []
    for fold in report["folds"]:
        store_path = folder / f"fold-{fold['index']}" / "eval" / STORE_FILENAME
        if not store_path.is_file():
            raise StoreError(f"{folder}: fold {fold['index']} has no store at {store_path}")
        with Store(store_path) as store:
            record = store.run(str(fold["run_id"]))
            found.append((store_path, record, load_run_data(store, record)))
    if not found:
        raise StoreError(f"{folder / CV_FILE}: no fold was run")
    return found


def _held_out_frame(folds: list[tuple[Path, RunRecord, RunData]], comparison: list[LoadedRun]) -> RunData:
    """The pooled held-out cases (ids, labels, lengths, groups, fingerprint) in one run's arrays.

    The comparison runs were made on exactly the pooled cases, in the data's order: their case
    frame is used when there is one. Without any, the folds' cases are put one fold after another.
    """
    if comparison:
        return comparison[0].data
    datas = [data for _, _, data in folds]
    digest = hashlib.sha256("\n".join(d.data_hash for d in datas).encode()).hexdigest()
    fields = sorted({f for d in datas for f in d.groups})
    return RunData(
        run_id="held-out",
        judge_spec="held-out",
        data_hash=f"cv-{digest[:56]}",
        case_ids=tuple(c for d in datas for c in d.case_ids),
        verdicts=np.concatenate([d.verdicts for d in datas]),
        labels=np.concatenate([d.labels for d in datas]),
        lengths=np.concatenate([d.lengths for d in datas]),
        groups={f: tuple(g for d in datas for g in d.groups.get(f, ("unknown",) * d.n_cases)) for f in fields},
        orders=datas[0].orders,
    )


def load_cv_bundles(folder: str | Path) -> list[LoadedRun]:
    """The runs of a ``cv`` output folder, the folds' held-out runs pooled into one.

    Args:
        folder: the folder ``cv`` wrote (it holds ``cv.json``).

    Returns:
        The pooled run of the trained models first (labelled as ``cv.json``'s ``tuned_judge``),
        then every comparison run on the same cases (the untuned base model, the baseline floor).

    Raises:
        StoreError: no ``cv.json`` of this format, a fold's store or run is missing, or the folds
            do not cover the held-out cases.
    """
    root = Path(folder)
    report = _read_report(root)
    folds = _fold_runs(root, report)
    comparison_dir = root / COMPARISON_DIR
    comparison = load_run_bundles([comparison_dir]) if (comparison_dir / STORE_FILENAME).is_file() else []
    frame = _held_out_frame(folds, comparison)
    by_case: dict[str, np.ndarray] = {}
    failures: dict[str, int] = {}
    usage: dict[str, Any] = {}
    for _, _, data in folds:
        for i, case_id in enumerate(data.case_ids):
            by_case[case_id] = data.verdicts[i]
        for reason, count in data.failures.items():
            failures[reason] = failures.get(reason, 0) + count
        for key, value in data.usage.items():
            if isinstance(value, int | float):
                usage[key] = usage.get(key, 0) + value
    missing = [c for c in frame.case_ids if c not in by_case]
    if missing:
        raise StoreError(
            f"{root}: {len(missing)} held-out case(s) were judged by no fold's model, e.g. {missing[:3]}; "
            "rerun cv with the same options to finish the folds"
        )
    empty = np.full((2, len(DIMENSIONS)), NOT_RUN, dtype=np.int8)
    verdicts = np.stack([by_case.get(c, empty) for c in frame.case_ids]).astype(np.int8)
    first_path, first_record, _ = folds[0]
    label = str(report.get("tuned_judge") or "cross-validated model")
    fold_judges = [{"fold": r.run_id, "spec": r.judge_spec, "adapter": r.config.get("adapter")} for _, r, _ in folds]
    config = {
        "spec": label,
        "method": report.get("method"),
        "base_model": report.get("base_model"),
        "adapter": f"one per fold ({len(folds)}: {root}/fold-*/model)",
        "folds": fold_judges,
        "hyperparameters": report.get("hyperparameters", {}),
    }
    run_id = "cv-pooled-" + hashlib.sha256(json.dumps(fold_judges, sort_keys=True).encode()).hexdigest()[:10]
    record = RunRecord(
        run_id=run_id,
        judge_spec=label,
        judge_fingerprint=run_id,
        data_hash=frame.data_hash,
        dataset_name=str(report.get("data", {}).get("name") or first_record.dataset_name),
        dataset_source=first_record.dataset_source,
        orders=frame.orders,
        config=config,
        metadata={"pooled_from": [r.run_id for _, r, _ in folds], "k": report.get("k")},
        n_cases=len(frame.case_ids),
    )
    data = RunData(
        run_id=run_id,
        judge_spec=label,
        data_hash=frame.data_hash,
        case_ids=frame.case_ids,
        verdicts=verdicts,
        labels=frame.labels,
        lengths=frame.lengths,
        groups=frame.groups,
        orders=frame.orders,
        failures=dict(sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))),
        usage=usage,
        config=config,
        metadata=record.metadata,
    )
    with Store(first_path) as store:
        labels = store.label_provenance(first_record.data_hash)
    if not labels.declared and comparison:
        labels = comparison[0].labels
    pooled = LoadedRun(data, record, first_path, labels, parts=tuple((path, rec) for path, rec, _ in folds))
    return [pooled, *comparison]
