"""Juries: a verdict per dimension by strict weighted majority of member judges, with abstentions counted.

A jury (``jury:NAME`` with ``members`` and optional ``weights``) is computed from its members'
stored judgments, with no new request, for every case and order the sweep judged, and stored as a
run of its own (judge spec ``jury:NAME``) so that every report and comparison treats it like any
judge. Per case, order and dimension:

* each member's verdict (in source order, ``1`` or ``2``) is a vote with the member's weight;
* a member whose judgment is missing, failed as a whole, or has no verdict on that dimension
  **abstains**: its weight stays in the total, the abstention is counted (per member, in the
  run's metadata and the sweep's summary) and its reason kept in the judgment; it is never dropped
  from the count, so a parse failure cannot turn a minority into a majority;
* a response wins when its votes weigh **more than half of all members' weight**, abstainers
  included. Otherwise there is no majority: the dimension is a failure with the reason
  ``no majority`` (counted wrong, like every failure); no member's position in the list breaks
  a tie. When no dimension has a majority the judgment fails as a whole with that reason.

Each decided dimension carries the jury's probability that ``response_1`` is better
(:attr:`StoredJudgment.preferences`, the confidence of selective judging): its weighted vote share,
an abstainer's weight split evenly between the two, ``(for_1 + abstained / 2) / total``
(:attr:`JuryDecision.share_1`). It is above one half exactly when response 1 has more votes.

These are the two ways inspect_ai's majority vote went wrong (#4721): a judge whose output did
not parse dropped out of the vote, and ties went to whichever verdict was listed first.

The jury's fingerprint covers the rule, and each member's fingerprint and weight (members sorted,
so their order in the file does not matter); a jury is recomputed by every sweep, replacing its
stored judgments, so that it follows its members as they are completed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from medrewardbench.cases import Case
from medrewardbench.dimensions import DIMENSIONS, Order, Winner
from medrewardbench.evaluation.store import RunRecord, Store, StoredJudgment, judgment_fingerprint, make_run_id
from medrewardbench.models.identity import config_hash
from medrewardbench.sweep.config import JURY_KIND, JuryEntry

__all__ = ["JURY_RULE", "NO_MAJORITY", "JuryDecision", "JuryOutcome", "decide", "jury_config", "store_jury"]

JURY_RULE = "strict-weighted-majority/1"
"""The decision rule, recorded in every jury's fingerprint."""
NO_MAJORITY = "no majority"
"""The failure reason of a dimension (or a whole judgment) without a strict majority."""


@dataclass(frozen=True)
class JuryDecision:
    """One dimension's vote.

    Attributes:
        winner: ``1`` or ``2`` (source order), or None without a strict majority.
        for_1, for_2: the weight of the votes for each response.
        abstained: the weight of the members that did not vote.
        total: every member's weight.
    """

    winner: Winner | None
    for_1: float
    for_2: float
    abstained: float
    total: float

    @property
    def share_1(self) -> float:
        """The weighted vote share of response 1, abstentions split evenly; 0.5 with no weight at all."""
        if self.total <= 0:
            return 0.5
        return (self.for_1 + self.abstained / 2) / self.total


def decide(votes: Sequence[tuple[Winner | None, float]]) -> JuryDecision:
    """Decide one dimension by strict weighted majority of all members (abstainers included).

    Args:
        votes: ``(verdict or None for an abstention, weight)`` per member.

    Returns:
        The decision; ``winner`` is None when neither response has more than half the total weight.
    """
    # exact decimal arithmetic (weights as written, 0.1 = 1/10): 0.1 + 0.2 must not beat 0.3 by a rounding error
    weights = [Fraction(repr(float(weight))) for _, weight in votes]
    total = sum(weights, Fraction(0))
    for_1 = sum((w for (v, _), w in zip(votes, weights, strict=True) if v == 1), Fraction(0))
    for_2 = sum((w for (v, _), w in zip(votes, weights, strict=True) if v == 2), Fraction(0))
    abstained = total - for_1 - for_2
    winner: Winner | None = None
    if 2 * for_1 > total:
        winner = 1
    elif 2 * for_2 > total:
        winner = 2
    return JuryDecision(winner, float(for_1), float(for_2), float(abstained), float(total))


@dataclass(frozen=True)
class JuryMember:
    """A member as the jury sees it: its name, weight and stored run."""

    name: str
    weight: float
    run: RunRecord


@dataclass
class JuryOutcome:
    """What computing a jury found.

    Attributes:
        name: the jury.
        run: its stored run.
        judgments: judgments stored.
        abstentions: member name -> dimension votes it did not cast (missing, failed, no verdict).
        no_majority: dimension -> requests without a strict majority on it.
        failed: requests with no majority on any dimension.
    """

    name: str
    run: RunRecord
    judgments: int = 0
    abstentions: dict[str, int] = field(default_factory=dict)
    no_majority: dict[str, int] = field(default_factory=dict)
    failed: int = 0


def jury_config(jury: JuryEntry, members: Sequence[JuryMember]) -> dict[str, Any]:
    """Everything that decides a jury's verdicts: the rule and each member's fingerprint and weight."""
    return {
        "spec": jury.spec,
        "kind": JURY_KIND,
        "rule": JURY_RULE,
        "members": sorted(
            ({"fingerprint": m.run.judge_fingerprint, "weight": m.weight} for m in members),
            key=lambda item: (str(item["fingerprint"]), float(item["weight"])),
        ),
    }


