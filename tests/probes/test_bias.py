"""The bias card: controlled cue pairs, the baselines behaving as their rules predict, self-preference."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from helpers.api import api_options, longer_answer_responder

from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics.core import load_run_data
from medrewardbench.metrics.stats import longer_preference_counts, position_consistency_counts
from medrewardbench.probes.bias import (
    BIASES,
    BiasFigures,
    JudgeCard,
    bias_figures,
    make_bias_pairs,
    model_family,
)
from medrewardbench.probes.edits import CUE_TYPES
from medrewardbench.probes.pairs import PARENT_KEY, TYPE_KEY, derived_benchmark, load_probe_data, run_probe
from medrewardbench.testing.openai_server import OpenAIServer

BASELINES = ["baseline:longer", "baseline:shorter", "baseline:first", "baseline:second", "baseline:random"]


@pytest.fixture(scope="module")
def demo() -> Benchmark:
    return load_benchmark("demo")


@pytest.fixture(scope="module")
def stored(demo: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Benchmark, Path, BiasFigures]:
    cases, _ = make_bias_pairs(demo)
    derived = derived_benchmark("bias", demo, cases)
    out = tmp_path_factory.mktemp("bias")
    run_probe(derived, BASELINES, out)
    with Store.in_dir(out) as store:
        data = load_probe_data(store, derived.data_hash())
    return derived, out, bias_figures(data, n_resamples=300)


def _card(figures: BiasFigures, judge: str) -> dict[str, Any]:
    card: JudgeCard = next(c for c in figures.cards if c.judge == judge)
    return {row.bias: row for row in card.rows}


def test_each_parent_gets_a_control_and_each_cue_on_either_answer(demo: Benchmark) -> None:
    cases, tally = make_bias_pairs(demo)
    assert len(cases) == len(demo) * (1 + 2 * len(CUE_TYPES))
    parent = demo.cases[0]
    mine = [c for c in cases if c.metadata[PARENT_KEY] == parent.case_id]
    assert mine[0].case_id == f"{parent.case_id}~bias~control"
    assert (mine[0].response_1, mine[0].response_2) == (parent.response_1, parent.response_2)
    authority_1 = next(c for c in mine if c.case_id.endswith("~authority-1"))
    assert authority_1.response_2 == parent.response_2 and authority_1.response_1.startswith(parent.response_1)
    assert authority_1.labels == {}  # a cue changes no content: either answer stays as good as before
    assert tally.made == {"control": len(demo), **{cue: 2 * len(demo) for cue in CUE_TYPES}}


def test_position_baselines_always_flip_with_the_order_and_never_with_a_cue(stored: Any) -> None:
    figures = stored[2]
    for judge, first_rate in (("baseline:first", 1.0), ("baseline:second", 0.0)):
        rows = _card(figures, judge)
        assert rows["position"].rate.point == 1.0
        assert rows["position"].secondary.point == first_rate
        for cue in CUE_TYPES:
            assert rows[cue].rate.point == 0.0 and rows[cue].secondary.point == 0.0, cue


def test_the_card_folds_in_the_reports_position_and_length_figures(stored: Any) -> None:
    derived, out, figures = stored
    with Store.in_dir(out) as store:
        data = load_probe_data(store, derived.data_hash())
        control = [i for i, kind in enumerate(data.field(TYPE_KEY)) if kind == "control"]
        for run in data.runs:
            consistent, both = position_consistency_counts(run.verdicts[control])
            picked, answered = longer_preference_counts(run.verdicts[control], data.cases.lengths[control])
            rows = _card(figures, run.judge_spec)
            d = 5  # overall
            assert rows["position"].rate.point == pytest.approx(1 - consistent[:, d].sum() / both[:, d].sum())
            assert rows["length"].rate.point == pytest.approx(picked[:, d].sum() / answered[:, d].sum())
            assert load_run_data(store, store.run(run.run_id)).n_cases == len(derived)
    assert _card(figures, "baseline:longer")["length"].rate.point == 1.0
    assert _card(figures, "baseline:shorter")["length"].rate.point == 0.0


def test_the_longer_baseline_flips_toward_a_cue_exactly_where_the_cue_makes_the_shorter_answer_longer(
    stored: Any, demo: Benchmark
) -> None:
    derived, _, figures = stored
    by_id = {c.case_id: c for c in derived}
    for cue in CUE_TYPES:
        expected_toward = expected_den = 0
        for parent in demo:
            longer = 1 if len(parent.response_1) > len(parent.response_2) else 2
            for k in (1, 2):
                if k == longer:
                    continue
                cued = by_id[f"{parent.case_id}~bias~{cue}-{k}"]
                if len(cued.response(k)) == len(cued.response(3 - k)):
                    continue  # a tie: the baseline records a failure, which is not counted
                expected_den += 2
                expected_toward += 2 * (len(cued.response(k)) > len(cued.response(3 - k)))
        row = _card(figures, "baseline:longer")[cue]
        assert (row.rate.successes, row.rate.n) == (expected_toward, expected_den), cue
        assert row.secondary.point == 0.0  # a cue never shortens the answer it is added to
    assert _card(figures, "baseline:longer")["authority"].rate.point > 0


def test_every_rate_has_an_interval_and_the_card_fits_one_line(stored: Any) -> None:
    figures = stored[2]
    for card in figures.cards:
        assert [row.bias for row in card.rows] == list(BIASES)
        for row in card.rows:
            if row.rate is not None and row.rate.n:
                assert row.rate.low <= row.rate.point + 1e-12 <= row.rate.high + 2e-12
        line = card.summary()
        assert line.startswith(card.judge + ": ") and "\n" not in line and "self-preference n/m" in line
    random = _card(figures, "baseline:random")
    assert random["position"].rate.low < random["position"].rate.point < random["position"].rate.high


def test_self_preference_is_not_measurable_without_generator_metadata(stored: Any) -> None:
    row = _card(stored[2], "baseline:longer")["self_preference"]
    assert row.rate is None and row.note.startswith("not measurable: the data has no generator metadata")


@pytest.mark.parametrize(
    ("spec", "family"),
    [
        ("api:gpt-4o-mini", "gpt"),
        ("hf:Qwen/Qwen2-VL-2B-Instruct", "qwen"),
        ("hf:/models/llava-1.5-7b#constrained", "llava"),
        ("api:claude-3-5-sonnet", "claude"),
        ("rm:./my_reward-model", "my"),
        ("api:gen-a", "gen-a"),
        ("hf:/ckpt/biomed-7b", "biomed"),
        ("gpt-4o", "gpt"),
        ("", ""),
    ],
)
def test_model_family_reads_the_models_name(spec: str, family: str) -> None:
    assert model_family(spec) == family


def test_self_preference_is_measured_where_one_answer_comes_from_the_judges_family(
    demo: Benchmark, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    # response_1 written by a gpt model, response_2 by a qwen model, as build records it
    build = {"response_1": {"generator": "api:gpt-4o"}, "response_2": {"generator": "hf:Qwen/Qwen2-VL-2B"}}
    parents = [dataclasses.replace(c, metadata={**c.metadata, "build": build}) for c in demo.cases[:8]]
    parent = Benchmark("built", "built.jsonl", parents)
    cases, _ = make_bias_pairs(parents, cues=["confident"])
    derived = derived_benchmark("bias", parent, cases)
    openai_server.control.set_responder(longer_answer_responder)  # a gpt judge that prefers the longer answer
    run_probe(derived, ["api:gpt-4o-mini", "baseline:first"], tmp_path, options=api_options(openai_server))
    with Store.in_dir(tmp_path) as store:
        figures = bias_figures(load_probe_data(store, derived.data_hash()), n_resamples=300)
    row = _card(figures, "api:gpt-4o-mini")["self_preference"]
    first_longer = sum(len(c.response_1) > len(c.response_2) for c in parents)
    assert row.rate is not None and row.rate.n == 16
    assert row.rate.successes == 2 * first_longer  # its "own" answer is response_1, picked where it is longer
    expert = sum(c.labels["overall"] == 1 for c in parents)
    assert row.secondary is not None and row.secondary.successes == expert and row.secondary.n == 8
    assert "family 'gpt': 8 pair(s)" in row.note
    other = _card(figures, "baseline:first")["self_preference"]
    assert other.rate is None and "no pair has exactly one answer of family 'first'" in other.note
