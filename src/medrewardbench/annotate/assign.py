"""Who labels what: a pure, deterministic plan of every user's queue.

The plan is recomputed whenever the set of annotators changes (a user is added or deactivated),
and it never takes away work that was started:

* **Primary items** go to ``K = min(per_case, annotators)`` distinct annotators each, with
  balanced load: every annotator's number of primary items is within one of every other's
  (unless started work pins more on someone). Existing assignments are kept where they can be,
  so a new annotator takes over *unstarted* items from the busiest ones rather than reshuffling
  every queue.
* **Gold items** (pairs with known labels) go to every annotator.
* **Repeats**: ``round(repeat_share * primary items)`` of each annotator's primary pairs are shown
  to them a second time, in the swapped order, at least half a queue later.
* Each annotator sees each pair in their **own seeded order** (``original``: response_1 as A, or
  ``swapped``), and their queue in their own seeded sequence. Both come from a hash of the seed,
  the annotator and the item, so they do not change when other annotators come and go.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

PRIMARY = "primary"
GOLD = "gold"
REPEAT = "repeat"
PURPOSES: tuple[str, ...] = (PRIMARY, GOLD, REPEAT)


@dataclass(frozen=True)
class Slot:
    """One assignment in a plan (or in the database): ``user`` sees ``item`` for ``purpose``."""

    user: str
    item: str
    purpose: str
    order_shown: str | None
    sort_key: float
    started: bool = False
    """Whether the user has submitted anything for it (started work is never moved)."""

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity of the slot: (user, item, purpose)."""
        return (self.user, self.item, self.purpose)


