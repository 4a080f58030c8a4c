"""The shared plumbing of every probe: derived data sets, their runs in the parent's store, paired figures.

A probe changes something about each case of a data set (its image, an answer's wording) and asks
whether the judge's verdict moves. It does so in three steps, each here:

1. **Derive**: :func:`derive_case` copies a parent case with its change, under the id
   ``<parent id>~<probe>~<variant>`` and with ``metadata`` naming the probe, the variant and the
   parent; :func:`derived_benchmark` wraps the copies as an ordinary
   :class:`~medrewardbench.data.benchmark.Benchmark` whose name names the probe, the variant and
   the parent's data fingerprint (``probe:grounding:no-image(3f2a9c1b0d4e)``). Its data fingerprint
   differs from the parent's (the ids and the contents differ), so its runs never mix with the
   parent's.
2. **Run**: :func:`run_probe` judges the derived sets and then the parent with the ordinary eval
   job (:func:`medrewardbench.evaluation.job.evaluate`) into one output directory, so the derived
   runs sit in the same resumable, fingerprinted SQLite store as the parent run; the parent comes
   last, so the directory's ``metrics.json`` and ``judgments.jsonl`` describe the parent data.
3. **Pair**: :func:`paired_runs` reads a parent run and a derived run back
   (:func:`~medrewardbench.metrics.core.load_run_data`) and lines their verdicts up by parent case;
   :func:`flip_counts`, :func:`agreement_counts` and :func:`paired_difference_ci` give per-case
   counts and paired case-bootstrap intervals on one weight matrix
   (:func:`~medrewardbench.metrics.stats.bootstrap_weights`), so every figure of a probe is
   resampled on the same cases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from medrewardbench.cases import PARENT_CASE_KEY, Case
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import Order
from medrewardbench.evaluation.job import EvaluationResult, ProgressSink, evaluate
from medrewardbench.evaluation.store import RunRecord, Store
from medrewardbench.judges.registry import JudgeOptions
from medrewardbench.metrics.core import RunData, load_run_data
from medrewardbench.metrics.stats import (
    FAILED,
    NOT_RUN,
    CountArray,
    Estimate,
    FloatArray,
    IntArray,
    percentile_interval,
    ratio,
    resampled_sums,
)
from medrewardbench.metrics.stats.floor import floor_degenerate

__all__ = [
    "ID_SEPARATOR",
    "PARENT_KEY",
    "PREVIOUS_PARENT_KEY",
    "PROBE_KEY",
    "VARIANT_KEY",
    "PairedRuns",
    "ProbeRuns",
    "agreement_counts",
    "derive_case",
    "derived_benchmark",
    "derived_id",
    "estimate_dict",
    "flip_counts",
    "paired_difference_ci",
    "paired_runs",
    "parent_id",
    "run_probe",
]

ID_SEPARATOR = "~"
"""Joins a parent case id, the probe and the variant into a derived case id."""
PROBE_KEY = "probe"
VARIANT_KEY = "probe_variant"
PARENT_KEY = PARENT_CASE_KEY
"""The metadata keys a derived case carries (the probe, the variant, the parent case's id); every
probe writes and reads the parent under ``PARENT_KEY`` (``"parent_case_id"``, defined in
:mod:`medrewardbench.cases` so that ``baseline:random`` can read it too)."""
PREVIOUS_PARENT_KEY = "probe_parent"
"""The parent's key in the pair probes' (counterfactual, bias) derived cases as first merged (issue
23): a results store they wrote holds it as the cases' grouping field, and
:func:`medrewardbench.probes.pairs.load_probe_data` still reads it there (the one place derived
data is read back; the data fingerprint does not cover metadata, so resuming such a store keeps
its rows)."""


def derived_id(parent: str, probe: str, variant: str) -> str:
    """The id of a derived case: ``<parent>~<probe>~<variant>``.

    Args:
        parent: the parent case's id.
        probe: the probe's name (``grounding``).
        variant: the variant (``no-image``).

    Returns:
        The derived id.

    Raises:
        ValueError: a probe or variant name containing the separator or empty.
    """
    for name in (probe, variant):
        if not name or ID_SEPARATOR in name:
            raise ValueError(f"probe and variant names must be non-empty and free of {ID_SEPARATOR!r}: {name!r}")
    return f"{parent}{ID_SEPARATOR}{probe}{ID_SEPARATOR}{variant}"


def parent_id(case: Case) -> str:
    """The parent case id of a derived case (its own id for a case that is not derived).

    Args:
        case: any case.

    Returns:
        ``metadata[PARENT_KEY]`` when present, else ``case_id``.
    """
    value = case.metadata.get(PARENT_KEY)
    return str(value) if value else case.case_id


def derive_case(
    parent: Case, probe: str, variant: str, *, metadata: Mapping[str, Any] | None = None, **changes: Any
) -> Case:
    """A copy of a case with a probe's change, under a derived id and with its provenance in metadata.

    Args:
        parent: the case to derive from.
        probe: the probe's name.
        variant: the variant's name.
        metadata: extra metadata for the copy (for example which window a control used).
        **changes: Case fields to replace (``image=...``, ``response_2=...``).

    Returns:
        The derived case (labels, annotations and grouping fields kept unless changed).
    """
    merged = {**parent.metadata, **(metadata or {}), PROBE_KEY: probe, VARIANT_KEY: variant, PARENT_KEY: parent.case_id}
    return dataclasses.replace(
        parent,
        case_id=derived_id(parent.case_id, probe, variant),
        metadata=merged,
        _hash_cache={},
        **changes,
    )


def derived_benchmark(parent: Benchmark, probe: str, variant: str, cases: Sequence[Case]) -> Benchmark:
    """Wrap derived cases as a benchmark named for the probe, the variant and the parent's fingerprint.

    Args:
        parent: the data the cases were derived from (hashed here if it was not yet).
        probe: the probe's name.
        variant: the variant's name.
        cases: the derived cases, in the parent's order.

    Returns:
        ``Benchmark("probe:<probe>:<variant>(<parent hash[:12]>)", <parent source>, cases)`` with
        the parent's label provenance.
    """
    name = f"probe:{probe}:{variant}({parent.data_hash()[:12]})"
    return Benchmark(name, parent.source, cases, labels=parent.labels)


@dataclass(frozen=True)
class ProbeRuns:
    """The runs :func:`run_probe` made or found: the parent's and each variant's, per judge spec.

    Attributes:
        out_dir: the output directory (its ``results.sqlite`` holds every run).
        parent: judge spec -> the parent run.
        variants: variant -> judge spec -> the run on that variant's derived data.
        data: variant -> its derived benchmark (``""`` for the parent).
    """

    out_dir: Path
    parent: Mapping[str, RunRecord]
    variants: Mapping[str, Mapping[str, RunRecord]]
    data: Mapping[str, Benchmark]


def _runs_by_spec(result: EvaluationResult) -> dict[str, RunRecord]:
    return {run.judge_spec: run for run in result.runs}


def run_probe(
    parent: Benchmark,
    variants: Mapping[str, Benchmark],
    judge_specs: Sequence[str],
    out_dir: str | Path,
    *,
    orders: Sequence[Order] = (Order.ORIGINAL, Order.SWAPPED),
    options: JudgeOptions | None = None,
    progress: ProgressSink | None = None,
    fresh: bool = False,
    retry_failures: bool = False,
) -> ProbeRuns:
    """Judge every derived data set, then the parent, with the eval job into one store.

    Stored judgments are reused (the same judge configuration on the same data fingerprint), so
    a probe that was interrupted resumes, and the parent run an earlier ``eval --out DIR`` made is
    not judged again.

    Args:
        parent: the parent data.
        variants: variant name -> derived benchmark (an empty benchmark is skipped).
        judge_specs: judges.
        out_dir: the output directory (shared with ``eval``).
        orders: presentation orders.
        options: judge settings.
        progress: progress receiver.
        fresh: forget stored judgments of these judges first.
        retry_failures: judge again requests that failed.

    Returns:
        The runs, per variant and judge.
    """
    out = Path(out_dir)
    common: dict[str, Any] = {
        "orders": orders,
        "options": options,
        "progress": progress,
        "fresh": fresh,
        "retry_failures": retry_failures,
    }
    found: dict[str, dict[str, RunRecord]] = {}
    for variant, benchmark in variants.items():
        if len(benchmark):
            found[variant] = _runs_by_spec(evaluate(benchmark, judge_specs, out, **common))
    parent_runs = _runs_by_spec(evaluate(parent, judge_specs, out, **common))
    return ProbeRuns(out, parent_runs, found, {"": parent, **variants})


@dataclass(frozen=True)
class PairedRuns:
    """A parent run and a derived run lined up by parent case (the cases both cover, parent order).

    Attributes:
        case_ids: parent case ids.
        labels: (n, n_dims) expert labels (from the parent run).
        base: (n, 2, n_dims) the parent run's verdicts.
        probe: (n, 2, n_dims) the derived run's verdicts on the same cases.
        groups: field -> value per case (from the parent run).
    """

    case_ids: tuple[str, ...]
    labels: IntArray
    base: IntArray
    probe: IntArray
    groups: Mapping[str, tuple[str, ...]]

    @property
    def n_cases(self) -> int:
        """How many cases both runs cover."""
        return len(self.case_ids)


def _pair(base: RunData, probe: RunData) -> PairedRuns:
    position = {case_id: i for i, case_id in enumerate(base.case_ids)}
    base_rows: list[int] = []
    probe_rows: list[int] = []
    for j, case_id in enumerate(probe.case_ids):
        parent = case_id.rsplit(ID_SEPARATOR, 2)[0] if case_id.count(ID_SEPARATOR) >= 2 else case_id
        i = position.get(parent)
        if i is not None:
            base_rows.append(i)
            probe_rows.append(j)
    order = np.argsort(np.asarray(base_rows, dtype=np.int64), kind="stable")
    b = np.asarray(base_rows, dtype=np.int64)[order]
    p = np.asarray(probe_rows, dtype=np.int64)[order]
    return PairedRuns(
        case_ids=tuple(base.case_ids[i] for i in b),
        labels=base.labels[b],
        base=base.verdicts[b],
        probe=probe.verdicts[p],
        groups={k: tuple(v[i] for i in b) for k, v in base.groups.items()},
    )


def paired_runs(store: Store, parent_run: RunRecord, derived_run: RunRecord) -> PairedRuns:
    """Read a parent run and a derived run from the store and line their verdicts up by parent case.

    A derived case ``<parent>~<probe>~<variant>`` is paired with the parent case ``<parent>``;
    derived cases whose parent the parent run lacks are left out.

    Args:
        store: the results store.
        parent_run: the run on the parent data.
        derived_run: the same judge's run on derived data.

    Returns:
        The paired verdicts.
    """
    return _pair(load_run_data(store, parent_run), load_run_data(store, derived_run))


def flip_counts(base: IntArray, probe: IntArray) -> tuple[CountArray, CountArray]:
    """Per case and dimension: requests whose verdict changed, and requests answered under both.

    A request counts when its order was run and gave a verdict (1 or 2) under both conditions;
    a failure under either is left out here (its rate is reported beside), so a judge that fails
    without the image is not mistaken for one whose verdicts moved.

    Args:
        base: (n, 2, n_dims) verdicts under the true condition.
        probe: (n, 2, n_dims) verdicts under the control.

    Returns:
        ``(flipped, answered)``, int arrays (n, n_dims) with values 0 to 2.
    """
    answered = (base != NOT_RUN) & (base != FAILED) & (probe != NOT_RUN) & (probe != FAILED)
    flipped = answered & (base != probe)
    return flipped.sum(axis=1, dtype=np.int64), answered.sum(axis=1, dtype=np.int64)


def agreement_counts(verdicts: IntArray, labels: IntArray) -> tuple[CountArray, CountArray]:
    """Per case and dimension: requests agreeing with the label, and requests counted (failures count wrong).

    Args:
        verdicts: (n, 2, n_dims).
        labels: (n, n_dims).

    Returns:
        ``(correct, counted)``, int arrays (n, n_dims).
    """
    lab = labels[:, None, :]
    counted = (verdicts != NOT_RUN) & (lab != 0)
    correct = counted & (verdicts == lab)
    return correct.sum(axis=1, dtype=np.int64), counted.sum(axis=1, dtype=np.int64)


def _divide(num: FloatArray, den: FloatArray) -> FloatArray:
    out = np.full(np.broadcast_shapes(num.shape, den.shape), np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def paired_difference_ci(
    first: tuple[npt.ArrayLike, npt.ArrayLike],
    second: tuple[npt.ArrayLike, npt.ArrayLike],
    weights: npt.ArrayLike,
    *,
    cases: npt.ArrayLike | None = None,
    confidence: float = 0.95,
) -> Estimate:
    """The difference of two ratios of sums over the same cases, with a paired case-bootstrap interval.

    Both ratios are resampled with the same rows of ``weights``, so the interval is that of the
    paired difference (the cases' own variability cancels), not of two independent figures. A
    zero-width interval (every case gives the same difference) is widened to the binomial interval
    on the cases counted (:func:`~medrewardbench.metrics.stats.floor.floor_degenerate` on [-1, 1]).

    Args:
        first: ``(numerators, denominators)`` per case, shape (n, ...).
        second: the same for the second ratio.
        weights: (B, n) resample weights (:func:`~medrewardbench.metrics.stats.bootstrap_weights`).
        cases: optional boolean mask or indices of the cases to use.
        confidence: interval coverage.

    Returns:
        An :class:`~medrewardbench.metrics.stats.Estimate` of ``first - second``; ``n`` is the
        first ratio's denominator.
    """
    arrays = [np.asarray(a) for a in (*first, *second)]
    w = np.asarray(weights)
    if cases is not None:
        index = np.asarray(cases)
        index = np.flatnonzero(index) if index.dtype == bool else index
        arrays = [a[index] for a in arrays]
        w = w[:, index]
    num_a, den_a, num_b, den_b = arrays
    sums = resampled_sums(w, np.stack(arrays, axis=1))
    samples = _divide(sums[:, 0], sums[:, 1]) - _divide(sums[:, 2], sums[:, 3])
    low, high = percentile_interval(samples, confidence)
    point = ratio(num_a, den_a) - ratio(num_b, den_b)
    units = ((den_a > 0) & (den_b > 0)).sum(axis=0)
    low, high = floor_degenerate(point, low, high, units, confidence, bounds=(-1.0, 1.0))
    return Estimate(point, low, high, den_a.sum(axis=0).astype(np.int64))


def estimate_dict(estimate: Estimate, index: int | tuple[int, ...] | None = None) -> dict[str, float | int | None]:
    """One cell of an estimate as JSON: ``{"point", "low", "high", "n"}`` (None for NaN).

    Args:
        estimate: the estimate.
        index: the cell (None for a scalar estimate).

    Returns:
        The cell as a plain dictionary.
    """

    def pick(array: npt.NDArray[Any]) -> Any:
        return array if index is None else array[index]

    def number(value: Any) -> float | None:
        value = float(value)
        return None if np.isnan(value) else round(value, 6)

    return {
        "point": number(pick(estimate.point)),
        "low": number(pick(estimate.low)),
        "high": number(pick(estimate.high)),
        "n": int(pick(estimate.n)),
    }
