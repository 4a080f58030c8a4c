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
  ``coin``: random verdicts, 2 % failures.
* **Design**: the K least confident cases labelled in full, R at random from the rest.

For each scenario it prints the coverage of the 95 % intervals (PPI and labels-only) with their
Monte-Carlo error, the mean half-widths and their ratio, and PASS/FAIL against the goals:
coverage >= 94 % (goal 95 %), and PPI narrower than labels-only where the proxy is informative.

Usage: python benchmarks/bench_ppi.py [--replicates 1000] [--seed 0]
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
from medrewardbench.metrics.selection import pick_design

D = len(DIMENSIONS)
COVERAGE_GOAL = 0.94


@dataclass(frozen=True)
class Scenario:
    """One simulated setting."""

    name: str
    reference: str
    pool: int
    least_confident: int
    random: int


SCENARIOS = (
    Scenario("calibrated reference, Med-RewardBench size", "calibrated", 1026, 100, 200),
    Scenario("overconfident reference", "overconfident", 1026, 100, 200),
    Scenario("order agreement only (no probabilities)", "hard", 1026, 100, 200),
    Scenario("uninformative reference (a coin)", "coin", 1026, 100, 200),
    Scenario("small pool, small slice", "calibrated", 300, 30, 60),
)
JUDGES = ("calibrated", "overconfident", "hard", "coin")


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def simulate(rng: np.random.Generator, n: int, reference: str) -> tuple[list[RunData], np.ndarray]:
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
    order = [reference, *[j for j in JUDGES if j != reference]]
    return [runs[name] for name in order], labels


def exact_agreement(run: RunData, labels: np.ndarray) -> float:
    """The judge's agreement with the doctors over the whole pool (both orders; failures wrong)."""
    return float((run.verdicts == labels[:, None, :]).mean())


def replicate(rng: np.random.Generator, scenario: Scenario, seed: int) -> dict[str, tuple[bool, bool, float, float]]:
    """One pool, one pick, one estimate: target -> (PPI covers, labels-only covers, PPI hw, labels-only hw)."""
    runs, labels = simulate(rng, scenario.pool, scenario.reference)
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
    found = corrected_estimates(runs, doctor_labels(cases, "simulated"))
    out: dict[str, tuple[bool, bool, float, float]] = {}
    truths = {r.judge_spec: exact_agreement(r, labels) for r in runs}
    for judge in found.judges:
        pooled = judge.pooled
        truth = truths[judge.judge_spec]
        out[f"agreement {judge.judge_spec}"] = (
            pooled.ppi.low <= truth <= pooled.ppi.high,
            pooled.classical.low <= truth <= pooled.classical.high,
            pooled.ppi.half_width,
            pooled.classical.half_width,
        )
    preference = found.preference[POOLED]
    truth = float((labels == 1).mean())
    out["doctors prefer response 1"] = (
        preference.ppi.low <= truth <= preference.ppi.high,
        preference.classical.low <= truth <= preference.classical.high,
        preference.ppi.half_width,
        preference.classical.half_width,
    )
    return out


def _mc(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 1e-12) / n)


def run_scenario(scenario: Scenario, replicates: int, seed: int) -> list[str]:
    """The scenario's table rows."""
    rng = np.random.default_rng(seed)
    totals: dict[str, np.ndarray] = {}
    for r in range(replicates):
        for target, values in replicate(rng, scenario, seed * 100_003 + r).items():
            totals.setdefault(target, np.zeros(4))
            totals[target] += np.array(values, dtype=float)
    rows = []
    for target, sums in totals.items():
        cover_ppi, cover_lab, width_ppi, width_lab = sums / replicates
        # the proxy is the reference's probability: informative unless the reference is the coin
        must_narrow = scenario.reference != "coin"
        ok = cover_ppi >= COVERAGE_GOAL - 2 * _mc(cover_ppi, replicates) and (width_ppi < width_lab or not must_narrow)
        status = "PASS" if ok else "FAIL"
        if ok and cover_ppi < COVERAGE_GOAL:
            status = "PASS±MC"
        rows.append(
            f"  {target:<34} {100 * cover_ppi:5.1f} ±{100 * _mc(cover_ppi, replicates):.1f}   "
            f"{100 * cover_lab:5.1f} ±{100 * _mc(cover_lab, replicates):.1f}   "
            f"{100 * width_ppi:5.2f}   {100 * width_lab:5.2f}   {width_ppi / width_lab:5.2f}   {status}"
        )
    return rows


def main() -> None:
    """Run every scenario and print the coverage and width table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run of 20 replicates on the small pool")
    args = parser.parse_args()
    scenarios = SCENARIOS[-1:] if args.quick else SCENARIOS
    replicates = 20 if args.quick else args.replicates
    print(f"Prediction-powered estimates under the stratified design: {replicates} replicates, 95 % intervals")
    print(
        f"(goal: coverage >= {100 * COVERAGE_GOAL:.0f} %; PPI narrower than labels-only when the proxy is informative)"
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
        print("  target                             cover PPI    labels-only   hw PPI  hw lab  ratio   goal")
        for row in rows:
            print(row)
    if args.quick:
        print("\n(--quick: a smoke run, not a measurement)")


if __name__ == "__main__":
    main()
