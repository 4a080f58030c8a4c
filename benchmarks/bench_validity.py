"""Statistical validity of the report: level and power of every shown test, coverage of every interval.

A simulation with the structure of Med-RewardBench, analysed by the very functions that build a
report (:func:`medrewardbench.metrics.analysis.analyze`, which includes the human ceiling), so
that what is measured is what reports show:

* **Cases** in 13 organ systems of unequal, fixed size (the design the bootstrap is stratified
  by): 205, 160, 130, ..., 23 at 1,026 cases, scaled down at other sizes (at least 2 a system;
  at 100 cases the smallest systems have 2 and 3 cases).
* **Annotators**: three per case, each picking the better response with a probability that falls
  with the case's difficulty (shared by everyone who looks at the case), an item ambiguity per
  (case, dimension; 60 % of it shared by the case's six dimensions) and the organ system; the
  labels are their majority.
* **Judges** whose correctness has the same case difficulty and item ambiguity, a case-level
  random effect of their own (shared across the six dimensions and both orders), an item effect
  (shared across orders), a **position bias** (a share of requests answered "the first shown" on
  every dimension) and failures (counted wrong). Judge A is a careful judge; judge B has weaker
  case effects and a strong position bias, its skill calibrated so that it agrees with the labels
  **exactly as often as A** in every organ system and dimension (the null: computed by
  quadrature, not by simulation); judge C has A's structure, **10 points** below A. Their
  verdicts are as clustered as real judges': A gives the same winner in both orders 87 % of the
  time, and the per-request McNemar test rejects a true null about a quarter of the time.
* **Truths**: agreement with the labels and its differences from the quadrature; every other
  estimand (kappa, AC1, pairwise agreement, Fleiss, Krippendorff, the human row, judges against
  the annotators, the gap) is the project's own formula applied to the sums of a population of
  ``--population`` cases per organ system, weighted by the design's organ-system sizes.

For every shown test (A vs B under the null, A vs C for power; the pooled column and each dimension)
it prints the rejection rate at alpha = 0.05 with its Monte-Carlo error, and for every interval its
coverage; PASS/FAIL against the goals: 3.5-6.5 % under the null, 93.5-96.5 % coverage (a figure
outside its band by less than two Monte-Carlo errors reads ``PASS±MC``: the replicates cannot tell
it from one inside, and more of them decide it). The per-request McNemar test that reports used to
show is measured too, as a reference (it is no longer shown anywhere). "Per dimension" rows average
the six dimensions' indicators within each replicate (their Monte-Carlo error comes from the spread
of those averages); a single rate near 5 % has a Monte-Carlo error of 0.49 points and a coverage
near 95 % 0.49 points with 2,000 replicates. Replicates run in ``--jobs`` processes (one BLAS thread
each).

**Selective judging** (``--only selective``): the abstention threshold of
:mod:`medrewardbench.metrics.selective` on simulated judges with known accuracy at every
confidence (:mod:`medrewardbench.testing.selective_sim`: calibrated, over-confident, and two with
order-agreement confidences of only 0.5 and 1), 500 repeats of 500 calibration and 500 held-out
cases, on one dimension (the binomial test) and on six dimensions pooled with errors correlated
within a case (the case-level betting test): PASS when the chosen threshold's population risk is at
most alpha in at least 1 - delta of the repeats. Also the coverage of the pooled Brier score's and
ECE's case-bootstrap intervals.

Usage: python benchmarks/bench_validity.py [--sizes 100 1026] [--replicates 2000]
       [--resamples 2000] [--population 100000] [--seed 0] [--jobs 1] [--only all|accuracy|selective]
       [--selective-repeats 500]
       python benchmarks/bench_validity.py --quick     (seconds: a smoke run, not a measurement)
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.special import ndtr
from scipy.stats import binom

from medrewardbench.dimensions import DIMENSIONS, ORGAN_SYSTEMS, Order
from medrewardbench.metrics import stats
from medrewardbench.metrics.analysis import analyze
from medrewardbench.metrics.calibration import calibration_figures
from medrewardbench.metrics.confidence import CaseVerdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.human import judge_loo_counts, loo_targets, panel_features, panel_statistics
from medrewardbench.metrics.results import POOLED, Analysis, Estimate
from medrewardbench.testing.selective_sim import SimulatedJudge, check_guarantee, simulated_judges

N_DIMS = len(DIMENSIONS)
N_ORGANS = len(ORGAN_SYSTEMS)
ALPHA = 0.05
LEVEL_GOAL = (3.5, 6.5)
COVERAGE_GOAL = (93.5, 96.5)
SIZES_1026 = (205, 160, 130, 105, 85, 70, 60, 50, 45, 38, 30, 25, 23)
"""Cases per organ system at 1,026 cases (unequal, as in Med-RewardBench)."""

ANNOTATOR_SKILL = (1.5, 1.2, 0.9)
"""Probit intercepts of the three annotators."""
ANNOTATOR_DIFFICULTY, ANNOTATOR_AMBIGUITY = 0.7, 0.6
"""Weights of the case difficulty and the item ambiguity in the annotators' probit."""
ORGAN_ANNOTATOR = np.linspace(-0.3, 0.3, N_ORGANS)[[5, 0, 9, 3, 12, 7, 1, 10, 4, 8, 2, 11, 6]]
ORGAN_JUDGE = np.linspace(-0.4, 0.4, N_ORGANS)[[2, 9, 5, 12, 0, 7, 3, 11, 6, 1, 10, 4, 8]]
AMBIGUITY_SHARED = 0.6
"""Share of an item's ambiguity that the case's six dimensions have in common (correlation 0.6)."""
SAME_BEST = 0.85
"""Probability that a dimension's better response is the case's better response overall."""
JUDGES = ("A", "B", "C")


