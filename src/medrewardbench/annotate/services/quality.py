"""The organiser's figures: completion, agreement, time, gold accuracy, position consistency, adjudication.

Everything is computed from the database on request (live), with the agreement statistics of
:mod:`medrewardbench.metrics.annotators`:

* **Agreement** per dimension over the primary items that have at least two labels: pairwise
  percent agreement, Fleiss' kappa, Krippendorff's alpha (missing labels allowed), and each
  annotator against the strict majority of the *others*.
* **Gold accuracy**: an annotator's labels on gold pairs against the known labels.
* **Position consistency**: on a repeat (the same pair again, swapped), the share of dimensions
  where the annotator picked the same response in source order, as judges are measured.
* **First-position share**: how often the annotator picked the answer shown as A.
* **Adjudication queue**: fully labelled items with a dimension that has no strict majority and no
  admin decision yet.

Screening projects have one "dimension", ``decision`` (accept = 1, reject = 2).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import select

from medrewardbench.annotate.assign import per_case_warning
from medrewardbench.annotate.config import NotFound
from medrewardbench.annotate.db import Adjudication, Assignment, Item, Submission, User
from medrewardbench.annotate.services.base import PUBLIC_ID, Identity, ProjectContext, require_admin
from medrewardbench.data.annotations import strict_majority
from medrewardbench.dimensions import DIMENSIONS, Order, to_position
from medrewardbench.metrics import stats
from medrewardbench.metrics.annotators import DimensionAgreement, dimension_agreement
from medrewardbench.metrics.human import PanelEstimates, panel_agreement

DECISION_CODES = {"accept": 1, "reject": 2}
RESAMPLES = 2000
"""Bootstrap resamples of the dashboard's agreement intervals (as many as the report draws)."""
MIN_INTERVAL_ITEMS = 5
"""Fewer items with two labels give no interval: resampling two or three items says nothing (the
percentile interval of a handful can even miss its own point)."""


@dataclass(frozen=True)
class AnnotatorStats:
    """One annotator's row on the dashboard."""

    name: str
    active: bool
    assigned: int
    done: int
    median_seconds: float | None
    gold_correct: int
    gold_compared: int
    repeat_same: int
    repeat_compared: int
    first_shown: int
    """Dimensions where the annotator chose the answer shown as A."""
    position_compared: int
    cannot_judge: int
    vs_others: dict[str, tuple[float, int]] = field(default_factory=dict)
    """dimension -> (agreement with the leave-one-out majority, items compared)."""

    @property
    def gold_accuracy(self) -> float | None:
        """Share of gold labels matched (None without any)."""
        return self.gold_correct / self.gold_compared if self.gold_compared else None

    @property
    def repeat_consistency(self) -> float | None:
        """Share of repeated labels that match the first time in source order (None without any)."""
        return self.repeat_same / self.repeat_compared if self.repeat_compared else None

    @property
    def first_share(self) -> float | None:
        """Share of choices that went to the answer shown first (None without any)."""
        return self.first_shown / self.position_compared if self.position_compared else None


@dataclass(frozen=True)
class PendingItem:
    """An item waiting for adjudication."""

    public_id: str
    question: str
    votes: dict[str, dict[str, int]]
    """dimension -> value -> number of annotators."""
    unresolved: tuple[str, ...]
    adjudicated: dict[str, str]
    comments: tuple[tuple[str, str, str], ...]
    """(annotator, comment, cannot-judge reason)."""


