"""Agreement between human annotators.

Majority vote, Fleiss' kappa, Krippendorff's alpha, pairwise agreement, and each annotator against
the majority of the others.

Every function takes a **ratings** matrix, int ``(n_items, n_raters)``: the category each rater
gave each item, with :data:`MISSING` (0) where a rater gave none. Categories are any other
integers (pairwise labels use 1 and 2, the better response in source order); floats are
accepted too, with NaN as missing. A rater who saw only some items is simply missing elsewhere.

Per dimension, a ``(n_items, n_raters, n_dims)`` array goes through :func:`dimension_agreement`.

Conventions:

* A **strict majority** is a category given by more than half of the ratings an item has; a tie
  (or a plurality short of half) gives no label.
* Items with fewer than two ratings are not pairable: they do not enter kappa, alpha or pairwise
  agreement.
* A statistic that is undefined (no pairable item, or every rating in one category, so that
  chance agreement is 1) is NaN.

Only numpy is needed. The tests check the published worked examples (Fleiss 1971, Table 1;
Krippendorff's reliability data with missing values) and small hand-computed cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MISSING = 0
"""The value that marks "no rating" in a ratings matrix."""

__all__ = [
    "MISSING",
    "DimensionAgreement",
    "RaterAgreement",
    "agreement_with_loo_majorities",
    "as_ratings",
    "category_counts",
    "dimension_agreement",
    "fleiss_kappa",
    "fleiss_kappa_counts",
    "krippendorff_alpha_nominal",
    "leave_one_out_agreement",
    "leave_one_out_majority",
    "majority_vote",
    "pairwise_agreement",
    "pairwise_agreement_matrix",
    "ratings_from_annotations",
]


class _Labelled(Protocol):
    """What :func:`ratings_from_annotations` reads of an annotation (a :class:`~medrewardbench.cases.Annotation`)."""

    @property
    def annotator(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, int]: ...


def ratings_from_annotations(
    annotations: Sequence[Iterable[_Labelled]], dimensions: Sequence[str]
) -> tuple[npt.NDArray[np.int8], tuple[str, ...]]:
    """The ratings array of a set of cases from their per-annotator labels.

    Args:
        annotations: per case, its annotations (each with ``annotator`` and ``labels``, a mapping
            from dimension to 1 or 2).
        dimensions: the dimensions, in the order of the last axis.

    Returns:
        ``(ratings, annotators)``: int8 ``(n_cases, n_annotators, n_dims)`` with :data:`MISSING`
        where an annotator gave no label, and the annotator names (sorted) along axis 1.
    """
    per_case = [list(case) for case in annotations]
    names = tuple(sorted({a.annotator for case in per_case for a in case}))
    column = {name: i for i, name in enumerate(names)}
    ratings = np.full((len(per_case), len(names), len(dimensions)), MISSING, dtype=np.int8)
    for i, case in enumerate(per_case):
        for annotation in case:
            for d, dimension in enumerate(dimensions):
                value = annotation.labels.get(dimension)
                if value is not None:
                    ratings[i, column[annotation.annotator], d] = value
    return ratings, names


def as_ratings(ratings: npt.ArrayLike, missing: int = MISSING) -> IntArray:
    """Check and normalise a ratings matrix.

    Args:
        ratings: ``(n_items, n_raters)`` categories; ``missing`` (or NaN in a float array) where
            a rater gave no rating.
        missing: the integer that marks a missing rating.

    Returns:
        An int64 copy; NaN in a float array becomes ``missing``.

    Raises:
        ValueError: not two-dimensional, or a float that is neither NaN nor a whole number.
    """
    array = np.asarray(ratings)
    if array.ndim != 2:
        raise ValueError(f"ratings must be a 2-D (items, raters) array, got shape {array.shape}")
    if array.dtype.kind == "f":
        nan = np.isnan(array)
        finite = np.where(nan, missing, array)
        if not np.all(finite == np.round(finite)):
            raise ValueError("float ratings must be whole numbers (categories) or NaN (missing)")
        return finite.astype(np.int64)
    if array.dtype.kind not in "iub":
        raise ValueError(f"ratings must be integers (categories), got dtype {array.dtype}")
    return array.astype(np.int64)


def category_counts(
    ratings: npt.ArrayLike, categories: Sequence[int] | None = None, missing: int = MISSING
) -> tuple[IntArray, tuple[int, ...]]:
    """How many raters put each item in each category.

    Args:
        ratings: ``(n_items, n_raters)``, see the module docstring.
        categories: the categories to count, in column order; None takes the sorted values seen.
        missing: the value that marks a missing rating.

    Returns:
        ``(counts, categories)``: counts is int ``(n_items, n_categories)``.

    Raises:
        ValueError: a rating outside ``categories``.
    """
    values = as_ratings(ratings, missing)
    given = values != missing
    seen = tuple(int(v) for v in np.unique(values[given]))
    cats = tuple(int(c) for c in categories) if categories is not None else seen
    unknown = sorted(set(seen) - set(cats))
    if unknown:
        raise ValueError(f"ratings {unknown} are not among the categories {list(cats)}")
    counts = np.zeros((values.shape[0], len(cats)), dtype=np.int64)
    for column, category in enumerate(cats):
        counts[:, column] = np.sum(given & (values == category), axis=1)
    return counts, cats


def majority_vote(ratings: npt.ArrayLike, missing: int = MISSING) -> IntArray:
    """The strict-majority category of each item.

    Args:
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating (and the result "no majority").

    Returns:
        int ``(n_items,)``: the category more than half of the item's ratings chose, else
        ``missing`` (a tie, no rating, or a plurality short of half).
    """
    counts, cats = category_counts(ratings, missing=missing)
    out = np.full(counts.shape[0], missing, dtype=np.int64)
    if not cats:
        return out
    totals = counts.sum(axis=1)
    best = counts.argmax(axis=1)
    top = counts[np.arange(counts.shape[0]), best]
    decided = 2 * top > totals
    out[decided] = np.asarray(cats, dtype=np.int64)[best[decided]]
    return out


def fleiss_kappa_counts(counts: npt.ArrayLike) -> float:
    """Fleiss' kappa from an item-by-category count table (Fleiss 1971).

    ``(P_bar - P_e) / (1 - P_e)``, where ``P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1))`` is
    item i's share of agreeing rater pairs, ``P_bar`` its mean, and ``P_e = sum_j p_j^2`` with
    ``p_j`` category j's share of all ratings. With the same number of ratings per item this is
    Fleiss' statistic exactly; with unequal numbers each item uses its own ``n_i`` (the usual
    generalisation), and items with fewer than two ratings are left out.

    Args:
        counts: ``(n_items, n_categories)`` non-negative counts.

    Returns:
        Kappa, or NaN when no item has two ratings or every rating is in one category.

    Raises:
        ValueError: not a 2-D table of non-negative counts.
    """
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or np.any(table < 0):
        raise ValueError("counts must be a 2-D (items, categories) table of non-negative counts")
    per_item = table.sum(axis=1)
    table = table[per_item >= 2]
    per_item = per_item[per_item >= 2]
    if table.shape[0] == 0:
        return float("nan")
    agreement = (np.sum(table * table, axis=1) - per_item) / (per_item * (per_item - 1.0))
    p_bar = float(agreement.mean())
    shares = table.sum(axis=0) / table.sum()
    p_e = float(np.sum(shares * shares))
    if p_e >= 1.0 - 1e-12:
        return float("nan")
    return (p_bar - p_e) / (1.0 - p_e)


def fleiss_kappa(ratings: npt.ArrayLike, missing: int = MISSING) -> float:
    """Fleiss' kappa of a ratings matrix (see :func:`fleiss_kappa_counts`).

    Args:
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating.

    Returns:
        Kappa, or NaN when undefined.
    """
    counts, _ = category_counts(ratings, missing=missing)
    return fleiss_kappa_counts(counts) if counts.size else float("nan")


def krippendorff_alpha_nominal(ratings: npt.ArrayLike, missing: int = MISSING) -> float:
    """Krippendorff's alpha for nominal data, missing ratings allowed (Krippendorff 2011).

    Builds the coincidence matrix ``o_ck = sum_u (pairs c-k in unit u) / (m_u - 1)`` over units
    with ``m_u >= 2`` ratings, then ``alpha = 1 - (n - 1) * sum_{c!=k} o_ck / sum_{c!=k} n_c n_k``.

    Args:
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating.

    Returns:
        Alpha, or NaN when no unit is pairable or all pairable ratings are one category.
    """
    counts, _ = category_counts(ratings, missing=missing)
    if counts.size == 0:
        return float("nan")
    per_unit = counts.sum(axis=1)
    pairable = counts[per_unit >= 2].astype(np.float64)
    m = per_unit[per_unit >= 2].astype(np.float64)
    if pairable.shape[0] == 0:
        return float("nan")
    outer = np.einsum("uc,uk->uck", pairable, pairable)
    outer -= np.einsum("uc,ck->uck", pairable, np.eye(pairable.shape[1]))
    coincidences = np.sum(outer / (m - 1.0)[:, None, None], axis=0)
    marginals = coincidences.sum(axis=1)
    n = marginals.sum()
    off_diagonal = ~np.eye(len(marginals), dtype=bool)
    expected = float(np.sum(np.outer(marginals, marginals)[off_diagonal]))
    if expected <= 0.0:
        return float("nan")
    observed = float(np.sum(coincidences[off_diagonal]))
    return float(1.0 - (n - 1.0) * observed / expected)


def pairwise_agreement(ratings: npt.ArrayLike, missing: int = MISSING) -> float:
    """Pooled pairwise percent agreement: agreeing rater pairs over all rater pairs on the same item.

    Args:
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating.

    Returns:
        A share in [0, 1], or NaN when no item has two ratings.
    """
    counts, _ = category_counts(ratings, missing=missing)
    if counts.size == 0:
        return float("nan")
    per_item = counts.sum(axis=1)
    pairs = float(np.sum(per_item * (per_item - 1)))
    if pairs == 0:
        return float("nan")
    agreeing = float(np.sum(counts * (counts - 1)))
    return agreeing / pairs


def pairwise_agreement_matrix(ratings: npt.ArrayLike, missing: int = MISSING) -> tuple[FloatArray, IntArray]:
    """Percent agreement of every pair of raters over the items both rated.

    Args:
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating.

    Returns:
        ``(agreement, n)``, both ``(n_raters, n_raters)``: the share of shared items on which
        the two agree (NaN where they share none; the diagonal is 1 wherever a rater rated
        anything), and the number of shared items.
    """
    values = as_ratings(ratings, missing)
    given = (values != missing).astype(np.int64)
    shared = given.T @ given
    agree = np.zeros_like(shared)
    for category in np.unique(values[values != missing]):
        hit = (values == category).astype(np.int64)
        agree += hit.T @ hit
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(shared > 0, agree / np.maximum(shared, 1), np.nan)
    return share.astype(np.float64), shared


def leave_one_out_majority(ratings: npt.ArrayLike, missing: int = MISSING) -> IntArray:
    """For every rater and item, the strict majority of the *other* raters' ratings.

    Args:
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating (and "no majority").

    Returns:
        int ``(n_items, n_raters)``: column r is :func:`majority_vote` of the matrix without
        column r.
    """
    values = as_ratings(ratings, missing)
    out = np.full(values.shape, missing, dtype=np.int64)
    for rater in range(values.shape[1]):
        others = np.delete(values, rater, axis=1)
        if others.shape[1]:
            out[:, rater] = majority_vote(others, missing)
    return out


@dataclass(frozen=True)
class RaterAgreement:
    """Per rater: agreement with a reference and the number of items it was measured on."""

    agreement: FloatArray
    """``(n_raters,)`` share of compared items that agree; NaN where nothing was compared."""
    n: IntArray
    """``(n_raters,)`` compared items."""

    @property
    def pooled(self) -> float:
        """Agreement over all raters' compared items together (NaN when there are none)."""
        total = int(self.n.sum())
        if total == 0:
            return float("nan")
        return float(np.nansum(self.agreement * self.n) / total)


