"""Validity of the prediction-powered estimates: coverage and width under the design of ``annotate pick``.

A simulation with known truth, analysed by the very functions ``report --labels`` calls
(:func:`medrewardbench.metrics.selection.pick_design` on the reference judge's case-level
verdicts, then :func:`medrewardbench.metrics.corrected.corrected_estimates`):

* **Pool**: N cases x six dimensions; each (case, dimension) has a chance ``p`` that response 1 is
  better (Beta(0.7, 0.7): most pairs clear, some close), and the doctors' label is drawn from it.
  The truth is the pool itself: each judge's agreement with those labels over all N cases (both
  orders, failures counted wrong) and the doctors' share of response-1 preferences.
* **Judges** (every one is estimated in every replicate; the first is the reference whose
  confidences pick the slice and whose probabilities are the proxies):
  ``calibrated``: a probability near ``p`` (logit noise 0.6) in both orders, verdicts from it;
  ``overconfident``: the same probability pushed to the extremes (logit x 3);
  ``hard``: verdicts only, from ``p`` plus noise per order (its confidence: do the orders agree);
  ``coin``: random verdicts, 2 % failures;
  ``agrees 95 %`` / ``agrees 99 %`` (the small-sample cells only): the doctors' label with that
  chance per pair and dimension, the same in both orders.
* **Design**: the K least confident cases labelled in full, R at random from the rest.

For each scenario it prints the coverage of the 95 % intervals (PPI and labels-only) with their
Monte-Carlo error, the mean half-widths and their ratio, and PASS/FAIL against the goals:
coverage within 93.5-96.5 % or within two Monte-Carlo errors of it (``PASS±MC``) for both
intervals, and PPI narrower than labels-only where the proxy is informative.

The **small-sample cells** (20 random labels, judges agreeing 95 % and 99 % of the time, pooled
and on the ``overall`` dimension alone) print the coverage of the plain CLT interval ("old",
``small_sample=False``) beside the default one with its small-sample variance floor
(:mod:`medrewardbench.metrics.ppi`): with 20 labels all equal the old interval has width 0. Their
goal is coverage >= 93.5 % (within two Monte-Carlo errors) only: at such rates a count of 20 is
so discrete that a 95 % interval over-covers (Agresti-Coull's as any other).

Usage: python benchmarks/bench_ppi.py [--replicates 1000] [--seed 0] [--only TEXT]
       python benchmarks/bench_ppi.py --quick     (seconds: a smoke run, not a measurement)
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.corrected import POOLED, corrected_estimates, doctor_labels
from medrewardbench.metrics.ppi import PPIResult
from medrewardbench.metrics.selection import pick_design

D = len(DIMENSIONS)
COVERAGE_BAND = (0.935, 0.965)
OVERALL = DIMENSIONS.index("overall")


@dataclass(frozen=True)
class Scenario:
    """One simulated setting."""

    name: str
    reference: str
    pool: int
    least_confident: int
    random: int
    judges: tuple[str, ...] = ("calibrated", "overconfident", "hard", "coin")
    small_sample: bool = False
    """a small-sample cell: old (plain CLT) vs new coverage, the overall dimension too, a lower goal only"""


SCENARIOS = (
    Scenario("calibrated reference, Med-RewardBench size", "calibrated", 1026, 100, 200),
    Scenario("overconfident reference", "overconfident", 1026, 100, 200),
    Scenario("order agreement only (no probabilities)", "hard", 1026, 100, 200),
    Scenario("uninformative reference (a coin)", "coin", 1026, 100, 200),
    Scenario("small pool, small slice", "calibrated", 300, 30, 60),
    Scenario(
        "20 random labels, no census, extreme agreement",
        "calibrated",
        300,
        0,
        20,
        ("calibrated", "agrees 95 %", "agrees 99 %"),
        True,
    ),
    Scenario(
        "20 random labels beside a census of 30, extreme agreement",
        "calibrated",
        300,
        30,
        20,
        ("calibrated", "agrees 95 %", "agrees 99 %"),
        True,
    ),
)
AGREEING = {"agrees 95 %": 0.95, "agrees 99 %": 0.99}


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def simulate(
    rng: np.random.Generator, n: int, reference: str, judges: tuple[str, ...]
) -> tuple[list[RunData], np.ndarray]:
    """The judges' runs (reference first) and the doctors' labels (n, D) on one pool."""
    p = rng.beta(0.7, 0.7, size=(n, D))
    labels = np.where(rng.uniform(size=(n, D)) < p, 1, 2).astype(np.int8)
    belief = _sigmoid(_logit(p) + rng.normal(0, 0.6, size=(n, D)))
    runs: dict[str, RunData] = {}
    ids = tuple(f"c{i:05d}" for i in range(n))

    def run(name: str, verdicts: np.ndarray, preferences: np.ndarray | None) -> RunData:
        return RunData(
            run_id=f"run-{name}",
            judge_spec=f"sim:{name}",
            data_hash="simulated",
            case_ids=ids,
            verdicts=verdicts.astype(np.int8),
            labels=np.zeros((n, D), dtype=np.int8),
            lengths=np.ones((n, 2), dtype=np.int64),
            groups={},
            orders=(Order.ORIGINAL, Order.SWAPPED),
            preferences=preferences,
        )

    for name, prob in (("calibrated", belief), ("overconfident", _sigmoid(3 * _logit(belief)))):
        per_order = np.stack([prob, prob], axis=1)
        runs[name] = run(name, np.where(per_order > 0.5, 1, 2), per_order)
    noisy = p[:, None, :] + rng.normal(0, 0.2, size=(n, 2, D))
    runs["hard"] = run("hard", np.where(noisy > 0.5, 1, 2), None)
    coin = rng.integers(1, 3, size=(n, 2, D))
    coin[rng.uniform(size=(n, 2, D)) < 0.02] = 0
    runs["coin"] = run("coin", coin, None)
    for name, rate in AGREEING.items():
        if name in judges:
            right = rng.uniform(size=(n, D)) < rate
            verdicts = np.where(right, labels, 3 - labels)
            runs[name] = run(name.replace(" %", "").replace(" ", "-"), np.stack([verdicts, verdicts], axis=1), None)
    order = [reference, *[j for j in judges if j != reference]]
    return [runs[name] for name in order], labels


def exact_agreement(run: RunData, labels: np.ndarray) -> float:
    """The judge's agreement with the doctors over the whole pool (both orders; failures wrong)."""
    return float((run.verdicts == labels[:, None, :]).mean())