def _abstention(judgment: StoredJudgment | None, dimension: str) -> str | None:
    """Why a member casts no vote on a dimension, or None when it votes."""
    if judgment is None:
        return "missing"
    if judgment.failure is not None:
        return f"failed: {judgment.failure.splitlines()[0][:120] if judgment.failure else 'failure'}"
    if dimension not in judgment.verdicts:
        reason = judgment.dimension_failures.get(dimension, "no verdict")
        return f"no verdict: {reason.splitlines()[0][:120] if reason else 'no verdict'}"
    return None


def store_jury(
    store: Store,
    jury: JuryEntry,
    members: Sequence[JuryMember],
    cases: Sequence[Case],
    data_hash: str,
    orders: Sequence[Order],
    *,
    dataset_name: str,
    dataset_source: str,
    metadata: Mapping[str, Any] | None = None,
) -> JuryOutcome:
    """Compute a jury from its members' stored judgments and store it as a run (no request is sent).

    Args:
        store: the results store holding the members' runs.
        jury: the jury.
        members: its members with their runs, in the jury's order.
        cases: the sweep's cases (their current content hashes decide which judgments count).
        data_hash: the data fingerprint.
        orders: the orders judged.
        dataset_name: the data set's name, recorded with the run.
        dataset_source: where the data came from, recorded with the run.
        metadata: further facts for the run's metadata.

    Returns:
        The counts of abstentions and of dimensions without a majority.
    """
    config = jury_config(jury, members)
    fingerprint = config_hash(config)
    run = RunRecord(
        run_id=make_run_id(jury.spec, fingerprint, data_hash),
        judge_spec=jury.spec,
        judge_fingerprint=fingerprint,
        data_hash=data_hash,
        dataset_name=dataset_name,
        dataset_source=dataset_source,
        orders=tuple(orders),
        config=config,
        metadata={},
        n_cases=len(cases),
    )
    store.register_run(run, cases, data_hash)
    by_member: list[dict[tuple[str, str], StoredJudgment]] = [
        {(j.case_id, j.order.value): j for j in store.judgments_for_run(m.run)} for m in members
    ]
    outcome = JuryOutcome(jury.name, run, abstentions={m.name: 0 for m in members})
    rows: list[StoredJudgment] = []
    for case in cases:
        case_hash = case.content_hash()
        for order in orders:
            judged = [found.get((case.case_id, order.value)) for found in by_member]
            verdicts: dict[str, Winner] = {}
            dimension_failures: dict[str, str] = {}
            votes: dict[str, dict[str, float]] = {}
            shares: dict[str, float] = {}
            abstained: dict[str, str] = {}
            for dimension in DIMENSIONS:
                cast: list[tuple[Winner | None, float]] = []
                for member, judgment in zip(members, judged, strict=True):
                    why = _abstention(judgment, dimension)
                    if why is not None:
                        outcome.abstentions[member.name] += 1
                        abstained.setdefault(member.name, why)
                        cast.append((None, member.weight))
                    else:
                        assert judgment is not None
                        cast.append((judgment.verdicts[dimension], member.weight))
                decision = decide(cast)
                votes[dimension] = {"1": decision.for_1, "2": decision.for_2, "abstained": decision.abstained}
                if decision.winner is None:
                    dimension_failures[dimension] = NO_MAJORITY
                    outcome.no_majority[dimension] = outcome.no_majority.get(dimension, 0) + 1
                else:
                    verdicts[dimension] = decision.winner
                    shares[dimension] = decision.share_1
            failure = NO_MAJORITY if not verdicts else None
            outcome.failed += failure is not None
            ballots = {
                member.name: (
                    abstained[member.name]
                    if judgment is None or judgment.failure is not None
                    else {d: judgment.verdicts.get(d) for d in DIMENSIONS}
                )
                for member, judgment in zip(members, judged, strict=True)
            }
            rows.append(
                StoredJudgment(
                    case_id=case.case_id,
                    order=order,
                    case_hash=case_hash,
                    fingerprint=judgment_fingerprint(fingerprint, case_hash, order),
                    verdicts={} if failure else verdicts,
                    # the ballots, so that a report's case gallery shows how the jury came to it
                    raw_output=json.dumps(ballots, sort_keys=True, ensure_ascii=False),
                    failure=failure,
                    dimension_failures={} if failure else dimension_failures,
                    latency_s=None,
                    prompt_tokens=None,
                    completion_tokens=None,
                    scores=None,
                    extra={"votes": votes, **({"abstentions": abstained} if abstained else {})},
                    preferences={} if failure else shares,
                )
            )
    store.write_judgments(fingerprint, rows)
    outcome.judgments = len(rows)
    run_metadata = {
        "jury": True,
        "rule": JURY_RULE,
        "members": [
            {"name": m.name, "spec": m.run.judge_spec, "run_id": m.run.run_id, "weight": m.weight} for m in members
        ],
        "abstentions": dict(outcome.abstentions),
        "no_majority": dict(sorted(outcome.no_majority.items())),
        "no_majority_requests": outcome.failed,
        **(metadata or {}),
    }
    store.update_run_metadata(run.run_id, run_metadata)
    outcome.run = replace(run, metadata=run_metadata)
    return outcome
