"""Everything a report shows, computed once: intervals, tiers, paired tests and bias diagnostics.

:func:`analyze` turns the runs of one dataset into an :class:`~medrewardbench.metrics.results.Analysis`.
All statistics come from :mod:`medrewardbench.metrics.stats`; this module only decides what to
compute and which record holds it. One bootstrap weight matrix (cases resampled within organ
systems) is drawn once and reused for every judge, dimension, group and pair, so judges are
compared on the same resamples.

Besides the six dimensions, every accuracy-like table has a pooled column: the accuracy over all
six dimensions' requests together (correct / counted summed over dimensions). It equals the mean
of the six when every case is labelled on all six, and it is the leaderboard's score. Its paired
tests take the case as their unit, as every test does: the bootstrap resamples whole cases, and the
sign-flip test flips the sign of a case's difference summed over its dimensions and orders.

Why one module of this size: the one place that turns runs into the analysis record (leaderboard,
tiers, pairwise tests, the human ceiling, sensitivity); each part is a function, the module is their
composition.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import StoreError
from medrewardbench.evaluation.store import RunRecord, Store, find_stores
from medrewardbench.metrics import power, stats
from medrewardbench.metrics.core import CaseTable, RunData, load_case_table, load_run_data, request_counts
from medrewardbench.metrics.cost import recorded_cost
from medrewardbench.metrics.human import JudgeInput, gap_detectable, has_annotations, human_ceiling
from medrewardbench.metrics.resampling import RATIO_METRICS, Resampled, resample_runs
from medrewardbench.metrics.results import (
    COLUMNS,
    DEFAULT_EPSILON,
    POOLED,
    STRATA,
    Agreement,
    Analysis,
    ColumnTable,
    DatasetSummary,
    DimensionTable,
    Estimate,
    GroupBreakdown,
    HumanCeiling,
    LeaderboardRow,
    LengthBias,
    PairwiseComparison,
    PairwiseTests,
    PositionBias,
    RunAnalysis,
    Sensitivity,
    Settings,
    fixed,
    fixed_p,
)
from medrewardbench.metrics.selective_section import SelectiveSettings, coverage_at_risk, selective_section
from medrewardbench.metrics.stats import FloatArray, IntArray
from medrewardbench.utils.shorten import shorten_distinct

log = logging.getLogger(__name__)

BASELINE_PREFIX = "baseline:"


# --------------------------------------------------------------------------------------------
# Loading and checking runs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedRun:
    """A run's arrays together with its record, the store it came from and its labels' provenance.

    A run pooled from several stored runs (the held-out runs of a cross-validation's folds) lists
    them in ``parts``; an ordinary run is its own single part.
    """

    data: RunData
    record: RunRecord
    store_path: Path
    labels: LabelProvenance = UNKNOWN_LABELS
    parts: tuple[tuple[Path, RunRecord], ...] = ()

    @property
    def sources(self) -> tuple[tuple[Path, RunRecord], ...]:
        """(store file, stored run) of every run this one is made of."""
        return self.parts or ((self.store_path, self.record),)


@dataclass(frozen=True)
class DataSet:
    """The runs of one data set (one data fingerprint), as reports show them in one section."""

    data_hash: str
    name: str
    n_cases: int
    runs: tuple[LoadedRun, ...]

    @property
    def labels(self) -> LabelProvenance:
        """Where the labels come from: the first declared provenance among the runs' stores."""
        declared = [run.labels for run in self.runs if run.labels.declared]
        return declared[0] if declared else self.runs[0].labels


def group_by_data(bundles: Sequence[LoadedRun]) -> list[DataSet]:
    """Split loaded runs by data fingerprint, data sets in the order their first run was found.

    Args:
        bundles: loaded runs.

    Returns:
        One :class:`DataSet` per fingerprint.
    """
    groups: dict[str, list[LoadedRun]] = {}
    for bundle in bundles:
        groups.setdefault(bundle.record.data_hash, []).append(bundle)
    return [
        DataSet(data_hash, runs[0].record.dataset_name, runs[0].record.n_cases, tuple(runs))
        for data_hash, runs in groups.items()
    ]


def resolve_group_fields(dataset: DataSet, fields: Sequence[str]) -> list[str]:
    """Check ``--by`` fields against the stored cases of a data set (``metadata.site`` is ``site``).

    Args:
        dataset: the runs of one data set.
        fields: field names as given.

    Returns:
        The field names as stored, each once, ``organ_system`` first.

    Raises:
        ValueError: a field that no stored case has a value for (the message lists those there are).
    """
    names = list(dict.fromkeys([STRATA, *(f.strip().removeprefix("metadata.") for f in fields)]))
    groups = dataset.runs[0].data.groups
    available = sorted(f for f, values in groups.items() if any(v != "unknown" for v in values))
    missing = [name for name in names if name != STRATA and name not in available]
    if missing:
        raise ValueError(
            f"--by {', '.join(map(repr, missing))}: no case of {dataset.name} ({dataset.data_hash[:12]}) has a value "
            f"for it; fields with values: {', '.join(available) or '(none)'}"
        )
    return names


def select_data(datasets: Sequence[DataSet], wanted: str | None) -> list[DataSet]:
    """The data sets a ``--data`` value names: a fingerprint prefix (at least 4 characters) or a name.

    Args:
        datasets: the data sets found.
        wanted: the value, or None for all of them.

    Returns:
        The named data set, or all of them.

    Raises:
        StoreError: the value names none of them, or several (the message lists every data set).
    """
    if wanted is None:
        return list(datasets)
    key = wanted.strip()
    matches = [d for d in datasets if (len(key) >= 4 and d.data_hash.startswith(key.lower())) or d.name == key]
    if len(matches) == 1:
        return matches
    listed = "; ".join(f"{d.data_hash[:12]} ({d.name}, {d.n_cases} cases)" for d in datasets)
    why = "matches several data sets" if matches else "matches no data set"
    raise StoreError(f"--data {wanted!r} {why}; give a fingerprint prefix: {listed}")


def load_run_bundles(paths: Sequence[str | Path]) -> list[LoadedRun]:
    """Every run of every store found under the given run directories or store files.

    Args:
        paths: run directories (searched recursively) or store files.

    Returns:
        One :class:`LoadedRun` per run, stores in the order found, runs in creation order. A run
        found twice (the same store reached through two paths, or a copied store) is kept once.

    Raises:
        StoreError: a path does not exist, a store is unusable, or no run was found.
    """
    bundles: list[LoadedRun] = []
    seen_runs: set[str] = set()
    seen_stores: set[Path] = set()
    tables: dict[str, CaseTable] = {}
    for store_path in find_stores(paths):
        resolved = store_path.resolve()
        if resolved in seen_stores:
            continue
        seen_stores.add(resolved)
        with Store(store_path) as store:
            for record in store.runs():
                if record.run_id in seen_runs:
                    log.info("run %s found again in %s; keeping the first copy", record.run_id, store_path)
                    continue
                seen_runs.add(record.run_id)
                cases = tables.get(record.data_hash)
                if cases is None:  # runs on the same data share one table, across stores as well
                    cases = tables[record.data_hash] = load_case_table(store, record.data_hash)
                labels = store.label_provenance(record.data_hash)
                bundles.append(
                    LoadedRun(load_run_data(store, record, cases, preferences=True), record, store_path, labels)
                )
    if not bundles:
        shown = ", ".join(str(p) for p in paths) or "(no paths)"
        raise StoreError(f"no runs found under {shown}")
    return bundles


def load_runs(paths: Sequence[str | Path]) -> list[RunData]:
    """Read every run from the stores found under the given run directories (see :func:`load_run_bundles`).

    Args:
        paths: run directories or store files.

    Returns:
        The runs' arrays.
    """
    return [bundle.data for bundle in load_run_bundles(paths)]


def check_same_data(runs: Sequence[RunData]) -> None:
    """Refuse to put runs made on different data into one report.

    Args:
        runs: the runs to compare.

    Raises:
        StoreError: no runs, or runs whose data fingerprints (``data_hash``) differ; the message
            names every run with its fingerprint. Also when runs with one fingerprint disagree on
            their cases or labels (a damaged store), or their stores hold different per-annotator
            labels (the fingerprint leaves annotations out, like case metadata; runs without any
            are accepted).
    """
    if not runs:
        raise StoreError("no runs to report on")
    by_hash: dict[str, list[str]] = {}
    for run in runs:
        by_hash.setdefault(run.data_hash, []).append(run.run_id)
    if len(by_hash) > 1:
        parts = [f"data {h[:12]}: {', '.join(ids)}" for h, ids in by_hash.items()]
        raise StoreError(
            "these runs were made on different data and cannot share a report "
            "(reports never mix runs whose data fingerprints differ): " + "; ".join(parts)
        )
    first = runs[0]
    for run in runs[1:]:
        same_cases = run.case_ids is first.case_ids or run.case_ids == first.case_ids
        if not same_cases or not (run.labels is first.labels or np.array_equal(run.labels, first.labels)):
            raise StoreError(
                f"runs {first.run_id} and {run.run_id} share data fingerprint {first.data_hash[:12]} "
                "but list different cases or labels; the store is inconsistent"
            )
    annotated = [(run, run.ratings) for run in runs if run.ratings is not None]
    for run, ratings in annotated[1:]:
        reference, reference_ratings = annotated[0]
        if run.annotators != reference.annotators or not np.array_equal(ratings, reference_ratings):
            raise StoreError(
                f"runs {reference.run_id} and {run.run_id} were made on the same data (fingerprint "
                f"{first.data_hash[:12]}) but their stores hold different per-annotator labels: the "
                "annotations changed between the two evals; run eval again on the current data in each "
                "output directory"
            )


def annotation_ratings(runs: Sequence[RunData]) -> tuple[npt.NDArray[np.int8], tuple[str, ...]] | None:
    """The per-annotator labels of the runs' data, from the first run whose store holds them.

    Runs on one data fingerprint share their annotations (:func:`check_same_data` refuses runs whose
    stores disagree); a run stored before the store kept annotations has none and takes them from
    the others.

    Args:
        runs: runs on the same data.

    Returns:
        ``(ratings, annotators)``, or None when no run's store holds a rating.
    """
    for run in runs:
        if run.ratings is not None and has_annotations(run.ratings):
            return run.ratings, run.annotators
    return None


def _flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested configuration as ``{"sampling.temperature": 0.7, ...}``."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flat_config(value, name + "."))
        else:
            flat[name] = value
    return flat


_HIDDEN_KEYS = ("spec", "kind")
"""Configuration keys that never tell two runs of one spec apart (they are the spec)."""


_SHOWN_CHARS = 24
"""Values longer than this are shortened in the middle (where they stay distinct)."""


def _shown_value(key: str, value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, float):
        return f"{value:g}"
    text = str(value)
    if key.rsplit(".", 1)[-1] in ("model", "adapter", "template") and "/" in text:
        text = text.rstrip("/").rsplit("/", 1)[-1]  # a path: its last part says enough
    return text


def _url_parts(values: Sequence[str]) -> list[str]:
    """Base URLs as ``@host:port`` (with the path where hosts are equal but paths differ)."""
    parsed = [urlsplit(v) for v in values]
    hosts = [p.netloc or v for p, v in zip(parsed, values, strict=True)]
    if len(set(hosts)) == len(set(values)):
        return [f"@{h}" for h in hosts]
    return [f"@{h}{p.path.rstrip('/')}" for h, p in zip(hosts, parsed, strict=True)]


def _distinct_values(key: str, values: Sequence[Any]) -> list[str]:
    """How one setting is shown for several runs: short, and as distinct as the values are.

    A base URL shows its host and port (``@127.0.0.1:18001``); a long value is cut in the middle,
    keeping its start and its end, never so far that two different values look alike.
    """
    texts = [_shown_value(key, v) for v in values]
    if key.rsplit(".", 1)[-1] == "base_url" and all(v is not None for v in values):
        texts = _url_parts(texts)
    return shorten_distinct(texts, _SHOWN_CHARS)


def config_differences(configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The configuration settings whose values differ between runs of one judge spec.

    Hashes (``..._sha256``) are left out when a readable setting differs too: a different
    template shows as ``template``, not as its hash.

    Args:
        configs: the runs' configurations (:meth:`Judge.config`).

    Returns:
        Dotted setting names (``sampling.temperature``), sorted.
    """
    flats = [_flat_config(c) for c in configs]
    keys = sorted({k for flat in flats for k in flat} - set(_HIDDEN_KEYS))
    differing = [k for k in keys if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flats}) > 1]
    readable = [k for k in differing if not k.endswith(("_sha256", "fingerprint"))]
    return readable or differing


def judge_labels(runs: Sequence[RunData]) -> list[str]:
    """Display names: the judge spec, and where one spec has several runs, what tells them apart.

    A sweep's entry is shown by its name (``name:`` in the sweep file) where it has one apart from
    its spec. Otherwise, where one spec has several runs, what differs in their configurations: two
    runs of ``api:gpt-4o`` with seeds 1 and 2 are ``api:gpt-4o (seed 1)`` and ``api:gpt-4o (seed
    2)``; two servers of one model are ``api:m @127.0.0.1:18001`` and ``api:m @127.0.0.1:18002``
    (the part of the base URL that differs); runs whose configurations are equal (they differ in
    nothing that changes an output) fall back to a short run id. Long values are shortened in the
    middle, never so that two labels read the same.

    Args:
        runs: the runs.

    Returns:
        One unique label per run, in the same order.
    """
    labels = [run.judge_spec for run in runs]
    by_spec: dict[str, list[int]] = {}
    for index, run in enumerate(runs):
        # a sweep names its entries: an entry reads by its name
        entry = run.metadata.get("sweep_entry")
        if isinstance(entry, str) and entry and entry != run.judge_spec:
            labels[index] = entry
            continue
        by_spec.setdefault(run.judge_spec, []).append(index)
    for spec, members in by_spec.items():
        if len(members) == 1:
            continue
        differing = config_differences([runs[i].config for i in members])[:3]
        flats = [_flat_config(runs[i].config) for i in members]
        shown = {key: _distinct_values(key, [flat.get(key) for flat in flats]) for key in differing}
        for position, i in enumerate(members):
            if differing == ["base_url"] or (len(differing) == 1 and differing[0].endswith(".base_url")):
                labels[i] = f"{spec} {shown[differing[0]][position]}"
                continue
            if differing:
                what = ", ".join(
                    value if value.startswith("@") else f"{k.rsplit('.', 1)[-1].replace('_', ' ')} {value}"
                    for k in differing
                    for value in (shown[k][position],)
                )
            else:
                what = f"run {runs[i].run_id[-10:]}"
            labels[i] = f"{spec} ({what})"
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if seen[label] == 1 else f"{label} #{seen[label]}")
    return unique


def is_baseline(judge_spec: str) -> bool:
    """Whether a judge spec names a baseline (``baseline:...``)."""
    return judge_spec.startswith(BASELINE_PREFIX)


# --------------------------------------------------------------------------------------------
# From arrays to records
# --------------------------------------------------------------------------------------------


def _estimates(estimate: stats.Estimate) -> list[Estimate]:
    """A 1-D array :class:`~medrewardbench.metrics.stats.Estimate` as one record per element."""
    points, lows, highs = (_reals(a) for a in (estimate.point, estimate.low, estimate.high))
    ns = np.asarray(estimate.n).tolist()
    return [Estimate(p, lo, hi, n) for p, lo, hi, n in zip(points, lows, highs, ns, strict=True)]


def _column_estimates(estimate: stats.Estimate) -> ColumnTable[Estimate]:
    """Seven estimates (the six dimensions, then the pooled column) as a table."""
    return ColumnTable.of(_estimates(estimate))


def _dimension_estimates(estimate: stats.Estimate) -> DimensionTable[Estimate]:
    return DimensionTable(tuple(_estimates(estimate)))


def _reals(array: npt.ArrayLike) -> list[float]:
    """Numbers as the records hold them: rounded as files write them (NaN stays NaN)."""
    return [fixed(v) for v in np.asarray(array, dtype=np.float64).tolist()]


# --------------------------------------------------------------------------------------------
# Per run (computed for all runs at once)
# --------------------------------------------------------------------------------------------


def _pick(estimate: stats.Estimate, *index: int) -> stats.Estimate:
    """The sub-estimate at a leading index (e.g. one metric and one judge)."""
    return stats.Estimate(estimate.point[index], estimate.low[index], estimate.high[index], estimate.n[index])


def _run_analysis(run: RunData, label: str, j: int, batch: Resampled) -> RunAnalysis:
    metric = {name: _column_estimates(_pick(batch.ratios, m, j)) for m, name in enumerate(RATIO_METRICS)}
    judge_dims = slice(j * len(DIMENSIONS), (j + 1) * len(DIMENSIONS))
    by_length = batch.by_length

    def split(points: FloatArray, ns: npt.NDArray[np.int64]) -> DimensionTable[Estimate]:
        return DimensionTable(
            tuple(Estimate(p, n=n) for p, n in zip(_reals(points[judge_dims]), ns[judge_dims].tolist(), strict=True))
        )

    grouped = {
        field_name: GroupBreakdown(
            groups={
                str(name): _column_estimates(_pick(g.per_group, i, j)) for i, name in enumerate(g.groups)
            },  # per_group arrays are (G, J, C)
            micro=_column_estimates(_pick(g.micro, j)),
            macro=_column_estimates(_pick(g.macro, j)),
        )
        for field_name, g in batch.groups.items()
    }
    return RunAnalysis(
        label=label,
        judge=run.judge_spec,
        run_id=run.run_id,
        is_baseline=is_baseline(run.judge_spec),
        orders=tuple(o.value for o in run.orders),
        n_cases=run.n_cases,
        config=dict(run.config),
        metadata=dict(run.metadata),
        # token counts only: summed latencies are wall-clock times, and report files stay reproducible
        usage={k: v for k, v in run.usage.items() if k != "latency_s"},
        requests=request_counts(run.verdicts),
        failures=dict(run.failures),
        accuracy=metric["accuracy"],
        answered_accuracy=metric["answered_accuracy"],
        failure_rate=ColumnTable.of(_reals(batch.failure_rate[j])),
        n_counted=ColumnTable.of([int(n) for n in batch.counted[j].tolist()]),
        by_order={o.value: metric[o.value] for o in run.orders},
        strict_accuracy=metric["strict_accuracy"],
        agreement=Agreement(
            kappa=_dimension_estimates(_pick(batch.kappa, j)), ac1=_dimension_estimates(_pick(batch.ac1, j))
        ),
        position=PositionBias(consistency=metric["consistency"], first_position_rate=metric["first_position_rate"]),
        length=LengthBias(
            longer_preference=metric["longer_preference"],
            accuracy_expert_longer=split(by_length.longer_preferred, by_length.n_longer),
            accuracy_expert_shorter=split(by_length.shorter_preferred, by_length.n_shorter),
        ),
        coherence={
            dim: fixed(stats.coherence_rate(run.verdicts, "overall", dim)) for dim in DIMENSIONS if dim != "overall"
        },
        groups=grouped,
    )


# --------------------------------------------------------------------------------------------
# Across runs
# --------------------------------------------------------------------------------------------


def _pairwise_records(
    labels_: Sequence[str], comparisons: list[stats.PairwiseComparisons], alpha: float
) -> tuple[list[PairwiseComparison], dict[str, FloatArray]]:
    """Records for every pair i < j and column, with Holm-adjusted p-values per column."""
    n = len(labels_)
    rows, cols = np.triu_indices(n, 1)
    per_dim, pooled = comparisons
    records: list[PairwiseComparison] = []
    p_matrices: dict[str, FloatArray] = {}
    for column in COLUMNS:
        if column == POOLED:
            pc, d = pooled, 0
        else:
            pc, d = per_dim, DIMENSIONS.index(column)
        p_matrices[column] = pc.p_bootstrap[:, :, d]
        if rows.size == 0:
            continue
        p_boot = pc.p_bootstrap[rows, cols, d]
        p_case = pc.p_case[rows, cols, d]
        holm_boot = stats.holm_adjust(p_boot)
        holm_case = stats.holm_adjust(p_case)
        fields = zip(
            rows.tolist(),
            cols.tolist(),
            pc.acc_a[rows, cols, d].tolist(),
            pc.acc_a[cols, rows, d].tolist(),
            pc.diff[rows, cols, d].tolist(),
            pc.low[rows, cols, d].tolist(),
            pc.high[rows, cols, d].tolist(),
            p_boot.tolist(),
            holm_boot.tolist(),
            (holm_boot < alpha).tolist(),
            pc.cases_better[rows, cols, d].tolist(),
            pc.cases_better[cols, rows, d].tolist(),
            p_case.tolist(),
            holm_case.tolist(),
            pc.n_pairs[rows, cols, d].tolist(),
            strict=True,
        )
        for i, j, acc_a, acc_b, diff, low, high, p_b, p_bh, sig, better, worse, p_c, p_ch, n_pairs in fields:
            records.append(
                PairwiseComparison(
                    a=labels_[i],
                    b=labels_[j],
                    column=column,
                    acc_a=fixed(acc_a),
                    acc_b=fixed(acc_b),
                    diff=fixed(diff),
                    low=fixed(low),
                    high=fixed(high),
                    p_bootstrap=fixed_p(p_b),
                    p_bootstrap_holm=fixed_p(p_bh),
                    significant=bool(sig),
                    cases_a_better=int(better),
                    cases_b_better=int(worse),
                    p_case=fixed_p(p_c),
                    p_case_holm=fixed_p(p_ch),
                    n_pairs=int(n_pairs),
                )
            )
    return records, p_matrices


def _tiers(
    run_results: Sequence[RunAnalysis], p_matrices: Mapping[str, FloatArray], alpha: float
) -> list[ColumnTable[int]]:
    """Tiers of every run on every column (see :func:`~medrewardbench.metrics.stats.leaderboard_tiers`)."""
    per_column = []
    for column in COLUMNS:
        points = np.array([run.accuracy[column].point for run in run_results], dtype=np.float64)
        per_column.append(stats.leaderboard_tiers(points, p_matrices[column], alpha=alpha).tolist())
    return [ColumnTable.of([int(tiers[index]) for tiers in per_column]) for index in range(len(run_results))]


def _leaderboard(run_results: Sequence[RunAnalysis], human: HumanCeiling | None = None) -> list[LeaderboardRow]:
    """The runs ranked by score (ties by label), with tiers when the runs carry them.

    With a human ceiling, each row also carries the judge's agreement with the annotators'
    leave-one-out majorities.
    """
    costs = [recorded_cost(run.metadata) for run in run_results]
    vs_annotators = {j.label: j.agreement.pooled for j in human.judges} if human is not None else {}
    normalised = {
        j.label: j.normalised.pooled for j in (human.judges if human is not None else ()) if j.normalised is not None
    }
    verdicts = {v.label: v.verdict for v in human.verdicts} if human is not None else {}
    rows = [
        LeaderboardRow(
            rank=0,
            label=run.label,
            judge=run.judge,
            run_id=run.run_id,
            is_baseline=run.is_baseline,
            tier=None if run.tiers is None else run.tiers.pooled,
            score=run.score,
            macro=run.groups[STRATA].macro.pooled if STRATA in run.groups else None,
            accuracy=run.accuracy.dimensions,
            tiers=None if run.tiers is None else run.tiers.dimensions,
            answered_accuracy=run.answered_accuracy.pooled.point,
            failure_rate=run.failure_rate.pooled,
            consistency=run.position.consistency.pooled.point,
            first_position_rate=run.position.first_position_rate.pooled.point,
            longer_preference=run.length.longer_preference.pooled.point,
            kappa_overall=run.agreement.kappa["overall"].point,
            cost_usd=math.nan if cost is None else fixed(cost.usd),
            cost_per_1000_cases=math.nan if cost is None else fixed(cost.per_1000_cases),
            vs_annotators=vs_annotators.get(run.label),
            normalised=normalised.get(run.label),
            verdict=verdicts.get(run.label),
        )
        for run, cost in zip(run_results, costs, strict=True)
    ]
    rows.sort(key=lambda row: (-(row.score.point if row.score.defined else -1.0), row.label))
    return [replace(row, rank=rank) for rank, row in enumerate(rows, start=1)]


def _dataset_section(
    first: RunData,
    labels: IntArray,
    groups: Mapping[str, tuple[str, ...]],
    dataset_name: str | None,
    provenance: LabelProvenance,
) -> DatasetSummary:
    group_sizes: dict[str, dict[str, int]] = {}
    for field_name, values in groups.items():
        names, counts = np.unique(np.asarray(values, dtype=object), return_counts=True)
        group_sizes[field_name] = {str(k): int(c) for k, c in zip(names.tolist(), counts.tolist(), strict=True)}
    mean_length = _reals(first.lengths.mean(axis=0)) if first.n_cases else [math.nan, math.nan]
    return DatasetSummary(
        name=dataset_name,
        data_hash=first.data_hash,
        n_cases=first.n_cases,
        n_labelled=DimensionTable(tuple(int(n) for n in (labels > 0).sum(axis=0).tolist())),
        groups=group_sizes,
        expert_longer_rate=DimensionTable(tuple(_reals(stats.expert_longer_rate(labels, first.lengths)))),
        expert_coherence={
            d: fixed(stats.expert_coherence_rate(labels, "overall", d)) for d in DIMENSIONS if d != "overall"
        },
        mean_length=(mean_length[0], mean_length[1]),
        labels=provenance,
    )


def _sensitivity(
    runs: Sequence[RunData], labels: IntArray, strata: Sequence[str], ratings: npt.NDArray[np.int8] | None
) -> Sensitivity:
    """The smallest differences these cases can detect (:mod:`medrewardbench.metrics.power`).

    Judges are added one at a time, so memory grows with one judge's cases, not with judges times cases.
    """
    keys = np.asarray(list(strata), dtype=object)
    names = sorted({str(k) for k in keys.tolist()})
    spread = power.Spread()
    per_group = {name: power.Spread() for name in names}
    members = {name: keys == name for name in names}
    for run in runs:
        correct, counted = stats.case_counts(run.verdicts, labels)
        u, mask = power.linearised(_pooled(correct), _pooled(counted))
        spread.add(u, mask)
        for name, cases in members.items():
            per_group[name].add(u[cases][:, -1], mask[cases][:, -1])
    labelled = labels > 0
    n_cases = np.concatenate([labelled.sum(axis=0), [np.count_nonzero(labelled.any(axis=1))]]).astype(np.int64)
    vs_chance = power.detectable(spread.rms_sd(), n_cases)
    between = power.detectable(spread.pair_rms_sd(), n_cases)
    vs_human = None
    if ratings is not None:
        gap, _ = gap_detectable(ratings, [run.verdicts for run in runs])
        vs_human = ColumnTable.of([fixed(v) for v in gap.tolist()])
    by_group: dict[str, float] = {}
    for name, cases in members.items():
        n = int(np.count_nonzero(labelled[cases].any(axis=1)))
        by_group[name] = fixed(float(power.detectable(per_group[name].rms_sd(), n)))
    return Sensitivity(
        n_cases=ColumnTable.of([int(n) for n in n_cases.tolist()]),
        vs_chance=ColumnTable.of([fixed(v) for v in vs_chance.tolist()]),
        between_judges=ColumnTable.of([fixed(v) for v in between.tolist()]),
        vs_human=vs_human,
        by_group=by_group,
        group_field=STRATA,
    )


def _pooled(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """(n, D) -> (n, D + 1): the sum over dimensions appended (the pooled column)."""
    return np.concatenate([values, values.sum(axis=1, keepdims=True)], axis=1)


def analyze(
    runs: Sequence[RunData],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    group_fields: Sequence[str] = (STRATA,),
    alpha: float = 0.05,
    dataset_name: str | None = None,
    labels: LabelProvenance = UNKNOWN_LABELS,
    block_size: int | None = None,
    epsilon: float = DEFAULT_EPSILON,
    selective: SelectiveSettings | None = None,
) -> Analysis:
    """Analyse runs of one dataset: every table of a report, with intervals and paired tests.

    Intervals are case-bootstrap percentile intervals from one weight matrix, stratified by organ
    system (organ systems keep their size in every resample); the same resamples serve every
    judge, so paired differences are paired. Failures count as wrong. The matrix is drawn and used
    a block of resamples at a time (:mod:`medrewardbench.metrics.resampling`), so memory depends
    on judges and resamples, not on cases times resamples.

    Args:
        runs: runs made on the same data (checked with :func:`check_same_data`).
        confidence: interval coverage.
        n_resamples: bootstrap resamples; 0 computes the point estimates only (what ``eval``
            prints): no intervals, no pairwise tests, no tiers.
        seed: seed of the resamples; the same seed gives the same intervals.
        group_fields: case metadata fields to break accuracy down by; ``organ_system`` is always
            included (the leaderboard's macro average uses it).
        alpha: family-wise level for tiers and for marking pairwise differences significant
            (Holm-adjusted).
        dataset_name: a name to show in reports.
        labels: where the data's labels come from (reports state it in a banner).
        block_size: resamples drawn at a time (default: as many as fit in about 200 MB); it
            changes memory and speed only, never a number.
        epsilon: the cost-benefit margin of the alt-test behind the stand-in verdicts
            (:mod:`medrewardbench.metrics.alttest`; its false discovery rate is ``alpha``).
        selective: calibration and abstention settings (:mod:`medrewardbench.metrics.selective_section`;
            default :class:`SelectiveSettings`: risk 0.10, delta 0.10, no recalibration); the split,
            folds and resamples use ``seed``.

    Returns:
        The :class:`~medrewardbench.metrics.results.Analysis`: one record per run (input order),
        the leaderboard ranked by score with tiers, and every pair of judges per column
        (paired case bootstrap and case sign-flip test, Holm-adjusted); when the cases carry per-annotator labels,
        also the human ceiling (:mod:`medrewardbench.metrics.human`, intervals from the same
        weight matrix) with every judge's stand-in verdict, and each leaderboard row's agreement
        with the annotators, its ratio to the human row and its verdict; and the smallest
        differences the cases can detect (:mod:`medrewardbench.metrics.power`). Fractions are in
        [0, 1]; undefined values are NaN.

    Raises:
        StoreError: no runs, or runs made on different data.
        ValueError: a negative number of resamples or a negative epsilon.
    """
    check_same_data(runs)
    if n_resamples < 0:
        raise ValueError(f"n_resamples must be >= 0, got {n_resamples}")
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    first = runs[0]
    label_matrix = first.labels
    fields = list(dict.fromkeys([STRATA, *group_fields]))
    groups = {f: tuple(first.groups.get(f, ("unknown",) * first.n_cases)) for f in fields}
    names = judge_labels(runs)
    batch = resample_runs(
        [run.verdicts for run in runs],
        label_matrix,
        first.lengths,
        groups,
        strata_field=STRATA,
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        block_size=block_size,
    )
    run_results = [_run_analysis(run, name, j, batch) for j, (run, name) in enumerate(zip(runs, names, strict=True))]
    records: list[PairwiseComparison] = []
    if batch.pairwise is not None:
        records, p_matrices = _pairwise_records(names, list(batch.pairwise), alpha)
        tiers = _tiers(run_results, p_matrices, alpha)
        run_results = [replace(run, tiers=run_tiers) for run, run_tiers in zip(run_results, tiers, strict=True)]
    settings = Settings(
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        alpha=alpha,
        group_fields=tuple(fields),
        epsilon=epsilon,
        **({} if n_resamples else {"interval": "none (point estimates only)"}),
    )
    human = None
    panel = annotation_ratings(runs)
    if panel is not None:
        judges = [
            JudgeInput(name, run.run_id, is_baseline(run.judge_spec), run.verdicts)
            for run, name in zip(runs, names, strict=True)
        ]
        ratings, annotators = panel
        # the human ceiling takes the whole weight matrix (the same resamples as the rest: row r
        # is drawn from (seed, r) whatever the blocks); only data with per-annotator labels needs it
        if n_resamples:
            strata = np.asarray(groups[STRATA], dtype=object) if first.n_cases else None
            weights = stats.bootstrap_weights(first.n_cases, n_resamples, seed, strata)
        else:
            weights = np.zeros((0, first.n_cases))
        human = human_ceiling(
            ratings,
            annotators,
            judges,
            groups[STRATA],
            weights,
            confidence=confidence,
            group_field=STRATA,
            epsilon=epsilon,
            q=alpha,
        )
    section = selective_section(
        runs,
        names,
        selective or SelectiveSettings(),
        strata=groups[STRATA],
        n_resamples=n_resamples,
        seed=seed,
        confidence=confidence,
        block_size=block_size,
    )
    leaderboard = [
        replace(row, coverage_at_risk=coverage_at_risk(section, row.label)) for row in _leaderboard(run_results, human)
    ]
    return Analysis(
        settings=settings,
        dataset=_dataset_section(first, label_matrix, groups, dataset_name, labels),
        runs=tuple(run_results),
        leaderboard=tuple(leaderboard),
        pairwise=PairwiseTests(judges=tuple(names), comparisons=tuple(records)),
        human=human,
        sensitivity=_sensitivity(runs, label_matrix, groups[STRATA], None if panel is None else panel[0]),
        selective=section,
    )


# --------------------------------------------------------------------------------------------
# Cases to show
# --------------------------------------------------------------------------------------------


def _wrong_matrix(runs: Sequence[RunData], dimension: str) -> npt.NDArray[np.bool_]:
    """(judges, cases): True where a counted request of the case on ``dimension`` is wrong or failed."""
    if dimension not in DIMENSIONS:
        raise ValueError(f"unknown dimension {dimension!r}; expected one of {', '.join(DIMENSIONS)}")
    d = DIMENSIONS.index(dimension)
    labels = runs[0].labels
    rows = []
    for run in runs:
        correct, counted = stats.case_counts(run.verdicts, labels)
        rows.append(counted[:, d] > correct[:, d])
    return np.stack(rows)


def case_difficulty_order(runs: Sequence[RunData], dimension: str = "overall") -> list[int]:
    """Case indices ordered by how many judges got the case wrong (most first), then case order.

    Args:
        runs: runs on the same data.
        dimension: the dimension that decides right and wrong.

    Returns:
        Every case index once.
    """
    if not runs:
        return []
    check_same_data(runs)
    missed = _wrong_matrix(runs, dimension).sum(axis=0)
    return [int(i) for i in np.lexsort((np.arange(missed.size), -missed))]


def select_wrong_cases(
    runs: Sequence[RunData], *, per_judge: int = 50, dimension: str = "overall"
) -> dict[str, list[int]]:
    """The cases each judge got wrong on one dimension, the ones most judges got wrong first.

    A case is wrong for a judge when at least one of its counted requests on ``dimension`` is
    wrong or failed. Ordering by how many judges missed a case makes the judges' selections
    overlap, so a report shows fewer distinct cases.

    Args:
        runs: runs on the same data.
        per_judge: at most this many cases per judge.
        dimension: the dimension that decides right and wrong.

    Returns:
        run_id -> case indices (positions in the runs' case order).
    """
    if not runs:
        return {}
    order = case_difficulty_order(runs, dimension)
    wrong = _wrong_matrix(runs, dimension)
    return {run.run_id: [i for i in order if mask[i]][:per_judge] for run, mask in zip(runs, wrong, strict=True)}