def unit_hash(*parts: object) -> float:
    """A uniform number in [0, 1) from a SHA-256 of the parts (stable across machines and runs).

    Args:
        parts: anything with a stable ``str``.

    Returns:
        The number.
    """
    digest = hashlib.sha256("\x1f".join(str(part) for part in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def order_for(seed: int, user: str, item: str) -> str:
    """The order a user sees a pair in: ``original`` or ``swapped``, seeded per user and item.

    Args:
        seed: the project seed.
        user: the user name.
        item: the item key.

    Returns:
        ``"original"`` or ``"swapped"``.
    """
    return "swapped" if unit_hash(seed, "order", user, item) >= 0.5 else "original"


def flip(order: str | None) -> str | None:
    """The other presentation order.

    Args:
        order: ``"original"``, ``"swapped"`` or None.

    Returns:
        The other one; None stays None.
    """
    if order is None:
        return None
    return "original" if order == "swapped" else "swapped"


def plan_assignments(
    annotators: Sequence[str],
    primary_items: Sequence[str],
    *,
    per_case: int,
    seed: int,
    gold_items: Sequence[str] = (),
    repeat_share: float = 0.0,
    pairs: bool = True,
    existing: Iterable[Slot] = (),
) -> list[Slot]:
    """The full set of assignments the project should have.

    Args:
        annotators: active annotators.
        primary_items: keys of the items to label.
        per_case: K, annotators per primary item (fewer while fewer annotators exist).
        seed: the project seed.
        gold_items: keys of the gold items (every annotator gets each).
        repeat_share: share of each annotator's primary items shown again, swapped.
        pairs: whether items are pairs (orders and repeats apply) or questions (neither).
        existing: the assignments already in the database; started ones are always kept, and
            so are unstarted ones that still fit the plan.

    Returns:
        The planned slots, sorted by (user, sort_key). Slots of ``existing`` keep their order and
        sort key.

    Raises:
        ValueError: per_case < 1 or repeat_share outside [0, 1].
    """
    if per_case < 1:
        raise ValueError(f"per_case must be >= 1, got {per_case}")
    if not 0.0 <= repeat_share <= 1.0:
        raise ValueError(f"repeat_share must be in [0, 1], got {repeat_share}")
    people = sorted(set(annotators))
    active = set(people)
    items = list(dict.fromkeys(primary_items))
    item_set = set(items)
    old = [slot for slot in existing if slot.user in active or slot.started]
    by_key = {slot.key: slot for slot in old}
    # a started repeat pins its original: its comparison needs both
    pinned = {(s.user, s.item) for s in old if s.purpose == REPEAT and s.started}
    started_primary = {
        (s.user, s.item) for s in old if s.purpose == PRIMARY and (s.started or (s.user, s.item) in pinned)
    }

    holders: dict[str, set[str]] = {item: set() for item in items}
    for slot in old:
        if slot.purpose == PRIMARY and slot.item in item_set:
            holders[slot.item].add(slot.user)
    k = min(per_case, len(people))
    load = {user: 0 for user in people}
    for item in items:
        for user in holders[item]:
            if user in load:
                load[user] += 1

    def movable(user: str, item: str) -> bool:
        return user in active and (user, item) not in started_primary

    item_order = sorted(items, key=lambda item: unit_hash(seed, "item", item))
    _fit_holders(people, item_order, holders, load, k, movable, seed)
    _balance(people, item_order, holders, load, movable, seed)

    planned: dict[tuple[str, str, str], Slot] = {}

    def keep_or_new(user: str, item: str, purpose: str) -> Slot:
        found = by_key.get((user, item, purpose))
        if found is not None:
            return found
        order = order_for(seed, user, item) if pairs else None
        return Slot(user, item, purpose, order, unit_hash(seed, "position", user, item))

    for item in items:
        for user in holders[item]:
            slot = keep_or_new(user, item, PRIMARY)
            planned[slot.key] = slot
    # started work of users no longer active, or on items no longer listed, stays as it is
    for slot in old:
        if slot.started and slot.key not in planned:
            planned[slot.key] = slot
    if pairs:
        for user in people:
            for item in dict.fromkeys(gold_items):
                slot = keep_or_new(user, item, GOLD)
                planned[slot.key] = slot
        _plan_repeats(people, planned, old, repeat_share, seed)
    return sorted(planned.values(), key=lambda s: (s.user, s.sort_key, s.item, s.purpose))


def _fit_holders(
    people: Sequence[str],
    item_order: Sequence[str],
    holders: dict[str, set[str]],
    load: dict[str, int],
    k: int,
    movable: Callable[[str, str], bool],
    seed: int,
) -> None:
    """Give every item exactly ``k`` holders (in place), changing as few as possible."""
    # too many holders (K lowered, or a user came back): drop unstarted ones from the busiest
    for item in item_order:
        extra = len(holders[item]) - k
        if extra <= 0:
            continue
        droppable = sorted(
            (u for u in holders[item] if movable(u, item)), key=lambda u: (-load[u], unit_hash(seed, u, item))
        )
        for user in droppable[:extra]:
            holders[item].discard(user)
            load[user] -= 1
    # too few holders: the least loaded annotators take the item
    for item in item_order:
        while len(holders[item]) < k:
            candidates = [u for u in people if u not in holders[item]]
            if not candidates:
                break
            user = min(candidates, key=lambda u: (load[u], unit_hash(seed, u, item)))
            holders[item].add(user)
            load[user] += 1


def _balance(
    people: list[str],
    item_order: list[str],
    holders: dict[str, set[str]],
    load: dict[str, int],
    can_move: Callable[[str, str], bool],
    seed: int,
) -> None:
    """Move unstarted items from the busiest to the least busy until loads differ by at most one."""
    owned: dict[str, list[str]] = {user: [] for user in people}
    for item in item_order:
        for user in holders[item]:
            if user in owned:
                owned[user].append(item)
    while True:
        ranked = sorted(people, key=lambda u: (load[u], unit_hash(seed, "rank", u)))
        moved = False
        for receiver in ranked:
            for donor in reversed(ranked):
                if load[donor] - load[receiver] < 2:
                    break
                for item in owned[donor]:
                    if receiver not in holders[item] and can_move(donor, item):
                        holders[item].discard(donor)
                        holders[item].add(receiver)
                        owned[donor].remove(item)
                        owned[receiver].append(item)
                        load[donor] -= 1
                        load[receiver] += 1
                        moved = True
                        break
                if moved:
                    break
            if moved:
                break
        if not moved:
            return


def _plan_repeats(
    people: list[str], planned: dict[tuple[str, str, str], Slot], old: list[Slot], share: float, seed: int
) -> None:
    old_repeats = {slot.key: slot for slot in old if slot.purpose == REPEAT}
    for user in people:
        originals = {s.item: s for s in planned.values() if s.user == user and s.purpose == PRIMARY}
        wanted = round(share * len(originals))
        kept = [s for key, s in old_repeats.items() if key[0] == user and (s.item in originals or s.started)]
        started = [s for s in kept if s.started]
        unstarted = sorted((s for s in kept if not s.started), key=lambda s: unit_hash(seed, "repeat", user, s.item))
        chosen = started + unstarted[: max(0, wanted - len(started))]
        have = {s.item for s in chosen}
        candidates = sorted(
            (item for item in originals if item not in have), key=lambda item: unit_hash(seed, "repeat", user, item)
        )
        for item in candidates[: max(0, wanted - len(chosen))]:
            original = originals[item]
            key = original.sort_key + 0.5 + 0.5 * unit_hash(seed, "repeat-position", user, item)
            chosen.append(Slot(user, item, REPEAT, flip(original.order_shown), key))
        for slot in chosen:
            planned[slot.key] = slot


def per_case_warning(per_case: int, active_annotators: int) -> str | None:
    """What to tell the organiser when fewer annotators are active than each case should get.

    Args:
        per_case: the project's K.
        active_annotators: annotators who are active now.

    Returns:
        The warning, or None when every case can get K annotators.
    """
    if active_annotators >= per_case:
        return None
    if active_annotators == 0:
        return (
            f"per-case is {per_case} but there are no active annotators yet: no case is assigned until some are added"
        )
    return (
        f"per-case is {per_case} but only {active_annotators} active annotator{'s' if active_annotators > 1 else ''}: "
        f"each case gets {active_annotators} until more are added"
    )
