"""Cross-validation folds: split by case, stratified by organ system, deterministic by seed.

The unit of splitting is a **case group**, not a request: both presentation orders of a case are
built from the case after the split, so a case is never seen in training in one order and in
evaluation in the other. Cases that are the same comparison written twice (same question and the
same two responses, in either order) form one group, so a duplicated or swapped copy cannot leak
across the split either.

Stratification: groups are sorted by organ system, shuffled within their organ system with the
seed, and then dealt to folds in turn across the whole list. Every organ system therefore has as
many cases in each fold as possible (counts differ by at most one group), and fold sizes differ by
at most one group overall.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from medrewardbench.cases import Case
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.errors import MedRewardBenchError

__all__ = ["FoldError", "FoldSplit", "assign_folds", "split_fold", "split_with_assignment"]


class FoldError(MedRewardBenchError, ValueError):
    """Invalid fold settings (K < 2, an index out of range, more folds than cases)."""


@dataclass(frozen=True)
class FoldSplit:
    """One fold of a K-fold split.

    Attributes:
        k: number of folds.
        index: the held-out fold, 0-based.
        seed: the seed of the split.
        train: the cases of the other folds, in benchmark order.
        evaluation: the held-out cases, in benchmark order.
    """

    k: int
    index: int
    seed: int
    train: Benchmark
    evaluation: Benchmark

    def as_dict(self) -> dict[str, object]:
        """JSON-ready description (for training cards and reports): settings and case ids."""
        return {
            "k": self.k,
            "index": self.index,
            "seed": self.seed,
            "stratified_by": "organ_system",
            "n_train_cases": len(self.train),
            "n_eval_cases": len(self.evaluation),
            "eval_case_ids": list(self.evaluation.case_ids()),
        }


def _group_key(case: Case) -> str:
    """Cases with the same question and the same pair of responses (either order) share a key."""
    payload = json.dumps([case.question.strip(), sorted([case.response_1.strip(), case.response_2.strip()])])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def assign_folds(cases: Sequence[Case], k: int, seed: int = 0) -> dict[str, int]:
    """Assign every case to one of ``k`` folds.

    Args:
        cases: the cases (their order does not matter: the result depends only on their content,
            ids, organ systems and the seed).
        k: number of folds, at least 2 and at most the number of case groups.
        seed: the seed of the shuffle.

    Returns:
        case_id -> fold index in ``range(k)``.

    Raises:
        FoldError: k < 2, duplicate case ids, or fewer case groups than folds.
    """
    if k < 2:
        raise FoldError(f"cross-validation needs at least 2 folds, got {k}")
    ids = [case.case_id for case in cases]
    if len(set(ids)) != len(ids):
        raise FoldError("case ids must be unique to split into folds")
    groups: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        groups[_group_key(case)].append(case)
    if len(groups) < k:
        raise FoldError(f"{k} folds need at least {k} distinct cases, got {len(groups)}")
    # a group takes the organ system of its first case by id, for a stable stratum
    by_organ: dict[str, list[tuple[str, list[Case]]]] = defaultdict(list)
    for key, members in groups.items():
        members.sort(key=lambda c: c.case_id)
        by_organ[members[0].organ_system].append((key, members))
    rng = random.Random(f"medrewardbench-folds:{seed}")
    dealt: list[list[Case]] = []
    for organ in sorted(by_organ):
        organ_groups = sorted(by_organ[organ], key=lambda item: item[1][0].case_id)
        rng.shuffle(organ_groups)
        dealt.extend(members for _, members in organ_groups)
    # start each seed at a different fold so that small strata do not always land in fold 0
    offset = rng.randrange(k)
    assignment: dict[str, int] = {}
    for position, members in enumerate(dealt):
        fold = (position + offset) % k
        for case in members:
            assignment[case.case_id] = fold
    return assignment


def split_fold(benchmark: Benchmark, k: int, index: int, seed: int = 0) -> FoldSplit:
    """The training and held-out parts of one fold.

    Args:
        benchmark: the labelled cases to split.
        k: number of folds.
        index: the held-out fold, ``0 <= index < k``.
        seed: the seed of the split (the same seed gives the same folds).

    Returns:
        The split; the two parts are disjoint and together hold every case.

    Raises:
        FoldError: bad k or index (see :func:`assign_folds`).
    """
    if not 0 <= index < k:
        raise FoldError(f"fold index must be in 0..{k - 1}, got {index}")
    assignment = assign_folds(benchmark.cases, k, seed)
    return split_with_assignment(benchmark, assignment, k, index, seed)


def split_with_assignment(
    benchmark: Benchmark, assignment: Mapping[str, int], k: int, index: int, seed: int
) -> FoldSplit:
    """Split a benchmark with a precomputed :func:`assign_folds` result."""
    train = tuple(case for case in benchmark.cases if assignment[case.case_id] != index)
    held_out = tuple(case for case in benchmark.cases if assignment[case.case_id] == index)
    return FoldSplit(
        k=k,
        index=index,
        seed=seed,
        train=Benchmark(benchmark.name, benchmark.source, train, labels=benchmark.labels),
        evaluation=Benchmark(benchmark.name, benchmark.source, held_out, labels=benchmark.labels),
    )
