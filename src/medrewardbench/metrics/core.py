"""Runs as arrays, and eval's point estimates with the counts behind them.

:func:`load_run_data` reads a run from the store into the array layout of
:mod:`medrewardbench.metrics.stats` (verdicts, labels and lengths over cases).
:func:`run_metrics` turns one run into a :class:`~medrewardbench.metrics.results.RunMetrics`
with the same count functions the report's analysis uses, so eval and report agree on every
point estimate. A failure counts as wrong for ``accuracy`` (the reference convention);
``answered_accuracy`` is over answered requests only; requests not run and cases without a label
are not counted at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics import stats
from medrewardbench.metrics.annotators import ratings_from_annotations
from medrewardbench.metrics.results import (
    COLUMNS,
    STRATA,
    AccuracyCell,
    ColumnTable,
    PositionCell,
    RequestCounts,
    RunMetrics,
)
from medrewardbench.metrics.stats import FAILED, NOT_RUN, IntArray
from medrewardbench.store import RunRecord, Store, summed_usage

ORDER_INDEX: dict[Order, int] = {Order.ORIGINAL: stats.ORIGINAL, Order.SWAPPED: stats.SWAPPED}


@dataclass(frozen=True)
class RunData:
    """One run's judgments as arrays, with the case metadata needed for grouping."""

    run_id: str
    judge_spec: str
    data_hash: str
    case_ids: tuple[str, ...]
    verdicts: IntArray
    labels: IntArray
    lengths: npt.NDArray[np.int64]
    groups: Mapping[str, tuple[str, ...]]
    """field name -> value per case (organ_system, department, ...)."""
    orders: tuple[Order, ...]
    failures: Mapping[str, int] = field(default_factory=dict)
    """failure reason (first 80 characters) -> count."""
    usage: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    ratings: npt.NDArray[np.int8] | None = None
    """per-annotator labels (n_cases, n_annotators, n_dims), 0 where none; None when the data has none"""
    annotators: tuple[str, ...] = ()
    """the annotator of each column of ``ratings``"""

    @property
    def n_cases(self) -> int:
        """How many cases the run covers."""
        return len(self.case_ids)

    def subset(self, mask: npt.NDArray[np.bool_]) -> RunData:
        """The same run restricted to the cases where ``mask`` is True."""
        idx = np.flatnonzero(mask)
        return RunData(
            run_id=self.run_id,
            judge_spec=self.judge_spec,
            data_hash=self.data_hash,
            case_ids=tuple(self.case_ids[i] for i in idx),
            verdicts=self.verdicts[idx],
            labels=self.labels[idx],
            lengths=self.lengths[idx],
            groups={k: tuple(v[i] for i in idx) for k, v in self.groups.items()},
            orders=self.orders,
            failures=self.failures,
            usage=self.usage,
            config=self.config,
            metadata=self.metadata,
            ratings=None if self.ratings is None else self.ratings[idx],
            annotators=self.annotators,
        )


def load_run_data(store: Store, run: RunRecord) -> RunData:
    """Read one run from the store into arrays.

    Args:
        store: the results store.
        run: the run record.

    Returns:
        The run's arrays; requests without a stored judgment are marked not run (-1).
    """
    cases = store.cases(run.data_hash)
    index = {c.case_id: i for i, c in enumerate(cases)}
    n, d = len(cases), len(DIMENSIONS)
    verdicts = np.full((n, 2, d), NOT_RUN, dtype=np.int8)
    labels = np.zeros((n, d), dtype=np.int8)
    lengths = np.zeros((n, 2), dtype=np.int64)
    for i, c in enumerate(cases):
        for j, dim in enumerate(DIMENSIONS):
            labels[i, j] = c.labels.get(dim, 0)
        lengths[i] = (c.len_1, c.len_2)
    failures: dict[str, int] = {}
    judgments = store.judgments_for_run(run)
    for judgment in judgments:
        i = index[judgment.case_id]
        o = ORDER_INDEX[judgment.order]
        for j, dim in enumerate(DIMENSIONS):
            verdicts[i, o, j] = judgment.verdicts.get(dim, FAILED)
        if judgment.failure is not None:
            key = judgment.failure.splitlines()[0][:80] if judgment.failure else "failure"
            failures[key] = failures.get(key, 0) + 1
    group_fields = sorted({k for c in cases for k in c.groups})
    groups = {f: tuple(c.groups.get(f, "unknown") for c in cases) for f in group_fields}
    ratings, annotators = ratings_from_annotations([c.annotations for c in cases], DIMENSIONS)
    return RunData(
        run_id=run.run_id,
        judge_spec=run.judge_spec,
        data_hash=run.data_hash,
        case_ids=tuple(c.case_id for c in cases),
        verdicts=verdicts,
        labels=labels,
        lengths=lengths,
        groups=groups,
        orders=run.orders,
        failures=dict(sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))),
        usage=summed_usage(judgments),
        config=run.config,
        metadata=run.metadata,
        ratings=ratings if annotators else None,
        annotators=annotators,
    )