@dataclass
class JudgeModel:
    """A judge's probit of picking the better response, its position bias and failure rate.

    P(right | case) = Phi(skill[organ] - difficulty * u - ambiguity * z + case_effect * v + item_effect * y)
    with u the case difficulty, z the item ambiguity (shared with the annotators), v the judge's
    own case effect (shared by the six dimensions and both orders) and y its item effect (shared
    by both orders); with probability ``position_bias`` a request is answered "the first shown" on
    every dimension, with probability ``failure`` it fails (no verdict, counted wrong).
    """

    difficulty: float
    ambiguity: float
    case_effect: float
    item_effect: float
    position_bias: float
    failure: float
    skill: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(N_ORGANS))


def organ_sizes(n_cases: int) -> npt.NDArray[np.int64]:
    """The design: cases per organ system, proportional to :data:`SIZES_1026`, at least 2 each."""
    raw = np.array(SIZES_1026, dtype=np.float64) * n_cases / sum(SIZES_1026)
    sizes = np.maximum(2, np.floor(raw)).astype(np.int64)
    while sizes.sum() < n_cases:
        sizes[np.argmax(raw - sizes)] += 1
    while sizes.sum() > n_cases:
        sizes[np.argmax(sizes)] -= 1
    return sizes


# --------------------------------------------------------------------------------------------
# Quadrature: the judges' agreement with the labels, exactly
# --------------------------------------------------------------------------------------------

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(64)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def _label_right(organ: int, u: npt.NDArray[np.float64], z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """P(the majority of the three annotators picks the better response | u, z)."""
    p = [ndtr(a + ORGAN_ANNOTATOR[organ] - ANNOTATOR_DIFFICULTY * u - ANNOTATOR_AMBIGUITY * z) for a in ANNOTATOR_SKILL]
    return p[0] * p[1] + p[0] * p[2] + p[1] * p[2] - 2.0 * p[0] * p[1] * p[2]


def agreement_with_labels(judge: JudgeModel, skill: float, organ: int) -> float:
    """P(a request's verdict equals the label), integrated over u and z (Gauss-Hermite, 64 x 64)."""
    u, z = np.meshgrid(_NODES, _NODES, indexing="ij")
    weight = np.outer(_WEIGHTS, _WEIGHTS)
    label = _label_right(organ, u, z)
    spread = math.sqrt(1.0 + judge.case_effect**2 + judge.item_effect**2)
    right = ndtr((skill - judge.difficulty * u - judge.ambiguity * z) / spread)
    agree = right * label + (1.0 - right) * (1.0 - label)
    value = (1.0 - judge.failure) * (judge.position_bias / 2.0 + (1.0 - judge.position_bias) * agree)
    return float((value * weight).sum())


def _calibrate(judge: JudgeModel, targets: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The skill per organ system at which the judge agrees with the labels as often as ``targets``."""
    skills = np.empty(N_ORGANS)
    for organ in range(N_ORGANS):
        low, high = -6.0, 10.0
        if not agreement_with_labels(judge, low, organ) < targets[organ] < agreement_with_labels(judge, high, organ):
            raise ValueError(f"judge cannot reach {targets[organ]:.4f} in organ system {organ}")
        for _ in range(100):
            middle = (low + high) / 2.0
            if agreement_with_labels(judge, middle, organ) < targets[organ]:
                low = middle
            else:
                high = middle
        skills[organ] = (low + high) / 2.0
    return skills


@dataclass(frozen=True)
class Model:
    judges: tuple[JudgeModel, ...]
    accuracy: npt.NDArray[np.float64]
    """(judge, organ system) agreement with the labels, from the quadrature"""


def build_model() -> Model:
    """Judges A (careful), B (position-biased, as good as A) and C (A's kind, 10 points worse)."""
    a = JudgeModel(1.0, 0.6, 2.5, 1.5, 0.05, 0.02, 3.0 + ORGAN_JUDGE)
    target = np.array([agreement_with_labels(a, a.skill[o], o) for o in range(N_ORGANS)])
    b = JudgeModel(0.5, 0.3, 1.5, 1.0, 0.12, 0.02)
    b.skill = _calibrate(b, target)
    c = JudgeModel(1.0, 0.6, 2.5, 1.5, 0.05, 0.02)
    c.skill = _calibrate(c, target - 0.10)
    accuracy = np.array([[agreement_with_labels(j, j.skill[o], o) for o in range(N_ORGANS)] for j in (a, b, c)])
    return Model((a, b, c), accuracy)


# --------------------------------------------------------------------------------------------
# Simulation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    organs: npt.NDArray[np.int64]
    ratings: npt.NDArray[np.int8]
    """(cases, 3, dims)"""
    labels: npt.NDArray[np.int8]
    verdicts: tuple[npt.NDArray[np.int8], ...]
    """per judge (cases, 2, dims)"""


def simulate(organs: npt.NDArray[np.int64], model: Model, rng: np.random.Generator) -> Sample:
    """One data set: ratings of three annotators, their majority labels, the judges' verdicts."""
    n = organs.size
    u = rng.normal(size=(n, 1))
    z = math.sqrt(AMBIGUITY_SHARED) * rng.normal(size=(n, 1))
    z = z + math.sqrt(1.0 - AMBIGUITY_SHARED) * rng.normal(size=(n, N_DIMS))
    best = rng.integers(1, 3, size=(n, 1))
    better = np.where(rng.random((n, N_DIMS)) < SAME_BEST, best, 3 - best).astype(np.int8)
    ratings = np.empty((n, len(ANNOTATOR_SKILL), N_DIMS), dtype=np.int8)
    for r, skill in enumerate(ANNOTATOR_SKILL):
        p = ndtr(skill + ORGAN_ANNOTATOR[organs][:, None] - ANNOTATOR_DIFFICULTY * u - ANNOTATOR_AMBIGUITY * z)
        ratings[:, r] = np.where(rng.random((n, N_DIMS)) < p, better, 3 - better)
    labels = np.where((ratings == 1).sum(axis=1) >= 2, 1, 2).astype(np.int8)
    first_shown = np.array([1, 2], dtype=np.int8)[None, :, None]
    verdicts = []
    for judge in model.judges:
        v = rng.normal(size=(n, 1))
        y = rng.normal(size=(n, N_DIMS))
        eta = judge.skill[organs][:, None] - judge.difficulty * u - judge.ambiguity * z
        eta = eta + judge.case_effect * v + judge.item_effect * y
        right = rng.random((n, 2, N_DIMS)) < ndtr(eta)[:, None, :]
        pick = np.where(right, better[:, None, :], 3 - better[:, None, :]).astype(np.int8)
        pick = np.where(rng.random((n, 2, 1)) < judge.position_bias, first_shown, pick).astype(np.int8)
        pick[rng.random((n, 2)) < judge.failure] = stats.FAILED
        verdicts.append(pick)
    return Sample(organs, ratings, labels, tuple(verdicts))


def as_runs(sample: Sample) -> list[RunData]:
    """The sample as the runs a report would load (three annotators' labels attached)."""
    n = sample.organs.size
    names = tuple(ORGAN_SYSTEMS[o] for o in sample.organs.tolist())
    ids = tuple(f"case-{i:05d}" for i in range(n))
    lengths = np.full((n, 2), 500, dtype=np.int64)
    return [
        RunData(
            run_id=f"run-{name}",
            judge_spec=f"sim:{name}",
            data_hash="simulated",
            case_ids=ids,
            verdicts=verdicts,
            labels=sample.labels,
            lengths=lengths,
            groups={"organ_system": names},
            orders=(Order.ORIGINAL, Order.SWAPPED),
            ratings=sample.ratings,
            annotators=("doctor-1", "doctor-2", "doctor-3"),
        )
        for name, verdicts in zip(JUDGES, sample.verdicts, strict=True)
    ]


# --------------------------------------------------------------------------------------------
# Population values
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PopulationSums:
    """Per organ system, the sums over a large population that the estimands are functions of."""

    cases: npt.NDArray[np.int64]
    """(organ,) population cases"""
    confusion: npt.NDArray[np.float64]
    """(organ, judge, 2, 2) [pred, gold] over answered requests, all dimensions"""
    panel: npt.NDArray[np.float64]
    """(organ, features) :func:`panel_features` summed, pooled column"""
    human: npt.NDArray[np.float64]
    """(organ, 2) the annotators' (right, counted) against the leave-one-out targets"""
    judges_loo: npt.NDArray[np.float64]
    """(organ, judge, 2) the judges' (right, counted) against the same targets"""


def population_sums(model: Model, per_organ: int, seed: int, chunk: int = 20_000) -> PopulationSums:
    """Simulate ``per_organ`` cases of every organ system and sum what the estimands need."""
    n_judges = len(model.judges)
    confusion = np.zeros((N_ORGANS, n_judges, 2, 2))
    panel = None
    human = np.zeros((N_ORGANS, 2))
    judges_loo = np.zeros((N_ORGANS, n_judges, 2))
    for organ in range(N_ORGANS):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(10**6, organ)))
        done = 0
        while done < per_organ:
            size = min(chunk, per_organ - done)
            sample = simulate(np.full(size, organ, dtype=np.int64), model, rng)
            lab = sample.labels[:, None, :]
            for j, verdicts in enumerate(sample.verdicts):
                for p in (1, 2):
                    for g in (1, 2):
                        confusion[organ, j, p - 1, g - 1] += np.count_nonzero((verdicts == p) & (lab == g))
            features = panel_features(sample.ratings)[:, -1].sum(axis=0)
            if panel is None:
                panel = np.zeros((N_ORGANS, features.size))
            panel[organ] += features
            targets, counted = loo_targets(sample.ratings)
            human[organ] += (np.count_nonzero(counted & (sample.ratings == targets)), np.count_nonzero(counted))
            for j, verdicts in enumerate(sample.verdicts):
                right, judged = judge_loo_counts(verdicts, targets, counted)
                judges_loo[organ, j] += (right.sum(), judged.sum())
            done += size
    assert panel is not None
    return PopulationSums(np.full(N_ORGANS, per_organ), confusion, panel, human, judges_loo)


@dataclass(frozen=True)
class Truth:
    """The population value of every interval's estimand at one design (organ-system sizes)."""

    values: dict[str, float]


def truth_at(sizes: npt.NDArray[np.int64], model: Model, sums: PopulationSums) -> Truth:
    """Population values for a design: organ systems weighted by their share of its cases."""
    share = sizes / sizes.sum()
    weight = share * sums.cases.sum() / sums.cases  # population sums scaled to the design's mix
    values: dict[str, float] = {}
    for j, name in enumerate(JUDGES):
        values[f"score {name}"] = float(share @ model.accuracy[j])
        values[f"macro {name}"] = float(model.accuracy[j].mean())
        cells = np.tensordot(weight, sums.confusion[:, j], axes=1)
        values[f"kappa {name}"] = float(stats.kappa_from_confusion(cells))
        values[f"ac1 {name}"] = float(stats.ac1_from_confusion(cells))
        loo = weight @ sums.judges_loo[:, j]
        values[f"vs annotators {name}"] = loo[0] / loo[1]
    human = weight @ sums.human
    values["human row"] = human[0] / human[1]
    for name in JUDGES:
        values[f"gap {name}"] = values[f"vs annotators {name}"] - values["human row"]
    percent, fleiss, alpha = panel_statistics(weight @ sums.panel)
    values.update({"pairwise agreement": float(percent), "Fleiss kappa": float(fleiss)})
    values["Krippendorff alpha"] = float(alpha)
    for other in ("B", "C"):
        values[f"difference A-{other}"] = values["score A"] - values[f"score {other}"]
    return Truth(values)


# --------------------------------------------------------------------------------------------
# One replicate
# --------------------------------------------------------------------------------------------


def _covers(estimate: Estimate, truth: float) -> float:
    if not (estimate.low == estimate.low and estimate.high == estimate.high):
        return math.nan
    return float(estimate.low <= truth <= estimate.high)


def request_mcnemar(sample: Sample, a: int, b: int) -> tuple[float, ...]:
    """The removed per-request McNemar p-value (requests as independent pairs): pooled, then per dimension."""
    lab = sample.labels[:, None, :]
    right_a = sample.verdicts[a] == lab
    right_b = sample.verdicts[b] == lab
    only_a = (right_a & ~right_b).sum(axis=(0, 1))
    only_b = (right_b & ~right_a).sum(axis=(0, 1))
    out = []
    for x, y in [(only_a.sum(), only_b.sum()), *zip(only_a.tolist(), only_b.tolist(), strict=True)]:
        out.append(1.0 if x + y == 0 else float(min(1.0, 2.0 * binom.cdf(min(x, y), x + y, 0.5))))
    return tuple(out)


def measure(analysis: Analysis, sample: Sample, truth: Truth) -> dict[str, float]:
    """Coverage flags and p-values of one analysed sample (keys as the table's rows)."""
    out: dict[str, float] = {}
    values = truth.values
    human = analysis.human
    assert human is not None
    for name, run in zip(JUDGES, analysis.runs, strict=True):
        out[f"cover|score {name}"] = _covers(run.accuracy.pooled, values[f"score {name}"])
        for dim in DIMENSIONS:
            out[f"cover|accuracy {name}|{dim}"] = _covers(run.accuracy[dim], values[f"score {name}"])
            out[f"cover|kappa {name}|{dim}"] = _covers(run.agreement.kappa[dim], values[f"kappa {name}"])
            out[f"cover|ac1 {name}|{dim}"] = _covers(run.agreement.ac1[dim], values[f"ac1 {name}"])
        out[f"cover|macro {name}"] = _covers(run.groups["organ_system"].macro.pooled, values[f"macro {name}"])
    for name, judge in zip(JUDGES, human.judges, strict=True):
        out[f"cover|vs annotators {name}"] = _covers(judge.agreement.pooled, values[f"vs annotators {name}"])
        out[f"cover|gap {name}"] = _covers(judge.gap.pooled, values[f"gap {name}"])
    panel = human.agreement
    for key, table in (
        ("pairwise agreement", panel.percent_agreement),
        ("Fleiss kappa", panel.fleiss_kappa),
        ("Krippendorff alpha", panel.krippendorff_alpha),
        ("human row", human.human),
    ):
        out[f"cover|{key}"] = _covers(table.pooled, values[key])
        for dim in DIMENSIONS:
            out[f"cover|{key}|{dim}"] = _covers(table[dim], values[key])
    labels = {name: run.label for name, run in zip(JUDGES, analysis.runs, strict=True)}
    for other, kind in (("B", "null"), ("C", "power")):
        comparisons = {c.column: c for c in analysis.pairwise.between(labels["A"], labels[other])}
        truth_diff = values[f"difference A-{other}"]
        mcnemar = request_mcnemar(sample, 0, JUDGES.index(other))
        for column, p_request in zip((POOLED, *DIMENSIONS), mcnemar, strict=True):
            c = comparisons[column]
            suffix = "" if column == POOLED else f"|{column}"
            out[f"{kind}|case{suffix}"] = c.p_case
            out[f"{kind}|bootstrap{suffix}"] = c.p_bootstrap
            out[f"{kind}|mcnemar{suffix}"] = p_request
            out[f"cover|difference A-{other}{suffix}"] = float(c.low <= truth_diff <= c.high)
    return out


# --------------------------------------------------------------------------------------------
# Running and printing
# --------------------------------------------------------------------------------------------

_WORKER: dict[str, object] = {}


def _init_worker(model: Model, truths: dict[int, Truth], resamples: int, seed: int) -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _WORKER.update(model=model, truths=truths, resamples=resamples, seed=seed)


def run_replicate(size: int, replicate: int) -> dict[str, float]:
    model = _WORKER["model"]
    truths = _WORKER["truths"]
    assert isinstance(model, Model) and isinstance(truths, dict)
    resamples, seed = int(_WORKER["resamples"]), int(_WORKER["seed"])  # type: ignore[call-overload]
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(size, replicate)))
    organs = np.repeat(np.arange(N_ORGANS), organ_sizes(size))
    sample = simulate(organs, model, rng)
    analysis = analyze(as_runs(sample), n_resamples=resamples, seed=replicate)
    return measure(analysis, sample, truths[size])