def _rater_agreement(compared: npt.NDArray[np.bool_], agree: npt.NDArray[np.bool_]) -> RaterAgreement:
    n = compared.sum(axis=0).astype(np.int64)
    hits = (compared & agree).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, hits / np.maximum(n, 1), np.nan)
    return RaterAgreement(share.astype(np.float64), n)


def leave_one_out_agreement(ratings: npt.ArrayLike, missing: int = MISSING) -> RaterAgreement:
    """Each rater against the strict majority of the others, over items where both exist.

    This is the human ceiling a judge is measured against: how often a single annotator agrees
    with the label the rest of the panel would have produced without them.

    Args:
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating.

    Returns:
        Per-rater agreement and counts.
    """
    values = as_ratings(ratings, missing)
    reference = leave_one_out_majority(values, missing)
    return _rater_agreement((values != missing) & (reference != missing), values == reference)


def agreement_with_loo_majorities(
    predictions: npt.ArrayLike, ratings: npt.ArrayLike, missing: int = MISSING
) -> RaterAgreement:
    """An outside predictor (a judge) against the same leave-one-out majorities as each rater.

    For rater r, the predictor is compared with the majority of the raters other than r, on the
    items where r rated and that majority exists: exactly the items and references that
    :func:`leave_one_out_agreement` uses for r. Averaging over raters gives a judge figure that
    is directly comparable with the human one.

    Args:
        predictions: ``(n_items,)`` the predictor's categories (``missing`` for none).
        ratings: ``(n_items, n_raters)``.
        missing: the value that marks a missing rating or prediction.

    Returns:
        Per-rater agreement and counts; a missing prediction counts as disagreement, as judge
        failures count wrong.

    Raises:
        ValueError: predictions and ratings disagree on the number of items.
    """
    values = as_ratings(ratings, missing)
    pred = np.asarray(predictions)
    if pred.ndim != 1 or pred.shape[0] != values.shape[0]:
        raise ValueError(f"predictions must have shape ({values.shape[0]},), got {pred.shape}")
    pred = as_ratings(pred[:, None], missing)[:, 0]
    reference = leave_one_out_majority(values, missing)
    return _rater_agreement((values != missing) & (reference != missing), pred[:, None] == reference)