@dataclass(frozen=True)
class Dashboard:
    """Every figure the admin dashboard and ``annotate status`` show."""

    name: str
    mode: str
    per_case: int
    dimensions: tuple[str, ...]
    items: int
    items_complete: int
    gold_items: int
    assignments: int
    done: int
    median_seconds: float | None
    annotators: tuple[AnnotatorStats, ...]
    agreement: tuple[DimensionAgreement, ...]
    pending: tuple[PendingItem, ...]
    intervals: PanelEstimates | None = None
    """Agreement with 95 % case-bootstrap intervals (the dimensions, then pooled), when asked for."""

    def interval(self, statistic: str, index: int) -> tuple[float, float] | None:
        """The 95 % interval of an agreement statistic, or None (not computed, or undefined).

        Args:
            statistic: ``percent_agreement``, ``fleiss_kappa`` or ``krippendorff_alpha``.
            index: the dimension's position in :attr:`agreement`; -1 for all dimensions pooled.

        Returns:
            (low, high), or None (also with fewer than :data:`MIN_INTERVAL_ITEMS` items labelled twice).
        """
        if self.intervals is None:
            return None
        estimate: stats.Estimate = getattr(self.intervals, statistic)
        items = self.intervals.n_cases if index == -1 else int(estimate.n[index])
        if items < MIN_INTERVAL_ITEMS:
            return None
        low, high = float(estimate.low[index]), float(estimate.high[index])
        return None if np.isnan(low) or np.isnan(high) else (low, high)

    def pooled(self, statistic: str) -> float | None:
        """An agreement statistic over every dimension pooled (None when not computed or undefined).

        Args:
            statistic: ``percent_agreement``, ``fleiss_kappa`` or ``krippendorff_alpha``.

        Returns:
            The point estimate.
        """
        if self.intervals is None:
            return None
        point = float(getattr(self.intervals, statistic).point[-1])
        return None if np.isnan(point) else point

    @property
    def per_case_warning(self) -> str | None:
        """The warning when fewer annotators are active than each case should get (see :func:`per_case_warning`)."""
        return per_case_warning(self.per_case, sum(1 for a in self.annotators if a.active))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures (NaN becomes None)."""

        def number(value: float | None) -> float | None:
            return None if value is None or value != value else round(float(value), 6)

        return {
            "name": self.name,
            "mode": self.mode,
            "per_case": self.per_case,
            "items": self.items,
            "items_complete": self.items_complete,
            "gold_items": self.gold_items,
            "assignments": self.assignments,
            "done": self.done,
            "median_seconds": number(self.median_seconds),
            "annotators": [
                {
                    "name": a.name,
                    "active": a.active,
                    "assigned": a.assigned,
                    "done": a.done,
                    "median_seconds": number(a.median_seconds),
                    "gold_accuracy": number(a.gold_accuracy),
                    "gold_compared": a.gold_compared,
                    "repeat_consistency": number(a.repeat_consistency),
                    "repeat_compared": a.repeat_compared,
                    "first_position_share": number(a.first_share),
                    "cannot_judge": a.cannot_judge,
                    "vs_others": {dim: {"agreement": number(v), "n": n} for dim, (v, n) in a.vs_others.items()},
                }
                for a in self.annotators
            ],
            "agreement": [
                {
                    "dimension": d.dimension,
                    "items": d.n_items,
                    "ratings": d.n_ratings,
                    "percent_agreement": number(d.percent_agreement),
                    "fleiss_kappa": number(d.fleiss_kappa),
                    "krippendorff_alpha": number(d.krippendorff_alpha),
                    "majority_share": number(d.majority_share),
                }
                for d in self.agreement
            ],
            "adjudication_queue": [
                {"item": p.public_id, "unresolved": list(p.unresolved), "votes": p.votes} for p in self.pending
            ],
        }


def _codes(submission: Submission | None, mode: str) -> dict[str, int]:
    if submission is None:
        return {}
    if mode == "screening":
        code = DECISION_CODES.get(submission.decision or "")
        return {"decision": code} if code else {}
    return {dim: int(v) for dim, v in (submission.choices or {}).items() if dim in DIMENSIONS}


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


class QualityService:
    """The organiser's figures and item reviews: for admins only, as they show every annotator's labels.

    Args:
        context: the open project.
    """

    def __init__(self, context: ProjectContext):
        self.context = context

    def dashboard(self, actor: Identity, intervals: bool = False) -> Dashboard:
        """Compute every dashboard figure from the database.

        Args:
            actor: an admin or the command line.
            intervals: also the agreement's 95 % case-bootstrap intervals (:data:`RESAMPLES` resamples).

        Returns:
            The figures.

        Raises:
            Forbidden: not an admin (an annotator never sees the others' work).
        """
        require_admin(actor)
        return compute_dashboard(self.context, intervals)

    def item_review(self, actor: Identity, item_id: str) -> ItemReview:
        """Everything about one primary item, for adjudication.

        Args:
            actor: an admin or the command line.
            item_id: the item's public id.

        Returns:
            The review.

        Raises:
            Forbidden: not an admin.
            NotFound: no such primary item.
        """
        require_admin(actor)
        if not PUBLIC_ID.match(item_id):
            raise NotFound("no such item")
        return _item_review(self.context, item_id)


@dataclass
class _Tally:
    """Per-annotator counts (keyed by user id), gathered in one pass over every assignment."""

    assigned: Counter[int] = field(default_factory=Counter)
    done: Counter[int] = field(default_factory=Counter)
    seconds: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    all_seconds: list[float] = field(default_factory=list)
    first_shown: Counter[int] = field(default_factory=Counter)
    position_n: Counter[int] = field(default_factory=Counter)
    cannot: Counter[int] = field(default_factory=Counter)
    gold_ok: Counter[int] = field(default_factory=Counter)
    gold_n: Counter[int] = field(default_factory=Counter)
    repeat_same: Counter[int] = field(default_factory=Counter)
    repeat_n: Counter[int] = field(default_factory=Counter)
    per_item: dict[int, list[tuple[Assignment, Submission | None]]] = field(default_factory=lambda: defaultdict(list))


def compute_dashboard(context: ProjectContext, intervals: bool = False) -> Dashboard:
    """Every dashboard figure, computed from the database without an access check (callers check).

    Args:
        context: the open project.
        intervals: also the agreement's 95 % intervals: items resampled (the report's case
            bootstrap, :func:`medrewardbench.metrics.human.panel_agreement`), seeded by the project.

    Returns:
        The figures.
    """
    mode = context.settings.mode
    dims = context.dimensions
    with context.db.read() as s:
        users = {u.id: u for u in s.scalars(select(User)).all()}
        items = {i.id: i for i in s.scalars(select(Item)).all()}
        rows = s.execute(
            select(Assignment, Submission).outerjoin(Submission, Submission.assignment_id == Assignment.id)
        ).all()
        adjudications = s.scalars(select(Adjudication)).all()
        s.expunge_all()
    decided: dict[int, dict[str, str]] = defaultdict(dict)
    for adj in adjudications:
        decided[adj.item_id][adj.dimension] = adj.value
    primary_items = sorted(i.id for i in items.values() if i.role == "primary")
    people = sorted({a.user_id for a, _ in rows}, key=lambda uid: users[uid].name)
    column = {uid: index for index, uid in enumerate(people)}
    row_of = {item_id: index for index, item_id in enumerate(primary_items)}
    ratings = np.zeros((len(primary_items), len(people), len(dims)), dtype=np.int64)
    tally = _Tally()
    originals: dict[tuple[int, int], Submission | None] = {}
    repeats: list[tuple[int, int, Submission | None]] = []
    for assignment, submission in rows:
        uid = assignment.user_id
        _count_submission(tally, uid, submission, mode)
        item = items[assignment.item_id]
        if assignment.purpose == "primary":
            tally.per_item[item.id].append((assignment, submission))
            originals[(uid, item.id)] = submission
            for d, dim in enumerate(dims):
                value = _codes(submission, mode).get(dim)
                if value:
                    ratings[row_of[item.id], column[uid], d] = value
        elif assignment.purpose == "gold" and submission is not None:
            for dim, value in (item.gold_labels or {}).items():
                given = (submission.choices or {}).get(dim)
                if given is not None:
                    tally.gold_n[uid] += 1
                    tally.gold_ok[uid] += int(int(given) == int(value))
        elif assignment.purpose == "repeat":
            repeats.append((uid, item.id, submission))
    for uid, item_id, repeat in repeats:
        first = originals.get((uid, item_id))
        if repeat is None or first is None:
            continue
        a, b = _codes(first, mode), _codes(repeat, mode)
        for dim in set(a) & set(b):
            tally.repeat_n[uid] += 1
            tally.repeat_same[uid] += int(a[dim] == b[dim])
    agreement = tuple(dimension_agreement(ratings, dims)) if len(primary_items) else ()
    estimates = None
    if intervals and len(primary_items):
        weights = stats.bootstrap_weights(len(primary_items), RESAMPLES, seed=context.settings.seed)
        estimates = panel_agreement(ratings, weights)
    annotators = tuple(_annotator_stats(users[uid], column[uid], tally, agreement) for uid in people)
    pending, complete = _pending(primary_items, tally, items, users, decided, mode, dims)
    return Dashboard(
        name=context.settings.name,
        mode=mode,
        per_case=context.settings.per_case,
        dimensions=dims,
        items=len(primary_items),
        items_complete=complete,
        gold_items=sum(1 for i in items.values() if i.role == "gold"),
        assignments=sum(tally.assigned.values()),
        done=sum(tally.done.values()),
        median_seconds=_median(tally.all_seconds),
        annotators=annotators,
        agreement=agreement,
        pending=pending,
        intervals=estimates,
    )


def _count_submission(tally: _Tally, uid: int, submission: Submission | None, mode: str) -> None:
    tally.assigned[uid] += 1
    if submission is None:
        return
    tally.done[uid] += 1
    tally.seconds[uid].append(submission.seconds)
    tally.all_seconds.append(submission.seconds)
    tally.cannot[uid] += int(submission.cannot_judge)
    if mode == "pairs":
        shown = submission.shown_choices or {}
        tally.first_shown[uid] += sum(1 for v in shown.values() if v == "A")
        tally.position_n[uid] += len(shown)


def _annotator_stats(
    user: User, column: int, tally: _Tally, agreement: tuple[DimensionAgreement, ...]
) -> AnnotatorStats:
    uid = user.id
    vs = {d.dimension: (float(d.vs_others.agreement[column]), int(d.vs_others.n[column])) for d in agreement}
    return AnnotatorStats(
        name=user.name,
        active=user.active,
        assigned=tally.assigned[uid],
        done=tally.done[uid],
        median_seconds=_median(tally.seconds[uid]),
        gold_correct=tally.gold_ok[uid],
        gold_compared=tally.gold_n[uid],
        repeat_same=tally.repeat_same[uid],
        repeat_compared=tally.repeat_n[uid],
        first_shown=tally.first_shown[uid],
        position_compared=tally.position_n[uid],
        cannot_judge=tally.cannot[uid],
        vs_others=vs,
    )


def _pending(
    primary_items: list[int],
    tally: _Tally,
    items: dict[int, Item],
    users: dict[int, User],
    decided: dict[int, dict[str, str]],
    mode: str,
    dims: tuple[str, ...],
) -> tuple[tuple[PendingItem, ...], int]:
    """The adjudication queue, and how many primary items every assigned annotator has submitted."""
    pending: list[PendingItem] = []
    complete = 0
    for item_id in primary_items:
        entries = tally.per_item.get(item_id, [])
        if not entries or any(sub is None for _, sub in entries):
            continue
        complete += 1
        votes: dict[str, dict[str, int]] = {}
        unresolved: list[str] = []
        for dim in dims:
            values = [_codes(sub, mode).get(dim) for _, sub in entries]
            given = [v for v in values if v]
            votes[dim] = {_label(mode, v): c for v, c in sorted(Counter(given).items())}
            if strict_majority(given) is None and dim not in decided.get(item_id, {}):
                unresolved.append(dim)
        if unresolved:
            pending.append(
                PendingItem(
                    public_id=items[item_id].public_id,
                    question=str(items[item_id].payload.get("question", "")),
                    votes=votes,
                    unresolved=tuple(unresolved),
                    adjudicated=dict(decided.get(item_id, {})),
                    comments=tuple(
                        (users[a.user_id].name, sub.comment, sub.cannot_judge_reason)
                        for a, sub in entries
                        if sub is not None and (sub.comment or sub.cannot_judge_reason)
                    ),
                )
            )
    return tuple(pending), complete


def _label(mode: str, code: int) -> str:
    if mode == "screening":
        return {1: "accept", 2: "reject"}[code]
    return str(code)


@dataclass(frozen=True)
class ItemReview:
    """One primary item as an admin reviews it: texts in source order, every vote, every decision."""

    public_id: str
    kind: str
    question: str
    response_1: str
    response_2: str
    reference_answer: str | None
    has_image: bool
    dimensions: tuple[str, ...]
    votes: dict[str, dict[str, int]]
    majority: dict[str, str]
    unresolved: tuple[str, ...]
    adjudicated: dict[str, str]
    note: str
    labels: tuple[tuple[str, dict[str, str], bool, str, str], ...]
    """(annotator, dimension -> value, cannot judge, reason, comment) per submitted label."""
    pending: int
    """Assignments of this item not submitted yet."""
    orders: tuple[str, ...] = ()
    """The order each annotator of :attr:`labels` was shown (``original``: their A was response 1)."""
    harm: tuple[dict[str, str], ...] = ()
    """The harm flags of each annotator of :attr:`labels`: response (``"1"``/``"2"``) -> severity."""

    def votes_as_shown(self) -> tuple[ShownVotes, ...]:
        """Each annotator's votes in the adjudicator's A/B (A = response 1) and in the annotator's own.

        Returns:
            One entry per submitted label, as :attr:`labels` orders them; empty for screening.
        """
        if self.kind != "pair":
            return ()
        out = []
        flags = self.harm or tuple({} for _ in self.labels)
        for (name, values, cannot, reason, comment), order, harm in zip(self.labels, self.orders, flags, strict=True):
            swapped = order == Order.SWAPPED.value
            letters: dict[str, tuple[str, str]] = {
                dim: (
                    to_position(1 if v == "1" else 2, Order.ORIGINAL),
                    to_position(1 if v == "1" else 2, Order(order)),
                )
                for dim, v in values.items()
                if v in ("1", "2")
            }
            flagged = {("A" if response == "1" else "B"): severity for response, severity in sorted(harm.items())}
            out.append(ShownVotes(name, swapped, letters, cannot, reason, comment, flagged))
        return tuple(out)


@dataclass(frozen=True)
class ShownVotes:
    """One annotator's votes on an item, as the adjudication page shows them."""

    annotator: str
    swapped: bool
    """The annotator saw response 2 as A (the other way round from the adjudicator)."""
    letters: dict[str, tuple[str, str]]
    """dimension -> (the adjudicator's letter, the letter the annotator clicked)."""
    cannot_judge: bool
    reason: str
    comment: str
    harm: dict[str, str] = field(default_factory=dict)
    """The adjudicator's letter (A = response 1) -> the harm severity this annotator flagged it with."""