@dataclass(frozen=True)
class Row:
    label: str
    key: str
    kind: str
    """'null' (goal on the rejection rate), 'power' (no goal), 'reference' (removed test), 'cover'"""


TEST_ROWS = (
    ("case sign-flip test (p_case)", "case"),
    ("paired bootstrap (p_bootstrap, tiers)", "bootstrap"),
    ("McNemar per request (removed)", "mcnemar"),
)


def rows() -> Iterator[Row]:
    for label, key in TEST_ROWS:
        reference = key == "mcnemar"
        for column, suffix in (("pooled", ""), ("per dimension", "|*")):
            yield Row(f"{label}, {column}", f"null|{key}{suffix}", "reference" if reference else "null")
            yield Row(f"{label}, {column}", f"power|{key}{suffix}", "power")
    for name in JUDGES:
        yield Row(f"score (pooled agreement), judge {name}", f"cover|score {name}", "cover")
        yield Row(f"agreement per dimension, judge {name}", f"cover|accuracy {name}|*", "cover")
        yield Row(f"macro over organ systems, judge {name}", f"cover|macro {name}", "cover")
        yield Row(f"Cohen's kappa per dimension, judge {name}", f"cover|kappa {name}|*", "cover")
        yield Row(f"Gwet's AC1 per dimension, judge {name}", f"cover|ac1 {name}|*", "cover")
        yield Row(f"vs annotators (pooled), judge {name}", f"cover|vs annotators {name}", "cover")
        yield Row(f"gap to human (pooled), judge {name}", f"cover|gap {name}", "cover")
    for key in ("pairwise agreement", "Fleiss kappa", "Krippendorff alpha", "human row"):
        yield Row(f"{key}, pooled", f"cover|{key}", "cover")
        yield Row(f"{key}, per dimension", f"cover|{key}|*", "cover")
    yield Row("difference A-B (null), pooled", "cover|difference A-B", "cover")
    yield Row("difference A-B (null), per dimension", "cover|difference A-B|*", "cover")
    yield Row("difference A-C (10 points), pooled", "cover|difference A-C", "cover")


