"""Which pairs go to the doctors: the K least confident and a uniform random slice of R, and the design's record.

A judge's run gives a confidence for every case (:mod:`medrewardbench.metrics.confidence`). The
K cases it is least sure of are where a doctor's label changes a verdict most; they are labelled
in full, so their mean is known exactly. The remaining ``N - K`` cases are sampled uniformly (R
of them), which is what lets :mod:`medrewardbench.metrics.ppi` estimate the rest of the pool
validly. Ties in confidence are broken by a seeded random order; the random slice is drawn from
the same seeded generator, so one seed gives one slice.

The design travels with the labels in each picked case's metadata (``metadata.selection``: the
design id, the run, the judge's fingerprint, K, R, the seed, the pool's size, the ranking and
the case's stratum), through the annotation project and its canonical export, and whole (with
the case ids of both strata) in :meth:`SelectionDesign.to_json`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.metrics.confidence import CaseVerdicts

__all__ = [
    "LEAST_CONFIDENT",
    "METADATA_KEY",
    "RANDOM",
    "RANKINGS",
    "SelectionDesign",
    "SelectionError",
    "case_ranking",
    "pick_design",
    "read_case_selection",
]

METADATA_KEY = "selection"
"""The key of the design in a picked case's ``metadata``."""
LEAST_CONFIDENT = "least_confident"
RANDOM = "random"
RANKINGS: tuple[str, ...] = ("mean", *DIMENSIONS)
"""What ranks the cases: the mean confidence over the six dimensions, or one dimension's."""


class SelectionError(MedRewardBenchError):
    """Pairs cannot be picked as asked (sizes, a run without confidences, a design that does not fit)."""


@dataclass(frozen=True)
class SelectionDesign:
    """A slice of a judge's run for the doctors: what was picked, how, and from what.

    Attributes:
        run_id, judge_spec, judge_fingerprint: the run whose confidences ranked the cases.
        data_hash: the data fingerprint of the pool.
        pool_size: N, the cases of the run.
        least_confident: K.
        random: R, drawn uniformly from the N - K others.
        seed: the seed of the tie-break order and of the random slice.
        ranked_by: ``mean`` or a dimension (see :data:`RANKINGS`).
        least_confident_ids: the K cases, least confident first.
        random_ids: the R cases, in the order drawn.
    """

    run_id: str
    judge_spec: str
    judge_fingerprint: str
    data_hash: str
    pool_size: int
    least_confident: int
    random: int
    seed: int
    ranked_by: str
    least_confident_ids: tuple[str, ...]
    random_ids: tuple[str, ...]

    @property
    def design_id(self) -> str:
        """A short fingerprint of the design (run, sizes, seed, ranking and the cases picked)."""
        blob = json.dumps(self.to_json(with_id=False), sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]

    def summary(self) -> dict[str, Any]:
        """The design without the case lists (what each picked case's metadata carries)."""
        return {
            "design": self.design_id,
            "run_id": self.run_id,
            "judge_spec": self.judge_spec,
            "judge_fingerprint": self.judge_fingerprint,
            "data_hash": self.data_hash,
            "pool_size": self.pool_size,
            "least_confident": self.least_confident,
            "random": self.random,
            "seed": self.seed,
            "ranked_by": self.ranked_by,
        }

    def case_metadata(self, case_id: str) -> dict[str, Any]:
        """The ``metadata.selection`` of one picked case: the summary and its stratum.

        Args:
            case_id: a picked case.

        Returns:
            The metadata value.

        Raises:
            KeyError: the case was not picked.
        """
        if case_id in self.least_confident_ids:
            stratum = LEAST_CONFIDENT
        elif case_id in self.random_ids:
            stratum = RANDOM
        else:
            raise KeyError(case_id)
        return {**self.summary(), "stratum": stratum}

    def to_json(self, *, with_id: bool = True) -> dict[str, Any]:
        """The whole design, case lists included.

        Args:
            with_id: include the design id.

        Returns:
            A JSON-ready object.
        """
        found = {
            "run_id": self.run_id,
            "judge_spec": self.judge_spec,
            "judge_fingerprint": self.judge_fingerprint,
            "data_hash": self.data_hash,
            "pool_size": self.pool_size,
            "least_confident": self.least_confident,
            "random": self.random,
            "seed": self.seed,
            "ranked_by": self.ranked_by,
            "least_confident_ids": list(self.least_confident_ids),
            "random_ids": list(self.random_ids),
        }
        return {"design": self.design_id, **found} if with_id else found