def exact_dimension_agreement(run: RunData, labels: np.ndarray, dimension: int) -> float:
    """The judge's agreement with the doctors on one dimension over the whole pool."""
    return float((run.verdicts[:, :, dimension] == labels[:, None, dimension]).mean())


def _covers(result: PPIResult, truth: float) -> tuple[float, float, float, float]:
    return (
        float(result.ppi.low <= truth <= result.ppi.high),
        float(result.classical.low <= truth <= result.classical.high),
        result.ppi.half_width,
        result.classical.half_width,
    )


def replicate(rng: np.random.Generator, scenario: Scenario, seed: int) -> dict[str, tuple[float, ...]]:
    """One pool, one pick, one estimate: target -> (PPI covers, labels-only covers, PPI hw, labels-only hw).

    A small-sample cell adds the plain CLT interval's (PPI covers, labels-only covers, PPI hw,
    labels-only hw) and the targets on the overall dimension alone.
    """
    runs, labels = simulate(rng, scenario.pool, scenario.reference, scenario.judges)
    design = pick_design(
        case_verdicts(runs[0]),
        least_confident=scenario.least_confident,
        random=scenario.random,
        seed=seed,
        data_hash="simulated",
    )
    index = {cid: i for i, cid in enumerate(runs[0].case_ids)}
    cases = [
        Case(
            case_id=cid,
            image=ImageRef.empty(),
            question="",
            response_1="",
            response_2="",
            labels={dim: int(labels[index[cid], j]) for j, dim in enumerate(DIMENSIONS)},
            metadata={"selection": design.case_metadata(cid)},
        )
        for cid in (*design.least_confident_ids, *design.random_ids)
    ]
    doctors = doctor_labels(cases, "simulated")
    versions = [corrected_estimates(runs, doctors)]
    if scenario.small_sample:
        versions.append(corrected_estimates(runs, doctors, small_sample=False))
    by_spec = {r.judge_spec: r for r in runs}
    preferred = float((labels == 1).mean())
    out: dict[str, tuple[float, ...]] = {}
    for found in versions:
        for judge in found.judges:
            run = by_spec[judge.judge_spec]
            key = f"agreement {judge.judge_spec}"
            out[key] = out.get(key, ()) + _covers(judge.pooled, exact_agreement(run, labels))
            if scenario.small_sample:
                key = f"  overall dimension {judge.judge_spec.removeprefix('sim:')}"
                truth = exact_dimension_agreement(run, labels, OVERALL)
                out[key] = out.get(key, ()) + _covers(judge.dimensions["overall"], truth)
        key = "doctors prefer response 1"
        out[key] = out.get(key, ()) + _covers(found.preference[POOLED], preferred)
    return out