def _per_replicate(results: Sequence[dict[str, float]], key: str, reject: bool) -> npt.NDArray[np.float64]:
    """One value per replicate: the flag, or the mean flag over the six dimensions for ``...|*``."""
    keys = [key.replace("|*", f"|{d}") for d in DIMENSIONS] if key.endswith("|*") else [key]
    values = np.array([[r[k] for k in keys] for r in results], dtype=np.float64)
    if reject:
        values = (values < ALPHA).astype(np.float64)
    return values.mean(axis=1)


def summarise(size: int, results: Sequence[dict[str, float]], judge: bool = True) -> list[str]:
    """The table's lines for one size, each figure with its Monte-Carlo error and PASS/FAIL (when ``judge``)."""
    lines = [f"{'':2}{'':70} {'figure':>8} {'± MC':>6}  {'goal':<11} result"]
    failures = 0
    for row in rows():
        values = _per_replicate(results, row.key, reject=row.kind != "cover")
        if np.isnan(values).any():
            values = values[~np.isnan(values)]
        figure = 100.0 * values.mean()
        if row.key.endswith("|*"):
            error = 100.0 * values.std(ddof=1) / math.sqrt(values.size)
        else:
            error = 100.0 * math.sqrt(max(values.mean() * (1 - values.mean()), 1e-12) / values.size)
        if row.kind in ("null", "reference"):
            goal, what = LEVEL_GOAL, "rejects (null)"
        elif row.kind == "cover":
            goal, what = COVERAGE_GOAL, "coverage"
        else:
            goal, what = None, "power"
        if goal is None:
            verdict, goal_text = "", ""
        elif not judge:
            verdict, goal_text = "-", f"{goal[0]:.1f}-{goal[1]:.1f}"
        else:
            ok = goal[0] <= figure <= goal[1]
            # a figure outside the band by less than two Monte-Carlo errors is not evidence of a miss: it
            # says so ("PASS±MC") rather than FAIL; more replicates shrink the error and decide it
            near = not ok and goal[0] - 2 * error <= figure <= goal[1] + 2 * error
            if row.kind == "reference":
                verdict = "within" if ok else "outside"
            else:
                verdict = "PASS" if ok else ("PASS±MC" if near else "FAIL")
            failures += row.kind != "reference" and not ok and not near
            goal_text = f"{goal[0]:.1f}-{goal[1]:.1f}"
        lines.append(f"  {row.label + ' ' + what:<70} {figure:8.1f} {error:6.1f}  {goal_text:<11} {verdict}")
    lines.append(f"  {size} cases: {failures} FAIL" if judge else f"  {size} cases: not judged (--quick)")
    return lines


