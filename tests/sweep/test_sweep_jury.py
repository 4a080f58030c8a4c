"""Juries: strict weighted majority, abstentions counted and never dropped, ties never broken by list order.

The members are real API judges against the test server, one model name per behaviour: ``always-a``
and ``also-a`` answer A everywhere, ``always-b`` answers B, ``garbled`` answers text that does not
parse (the inspect_ai #4721 case: a parse failure that silently left the vote).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.api import API_KEY_ENV, verdict_json
from helpers.sweep import judgments_of, write_sweep

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics.analysis import load_run_bundles
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import load_run_data
from medrewardbench.sweep import SweepOptions, load_sweep, run_sweep
from medrewardbench.sweep.jury import NO_MAJORITY, decide
from medrewardbench.testing.openai_server import OpenAIServer


def _answer_by_model(body: dict[str, Any]) -> str:
    model = body["model"]
    if model in ("always-a", "also-a"):
        return verdict_json("A")
    if model == "always-b":
        return verdict_json("B")
    return "I would rather not say which answer is better."


def _sweep(tmp_path: Path, server: OpenAIServer, cases: Path, juries: str, name: str = "sweep.yaml") -> Path:
    members = "\n".join(
        f"  - {{judge: 'api:{model}', base_url: '{server.base_url}', api_key_env: {API_KEY_ENV}, max_retries: 0}}"
        for model in ("always-a", "also-a", "always-b", "garbled")
    )
    text = f"data: {cases}\nreport: {{n_resamples: 50}}\njudges:\n{members}\njuries:\n{juries}"
    return write_sweep(tmp_path / name, text)


JURIES = """
  - name: split-with-abstention
    members: [api:always-a, api:always-b, api:garbled]
  - name: majority-despite-abstention
    members: [api:always-a, api:garbled, api:also-a]
  - name: weighted
    members: [api:always-a, api:always-b, api:garbled]
    weights: {api:always-a: 2}
  - name: even-split
    members: [api:always-a, api:always-b]
"""


def test_the_vote_is_a_strict_majority_of_all_members_weight_abstainers_included() -> None:
    assert decide([(1, 1), (2, 1), (None, 1)]).winner is None  # 1 of 3: no majority, not a win by list order
    assert decide([(2, 1), (1, 1), (None, 1)]).winner is None  # the same votes in another order: the same
    assert decide([(1, 1), (None, 1), (1, 1)]).winner == 1  # 2 of 3, though one abstained
    assert decide([(1, 1), (None, 1), (None, 1)]).winner is None  # 1 of 3: abstainers are not dropped
    assert decide([(1, 2), (2, 1), (None, 1)]).winner is None  # 2 of 4 is not more than half
    assert decide([(1, 2), (2, 1), (None, 0.5)]).winner == 1  # 2 of 3.5 is
    assert decide([(2, 0.1), (2, 0.2), (1, 0.3)]).winner is None  # 0.1 + 0.2 == 0.3 exactly: a tie
    assert decide([(None, 1), (None, 1)]).winner is None
    decision = decide([(1, 1), (2, 1), (None, 1)])
    assert (decision.for_1, decision.for_2, decision.abstained, decision.total) == (1, 1, 1, 3)
    for votes in itertools.permutations([(1, 1.5), (2, 1.0), (None, 0.25), (1, 0.25)]):
        assert decide(list(votes)).winner == 1  # 1.75 of 3: the order of the members never matters


def test_the_juries_confidence_is_its_weighted_vote_share_with_abstentions_split_evenly() -> None:
    assert decide([(1, 3), (2, 1), (None, 1)]).share_1 == pytest.approx(0.7)
    assert decide([(2, 3), (1, 1), (None, 1)]).share_1 == pytest.approx(0.3)
    assert decide([(1, 1), (2, 1)]).share_1 == 0.5 and decide([]).share_1 == 0.5
    for votes in itertools.product([1, 2, None], repeat=4):  # above one half exactly when 1 has more votes
        decision = decide([(v, w) for v, w in zip(votes, (0.5, 1.0, 1.5, 2.0), strict=True)])
        assert (decision.share_1 > 0.5) == (decision.for_1 > decision.for_2)
        if decision.winner is not None:
            assert (decision.share_1 > 0.5) == (decision.winner == 1)


def test_juries_are_stored_as_runs_in_both_orders_from_stored_judgments_without_new_requests(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    openai_server.control.set_responder(_answer_by_model)
    out = tmp_path / "out"
    result = run_sweep(load_sweep(_sweep(tmp_path, openai_server, sweep_cases, JURIES)), SweepOptions(out_dir=out))
    member_requests = 4 * 6 * 2
    assert len(openai_server.control.chat_requests()) == member_requests  # the juries sent nothing
    outcomes = {jury.name: jury for jury in result.juries}
    assert set(outcomes) == {"split-with-abstention", "majority-despite-abstention", "weighted", "even-split"}

    # a parse failure is an abstention: counted, and the 1-1 split it leaves is no majority (counted wrong)
    split = judgments_of(out, "jury:split-with-abstention")
    assert len(split) == 12 and {row["order"] for row in split} == {"original", "swapped"}
    assert all(row["failure"] == NO_MAJORITY and row["verdicts"] == {} for row in split)
    assert outcomes["split-with-abstention"].abstentions == {
        "api:always-a": 0,
        "api:always-b": 0,
        "api:garbled": 6 * 12,  # six dimensions of twelve requests, every one counted
    }
    assert outcomes["split-with-abstention"].no_majority == dict.fromkeys(DIMENSIONS, 12)
    ballots = json.loads(split[0]["raw_output"])
    assert ballots["api:garbled"].startswith("failed: ") and ballots["api:always-a"]["overall"] == 1

    # two of three agree: a strict majority of all three, the abstention notwithstanding
    majority = judgments_of(out, "jury:majority-despite-abstention")
    assert all(row["failure"] is None for row in majority)
    for row in majority:  # "A" in each order, mapped back to source order
        assert set(row["verdicts"].values()) == {1 if row["order"] == "original" else 2}
    # weight 2 for A of 4 in all is exactly half: no majority
    assert all(row["failure"] == NO_MAJORITY for row in judgments_of(out, "jury:weighted"))
    assert all(row["failure"] == NO_MAJORITY for row in judgments_of(out, "jury:even-split"))

    # every report counts a jury like any judge; no majority counts wrong
    bundles = {bundle.record.judge_spec: bundle for bundle in load_run_bundles([out])}
    assert {"jury:split-with-abstention", "jury:weighted"} <= set(bundles)
    analysis = result.analysis
    assert analysis is not None
    rows = {row.judge: row for row in analysis.leaderboard}
    assert rows["jury:split-with-abstention"].failure_rate == 1.0
    assert rows["jury:split-with-abstention"].score.point == 0.0
    assert rows["jury:majority-despite-abstention"].score.has_interval
    labels = {c.a for c in analysis.pairwise.comparisons} | {c.b for c in analysis.pairwise.comparisons}
    assert "jury:majority-despite-abstention" in labels
    metadata = bundles["jury:split-with-abstention"].record.metadata
    assert metadata["abstentions"]["api:garbled"] == 72 and metadata["no_majority_requests"] == 12
    report = (out / "report" / "report.md").read_text("utf-8")
    assert "jury:majority-despite-abstention" in report


def test_a_weighted_member_decides_where_its_weight_is_a_strict_majority(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    openai_server.control.set_responder(_answer_by_model)
    juries = """
  - name: heavy-a
    members: [api:always-a, api:always-b, api:garbled]
    weights: {api:always-a: 3}