def accuracy_cells(verdicts: IntArray, labels: IntArray, orders: Sequence[int] = (0, 1)) -> ColumnTable[AccuracyCell]:
    """Accuracy counts per dimension and pooled over dimensions, on the given order indices.

    Args:
        verdicts: (n_cases, 2, n_dims) verdicts in the shared layout.
        labels: (n_cases, n_dims) expert labels.
        orders: which order indices to count (0 = original, 1 = swapped).

    Returns:
        One :class:`~medrewardbench.metrics.results.AccuracyCell` per dimension, then the pooled one.
    """
    correct, counted = stats.request_outcomes(verdicts, labels)
    _, answered = stats.request_outcomes(verdicts, labels, count_failures=False)
    selected = list(orders)
    sums = [a[:, selected].sum(axis=(0, 1)).tolist() for a in (counted, correct, answered)]
    cells = [AccuracyCell(int(n), int(c), int(a)) for n, c, a in zip(*sums, strict=True)]
    pooled = AccuracyCell(*(int(sum(values)) for values in sums))
    return ColumnTable.of([*cells, pooled])


def grouped_accuracy(
    verdicts: IntArray, labels: IntArray, groups: Sequence[str], orders: Sequence[int] = (0, 1)
) -> dict[str, ColumnTable[AccuracyCell]]:
    """:func:`accuracy_cells` applied to each group of cases, groups sorted by name.

    Args:
        verdicts: (n_cases, 2, n_dims).
        labels: (n_cases, n_dims).
        groups: the group of each case.
        orders: order indices to count.

    Returns:
        group -> per-column cells.
    """
    keys = np.asarray(groups, dtype=object)
    return {g: accuracy_cells(verdicts[keys == g], labels[keys == g], orders) for g in sorted(set(groups))}


def macro_accuracy(by_group: Mapping[str, ColumnTable[AccuracyCell]]) -> ColumnTable[float]:
    """Per column, the mean over groups of the group accuracy (groups with nothing counted skipped).

    Args:
        by_group: group -> accuracy cells, as :func:`grouped_accuracy` returns.

    Returns:
        The macro accuracy per column, NaN where no group counted anything.
    """
    means = []
    for column in COLUMNS:
        counted = [cells[column].accuracy for cells in by_group.values() if cells[column].n > 0]
        means.append(float(np.mean(counted)) if counted else float("nan"))
    return ColumnTable.of(means)


def position_cells(verdicts: IntArray) -> ColumnTable[PositionCell]:
    """Position consistency and first-position picks as counts, per dimension and pooled.

    Args:
        verdicts: (n_cases, 2, n_dims).

    Returns:
        One :class:`~medrewardbench.metrics.results.PositionCell` per dimension, then the pooled one.
    """
    consistent, both = stats.position_consistency_counts(verdicts)
    picked, answered = stats.first_position_counts(verdicts)
    sums = [a.sum(axis=0).tolist() for a in (both, consistent, answered, picked)]
    cells = [PositionCell(*(int(v) for v in values)) for values in zip(*sums, strict=True)]
    return ColumnTable.of([*cells, PositionCell(*(int(sum(values)) for values in sums))])


def request_counts(verdicts: IntArray) -> RequestCounts:
    """Requests run (with or without a verdict), and requests that failed on every dimension.

    Args:
        verdicts: (n_cases, 2, n_dims).

    Returns:
        The two counts.
    """
    run = verdicts[:, :, 0] != NOT_RUN
    failed = (verdicts == FAILED).all(axis=2) & run
    return RequestCounts(judged=int(run.sum()), failed=int(failed.sum()))


def run_metrics(data: RunData, group_fields: Sequence[str] = (STRATA,)) -> RunMetrics:
    """Every point estimate of a run with the counts behind it.

    Args:
        data: the run's arrays.
        group_fields: metadata fields to group by (organ_system first by convention; its groups
            also give the macro average).

    Returns:
        The run's :class:`~medrewardbench.metrics.results.RunMetrics`.
    """
    run_orders = [ORDER_INDEX[o] for o in data.orders]
    by: dict[str, dict[str, ColumnTable[AccuracyCell]]] = {}
    macro = None
    for field_name in dict.fromkeys(group_fields):
        values = data.groups.get(field_name, ("unknown",) * data.n_cases)
        by[field_name] = grouped_accuracy(data.verdicts, data.labels, values, run_orders)
        if field_name == STRATA:
            macro = macro_accuracy(by[field_name])
    return RunMetrics(
        n_cases=data.n_cases,
        orders=tuple(o.value for o in data.orders),
        accuracy=accuracy_cells(data.verdicts, data.labels, run_orders),
        by_order={o.value: accuracy_cells(data.verdicts, data.labels, [ORDER_INDEX[o]]) for o in data.orders},
        by=by,
        macro=macro,
        position=position_cells(data.verdicts),
        requests=request_counts(data.verdicts),
        failures=dict(data.failures),
    )
