"""Counterfactual pairs: derived data, figures read back from a stored run, the baselines' rules, the rewriter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.api import api_options

from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.data.canonical import write_canonical
from medrewardbench.evaluation.store import Store
from medrewardbench.probes.counterfactual import (
    API_PARAPHRASE,
    CounterfactualFigures,
    counterfactual_figures,
    make_pairs,
    original_texts,
)
from medrewardbench.probes.edits import HARMLESS_TYPES
from medrewardbench.probes.pairs import (
    ORIGINAL_KEY,
    PARENT_KEY,
    SEVERITY_KEY,
    TYPE_KEY,
    derived_benchmark,
    load_probe_data,
    run_probe,
)
from medrewardbench.probes.rewriter import as_rewriter, paraphrases
from medrewardbench.testing.openai_server import OpenAIServer

BASELINES = ["baseline:longer", "baseline:shorter", "baseline:first", "baseline:random"]


@pytest.fixture(scope="module")
def demo() -> Benchmark:
    return load_benchmark("demo")


@pytest.fixture(scope="module")
def stored(demo: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Benchmark, Path, CounterfactualFigures]:
    cases, _ = make_pairs(demo, seed=0)
    derived = derived_benchmark("counterfactual", demo, cases)
    out = tmp_path_factory.mktemp("cf")
    run_probe(derived, BASELINES, out)
    with Store.in_dir(out) as store:
        data = load_probe_data(store, derived.data_hash())
    return derived, out, counterfactual_figures(data, n_resamples=300)


def _by_judge(figures: CounterfactualFigures) -> dict[str, Any]:
    return {j.judge: j for j in figures.judges}


def test_derived_cases_carry_ids_metadata_and_labels_by_construction(demo: Benchmark) -> None:
    cases, tally = make_pairs(demo, seed=0)
    parent = {c.case_id: c for c in demo}
    assert sum(tally.made.values()) == len(cases) and sum(sum(r.values()) for r in tally.skipped.values()) > 0
    for case in cases:
        parent_id, probe, variant = case.case_id.split("~")
        assert probe == "counterfactual" and variant == case.metadata[TYPE_KEY]
        assert case.metadata[PARENT_KEY] == parent_id
        at = int(case.metadata[ORIGINAL_KEY])
        source = parent[parent_id]
        assert case.response(at) == source.response(source.labels.get("overall", 1))
        assert case.response(3 - at) != case.response(at)
        if variant in HARMLESS_TYPES:
            assert case.labels == {} and case.metadata[SEVERITY_KEY] == "0"
        else:
            assert case.labels == {"accuracy": at, "overall": at} and case.metadata[SEVERITY_KEY] in "1234"
    placements = [case.metadata[ORIGINAL_KEY] for case in cases]
    assert 0.35 < placements.count("1") / len(placements) < 0.65  # the original is not always shown first
    again, _ = make_pairs(demo, seed=0)
    assert [c.case_id for c in again] == [c.case_id for c in cases] and again[5].response_1 == cases[5].response_1


def test_types_and_severities_select_and_the_skips_count_why(demo: Benchmark) -> None:
    cases, tally = make_pairs(demo, types=["negation", "reorder"], severities=[4])
    assert {c.metadata[TYPE_KEY] for c in cases} == {"negation", "reorder"}
    assert {c.metadata[SEVERITY_KEY] for c in cases if c.metadata[TYPE_KEY] == "negation"} == {"4"}
    assert tally.skipped["negation"]["severity 3 not selected"] > 0
    assert tally.made["negation"] + sum(tally.skipped["negation"].values()) == len(demo)
    with pytest.raises(ValueError, match="unknown counterfactual type"):
        make_pairs(demo, types=["colour"])
    with pytest.raises(ValueError, match="levels are 1"):
        make_pairs(demo, severities=[5])


def test_the_source_names_the_probe_and_the_parent_data(demo: Benchmark) -> None:
    cases, _ = make_pairs(demo, types=["laterality"])
    derived = derived_benchmark("counterfactual", demo, cases)
    assert derived.source == f"probe:counterfactual({demo.data_hash()[:12]})"
    assert derived.name == f"{demo.name}~counterfactual"


def test_position_baselines_detect_half_and_never_prefer_strongly(stored: Any) -> None:
    judges = _by_judge(stored[2])
    for spec in ("baseline:first",):
        j = judges[spec]
        assert j.detection["all"].point == 0.5  # one order right, one wrong, on every pair
        assert j.over_penalisation["all"].point == 0.0 and j.variant_preferred["all"].point == 0.0
        assert not j.control_fails
        assert j.critical_miss.point == 0.5


def test_length_baselines_follow_their_rule_on_every_pair(stored: Any) -> None:
    derived, _, figures = stored
    judges = _by_judge(figures)
    cases = list(derived)
    errors = [c for c in cases if c.labels]
    orig_len = np.array([len(c.response(int(c.metadata[ORIGINAL_KEY]))) for c in errors])
    edit_len = np.array([len(c.response(3 - int(c.metadata[ORIGINAL_KEY]))) for c in errors])
    # longer picks the original in both orders exactly where it is the longer answer
    assert judges["baseline:longer"].detection["all"].successes == 2 * int((orig_len > edit_len).sum())
    assert judges["baseline:shorter"].detection["all"].successes == 2 * int((orig_len < edit_len).sum())
    assert judges["baseline:longer"].detection["omitted"].point == 1.0  # dropping a sentence shortens
    assert judges["baseline:longer"].detection["invented"].point == 0.0  # inventing one lengthens


def test_the_longer_baseline_fails_the_harmless_variant_control_when_the_variant_is_shorter(
    demo: Benchmark, tmp_path: Path
) -> None:
    cases, _ = make_pairs(demo, types=list(HARMLESS_TYPES))
    shorter = [
        c
        for c in cases
        if len(c.response(3 - int(c.metadata[ORIGINAL_KEY]))) < len(c.response(int(c.metadata[ORIGINAL_KEY])))
    ]
    assert len(shorter) >= 10
    derived = derived_benchmark("counterfactual", demo, shorter)
    run_probe(derived, ["baseline:longer", "baseline:shorter"], tmp_path)
    with Store.in_dir(tmp_path) as store:
        figures = counterfactual_figures(load_probe_data(store, derived.data_hash()), n_resamples=300)
    judges = _by_judge(figures)
    longer, shorter_judge = judges["baseline:longer"], judges["baseline:shorter"]
    assert longer.over_penalisation["all"].point == 1.0 and longer.over_penalisation["variant shorter"].n == len(
        shorter
    )
    assert longer.control_fails
    assert shorter_judge.over_penalisation["all"].point == 0.0 and shorter_judge.variant_preferred["all"].point == 1.0
    assert not shorter_judge.control_fails


def test_every_figure_has_an_interval_around_its_point(stored: Any) -> None:
    figures = stored[2]
    for judge in figures.judges:
        rates = [*judge.detection.values(), judge.critical_miss, *judge.over_penalisation.values()]
        for rate in rates:
            if rate.n:
                assert rate.low <= rate.point + 1e-12 and rate.point <= rate.high + 1e-12
    random = _by_judge(figures)["baseline:random"]
    assert random.detection["all"].high - random.detection["all"].low > 0.05
    assert random.detection["all"].low < 0.5 < random.detection["all"].high


def test_the_figures_come_back_the_same_from_the_store_alone(stored: Any) -> None:
    derived, out, figures = stored
    with Store.in_dir(out) as store:
        again = counterfactual_figures(load_probe_data(store, derived.data_hash()), n_resamples=300)
    assert again.as_dict() == figures.as_dict()


def test_the_critical_miss_rate_weighs_each_miss_by_its_severity() -> None:
    from medrewardbench.probes.counterfactual import _judge_figures
    from medrewardbench.probes.pairs import ProbeData

    # two parents, each with a severity-1 and a severity-4 pair; the judge misses only the severity-4 ones
    n = 4
    v = np.array([[1, 1], [2, 2], [1, 1], [2, 2]], dtype=np.int8)
    orig = np.ones(n, dtype=np.int8)
    data = ProbeData(None, (), ("a", "a", "b", "b"), ("a", "b"), np.array([0, 0, 1, 1]))  # type: ignore[arg-type]
    kinds = np.array(["number", "negation"] * 2, dtype=object)
    figures = _judge_figures(
        "j",
        "r",
        v,
        orig,
        kinds,
        np.array([1, 4, 1, 4]),
        np.ones(n, dtype=bool),
        np.ones(n, dtype=np.int64),
        np.ones(n, dtype=np.int64),
        data,
        np.ones((10, 2)),
        0.95,
    )
    assert figures.detection["all"].point == 0.5
    assert figures.critical_miss.point == pytest.approx(4 / 5)  # (4+4)*2 / ((1+4)*2*2)


def test_exported_pairs_read_back_as_canonical_data(demo: Benchmark, tmp_path: Path) -> None:
    cases, _ = make_pairs(demo, types=["laterality", "paraphrase"])
    path = write_canonical(cases, tmp_path / "pairs.jsonl")
    back = load_benchmark(str(path)).cases
    assert [c.case_id for c in back] == [c.case_id for c in cases]
    assert [c.labels for c in back] == [c.labels for c in cases]
    assert back[0].metadata[TYPE_KEY] == cases[0].metadata[TYPE_KEY]


def test_the_api_rewriter_adds_paraphrases_from_a_local_server(demo: Benchmark, openai_server: OpenAIServer) -> None:
    parents = demo.cases[:3]
    openai_server.control.set_responder(lambda body: "Rewritten: " + body["messages"][0]["content"][-40:])
    table = paraphrases("api:rewriter-model", original_texts(parents), api_options(openai_server))
    cases, tally = make_pairs(parents, types=["reorder"], rewriter=as_rewriter(table))
    made = [c for c in cases if c.metadata[TYPE_KEY] == API_PARAPHRASE]
    assert len(made) == 3 and tally.made[API_PARAPHRASE] == 3
    assert all(c.response(3 - int(c.metadata[ORIGINAL_KEY])).startswith("Rewritten: ") for c in made)
    assert all(c.labels == {} for c in made)
    sent = openai_server.control.chat_requests()
    assert len(sent) == 3 and "Keep every finding" in sent[0].user_text()
    openai_server.control.script_faults("400")
    failing = paraphrases("api:rewriter-model", original_texts(parents[:1]), api_options(openai_server))
    _, tally = make_pairs(parents[:1], types=["reorder"], rewriter=as_rewriter(failing))
    assert API_PARAPHRASE not in tally.made
    assert any(reason.startswith("rewriter failed: HTTP 400") for reason in tally.skipped[API_PARAPHRASE])
