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

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.evaluation.store import RunRecord, Store
from medrewardbench.metrics import stats
from medrewardbench.metrics.annotators import MISSING as MISSING_RATING
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
    preferences: npt.NDArray[np.float64] | None = None
    """(n_cases, 2, n_dims) the judge's probability that ``response_1`` is better, per order (source
    order); NaN where the request gave none; None when the run has no probabilities at all
    (:mod:`medrewardbench.metrics.confidence`)"""

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
            preferences=None if self.preferences is None else self.preferences[idx],
        )


@dataclass(frozen=True)
class CaseTable:
    """What metrics need of a data set's cases, as the store keeps them, in case order.

    Attributes:
        data_hash: the data fingerprint.
        case_ids: one id per case.
        labels: (n_cases, n_dims) int8 expert labels.
        lengths: (n_cases, 2) response lengths.
        groups: field -> the value of every case (the same string objects repeat: a field with a
            few values costs a pointer per case).
        position_index: the index of the case stored at each position, when the store's positions
            are not simply 0, 1, 2, ... (None when they are).
        ratings: per-annotator labels (n_cases, n_annotators, n_dims) int8, or None when the data
            has none.
        annotators: the annotator of each column of ``ratings``.
    """

    data_hash: str
    case_ids: tuple[str, ...]
    labels: IntArray
    lengths: npt.NDArray[np.int64]
    groups: Mapping[str, tuple[str, ...]]
    position_index: npt.NDArray[np.int64] | None = None
    ratings: IntArray | None = None
    annotators: tuple[str, ...] = ()

    @property
    def n_cases(self) -> int:
        """How many cases the table holds."""
        return len(self.case_ids)


def load_case_table(store: Store, data_hash: str) -> CaseTable:
    """Read a data set's cases from the store into arrays, a block of rows at a time.

    Args:
        store: the results store.
        data_hash: the data fingerprint.

    Returns:
        The :class:`CaseTable`; group values are interned, so repeated values share one string.
    """
    case_ids: list[str] = []
    label_rows = bytearray()
    length_rows: list[tuple[int, int]] = []
    group_values: dict[str, list[str]] = {}
    seen: dict[str, str] = {}
    dims = {dim: j for j, dim in enumerate(DIMENSIONS)}
    positions: list[int] = []
    contiguous = True
    annotated: list[tuple[int, str, dict[str, int]]] = []  # only the cases that have annotations
    for index, (case_id, _hash, labels_json, groups_json, len_1, len_2, position, annotations_json) in enumerate(
        store.iter_case_rows(data_hash)
    ):
        if annotations_json:
            for record in json.loads(annotations_json):
                annotator = seen.setdefault(str(record["annotator"]), str(record["annotator"]))
                annotated.append((index, annotator, {str(k): int(v) for k, v in record["labels"].items()}))
        contiguous = contiguous and position == index
        if not contiguous:
            positions.append(position)
        case_ids.append(case_id)
        row = [0] * len(DIMENSIONS)
        for dim, winner in json.loads(labels_json).items():
            if dim in dims:
                row[dims[dim]] = int(winner)
        label_rows.extend(row)
        length_rows.append((len_1, len_2))
        for field_name, value in json.loads(groups_json).items():
            values = group_values.get(field_name)
            if values is None:
                values = group_values[field_name] = ["unknown"] * index
            values.append(seen.setdefault(value, value))
        for values in group_values.values():
            if len(values) <= index:
                values.append("unknown")
    n = len(case_ids)
    labels = np.frombuffer(bytes(label_rows), dtype=np.int8).reshape(n, len(DIMENSIONS)).copy()
    lengths = np.array(length_rows, dtype=np.int64).reshape(n, 2)
    position_index = None
    if positions:  # positions with gaps (never written so, but read safely): map them to indices
        stored = np.concatenate([np.arange(n - len(positions)), np.array(positions, dtype=np.int64)])
        position_index = np.full(int(stored.max()) + 1, -1, dtype=np.int64)
        position_index[stored] = np.arange(n)
    annotators = tuple(sorted({name for _, name, _ in annotated}))
    ratings = None
    if annotators:
        column = {name: k for k, name in enumerate(annotators)}
        ratings = np.full((n, len(annotators), len(DIMENSIONS)), MISSING_RATING, dtype=np.int8)
        for index, name, given in annotated:
            for dim, value in given.items():
                if dim in dims:
                    ratings[index, column[name], dims[dim]] = value
    return CaseTable(
        data_hash=data_hash,
        case_ids=tuple(case_ids),
        labels=labels,
        lengths=lengths,
        groups={f: tuple(group_values[f]) for f in sorted(group_values)},
        position_index=position_index,
        ratings=ratings,
        annotators=annotators,
    )