# --------------------------------------------------------------------------------------------
# Selective judging: the abstention guarantee, and the calibration intervals
# --------------------------------------------------------------------------------------------


def _verdict(value: float, goal_low: float, goal_high: float, mc: float) -> str:
    if goal_low <= value <= goal_high:
        return "PASS"
    near = value >= goal_low - 2 * mc and value <= goal_high + 2 * mc
    return "PASS±MC" if near else "FAIL"


def _population_calibration(judge: SimulatedJudge, bins: int = 10) -> tuple[float, float]:
    """The population Brier score and equal-width ECE of a continuous simulated judge (quadrature)."""
    c = np.linspace(0.5, 1.0, 200_001)[1:-1]
    acc = judge.accuracy(c)
    brier = float(np.mean(acc * (1 - c) ** 2 + (1 - acc) * c**2))
    index = np.minimum(((c - 0.5) / 0.5 * bins).astype(int), bins - 1)
    gaps = [abs(acc[index == b].mean() - c[index == b].mean()) * np.mean(index == b) for b in range(bins)]
    return brier, float(np.sum(gaps))


def calibration_coverage(
    judge: SimulatedJudge, repeats: int, n_cases: int, resamples: int, seed: int
) -> dict[str, float]:
    """How often the case-bootstrap intervals of the pooled Brier score and ECE cover the population values."""
    brier_truth, ece_truth = _population_calibration(judge)
    rng = np.random.default_rng(seed)
    hits = {"brier": 0, "ece": 0}
    dims = len(DIMENSIONS)
    for r in range(repeats):
        conf, wrong = judge.draw(rng, (n_cases, dims), shared=0.5)
        labels = np.where(rng.random((n_cases, dims)) < 0.5, 1, 2).astype(np.int8)
        picks_first = (labels == 1) ^ (wrong > 0)
        verdicts = CaseVerdicts(
            run_id="sim",
            judge_spec="sim",
            case_ids=tuple(map(str, range(n_cases))),
            p_first=np.where(picks_first, conf, 1 - conf),
            labels=labels,
            groups={},
            source="probability",
        )
        figures = calibration_figures(verdicts, n_resamples=resamples, seed=seed + r)
        hits["brier"] += int(figures.brier_low[-1] <= brier_truth <= figures.brier_high[-1])
        hits["ece"] += int(figures.ece_low[-1] <= ece_truth <= figures.ece_high[-1])
    return {"brier": hits["brier"] / repeats, "ece": hits["ece"] / repeats, "ece_truth": ece_truth}


