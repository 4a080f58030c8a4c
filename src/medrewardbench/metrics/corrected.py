"""Corrected estimates: judges' agreement with the doctors over the whole pool, from a slice of doctors' labels.

The doctors label a slice of a pool (:mod:`medrewardbench.metrics.selection`): the K cases a
reference judge was least sure of, in full, and a uniform random slice of the rest. Every judge
has judged every case of the pool. Per judge and dimension this module estimates, over the
**whole pool**:

* the judge's **agreement** with the doctors: the label ``Y`` of a case is the share of the
  judge's requests (orders) whose verdict is the doctors' one (a failure counts wrong, as in the
  report's headline accuracy); its proxy is the reference judge's probability that the verdict
  is the doctors' (``p_first`` for a verdict of ``response_1``, ``1 - p_first`` for
  ``response_2``, 0 for a failure), averaged over the same orders;
* the doctors' **preference rate**: the share of cases where ``response_1`` is better, with the
  reference judge's ``p_first`` as the proxy;
* a **leaderboard** by pooled agreement, with each judge's difference from the leader (the
  same estimator on ``Y_leader - Y_judge``).

Each estimate comes by :func:`medrewardbench.metrics.ppi.stratified_ppi` beside the doctors'
labels alone. Labels on cases outside the design are not used (they were not sampled at random);
without a design in the labels' metadata the labelled cases are taken as a uniform random sample
of the pool, and the result says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from medrewardbench.cases import Case
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import StoreError
from medrewardbench.metrics.analysis import LoadedRun
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.ppi import PPIResult, stratified_ppi
from medrewardbench.metrics.selection import LEAST_CONFIDENT, RANDOM, SelectionError, pick_design, read_case_selection
from medrewardbench.metrics.stats import FloatArray

__all__ = [
    "POOLED",
    "CorrectedEstimates",
    "DoctorLabels",
    "JudgeEstimates",
    "LabelledPool",
    "agreement_arrays",
    "corrected_estimates",
    "doctor_labels",
    "labelled_pool",
    "load_corrected",
    "load_single_run",
]

POOLED = "pooled"
"""The key of the mean over the six dimensions."""


@dataclass(frozen=True)
class DoctorLabels:
    """The doctors' labels on a slice, with the slice's design when the cases carry one.

    Attributes:
        source: where they were read from (for messages).
        labels: case id -> dimension -> 1 or 2.
        strata: case id -> ``least_confident`` or ``random`` (empty without a design).
        design: the design's summary (``metadata.selection`` without the stratum); None without one.
    """

    source: str
    labels: dict[str, dict[str, int]]
    strata: dict[str, str] = field(default_factory=dict)
    design: dict[str, Any] | None = None


def doctor_labels(cases: Iterable[Case], source: str) -> DoctorLabels:
    """Read the doctors' labels and the design from labelled cases (an annotation export).

    Args:
        cases: the cases (an ``annotate export`` canonical file, loaded).
        source: the file, for messages.

    Returns:
        The labels; the strata and design from ``metadata.selection`` when the cases carry it.

    Raises:
        SelectionError: cases from two designs, or a malformed ``metadata.selection``.
    """
    labels: dict[str, dict[str, int]] = {}
    strata: dict[str, str] = {}
    design: dict[str, Any] | None = None
    for case in cases:
        where = f"{source}: case {case.case_id}"
        found = read_case_selection(case.metadata, where)
        if found is not None:
            summary = {k: v for k, v in found.items() if k != "stratum"}
            if design is None:
                design = summary
            elif summary["design"] != design["design"]:
                raise SelectionError(
                    f"{where}: picked by design {summary['design']}, other cases by {design['design']}; "
                    "estimate one design at a time"
                )
            strata[case.case_id] = str(found["stratum"])
        given = {dim: int(v) for dim, v in case.labels.items() if dim in DIMENSIONS}
        if given:
            labels[case.case_id] = given
    return DoctorLabels(source=source, labels=labels, strata=strata, design=design)


@dataclass(frozen=True)
class JudgeEstimates:
    """One judge's agreement with the doctors over the pool.

    Attributes:
        run_id, judge_spec: the run.
        dimensions: dimension (and ``pooled``) -> estimate.
        vs_leader: the pooled difference leader - this judge (None for the leader itself).
    """

    run_id: str
    judge_spec: str
    dimensions: dict[str, PPIResult]
    vs_leader: PPIResult | None = None

    @property
    def pooled(self) -> PPIResult:
        """The estimate over the six dimensions together."""
        return self.dimensions[POOLED]


@dataclass(frozen=True)
class CorrectedEstimates:
    """Everything the report's "Corrected estimates" section shows.

    Attributes:
        pool_size: the cases of the pool.
        labelled: pool cases with a doctors' label that the design counts.
        ignored: labelled pool cases outside the design (not used).
        reference: the run whose probabilities are the proxies.
        design: the design's summary; None when the labels carry none.
        judges: per judge, best pooled agreement first.
        preference: dimension (and ``pooled``) -> the doctors' rate of preferring ``response_1``.
        notes: assumptions and gaps, for the reader.
        confidence: the intervals' coverage.
    """

    pool_size: int
    labelled: int
    ignored: int
    reference: str
    design: dict[str, Any] | None
    judges: tuple[JudgeEstimates, ...]
    preference: dict[str, PPIResult]
    notes: tuple[str, ...]
    confidence: float

    def to_json(self) -> dict[str, Any]:
        """The estimates as a JSON object."""

        def block(results: dict[str, PPIResult]) -> dict[str, Any]:
            return {name: result.to_json() for name, result in results.items()}

        return {
            "pool_size": self.pool_size,
            "labelled": self.labelled,
            "ignored": self.ignored,
            "reference": self.reference,
            "design": self.design,
            "confidence": self.confidence,
            "notes": list(self.notes),
            "judges": [
                {
                    "run_id": j.run_id,
                    "judge": j.judge_spec,
                    "agreement": block(j.dimensions),
                    "vs_leader": None if j.vs_leader is None else j.vs_leader.to_json(),
                }
                for j in self.judges
            ],
            "preference_response_1": block(self.preference),
        }


@dataclass(frozen=True)
class LabelledPool:
    """The doctors' labels laid over a pool, with each case's stratum.

    Attributes:
        labels: (n_cases, n_dims) the doctors' winner, 1 or 2; 0 where none counts.
        strata: (n_cases,) 0 for the least-confident census, 1 for the rest (sampled at random).
        ignored: labelled pool cases outside the design (not used).
        notes: assumptions and gaps.
    """

    labels: np.ndarray[Any, np.dtype[np.int64]]
    strata: np.ndarray[Any, np.dtype[np.int64]]
    ignored: int
    notes: tuple[str, ...]

    @property
    def labelled_rows(self) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Cases with at least one counted label."""
        return np.asarray((self.labels > 0).any(axis=1))


