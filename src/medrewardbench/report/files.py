"""Machine-readable outputs: judgments.jsonl, metrics.json and metrics.csv.

These files are deterministic: they hold no wall-clock times or latencies (those stay in the
SQLite store), keys are sorted and rows come in case order, so two runs with the same seed give
byte-identical files. Each is written beside its final name and moved into place, so a reader or
an interrupted write never sees half a file.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TextIO

from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.evaluation.store import RunRecord, Store
from medrewardbench.metrics.results import (
    METRICS_SCHEMA,
    AccuracyCell,
    ColumnTable,
    HumanCeiling,
    LeaderboardRow,
    RunMetrics,
    number,
)

CSV_COLUMNS: tuple[str, ...] = (
    "run_id",
    "judge",
    "scope",
    "group_field",
    "group",
    "order",
    "dimension",
    "n",
    "correct",
    "answered",
    "accuracy",
    "answered_accuracy",
    "failure_rate",
)


@contextmanager
def _replacing(path: Path, newline: str | None = "\n") -> Iterator[TextIO]:
    """Write to a temporary file beside ``path`` and move it into place when done.

    A reader, a crash or a second Ctrl-C never sees half a file: the old one stays until the new
    one is complete.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    # os.open with 0o666, not mkstemp (0o600): the file gets the permissions the umask gives
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
            yield fh
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


_JSON_LINE = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
"""``json.dumps(row, sort_keys=True, ensure_ascii=False)`` with one encoder for every row."""


def write_judgments_jsonl(store: Store, runs: Sequence[RunRecord], path: Path) -> int:
    """Write every judgment of the given runs, one JSON object per line. Returns the row count.

    The judgments are read from the store and written a few thousand at a time.
    """
    count = 0
    with _replacing(path) as fh:
        for run in runs:
            for j in store.iter_judgments_for_run(run, extras=False):  # the file has no extras
                row = {
                    "run_id": run.run_id,
                    "judge": run.judge_spec,
                    "case_id": j.case_id,
                    "order": j.order.value,
                    "verdicts": {d: j.verdicts[d] for d in DIMENSIONS if d in j.verdicts},
                    "failure": j.failure,
                    "dimension_failures": j.dimension_failures,
                    "raw_output": j.raw_output,
                    "prompt_tokens": j.prompt_tokens,
                    "completion_tokens": j.completion_tokens,
                    "scores": j.scores,
                    "fingerprint": j.fingerprint,
                    # P(response_1 better) per dimension, only where the judge gave probabilities
                    **({"preferences": j.preferences} if j.preferences else {}),
                }
                fh.write(_JSON_LINE(row) + "\n")
                count += 1
    return count


def leaderboard_entry(row: LeaderboardRow) -> dict[str, Any]:
    """One leaderboard row of metrics.json: point estimates, pooled over the six dimensions."""
    return {
        "rank": row.rank,
        "judge": row.judge,
        "run_id": row.run_id,
        "score": number(row.score.point),
        **{d: number(row.accuracy[d].point) for d in DIMENSIONS},
        "macro": None if row.macro is None else number(row.macro.point),
        "failure_rate": number(row.failure_rate),
        "consistency": number(row.consistency),
        "first_position_rate": number(row.first_position_rate),
        **(
            {"cost_usd": number(row.cost_usd), "cost_per_1000_cases": number(row.cost_per_1000_cases)}
            if row.has_cost
            else {}
        ),
        **({} if row.vs_annotators is None else {"vs_annotators": number(row.vs_annotators.point)}),
    }