"""
    out = tmp_path / "out"
    run_sweep(load_sweep(_sweep(tmp_path, openai_server, sweep_cases, juries)), SweepOptions(out_dir=out, report=False))
    rows = judgments_of(out, "jury:heavy-a")
    assert len(rows) == 12 and all(row["failure"] is None for row in rows)  # 3 of 5 > half
    assert all(set(row["verdicts"].values()) == {1 if row["order"] == "original" else 2} for row in rows)
    # the vote share: A has 3 of 5 and the abstainer's 1 is split: 3.5 of 5 for the response shown first
    for row in rows:
        expected = 0.7 if row["order"] == "original" else 0.3
        assert row["preferences"] == pytest.approx(dict.fromkeys(DIMENSIONS, expected))
    with Store.in_dir(out) as store:
        [run] = [r for r in store.runs() if r.judge_spec == "jury:heavy-a"]
        verdicts = case_verdicts(load_run_data(store, run, preferences=True))
    assert verdicts.source == "probability" and verdicts.p_first == pytest.approx(0.5)


def test_the_order_of_the_members_changes_nothing_and_a_rerun_recomputes_without_requests(
    tmp_path: Path, openai_server: OpenAIServer, sweep_cases: Path
) -> None:
    openai_server.control.set_responder(_answer_by_model)
    # a tie (2 of 4 for A, 1 for B, 1 abstains) and a majority (2 of 3), each listed both ways round: a
    # tie broken by list order would go to A one way and to B the other
    forward = (
        "  - name: tie\n    members: [api:always-a, api:garbled, api:always-b, api:also-a]\n"
        "  - name: two-of-three\n    members: [api:always-a, api:also-a, api:always-b]\n"
    )
    backward = (
        "  - name: tie\n    members: [api:always-b, api:also-a, api:garbled, api:always-a]\n"
        "  - name: two-of-three\n    members: [api:always-b, api:also-a, api:always-a]\n"
    )
    out_1, out_2 = tmp_path / "one", tmp_path / "two"
    run_sweep(
        load_sweep(_sweep(tmp_path, openai_server, sweep_cases, forward, "f.yaml")),
        SweepOptions(out_dir=out_1, report=False),
    )
    run_sweep(
        load_sweep(_sweep(tmp_path, openai_server, sweep_cases, backward, "b.yaml")),
        SweepOptions(out_dir=out_2, report=False),
    )
    for jury in ("jury:tie", "jury:two-of-three"):
        assert judgments_of(out_1, jury) == judgments_of(out_2, jury)  # same run id (fingerprint), same rows
    assert all(row["failure"] == NO_MAJORITY for row in judgments_of(out_1, "jury:tie"))
    assert all(row["failure"] is None for row in judgments_of(out_1, "jury:two-of-three"))
    with Store.in_dir(out_1) as store:
        jury_run = next(run for run in store.runs() if run.judge_spec == "jury:tie")
        assert jury_run.config["rule"] == "strict-weighted-majority/1"
    requests = len(openai_server.control.chat_requests())
    before = judgments_of(out_1, "jury:two-of-three")
    run_sweep(
        load_sweep(_sweep(tmp_path, openai_server, sweep_cases, forward, "f.yaml")),
        SweepOptions(out_dir=out_1, report=False),
    )
    assert len(openai_server.control.chat_requests()) == requests  # members resumed, juries recomputed: nothing sent
    assert judgments_of(out_1, "jury:two-of-three") == before