def labelled_pool(ref: RunData, doctors: DoctorLabels, *, design_run: bool = False) -> LabelledPool:
    """Lay the doctors' labels over the pool of ``ref`` (its cases, in its order).

    With ``design_run`` (``ref`` is the run the design was drawn from), the design is drawn again
    from it, so the least-confident stratum is known even where the export left some of its cases
    out; the file's picks must agree with it.

    Args:
        ref: the run whose cases are the pool.
        doctors: the labels.
        design_run: ``ref`` is the design's run.

    Returns:
        The :class:`LabelledPool`.

    Raises:
        SelectionError: picked cases outside the pool, picks that do not match the design, or no
            label the design counts.
    """
    notes: list[str] = []
    design = doctors.design
    pool_ids = ref.case_ids
    index = {cid: i for i, cid in enumerate(pool_ids)}
    n = len(pool_ids)
    label = np.zeros((n, len(DIMENSIONS)), dtype=np.int64)
    strata = np.ones(n, dtype=np.int64)
    in_design = np.ones(n, dtype=bool)
    if design is not None:
        in_design[:] = False
        outside_pool = [cid for cid in doctors.strata if cid not in index]
        if outside_pool:
            raise SelectionError(
                f"{doctors.source}: {len(outside_pool)} picked case(s) are not in the runs' pool "
                f"(e.g. {outside_pool[0]!r})"
            )
        for cid, stratum in doctors.strata.items():
            in_design[index[cid]] = True
            strata[index[cid]] = 0 if stratum == LEAST_CONFIDENT else 1
        if design_run:
            again = pick_design(
                case_verdicts(ref),
                least_confident=int(design["least_confident"]),
                random=int(design["random"]),
                seed=int(design["seed"]),
                ranked_by=str(design.get("ranked_by", "mean")),
            )
            tagged = dict(doctors.strata)
            expected = {cid: LEAST_CONFIDENT for cid in again.least_confident_ids}
            expected.update({cid: RANDOM for cid in again.random_ids})
            wrong = [cid for cid, stratum in tagged.items() if expected.get(cid) != stratum]
            tagged_census = sum(1 for stratum in tagged.values() if stratum == LEAST_CONFIDENT)
            if not wrong:
                for cid in again.least_confident_ids:
                    strata[index[cid]] = 0
            elif tagged_census == int(design["least_confident"]):
                notes.append(
                    f"Run {design['run_id']} changed since the pick (its verdicts rank the pairs differently now); "
                    "the strata are taken from the labels file, which lists the whole least-confident stratum."
                )
            else:
                raise SelectionError(
                    f"{doctors.source}: case {wrong[0]!r} is not where design {design['design']} of run "
                    f"{design['run_id']} puts it (the run changed since the pick), and the file lists only "
                    f"{tagged_census} of the {design['least_confident']} least-confident pairs: export every "
                    "picked pair (without --only-complete)"
                )
        if int(design["pool_size"]) != n:
            notes.append(f"The design's pool had {design['pool_size']} cases; these runs have {n}.")
    ignored = 0
    outside = 0
    for cid, given in doctors.labels.items():
        i = index.get(cid)
        if i is None:
            outside += 1
            continue
        if not in_design[i]:
            ignored += 1
            continue
        for dim, value in given.items():
            label[i, DIMENSIONS.index(dim)] = value
    labelled_rows = (label > 0).any(axis=1)
    if not labelled_rows.any():
        raise SelectionError(f"{doctors.source}: no doctors' label on any case of the pool the design counts")
    if outside:
        notes.append(f"{outside} labelled case(s) are not in the pool and are left out.")
    if ignored:
        notes.append(f"{ignored} labelled case(s) outside the design are not used (they were not drawn at random).")
    if design is None:
        notes.append(
            "The labels carry no selection design: the labelled cases are taken as a uniform random sample of the pool."
        )
    else:
        k_labelled = int((labelled_rows & (strata == 0)).sum())
        k_planned = int(design["least_confident"])
        if k_planned and k_labelled < k_planned:
            notes.append(
                f"Only {k_labelled} of the {k_planned} least-confident cases have labels: the rest of that stratum "
                "is estimated as if the labelled ones were a random sample of it (an assumption)."
            )
        picked_random = int(design["random"])
        r_labelled = int((labelled_rows & (strata == 1)).sum())
        if picked_random and r_labelled < picked_random:
            notes.append(f"{r_labelled} of the {picked_random} random cases have labels so far.")
    return LabelledPool(labels=label, strata=strata, ignored=ignored, notes=tuple(notes))