def read_case_selection(metadata: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """A case's ``metadata.selection``, checked; None when the case carries none.

    Args:
        metadata: the case's metadata.
        where: the file and case, for the error.

    Returns:
        The selection object.

    Raises:
        SelectionError: a selection that is not an object with the design's fields.
    """
    found = metadata.get(METADATA_KEY)
    if found is None:
        return None
    needed = ("design", "run_id", "data_hash", "pool_size", "least_confident", "random", "stratum")
    if not isinstance(found, Mapping) or any(key not in found for key in needed):
        raise SelectionError(f"{where}: metadata.{METADATA_KEY} must be an object with {', '.join(needed)}")
    if found["stratum"] not in (LEAST_CONFIDENT, RANDOM):
        raise SelectionError(
            f"{where}: metadata.{METADATA_KEY}.stratum must be {LEAST_CONFIDENT!r} or {RANDOM!r}, "
            f"not {found['stratum']!r}"
        )
    return dict(found)


def case_ranking(verdicts: CaseVerdicts, ranked_by: str = "mean") -> np.ndarray[Any, np.dtype[np.float64]]:
    """The confidence that ranks each case (lower = less sure).

    Args:
        verdicts: the run's case-level verdicts.
        ranked_by: ``mean`` (over the six dimensions) or a dimension.

    Returns:
        (n_cases,) confidences in [0, 1] (0 where the judge gave no verdict).

    Raises:
        SelectionError: an unknown ranking.
    """
    if ranked_by not in RANKINGS:
        raise SelectionError(f"unknown ranking {ranked_by!r}; use one of {', '.join(RANKINGS)}")
    confidence = verdicts.confidence
    if ranked_by == "mean":
        return np.asarray(confidence.mean(axis=1), dtype=np.float64)
    return np.asarray(confidence[:, DIMENSIONS.index(ranked_by)], dtype=np.float64)


def pick_design(
    verdicts: CaseVerdicts,
    *,
    least_confident: int,
    random: int,
    seed: int = 0,
    ranked_by: str = "mean",
    judge_fingerprint: str = "",
    data_hash: str = "",
) -> SelectionDesign:
    """Pick the K least confident cases (ties in a seeded random order) and R uniformly from the rest.

    Args:
        verdicts: the run's case-level verdicts (the pool is its cases).
        least_confident: K, at least 0.
        random: R, at least 0.
        seed: the seed of the tie-break order and of the random slice.
        ranked_by: ``mean`` or a dimension.
        judge_fingerprint: the run's judge fingerprint, recorded.
        data_hash: the pool's data fingerprint, recorded.

    Returns:
        The design.

    Raises:
        SelectionError: negative sizes, nothing to pick, K + R beyond the pool, or K > 0 for a
            run that has no confidences (one order and no probabilities).
    """
    pool = len(verdicts.case_ids)
    if least_confident < 0 or random < 0:
        raise SelectionError(f"K and R must be at least 0, not K={least_confident}, R={random}")
    if least_confident + random == 0:
        raise SelectionError("nothing to pick: K = R = 0")
    if least_confident + random > pool:
        raise SelectionError(
            f"K + R = {least_confident} + {random} = {least_confident + random} is more than the "
            f"{pool} cases of run {verdicts.run_id} ({verdicts.judge_spec})"
        )
    if least_confident > 0 and verdicts.source == "none":
        raise SelectionError(
            f"run {verdicts.run_id} ({verdicts.judge_spec}) has no confidence to rank by (one order and no "
            "probabilities): run it in both orders, or pick a random slice only (K = 0)"
        )
    rng = np.random.default_rng(seed)
    tie_break = rng.permutation(pool)
    order = np.lexsort((tie_break, case_ranking(verdicts, ranked_by)))
    chosen = order[:least_confident]
    rest = np.sort(order[least_confident:])
    drawn = rng.choice(rest, size=random, replace=False) if random else np.empty(0, dtype=np.int64)
    return SelectionDesign(
        run_id=verdicts.run_id,
        judge_spec=verdicts.judge_spec,
        judge_fingerprint=judge_fingerprint,
        data_hash=data_hash,
        pool_size=pool,
        least_confident=least_confident,
        random=random,
        seed=seed,
        ranked_by=ranked_by,
        least_confident_ids=tuple(verdicts.case_ids[i] for i in chosen),
        random_ids=tuple(verdicts.case_ids[i] for i in drawn),
    )