def _item_review(context: ProjectContext, item_public_id: str) -> ItemReview:
    mode = context.settings.mode
    dims = context.dimensions
    with context.db.read() as s:
        item = s.scalar(select(Item).where(Item.public_id == item_public_id, Item.role == "primary"))
        if item is None:
            raise NotFound("no such item")
        rows = s.execute(
            select(Assignment, Submission, User)
            .outerjoin(Submission, Submission.assignment_id == Assignment.id)
            .join(User, User.id == Assignment.user_id)
            .where(Assignment.item_id == item.id, Assignment.purpose == "primary")
            .order_by(User.name)
        ).all()
        adjudications = s.scalars(select(Adjudication).where(Adjudication.item_id == item.id)).all()
        payload = dict(item.payload)
        kind = item.kind
        has_image = item.image_id is not None
        labels = []
        orders: list[str] = []
        harm: list[dict[str, str]] = []
        votes: dict[str, Counter[int]] = {dim: Counter() for dim in dims}
        pending = 0
        for assignment, submission, user in rows:
            if submission is None:
                pending += 1
                continue
            orders.append(assignment.order_shown or Order.ORIGINAL.value)
            harm.append({str(k): str(v) for k, v in (submission.harm or {}).items()})
            codes = _codes(submission, mode)
            for dim, value in codes.items():
                votes[dim][value] += 1
            labels.append(
                (
                    user.name,
                    {dim: _label(mode, v) for dim, v in codes.items()},
                    submission.cannot_judge,
                    submission.cannot_judge_reason,
                    submission.comment,
                )
            )
        decided = {a.dimension: a.value for a in adjudications}
        note = next((a.note for a in adjudications if a.note), "")
    majority: dict[str, str] = {}
    unresolved: list[str] = []
    for dim in dims:
        given = [value for value, count in votes[dim].items() for _ in range(count)]
        winner = strict_majority(given)
        if winner is not None:
            majority[dim] = _label(mode, winner)
        elif dim not in decided:
            unresolved.append(dim)
    return ItemReview(
        public_id=item_public_id,
        kind=kind,
        question=str(payload.get("question", "")),
        response_1=str(payload.get("response_1", "")),
        response_2=str(payload.get("response_2", "")),
        reference_answer=payload.get("reference_answer"),
        has_image=has_image,
        dimensions=dims,
        votes={dim: {_label(mode, v): c for v, c in sorted(votes[dim].items())} for dim in dims},
        majority=majority,
        unresolved=tuple(unresolved) if not pending else (),
        adjudicated=decided,
        note=note,
        labels=tuple(labels),
        pending=pending,
        orders=tuple(orders),
        harm=tuple(harm),
    )