def metrics_document(
    runs: Sequence[RunRecord],
    metrics_by_run: Mapping[str, RunMetrics],
    leaderboard: Sequence[LeaderboardRow],
    human: HumanCeiling | None = None,
    labels: Mapping[str, LabelProvenance] | None = None,
) -> dict[str, Any]:
    """The content of metrics.json (schema ``medrewardbench.metrics/2``).

    Args:
        runs: the runs described.
        metrics_by_run: each run's point estimates.
        leaderboard: the ranked rows.
        human: the human ceiling, when the data has per-annotator labels: each leaderboard entry
            then carries ``vs_annotators`` and the document a ``human`` entry (the human row's
            points per column, the annotators, and how the targets are defined).
        labels: data fingerprint -> where its labels come from (unknown when missing).

    Returns:
        The document.
    """
    datasets = sorted({(r.dataset_name, r.data_hash, r.n_cases) for r in runs})
    provenance = labels or {}
    extra: dict[str, Any] = {}
    if human is not None:
        extra["human"] = {
            "label": human.label,
            "annotators": list(human.annotators),
            "n_cases": human.n_cases,
            "vs_annotators": human.human.to_json(lambda e: number(e.point)),
            "targets": human.targets,
        }
    return {
        **extra,
        "schema": METRICS_SCHEMA,
        "datasets": [
            {"name": n, "data_hash": h, "n_cases": c, "labels": provenance.get(h, UNKNOWN_LABELS).to_json()}
            for n, h, c in datasets
        ],
        "leaderboard": [leaderboard_entry(row) for row in leaderboard],
        "runs": [
            {
                "run_id": r.run_id,
                "judge": r.judge_spec,
                "judge_fingerprint": r.judge_fingerprint,
                "data_hash": r.data_hash,
                "dataset": r.dataset_name,
                "config": r.config,
                "metadata": r.metadata,
                "metrics": metrics_by_run[r.run_id].to_json(),
            }
            for r in runs
        ],
    }


def write_metrics_json(document: Mapping[str, Any], path: Path) -> None:
    """Write metrics.json (indented, keys sorted, no ``-0.0``), replacing any previous file whole."""
    with _replacing(path) as fh:
        fh.write(json_text(document, indent=2, sort_keys=True, ensure_ascii=False))


def json_text(document: Any, **options: Any) -> str:
    """A JSON document as result files are written: no ``-0.0`` (:func:`without_negative_zero`), final newline.

    Args:
        document: a JSON-ready value.
        options: ``json.dumps`` options (indent, sort_keys, ensure_ascii, allow_nan).

    Returns:
        The text.
    """
    return json.dumps(without_negative_zero(document), **options) + "\n"


def without_negative_zero(value: Any) -> Any:
    """``value`` with every ``-0.0`` inside it (dicts, lists, tuples) made ``0.0``.

    Rounding keeps the sign of a zero (:func:`~medrewardbench.metrics.codec.number`: a difference
    of -1e-9 rounds to -0.0), and a reader comparing signs, or a person reading the file, should
    not see a negative zero; the printed reports already drop the sign (:mod:`medrewardbench.report.format`).

    Args:
        value: a JSON-ready value.

    Returns:
        The same structure, rebuilt where it held a float.
    """
    if isinstance(value, float):
        return 0.0 if value == 0 else value
    if isinstance(value, Mapping):
        return {k: without_negative_zero(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_negative_zero(v) for v in value]
    return value


def metrics_csv_rows(runs: Sequence[RunRecord], metrics_by_run: Mapping[str, RunMetrics]) -> list[dict[str, Any]]:
    """Long-format rows: one per (run, scope, group, order, dimension)."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        m = metrics_by_run[run.run_id]
        base = {"run_id": run.run_id, "judge": run.judge_spec}

        def add(
            scope: str,
            field: str,
            group: str,
            order: str,
            cells: ColumnTable[AccuracyCell],
            base: dict[str, Any] = base,
        ) -> None:
            for dim in DIMENSIONS:
                values = cells[dim].to_json()
                rows.append(
                    {
                        **base,
                        "scope": scope,
                        "group_field": field,
                        "group": group,
                        "order": order,
                        "dimension": dim,
                        **{k: values[k] for k in CSV_COLUMNS[7:]},
                    }
                )

        add("all", "", "", "both", m.accuracy)
        for order, cells in m.by_order.items():
            add("order", "", "", order, cells)
        for field, groups in m.by.items():
            for group, cells in groups.items():
                add("group", field, group, "both", cells)
        for dim in DIMENSIONS:
            value = None if m.macro is None else number(m.macro[dim])
            rows.append(
                {
                    **base,
                    "scope": "macro",
                    "group_field": "organ_system",
                    "group": "",
                    "order": "both",
                    "dimension": dim,
                    "n": "",
                    "correct": "",
                    "answered": "",
                    "accuracy": value,
                    "answered_accuracy": "",
                    "failure_rate": "",
                }
            )
    return rows


def write_metrics_csv(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Write metrics.csv in long format, replacing any previous file whole."""
    with _replacing(path, newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in CSV_COLUMNS})
