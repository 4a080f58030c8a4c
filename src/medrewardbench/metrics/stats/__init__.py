"""Statistics on judge verdicts.

Bootstrap intervals, paired tests, tiers, chance-corrected agreement, position, length and
coherence measures.

Everything works on the array layout of :mod:`.counts` (verdicts, labels and lengths as arrays
over cases). Conventions:

* A failure counts as wrong for accuracy (the reference protocol); requests whose order was not
  run and cases without a label are not counted at all.
* Every estimate is a **ratio of sums** over cases, ``sum(numerator) / sum(denominator)``, where a
  case contributes the counts of its requests (e.g. correct requests / counted requests). The
  bootstrap resamples **cases**, so the two presentation orders of a case stay together.
* One bootstrap weight matrix is drawn once (:func:`bootstrap_weights`) and reused for every
  judge, dimension and group, so that judges are compared on the same resamples.

One concern per module: :mod:`.counts` (layout and per-case counts), :mod:`.bootstrap`
(resampling and intervals), :mod:`.paired` (case-level sign-flip test, paired bootstrap, Holm, tiers),
:mod:`.agreement` (kappa, AC1), :mod:`.position` and :mod:`.length` (length bias and coherence).
The package needs only numpy; scipy and scikit-learn are used by the tests as references.
"""

from medrewardbench.metrics.stats.agreement import ac1_from_confusion, bootstrap_agreement_ci, kappa_from_confusion
from medrewardbench.metrics.stats.bootstrap import (
    Estimate,
    GroupedEstimate,
    bootstrap_weights,
    grouped_ratio_ci,
    percentile_interval,
    ratio_ci,
    resampled_sums,
)
from medrewardbench.metrics.stats.counts import (
    FAILED,
    FIRST_SHOWN,
    NOT_RUN,
    ORIGINAL,
    SWAPPED,
    BoolArray,
    CountArray,
    FloatArray,
    IntArray,
    case_counts,
    ratio,
    request_outcomes,
)
from medrewardbench.metrics.stats.length import (
    LengthAccuracy,
    accuracy_by_length_agreement,
    coherence_counts,
    coherence_rate,
    expert_coherence_rate,
    expert_longer_rate,
    longer_preference_counts,
)
from medrewardbench.metrics.stats.paired import (
    PairwiseComparisons,
    case_sign_flip_test,
    difference_histograms,
    histograms_of_differences,
    holm_adjust,
    leaderboard_tiers,
    pairwise_comparisons,
    sign_flip_p_value,
    sign_flip_test,
)
from medrewardbench.metrics.stats.position import (
    first_position_counts,
    position_consistency_counts,
    strict_accuracy_counts,
)

__all__ = [
    "FAILED",
    "FIRST_SHOWN",
    "NOT_RUN",
    "ORIGINAL",
    "SWAPPED",
    "BoolArray",
    "CountArray",
    "Estimate",
    "FloatArray",
    "GroupedEstimate",
    "IntArray",
    "LengthAccuracy",
    "PairwiseComparisons",
    "ac1_from_confusion",
    "accuracy_by_length_agreement",
    "bootstrap_agreement_ci",
    "bootstrap_weights",
    "case_counts",
    "case_sign_flip_test",
    "coherence_counts",
    "coherence_rate",
    "difference_histograms",
    "expert_coherence_rate",
    "expert_longer_rate",
    "first_position_counts",
    "grouped_ratio_ci",
    "histograms_of_differences",
    "holm_adjust",
    "kappa_from_confusion",
    "leaderboard_tiers",
    "longer_preference_counts",
    "pairwise_comparisons",
    "percentile_interval",
    "position_consistency_counts",
    "ratio",
    "ratio_ci",
    "request_outcomes",
    "resampled_sums",
    "sign_flip_p_value",
    "sign_flip_test",
    "strict_accuracy_counts",
]