def load_preferences(store: Store, run: RunRecord, cases: CaseTable | None = None) -> npt.NDArray[np.float64] | None:
    """Read a run's stored probabilities into the layout of :attr:`RunData.preferences`.

    One query over the judgments that hold probabilities only; the verdicts' path
    (:func:`load_run_data` without ``preferences``) never reads them.

    Args:
        store: the results store.
        run: the run record.
        cases: the run's cases when already read.

    Returns:
        (n_cases, 2, n_dims) P(``response_1`` is better) per order, NaN where a request gave none;
        None when no judgment of the run has a probability.

    Raises:
        ValueError: ``cases`` belong to other data.
    """
    if cases is None:
        cases = load_case_table(store, run.data_hash)
    elif cases.data_hash != run.data_hash:
        raise ValueError(f"the case table is of data {cases.data_hash[:12]}, the run of {run.data_hash[:12]}")
    out: npt.NDArray[np.float64] | None = None
    for block in store.iter_preference_rows(run):
        table = np.array(block, dtype=np.float64).reshape(-1, 1 + len(DIMENSIONS))  # None -> NaN
        keys = table[:, 0].astype(np.int64)
        positions = keys // 2
        if cases.position_index is not None:
            positions = cases.position_index[positions]
        if out is None:
            out = np.full((cases.n_cases, 2, len(DIMENSIONS)), np.nan, dtype=np.float64)
        out[positions, keys % 2] = table[:, 1:]
    if out is not None and np.isnan(out).all():
        return None
    return out


def load_run_data(
    store: Store, run: RunRecord, cases: CaseTable | None = None, *, preferences: bool = False
) -> RunData:
    """Read one run from the store into arrays.

    Args:
        store: the results store.
        run: the run record.
        cases: the run's cases when already read (:func:`load_case_table` on ``run.data_hash``);
            runs on the same data share it.
        preferences: also read the judge's probabilities (:func:`load_preferences`), for
            confidences; off by default, so that the verdicts' path stays one narrow query.

    Returns:
        The run's arrays; requests without a stored judgment are marked not run (-1).

    Raises:
        ValueError: ``cases`` belong to other data.
    """
    if cases is None:
        cases = load_case_table(store, run.data_hash)
    elif cases.data_hash != run.data_hash:
        raise ValueError(f"the case table is of data {cases.data_hash[:12]}, the run of {run.data_hash[:12]}")
    n, d = cases.n_cases, len(DIMENSIONS)
    verdicts = np.full((n, 2, d), NOT_RUN, dtype=np.int8)
    prompt_tokens = completion_tokens = n_failed = 0
    latencies: list[float] = []
    powers = 3 ** np.arange(d, dtype=np.int64)
    for block in store.iter_verdict_rows(run):
        table = np.array(block, dtype=np.float64).reshape(-1, 5)  # small integers and token counts: exact
        key, code = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
        prompt_tokens += int(table[:, 2].astype(np.int64).sum())
        completion_tokens += int(table[:, 3].astype(np.int64).sum())
        latencies.append(math.fsum(table[:, 4].tolist()))
        positions, orders = key // 2, key % 2
        if cases.position_index is not None:
            positions = cases.position_index[positions]
        packed = (code // 2)[:, None] // powers[None, :] % 3  # (rows, dims): 1, 2 or 0 (no verdict)
        failed = code % 2 == 1
        n_failed += int(failed.sum())
        values = np.where(failed[:, None], FAILED, packed)  # a failed request has no verdict
        verdicts[positions, orders] = values.astype(np.int8)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "latency_s": math.fsum(latencies)}
    return RunData(
        run_id=run.run_id,
        judge_spec=run.judge_spec,
        data_hash=run.data_hash,
        case_ids=cases.case_ids,
        verdicts=verdicts,
        labels=cases.labels,
        lengths=cases.lengths,
        groups=cases.groups,
        orders=run.orders,
        failures=store.failure_counts(run) if n_failed else {},  # its reasons: another pass, when needed
        usage=usage,
        config=run.config,
        metadata=run.metadata,
        ratings=cases.ratings,
        annotators=cases.annotators,
        preferences=load_preferences(store, run, cases) if preferences else None,
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