def agreement_arrays(
    run: RunData, rows: np.ndarray[Any, Any], label: np.ndarray[Any, Any], p_ref: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(Y, f) per case and dimension for one judge; Y NaN where the doctors gave no label."""
    verdicts = run.verdicts[rows].astype(np.int64)  # (n, 2, d)
    ran = verdicts != -1
    n_ran = ran.sum(axis=1)
    right = np.where(ran, (verdicts == label[:, None, :]).astype(np.float64), 0.0)
    p = p_ref[:, None, :]
    proxy = np.where(verdicts == 1, p, np.where(verdicts == 2, 1.0 - p, 0.0))
    proxy = np.where(ran, proxy, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(n_ran > 0, right.sum(axis=1) / np.maximum(n_ran, 1), 0.0)
        f = np.where(n_ran > 0, proxy.sum(axis=1) / np.maximum(n_ran, 1), 0.0)
    return np.where(label > 0, y, np.nan), f


def _estimates(
    y: FloatArray, f: FloatArray, strata: np.ndarray[Any, Any], confidence: float, small_sample: bool
) -> dict[str, PPIResult]:
    found = {
        dim: stratified_ppi(y[:, j], f[:, j], strata, confidence=confidence, small_sample=small_sample)
        for j, dim in enumerate(DIMENSIONS)
    }
    found[POOLED] = stratified_ppi(y, f, strata, confidence=confidence, small_sample=small_sample)
    return found


def corrected_estimates(
    runs: Sequence[RunData],
    doctors: DoctorLabels,
    *,
    reference: str | None = None,
    confidence: float = 0.95,
    small_sample: bool = True,
) -> CorrectedEstimates:
    """Agreement, preference rate and leaderboard over the pool, by PPI beside labels-only.

    Args:
        runs: every judge's run on the pool (one data set).
        doctors: the doctors' labels on the slice (:func:`doctor_labels`).
        reference: the run (id or judge spec) whose probabilities are the proxies; default the
            design's run, else the first run.
        confidence: interval coverage.
        small_sample: the small-sample variance floor of
            :func:`~medrewardbench.metrics.ppi.stratified_ppi` (False: the plain CLT interval,
            for comparison in ``benchmarks/bench_ppi.py``).

    Returns:
        The :class:`CorrectedEstimates`.

    Raises:
        SelectionError: no runs, runs on several data sets, a design made on other data, an
            unknown reference, or no doctors' label on any case of the pool.
    """
    if not runs:
        raise SelectionError("no runs to estimate")
    data_hashes = {r.data_hash for r in runs}
    if len(data_hashes) > 1:
        raise SelectionError("the runs are on several data sets; choose one with --data")
    notes: list[str] = []
    design = doctors.design
    data_hash = next(iter(data_hashes))
    if design is not None and design["data_hash"] and design["data_hash"] != data_hash:
        raise SelectionError(
            f"{doctors.source}: the pairs were picked from data {str(design['data_hash'])[:12]}, "
            f"but these runs are on data {data_hash[:12]}"
        )
    wanted = reference or (design["run_id"] if design is not None else None)
    matches = [r for r in runs if wanted in (r.run_id, r.judge_spec)] if wanted else list(runs[:1])
    if not matches:
        if reference is not None:
            raise SelectionError(
                f"no run of {reference!r} among the runs; available: {', '.join(r.run_id for r in runs)}"
            )
        matches = list(runs[:1])
        notes.append(
            f"The design's run {design['run_id'] if design else '?'} is not among these runs; "
            f"{matches[0].judge_spec}'s probabilities are the proxies."
        )
    ref = matches[0]
    pool_ids = ref.case_ids
    n = len(pool_ids)
    pool = labelled_pool(ref, doctors, design_run=design is not None and ref.run_id == design["run_id"])
    label, strata, labelled_rows, ignored = pool.labels, pool.strata, pool.labelled_rows, pool.ignored
    notes.extend(pool.notes)
    p_first = case_verdicts(ref).p_first
    p_ref = np.where(np.isnan(p_first), 0.5, p_first)
    judges: list[JudgeEstimates] = []
    arrays: dict[str, tuple[FloatArray, FloatArray]] = {}
    for run in runs:
        if run.case_ids == pool_ids:
            rows = np.arange(n)
        else:
            where = {cid: i for i, cid in enumerate(run.case_ids)}
            rows = np.array([where.get(cid, -1) for cid in pool_ids], dtype=np.int64)
        if (rows < 0).any():
            notes.append(f"{run.judge_spec} ({run.run_id}) did not judge every case of the pool; left out.")
            continue
        y, f = agreement_arrays(run, rows, label, p_ref)
        arrays[run.run_id] = (y, f)
        judges.append(JudgeEstimates(run.run_id, run.judge_spec, _estimates(y, f, strata, confidence, small_sample)))
    judges.sort(key=lambda j: -j.pooled.ppi.estimate if math.isfinite(j.pooled.ppi.estimate) else math.inf)
    if len(judges) > 1:
        y_lead, f_lead = arrays[judges[0].run_id]
        ranked = [judges[0]]
        for j in judges[1:]:
            y_j, f_j = arrays[j.run_id]
            diff = stratified_ppi(
                y_lead - y_j, f_lead - f_j, strata, confidence=confidence, bounds=(-1.0, 1.0), small_sample=small_sample
            )
            ranked.append(JudgeEstimates(j.run_id, j.judge_spec, j.dimensions, diff))
        judges = ranked
    prefers_first = np.where(label > 0, (label == 1).astype(np.float64), np.nan)
    preference = _estimates(prefers_first, p_ref, strata, confidence, small_sample)
    return CorrectedEstimates(
        pool_size=n,
        labelled=int(labelled_rows.sum()),
        ignored=ignored,
        reference=f"{ref.judge_spec} ({ref.run_id})",
        design=design,
        judges=tuple(judges),
        preference=preference,
        notes=tuple(notes),
        confidence=confidence,
    )


def load_corrected(
    paths: Sequence[str | Path],
    labels: str,
    *,
    judges: Sequence[str] | None = None,
    data: str | None = None,
    reference: str | None = None,
    confidence: float = 0.95,
) -> tuple[str, CorrectedEstimates]:
    """Read runs and the doctors' labels from disk and estimate (what ``report --labels`` calls).

    Args:
        paths: results directories or store files.
        labels: the doctors' labels: an ``annotate export`` canonical file (any data source works).
        judges: only these judges (specs or run ids).
        data: the data set, when the runs cover several and the labels carry no design.
        reference: the run whose probabilities are the proxies (default: the design's).
        confidence: interval coverage.

    Returns:
        (the pool's data fingerprint, the estimates).

    Raises:
        SelectionError: labels that fit none of the data sets, or several without ``data``.
        DataError: an unreadable labels file.
        StoreError: no runs, unknown judges.
    """
    from medrewardbench.data import load_benchmark
    from medrewardbench.metrics.loading import find_datasets

    doctors = doctor_labels(load_benchmark(labels).cases, labels)
    datasets = find_datasets(paths, judges=judges, data=data)
    if doctors.design is not None and doctors.design.get("data_hash"):
        datasets = [d for d in datasets if d.data_hash == doctors.design["data_hash"]]
        if not datasets:
            raise SelectionError(
                f"{labels}: the pairs were picked from data {str(doctors.design['data_hash'])[:12]}; "
                "no run here is on it"
            )
    if len(datasets) > 1:
        listed = ", ".join(f"{d.data_hash[:12]} ({d.name})" for d in datasets)
        raise SelectionError(f"{labels}: the runs cover several data sets ({listed}); choose one with --data")
    dataset = datasets[0]
    found = corrected_estimates([b.data for b in dataset.runs], doctors, reference=reference, confidence=confidence)
    return dataset.data_hash, found


def load_single_run(results: Sequence[str | Path], judge: str, data: str | None = None) -> LoadedRun:
    """The one stored run named by ``judge`` (a judge spec or a run id) under ``results``.

    Args:
        results: results directories or store files.
        judge: a judge spec or run id.
        data: a data fingerprint prefix or name, when the judge has runs on several data sets.

    Returns:
        The loaded run.

    Raises:
        StoreError: no such run, or several (the message lists them).
    """
    from medrewardbench.metrics.loading import find_datasets

    datasets = find_datasets(results, judges=[judge], data=data)
    runs = [run for dataset in datasets for run in dataset.runs]
    if len(runs) > 1:
        listed = "; ".join(f"{r.record.run_id} (data {r.record.data_hash[:12]}, {r.record.dataset_name})" for r in runs)
        raise StoreError(f"{judge!r} names {len(runs)} runs: {listed}; name one by its run id (or use --data)")
    return runs[0]