def selective_validity(repeats: int, resamples: int, seed: int, judge_goals: bool) -> tuple[list[str], int]:
    """The abstention guarantee per simulated judge (one dimension and six pooled), and calibration intervals.

    Returns:
        The printed lines and the number of FAIL verdicts.
    """
    alpha = delta = 0.10
    lines = [
        f"\nselective judging: alpha {alpha}, delta {delta}; {repeats} repeats of 500 calibration and 500 held-out "
        "cases; 'held' = share of repeats whose chosen threshold has population risk <= alpha (goal >= 90 %)",
        f"{'judge':<34}{'column':<22}{'held %':>14}{'realised held %':>17}{'coverage %':>12}{'none %':>9}  verdict",
    ]
    failures = 0
    for judge in simulated_judges():
        for dims, column in ((1, "one dimension"), (6, "pooled (6, correlated)")):
            check = check_guarantee(judge, repeats=repeats, dimensions=dims, seed=seed + dims)
            verdict = _verdict(check.held, 1 - delta, 1.0, check.held_mc) if judge_goals else "-"
            failures += verdict == "FAIL"
            lines.append(
                f"{judge.name:<34}{column:<22}{100 * check.held:>8.1f} ± {100 * check.held_mc:.1f}"
                f"{100 * check.realised_held:>17.1f}{100 * check.coverage:>12.1f}"
                f"{100 * check.none_qualified:>9.1f}  {verdict}"
            )
    n_cal = max(50, repeats // 2)
    lines.append(
        f"\ncalibration intervals: pooled Brier score and ECE (10 equal-width bins), 95 % case bootstrap "
        f"({resamples} resamples) on 300 cases x 6 correlated dimensions, {n_cal} repeats"
    )
    for judge in simulated_judges()[:2]:
        found = calibration_coverage(judge, n_cal, 300, resamples, seed)
        mc = math.sqrt(0.95 * 0.05 / n_cal)
        brier_verdict = _verdict(found["brier"], 0.935, 0.965, mc) if judge_goals else "-"
        failures += brier_verdict == "FAIL"
        lines.append(
            f"{judge.name:<34}Brier covered {100 * found['brier']:5.1f} ± {100 * mc:.1f} %  {brier_verdict};  "
            f"ECE (true {found['ece_truth']:.3f}) covered {100 * found['ece']:5.1f} %  (reported: the plug-in ECE is "
            "biased upwards, its interval is not judged)"
        )
    return lines, failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1026])
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--population", type=int, default=100_000, help="population cases per organ system")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--quick", action="store_true", help="30 replicates, 200 resamples: a smoke run, the goals not judged"
    )
    parser.add_argument(
        "--only",
        choices=("all", "accuracy", "selective"),
        default="all",
        help="accuracy: the report's tests and intervals; selective: the abstention guarantee, calibration intervals",
    )
    parser.add_argument("--selective-repeats", type=int, default=500, help="repeats of the abstention check")
    args = parser.parse_args(argv)
    if args.quick:
        args.replicates, args.resamples, args.population, args.selective_repeats = 30, 200, 5_000, 60
    start = time.perf_counter()
    selective_failures = 0
    if args.only in ("all", "selective"):
        lines, selective_failures = selective_validity(
            args.selective_repeats, min(args.resamples, 1000), args.seed, judge_goals=not args.quick
        )
        print("\n".join(lines))
        if args.only == "selective":
            verdict = "not judged (--quick)" if args.quick else f"{selective_failures} FAIL"
            print(f"\ntotal: {verdict}; wall {time.perf_counter() - start:.0f} s")
            return 0
    model = build_model()
    sums = population_sums(model, args.population, args.seed)
    truths = {size: truth_at(organ_sizes(size), model, sums) for size in args.sizes}
    print(
        f"validity: {args.replicates} replicates per size, {args.resamples} resamples, sizes "
        f"{', '.join(map(str, args.sizes))}; population {args.population:,} cases per organ system "
        f"({time.perf_counter() - start:.0f} s); alpha {ALPHA}"
    )
    agreement = ", ".join(f"{name} {100 * model.accuracy[j].mean():.1f}" for j, name in enumerate(JUDGES))
    print(f"judges' agreement with the labels (mean over organ systems, %): {agreement}")
    failures = 0
    for size in args.sizes:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(
            max_workers=args.jobs, initializer=_init_worker, initargs=(model, truths, args.resamples, args.seed)
        ) as pool:
            results = list(pool.map(run_replicate, [size] * args.replicates, range(args.replicates), chunksize=4))
        sizes = organ_sizes(size)
        print(
            f"\n{size} cases (organ systems of {', '.join(map(str, sizes.tolist()))}), "
            f"{args.replicates} replicates in {time.perf_counter() - t0:.0f} s"
        )
        lines = summarise(size, results, judge=not args.quick)
        failures += 0 if args.quick else int(lines[-1].split(": ")[1].split()[0])
        print("\n".join(lines))
    failures += selective_failures
    verdict = "not judged (--quick: too few replicates)" if args.quick else f"{failures} FAIL"
    print(f"\ntotal: {verdict}; wall {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
