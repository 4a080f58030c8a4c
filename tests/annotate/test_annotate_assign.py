"""The assignment planner: K annotators per case, balanced load, gold, repeats, per-annotator seeded order."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from medrewardbench.annotate.assign import GOLD, PRIMARY, REPEAT, Slot, order_for, plan_assignments

ITEMS = [f"primary:case-{i:03d}" for i in range(60)]
PEOPLE = ["ann", "ben", "cat", "dan", "eve"]


def loads(plan: list[Slot], purpose: str = PRIMARY) -> Counter[str]:
    return Counter(slot.user for slot in plan if slot.purpose == purpose)


def holders(plan: list[Slot]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for slot in plan:
        if slot.purpose == PRIMARY:
            out.setdefault(slot.item, set()).add(slot.user)
    return out


def test_every_case_goes_to_k_distinct_annotators_with_balanced_load() -> None:
    plan = plan_assignments(PEOPLE, ITEMS, per_case=3, seed=7)
    assert all(len(users) == 3 for users in holders(plan).values())
    assert set(holders(plan)) == set(ITEMS)
    counts = loads(plan)
    assert sum(counts.values()) == 180 and max(counts.values()) - min(counts.values()) <= 1


def test_fewer_annotators_than_k_gives_each_case_to_all_of_them() -> None:
    plan = plan_assignments(["ann", "ben"], ITEMS[:10], per_case=3, seed=1)
    assert all(users == {"ann", "ben"} for users in holders(plan).values())


def test_the_plan_is_deterministic_and_depends_on_the_seed() -> None:
    first = plan_assignments(PEOPLE, ITEMS, per_case=3, seed=7, repeat_share=0.2)
    again = plan_assignments(list(reversed(PEOPLE)), ITEMS, per_case=3, seed=7, repeat_share=0.2)
    other = plan_assignments(PEOPLE, ITEMS, per_case=3, seed=8, repeat_share=0.2)
    assert first == again
    assert first != other


def test_each_annotator_has_a_seeded_order_per_pair_near_half_swapped() -> None:
    plan = plan_assignments(PEOPLE, ITEMS, per_case=5, seed=3)
    swapped = Counter(slot.order_shown for slot in plan)
    assert 0.35 < swapped["swapped"] / len(plan) < 0.65
    # annotators see the same pair in different orders: not everyone the same on every case
    by_item: dict[str, set[str | None]] = {}
    for slot in plan:
        by_item.setdefault(slot.item, set()).add(slot.order_shown)
    assert sum(len(orders) == 2 for orders in by_item.values()) > len(ITEMS) / 2
    for slot in plan:
        assert slot.order_shown == order_for(3, slot.user, slot.item)
    # and each annotator's queue order is their own
    sequences = {user: [s.item for s in plan if s.user == user] for user in PEOPLE}
    common = set(sequences["ann"]) & set(sequences["ben"])
    assert [i for i in sequences["ann"] if i in common] != [i for i in sequences["ben"] if i in common]


def test_gold_items_go_to_every_annotator_and_questions_get_no_order() -> None:
    plan = plan_assignments(PEOPLE, ITEMS[:10], per_case=2, seed=1, gold_items=["gold:g1", "gold:g2"])
    assert loads(plan, GOLD) == Counter({user: 2 for user in PEOPLE})
    questions = plan_assignments(PEOPLE, ITEMS[:10], per_case=2, seed=1, pairs=False, repeat_share=0.5)
    assert all(slot.order_shown is None for slot in questions)
    assert not [s for s in questions if s.purpose in (GOLD, REPEAT)]


def test_repeats_are_a_share_of_each_queue_shown_later_in_the_swapped_order() -> None:
    plan = plan_assignments(PEOPLE, ITEMS, per_case=3, seed=11, repeat_share=0.25)
    primaries = {(s.user, s.item): s for s in plan if s.purpose == PRIMARY}
    repeats = [s for s in plan if s.purpose == REPEAT]
    per_user = loads(plan)
    for user in PEOPLE:
        assert loads(plan, REPEAT)[user] == round(0.25 * per_user[user])
    for repeat in repeats:
        original = primaries[(repeat.user, repeat.item)]
        assert repeat.order_shown != original.order_shown
        assert repeat.sort_key >= original.sort_key + 0.5


def test_a_new_annotator_takes_over_unstarted_work_and_started_work_stays() -> None:
    first = plan_assignments(PEOPLE[:3], ITEMS, per_case=2, seed=5, repeat_share=0.1)
    started = {slot.key for slot in first if slot.user == "ann" and slot.purpose == PRIMARY}
    existing = [replace(slot, started=slot.key in started) for slot in first]
    second = plan_assignments(PEOPLE, ITEMS, per_case=2, seed=5, repeat_share=0.1, existing=existing)
    keys = {slot.key for slot in second}
    assert started <= keys, "started work was moved"
    counts = loads(second)
    assert counts["dan"] > 0 and counts["eve"] > 0
    # ann keeps all her started cases, so she may stay above the others; the rest are balanced
    others = [counts[u] for u in PEOPLE if u != "ann"]
    assert max(others) - min(others) <= 1
    assert all(len(users) == 2 for users in holders(second).values())
    # existing slots that stayed keep their order and position
    old = {slot.key: slot for slot in first}
    for slot in second:
        if slot.key in old:
            assert (slot.order_shown, slot.sort_key) == (old[slot.key].order_shown, old[slot.key].sort_key)
    kept = len(keys & {slot.key for slot in first if slot.purpose == PRIMARY})
    assert kept >= 0.5 * sum(1 for s in first if s.purpose == PRIMARY), "most of the old queues should stay"


def test_a_deactivated_annotator_keeps_started_work_and_hands_over_the_rest() -> None:
    first = plan_assignments(PEOPLE, ITEMS, per_case=3, seed=2)
    started = {slot.key for slot in first if slot.user == "eve"}
    started = set(sorted(started)[:5])
    existing = [replace(slot, started=slot.key in started) for slot in first]
    second = plan_assignments(PEOPLE[:4], ITEMS, per_case=3, seed=2, existing=existing)
    eve = [slot for slot in second if slot.user == "eve"]
    assert {slot.key for slot in eve} == started
    # her started items still count towards K; the others got a new annotator
    assert all(len(users) == 3 for users in holders(second).values())
    counts = loads(second)
    assert max(counts[u] for u in PEOPLE[:4]) - min(counts[u] for u in PEOPLE[:4]) <= 1


def test_a_started_repeat_pins_its_original() -> None:
    first = plan_assignments(PEOPLE[:3], ITEMS[:12], per_case=2, seed=4, repeat_share=0.5)
    repeat = next(slot for slot in first if slot.purpose == REPEAT)
    existing = [replace(slot, started=slot.key == repeat.key) for slot in first]
    second = plan_assignments(PEOPLE, ITEMS[:12], per_case=2, seed=4, repeat_share=0.5, existing=existing)
    keys = {slot.key for slot in second}
    assert repeat.key in keys and (repeat.user, repeat.item, PRIMARY) in keys


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="per_case"):
        plan_assignments(PEOPLE, ITEMS, per_case=0, seed=1)
    with pytest.raises(ValueError, match="repeat_share"):
        plan_assignments(PEOPLE, ITEMS, per_case=1, seed=1, repeat_share=1.5)
