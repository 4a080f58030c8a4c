import asyncio

import pytest
from helpers.cases import make_case

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges import BASELINE_SPECS, JudgeOptions, build_judge
from medrewardbench.judges.base import JudgeRequest


def judge_one(spec: str, case, order: Order, seed: int = 0):  # type: ignore[no-untyped-def]
    judge = build_judge(spec, JudgeOptions(seed=seed))
    return asyncio.run(judge.judge_batch([JudgeRequest(case, order)]))[0]


def test_registry_knows_every_baseline() -> None:
    assert [build_judge(s).spec for s in BASELINE_SPECS] == list(BASELINE_SPECS)


def test_unknown_specs_are_rejected_with_the_known_kinds() -> None:
    with pytest.raises(JudgeSpecError, match="known kinds"):
        build_judge("nosuchkind:x")
    with pytest.raises(JudgeSpecError, match="choose one of"):
        build_judge("baseline:tallest")
    with pytest.raises(JudgeSpecError, match="has no kind"):
        build_judge("longer")


@pytest.mark.parametrize("order", list(Order))
def test_first_and_second_follow_presentation_order(order: Order) -> None:
    case = make_case(1)
    assert set(judge_one("baseline:first", case, order).verdicts.values()) == {"A"}
    assert set(judge_one("baseline:second", case, order).verdicts.values()) == {"B"}


def test_longer_and_shorter_look_at_the_text_not_the_position() -> None:
    case = make_case(1, response_1="short", response_2="much longer answer")
    assert judge_one("baseline:longer", case, Order.ORIGINAL).verdicts["overall"] == "B"
    assert judge_one("baseline:longer", case, Order.SWAPPED).verdicts["overall"] == "A"
    assert judge_one("baseline:shorter", case, Order.ORIGINAL).verdicts["overall"] == "A"
    assert judge_one("baseline:shorter", case, Order.SWAPPED).verdicts["overall"] == "B"


def test_equal_lengths_are_a_recorded_tie_not_a_position_pick() -> None:
    case = make_case(1, response_1="same", response_2="SAME")
    result = judge_one("baseline:longer", case, Order.ORIGINAL)
    assert result.failure is not None and "tie" in result.failure
    assert result.verdicts == {}


def test_random_is_seeded_per_request_and_balanced() -> None:
    cases = [make_case(i) for i in range(400)]
    judge = build_judge("baseline:random", JudgeOptions(seed=7))
    requests = [JudgeRequest(c, Order.ORIGINAL) for c in cases]
    first = asyncio.run(judge.judge_batch(requests))
    again = asyncio.run(build_judge("baseline:random", JudgeOptions(seed=7)).judge_batch(list(reversed(requests))))
    assert [r.verdicts for r in first] == [r.verdicts for r in reversed(again)]
    other = asyncio.run(build_judge("baseline:random", JudgeOptions(seed=8)).judge_batch(requests))
    assert [r.verdicts for r in first] != [r.verdicts for r in other]
    share_a = sum(r.verdicts[d] == "A" for r in first for d in DIMENSIONS) / (400 * 6)
    assert 0.45 < share_a < 0.55
    assert (
        build_judge("baseline:random", JudgeOptions(seed=7)).fingerprint()
        != build_judge("baseline:random", JudgeOptions(seed=8)).fingerprint()
    )


def test_random_gives_every_probes_derived_case_its_parents_coin() -> None:
    from medrewardbench.data import load_benchmark
    from medrewardbench.probes.bias import make_bias_pairs
    from medrewardbench.probes.counterfactual import make_pairs
    from medrewardbench.probes.grounding import no_image

    parent = load_benchmark("demo", limit=4)
    derived = [
        *make_pairs(parent, types=["negation", "reorder"])[0],
        *make_bias_pairs(parent)[0],
        *(no_image(c) for c in parent.cases),
    ]
    by_id = {c.case_id: c for c in parent.cases}
    for order in Order:
        coins = {c.case_id: judge_one("baseline:random", c, order, seed=3).verdicts for c in parent.cases}
        for case in derived:
            assert case.case_id not in by_id
            assert judge_one("baseline:random", case, order, seed=3).verdicts == coins[case.case_id.split("~")[0]]
