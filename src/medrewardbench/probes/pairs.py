"""The machinery the pair probes share: derived cases, their data set, judging them, reading them back, rates.

A pair probe (counterfactual pairs, the bias card) turns each parent case into derived cases
whose id is ``<parent id>~<probe>~<variant>`` and whose metadata records, as flat strings that the
store keeps as grouping fields (:data:`PROBE_KEYS`): the probe, the edit type, its severity
(``"0"`` for none), the parent case and which response (``"1"`` or ``"2"``) holds the parent's
original answer. The derived cases become a :class:`~medrewardbench.data.benchmark.Benchmark`
whose source names the probe and the parent data (``probe:counterfactual(<hash[:12]>)``), judged
by the ordinary eval job in both orders into the same results store, and read back from the
store alone: every figure can be recomputed from the store.

Intervals resample **parent cases** (the derived cases of one parent share its image, question and
answer, so they are not independent): per-case counts are summed per parent first, then
:func:`medrewardbench.metrics.stats.ratio_ci` draws one weight matrix for every rate of a run.
When every parent agrees (no parent shows the event, or every one does) the resamples all give
the same rate and the percentile interval has width 0; such an interval is widened to the
binomial interval on the number of parents (:mod:`medrewardbench.metrics.stats.floor`: 0 of 12
parents gives ``[0, 0.265]``), so a probe never claims certainty that a few parents cannot give.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from medrewardbench.cases import Case
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Order, Winner
from medrewardbench.evaluation.job import EvaluationResult, ProgressSink, evaluate
from medrewardbench.evaluation.store import RunRecord, Store
from medrewardbench.judges.base import Judge
from medrewardbench.judges.registry import JudgeOptions, build_judge
from medrewardbench.metrics import stats
from medrewardbench.metrics.core import CaseTable, RunData, load_case_table, load_run_data
from medrewardbench.probes.derive import PARENT_KEY, PREVIOUS_PARENT_KEY, PROBE_KEY

__all__ = [
    "ORIGINAL_KEY",
    "PARENT_KEY",
    "PROBE_KEY",
    "PROBE_KEYS",
    "SEVERITY_KEY",
    "TYPE_KEY",
    "ProbeData",
    "ProbeFigures",
    "Rate",
    "SkipTally",
    "derived_benchmark",
    "derived_case",
    "dimension_index",
    "grouped_rates",
    "load_probe_data",
    "original_answer",
    "placement",
    "probe_case_id",
    "run_probe",
]

TYPE_KEY = "probe_type"
SEVERITY_KEY = "probe_severity"
ORIGINAL_KEY = "probe_original"
PROBE_KEYS = (PROBE_KEY, TYPE_KEY, SEVERITY_KEY, PARENT_KEY, ORIGINAL_KEY)
"""The metadata every derived case carries (strings, so the store keeps them as grouping fields);
the probe and the parent under the keys every probe uses (:mod:`medrewardbench.probes.derive`)."""


def probe_case_id(parent_id: str, probe: str, variant: str) -> str:
    """``<parent id>~<probe>~<variant>``.

    Args:
        parent_id: the parent case's id.
        probe: the probe's name (``counterfactual``, ``bias``).
        variant: the variant (an edit type, ``control``, ``authority-1``).

    Returns:
        The derived case's id.
    """
    return f"{parent_id}~{probe}~{variant}"


def original_answer(case: Case, dimension: str = "overall") -> tuple[Winner, str]:
    """The answer a probe edits: the experts' better response on ``dimension``, else ``response_1``.

    Args:
        case: the parent case.
        dimension: the dimension whose label picks the answer.

    Returns:
        (its source index, its text).
    """
    index: Winner = case.label(dimension) or 1
    return index, case.response(index)


def placement(seed: int, case_id: str, variant: str) -> Winner:
    """Where the original answer goes (1 or 2), from a hash of (seed, case, variant): balanced, reproducible.

    Args:
        seed: the probe's seed.
        case_id: the parent case's id.
        variant: the variant.

    Returns:
        1 or 2.
    """
    digest = hashlib.blake2b(f"{seed}\x1f{case_id}\x1f{variant}".encode(), digest_size=1).digest()
    return 1 if digest[0] & 1 == 0 else 2


def derived_case(
    parent: Case,
    probe: str,
    variant: str,
    response_1: str,
    response_2: str,
    *,
    probe_type: str,
    original: Winner,
    severity: int = 0,
    labels: Mapping[str, Winner] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Case:
    """A parent case with new responses, a derived id and the probe's metadata.

    Args:
        parent: the parent case (image, question, grouping fields and metadata are kept).
        probe: the probe's name.
        variant: the variant (part of the id).
        response_1: the first response.
        response_2: the second response.
        probe_type: the edit type (``laterality``, ``paraphrase``, ``control``, ``authority``).
        original: which response is the parent's original answer (1 or 2).
        severity: 1-4 for an injected error, 0 otherwise.
        labels: the labels by construction (none for a pair where either answer is acceptable).
        extra: more metadata (what changed).

    Returns:
        The derived case, without annotations or adjudications (they were about the parent pair).
    """
    metadata = {
        **parent.metadata,
        **(extra or {}),
        PROBE_KEY: probe,
        TYPE_KEY: probe_type,
        SEVERITY_KEY: str(severity),
        PARENT_KEY: parent.case_id,
        ORIGINAL_KEY: str(original),
    }
    return replace(
        parent,
        case_id=probe_case_id(parent.case_id, probe, variant),
        response_1=response_1,
        response_2=response_2,
        labels=dict(labels or {}),
        metadata=metadata,
        annotations=(),
        adjudications=(),
        label_sources={},
        _hash_cache={},
    )


@dataclass
class SkipTally:
    """How many parent answers each edit type skipped, and why."""

    made: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)

    def add_made(self, kind: str) -> None:
        """One more derived case of ``kind``."""
        self.made[kind] = self.made.get(kind, 0) + 1

    def add_skip(self, kind: str, reason: str) -> None:
        """One more answer that ``kind`` did not apply to, for ``reason``."""
        reasons = self.skipped.setdefault(kind, {})
        reasons[reason] = reasons.get(reason, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        """``{"made": {kind: n}, "skipped": {kind: {reason: n}}}``."""
        return {"made": dict(self.made), "skipped": {k: dict(v) for k, v in self.skipped.items()}}


def derived_benchmark(probe: str, parent: Benchmark, cases: Sequence[Case]) -> Benchmark:
    """The derived cases as a data set named for the probe and its parent data.

    Args:
        probe: the probe's name.
        parent: the parent data (its fingerprint goes into the source).
        cases: the derived cases.

    Returns:
        ``Benchmark("<parent>~<probe>", "probe:<probe>(<parent hash[:12]>)", cases)``.
    """
    return Benchmark(f"{parent.name}~{probe}", f"probe:{probe}({parent.data_hash()[:12]})", cases)


def run_probe(
    benchmark: Benchmark,
    judge_specs: Sequence[str],
    out_dir: str | Path,
    *,
    options: JudgeOptions | None = None,
    progress: ProgressSink | None = None,
    judge_factory: Callable[[str, JudgeOptions], Judge] = build_judge,
    fresh: bool = False,
) -> EvaluationResult:
    """Judge the derived data in both orders with the ordinary eval job, into ``out_dir``'s store.

    Args:
        benchmark: the derived data set.
        judge_specs: the judges.
        out_dir: the output directory (the store is shared with eval and the other probes).
        options: judge settings.
        progress: progress receiver.
        judge_factory: how a spec becomes a judge.
        fresh: forget stored judgments of these judges on this data first.

    Returns:
        The eval job's result.
    """
    return evaluate(
        benchmark,
        judge_specs,
        out_dir,
        orders=(Order.ORIGINAL, Order.SWAPPED),
        options=options,
        progress=progress,
        judge_factory=judge_factory,
        fresh=fresh,
        write_files=False,  # the directory's metrics.json and judgments.jsonl keep describing the user's data
    )


@dataclass(frozen=True)
class ProbeData:
    """A derived data set as the store holds it, with every run on it.

    Attributes:
        cases: the case table (the probe's metadata in ``groups``).
        runs: one :class:`~medrewardbench.metrics.core.RunData` per judge, in the store's order.
        parents: the parent id of each derived case.
        parent_ids: the distinct parents, in order of first appearance.
        parent_index: the position of each derived case's parent in ``parent_ids``.
    """

    cases: CaseTable
    runs: tuple[RunData, ...]
    parents: tuple[str, ...]
    parent_ids: tuple[str, ...]
    parent_index: npt.NDArray[np.intp]

    def field(self, name: str) -> npt.NDArray[np.object_]:
        """One metadata field of every derived case (``"unknown"`` where absent)."""
        values = self.cases.groups.get(name, ("unknown",) * self.cases.n_cases)
        return np.asarray(values, dtype=object)

    def per_parent(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Per-case counts summed per parent: (n_cases, ...) -> (n_parents, ...).

        Args:
            values: per derived case counts.

        Returns:
            The sums per parent, in :attr:`parent_ids` order.
        """
        array = np.asarray(values, dtype=np.int64)
        out = np.zeros((len(self.parent_ids), *array.shape[1:]), dtype=np.int64)
        np.add.at(out, self.parent_index, array)
        return out


def load_probe_data(store: Store, data_hash: str, judges: Sequence[str] | None = None) -> ProbeData:
    """Read a derived data set and its runs back from the store.

    Args:
        store: the results store.
        data_hash: the derived data's fingerprint.
        judges: keep only the runs of these judge specs (all when None).

    Returns:
        The :class:`ProbeData`.

    Raises:
        ValueError: the data's cases carry no probe metadata.
    """
    cases = load_case_table(store, data_hash)
    # a store the pair probes wrote before the parent key was shared holds it under its old name
    # (derive.PREVIOUS_PARENT_KEY); the store keeps a data set's first case rows when it is resumed
    parent_key = next((k for k in (PARENT_KEY, PREVIOUS_PARENT_KEY) if k in cases.groups), None)
    if parent_key is None:
        raise ValueError(f"data {data_hash[:12]} is not a probe's derived data (no {PARENT_KEY} field)")
    records: list[RunRecord] = [r for r in store.runs_on_data(data_hash) if judges is None or r.judge_spec in judges]
    runs = tuple(load_run_data(store, record, cases) for record in records)
    parents = tuple(cases.groups[parent_key])
    parent_ids = tuple(dict.fromkeys(parents))
    lookup = {p: i for i, p in enumerate(parent_ids)}
    index = np.array([lookup[p] for p in parents], dtype=np.intp)
    return ProbeData(cases, runs, parents, parent_ids, index)


def dimension_index(dimension: str) -> int:
    """The position of a dimension on the verdict arrays' last axis.

    Raises:
        ValueError: an unknown dimension.
    """
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; choose one of {', '.join(DIMENSIONS)}")
    return DIMENSIONS.index(dimension)


@dataclass(frozen=True)
class ProbeFigures:
    """What every pair probe's figures share: the settings they were measured with, and the JSON file's shape.

    A probe's figures subclass it, name the probe (:attr:`PROBE`) and give their own part of the
    JSON (:meth:`body`); :meth:`as_dict` puts the settings first, and :meth:`document` wraps it
    with the data it was measured on, as ``probe-<name>.json`` holds it.
    """

    PROBE: ClassVar[str] = ""
    """The probe's name (``counterfactual``, ``bias``)."""

    dimension: str
    confidence: float
    n_resamples: int
    n_parents: int

    def body(self) -> dict[str, Any]:
        """The probe's own figures, JSON-ready (after the settings in :meth:`as_dict`)."""
        raise NotImplementedError

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the settings, then :meth:`body`."""
        settings = {
            "dimension": self.dimension,
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
            "n_parents": self.n_parents,
        }
        return {**settings, **self.body()}

    def document(self, derived: Benchmark, parent: Benchmark, tally: SkipTally) -> dict[str, Any]:
        """The whole JSON file: the probe, the data measured on, the pairs made and skipped, the figures.

        Args:
            derived: the derived data set that was judged.
            parent: the data it was derived from.
            tally: the pairs made and skipped per type.

        Returns:
            What ``probe-<name>.json`` holds.
        """
        data = {
            "name": derived.name,
            "source": derived.source,
            "data_hash": derived.data_hash(),
            "parent": parent.source,
        }
        return {"probe": self.PROBE, "data": data, "pairs": tally.as_dict(), **self.as_dict()}


@dataclass(frozen=True)
class Rate:
    """A rate with its case-bootstrap percentile interval (parent cases resampled; never zero-width).

    Attributes:
        point: the ratio of sums (NaN when nothing was counted).
        low: the interval's lower end.
        high: its upper end.
        n: the requests (or cases) counted.
        successes: the numerator's sum (weighted for a weighted rate).
    """

    point: float
    low: float
    high: float
    n: int
    successes: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: NaN becomes None."""
        return {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in self.__dict__.items()}


def grouped_rates(
    numerators: npt.ArrayLike,
    denominators: npt.ArrayLike,
    names: Sequence[str],
    weights: npt.NDArray[np.float64],
    *,
    confidence: float = 0.95,
) -> dict[str, Rate]:
    """One rate per group of per-parent counts, all on the same resamples.

    Args:
        numerators: (n_parents, n_cols) counts (or weighted counts).
        denominators: the same shape.
        names: the name of each column.
        weights: (B, n_parents) bootstrap weights.
        confidence: interval coverage.

    Returns:
        column name -> :class:`Rate`.
    """
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    estimate = stats.ratio_ci(num, den, weights=weights, confidence=confidence, small_sample=True)
    sums = num.sum(axis=0)
    return {
        name: Rate(
            float(estimate.point[j]),
            float(estimate.low[j]),
            float(estimate.high[j]),
            int(den[:, j].sum()),
            float(sums[j]),
        )
        for j, name in enumerate(names)
    }
