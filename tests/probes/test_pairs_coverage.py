"""The probes' intervals resample parent cases; simulation checks that they cover at their level.

Derived pairs of one parent share its image, question and answer, so a judge's successes on them
are correlated. Data are drawn with a per-parent success probability (a beta random effect); the
95 % interval of :func:`medrewardbench.probes.pairs.grouped_rates` on per-parent sums must cover the
true rate about 95 % of the time, while resampling the derived pairs as if independent covers
visibly less: the reason the probes sum per parent first.
"""

from __future__ import annotations

import numpy as np

from medrewardbench.metrics import stats
from medrewardbench.probes.pairs import ProbeData, grouped_rates

N_PARENTS = 40
PAIRS_PER_PARENT = 8
REPS = 400
TRUE_RATE = 0.7


def _simulate(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per derived pair: successes out of 2 requests (both orders), with a strong parent effect."""
    p = rng.beta(TRUE_RATE * 2, (1 - TRUE_RATE) * 2, size=N_PARENTS)  # mean 0.7, widely spread
    per_pair = rng.binomial(2, np.repeat(p, PAIRS_PER_PARENT))
    return per_pair, np.full(per_pair.shape, 2)


def test_parent_case_intervals_cover_at_their_level_and_pair_level_ones_do_not() -> None:
    rng = np.random.default_rng(2026)
    parents = np.repeat(np.arange(N_PARENTS), PAIRS_PER_PARENT)
    data = ProbeData(None, (), tuple(map(str, parents)), tuple(map(str, range(N_PARENTS))), parents)  # type: ignore[arg-type]
    parent_weights = stats.bootstrap_weights(N_PARENTS, 400, seed=1)
    pair_weights = stats.bootstrap_weights(N_PARENTS * PAIRS_PER_PARENT, 400, seed=1)
    covered_parent = covered_pair = 0
    for _ in range(REPS):
        num, den = _simulate(rng)
        by_parent = grouped_rates(data.per_parent(num[:, None]), data.per_parent(den[:, None]), ["r"], parent_weights)
        by_pair = grouped_rates(num[:, None], den[:, None], ["r"], pair_weights)
        covered_parent += by_parent["r"].low <= TRUE_RATE <= by_parent["r"].high
        covered_pair += by_pair["r"].low <= TRUE_RATE <= by_pair["r"].high
    parent_rate, pair_rate = covered_parent / REPS, covered_pair / REPS
    # 400 replications: a binomial standard error of about 1.1 points around 95 %
    assert 0.91 <= parent_rate <= 0.98, parent_rate
    assert pair_rate < parent_rate - 0.08, (pair_rate, parent_rate)