def _mc(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / n)


def run_scenario(scenario: Scenario, replicates: int, seed: int) -> list[str]:
    """The scenario's table rows."""
    rng = np.random.default_rng(seed)
    totals: dict[str, np.ndarray] = {}
    for r in range(replicates):
        for target, values in replicate(rng, scenario, seed * 100_003 + r).items():
            totals.setdefault(target, np.zeros(len(values)))
            totals[target] += np.array(values, dtype=float)
    rows = []
    for target, sums in totals.items():
        means = sums / replicates
        cover_ppi, cover_lab, width_ppi, width_lab = means[:4]
        # the proxy is the reference's probability: informative unless the reference is the coin
        must_narrow = scenario.reference != "coin" and not scenario.small_sample
        verdicts = [_goal(c, replicates, lower_only=scenario.small_sample) for c in (cover_ppi, cover_lab)]
        status = "FAIL" if "FAIL" in verdicts or (must_narrow and width_ppi >= width_lab) else max(verdicts)
        cells = f"{100 * cover_ppi:5.1f} ±{100 * _mc(cover_ppi, replicates):.1f}   "
        cells += f"{100 * cover_lab:5.1f} ±{100 * _mc(cover_lab, replicates):.1f}   "
        if scenario.small_sample:
            cells += f"{100 * means[4]:5.1f}   {100 * means[5]:5.1f}   "
        rows.append(
            f"  {target:<34} {cells}{100 * width_ppi:5.2f}   {100 * width_lab:5.2f}   "
            f"{width_ppi / width_lab if width_lab else math.nan:5.2f}   {status}"
        )
    return rows


def _goal(coverage: float, replicates: int, *, lower_only: bool) -> str:
    """PASS inside the band, PASS±MC within two Monte-Carlo errors of it, else FAIL."""
    low, high = COVERAGE_BAND
    if lower_only:
        high = 1.0
    if low <= coverage <= high:
        return "PASS"
    margin = 2 * _mc(coverage, replicates)
    return "PASS±MC" if low - margin <= coverage <= high + margin else "FAIL"


def main() -> None:
    """Run every scenario and print the coverage and width table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run of 20 replicates on the small pools")
    parser.add_argument("--only", help="the scenarios whose name contains this text")
    args = parser.parse_args()
    scenarios = tuple(s for s in SCENARIOS if s.pool < 1000) if args.quick else SCENARIOS
    if args.only:
        scenarios = tuple(s for s in scenarios if args.only in s.name)
    replicates = 20 if args.quick else args.replicates
    print(f"Prediction-powered estimates under the stratified design: {replicates} replicates, 95 % intervals")
    low, high = (100 * c for c in COVERAGE_BAND)
    print(
        f"(goal: coverage {low:.1f}-{high:.1f} % for both intervals, >= {low:.1f} % in the small-sample cells; "
        "PPI narrower than labels-only when the proxy is informative)"
    )
    for scenario in scenarios:
        start = time.perf_counter()
        rows = run_scenario(scenario, replicates, args.seed)
        took = time.perf_counter() - start
        print()
        print(
            f"{scenario.name}: N={scenario.pool}, K={scenario.least_confident} least confident + "
            f"R={scenario.random} random; reference sim:{scenario.reference} ({took:.0f} s)"
        )
        if scenario.small_sample:
            print(
                "  target                             cover PPI    labels-only   "
                "old PPI  old lab   hw PPI  hw lab  ratio   goal"
            )
        else:
            print("  target                             cover PPI    labels-only   hw PPI  hw lab  ratio   goal")
        for row in rows:
            print(row)
    if args.quick:
        print("\n(--quick: a smoke run, not a measurement)")


if __name__ == "__main__":
    main()