@dataclass(frozen=True)
class DimensionAgreement:
    """Every agreement figure of one dimension."""

    dimension: str
    n_items: int
    """Items with at least two ratings (the pairable ones)."""
    n_ratings: int
    percent_agreement: float
    fleiss_kappa: float
    krippendorff_alpha: float
    majority_share: float
    """Share of pairable items with a strict majority (NaN when none is pairable)."""
    vs_others: RaterAgreement
    """Each rater against the leave-one-out majority of the others."""


def dimension_agreement(
    ratings: npt.ArrayLike, dimensions: Sequence[str], missing: int = MISSING
) -> list[DimensionAgreement]:
    """Every agreement figure for each dimension of a ``(n_items, n_raters, n_dims)`` array.

    Args:
        ratings: categories per item, rater and dimension (``missing`` where none).
        dimensions: the dimension names, one per last-axis entry.
        missing: the value that marks a missing rating.

    Returns:
        One :class:`DimensionAgreement` per dimension, in order.

    Raises:
        ValueError: the array is not 3-D or the names do not match its last axis.
    """
    array = np.asarray(ratings)
    if array.ndim != 3 or array.shape[2] != len(dimensions):
        raise ValueError(
            f"ratings must have shape (items, raters, {len(dimensions)}) for {len(dimensions)} dimensions, "
            f"got {array.shape}"
        )
    out: list[DimensionAgreement] = []
    for index, name in enumerate(dimensions):
        values = as_ratings(array[:, :, index], missing)
        given = (values != missing).sum(axis=1)
        pairable = given >= 2
        majority = majority_vote(values[pairable], missing) if pairable.any() else np.zeros(0, dtype=np.int64)
        out.append(
            DimensionAgreement(
                dimension=name,
                n_items=int(pairable.sum()),
                n_ratings=int(given.sum()),
                percent_agreement=pairwise_agreement(values, missing),
                fleiss_kappa=fleiss_kappa(values, missing),
                krippendorff_alpha=krippendorff_alpha_nominal(values, missing),
                majority_share=float(np.mean(majority != missing)) if majority.size else float("nan"),
                vs_others=leave_one_out_agreement(values, missing),
            )
        )
    return out
