"""probes/pairs.py: one parent key for every probe (and the old spelling still read back), the shared figures."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics import stats
from medrewardbench.probes import derive
from medrewardbench.probes.bias import BiasFigures, bias_figures, make_bias_pairs
from medrewardbench.probes.counterfactual import CounterfactualFigures, counterfactual_figures, make_pairs
from medrewardbench.probes.grounding import make_controls
from medrewardbench.probes.pairs import (
    PARENT_KEY,
    ProbeFigures,
    derived_benchmark,
    grouped_rates,
    load_probe_data,
    run_probe,
)

JUDGES = ["baseline:first", "baseline:longer", "baseline:random"]


@pytest.fixture(scope="module")
def parent() -> Benchmark:
    return load_benchmark("demo", limit=6)


def test_every_probe_writes_the_parent_under_the_one_key(parent: Benchmark) -> None:
    assert PARENT_KEY is derive.PARENT_KEY and PARENT_KEY == "parent_case_id"
    derived = [
        *make_pairs(parent, types=["negation", "paraphrase"])[0],
        *make_bias_pairs(parent)[0],
        *(case for controls in make_controls(parent.cases).values() for case in controls.cases),
    ]
    assert {c.metadata["probe"] for c in derived} == {"counterfactual", "bias", "grounding"}
    for case in derived:
        assert case.metadata[PARENT_KEY] == case.case_id.split("~")[0] == derive.parent_id(case)
        assert derive.PREVIOUS_PARENT_KEY not in case.metadata


def _with_previous_key(benchmark: Benchmark) -> Benchmark:
    """The same derived data as the pair probes wrote it before the key was shared."""
    cases = []
    for case in benchmark.cases:
        metadata = {k: v for k, v in case.metadata.items() if k != PARENT_KEY}
        cases.append(
            dataclasses.replace(case, metadata={**metadata, derive.PREVIOUS_PARENT_KEY: case.metadata[PARENT_KEY]})
        )
    return Benchmark(benchmark.name, benchmark.source, cases)


def test_a_store_written_with_the_previous_key_is_read_back_alike(parent: Benchmark, tmp_path: Path) -> None:
    cases, _ = make_bias_pairs(parent)
    derived = derived_benchmark("bias", parent, cases)
    old = _with_previous_key(derived)
    assert old.data_hash() == derived.data_hash()  # metadata is not fingerprinted: a resumed old store keeps its rows
    figures = {}
    for name, data in (("now", derived), ("before", old)):
        run_probe(data, ["baseline:first", "baseline:longer"], tmp_path / name)
        with Store.in_dir(tmp_path / name) as store:
            probe_data = load_probe_data(store, data.data_hash())
        assert probe_data.parent_ids == tuple(c.case_id for c in parent.cases)
        figures[name] = bias_figures(probe_data, n_resamples=200).as_dict()
    assert figures["before"] == figures["now"]
    # resuming the old store with today's data reads the rows it kept
    run_probe(derived, ["baseline:first", "baseline:longer"], tmp_path / "before")
    with Store.in_dir(tmp_path / "before") as store:
        assert bias_figures(load_probe_data(store, derived.data_hash()), n_resamples=200).as_dict() == figures["now"]


def test_data_with_neither_key_is_refused(parent: Benchmark, tmp_path: Path) -> None:
    run_probe(parent, ["baseline:first"], tmp_path)
    with Store.in_dir(tmp_path) as store, pytest.raises(ValueError, match="no parent_case_id field"):
        load_probe_data(store, parent.data_hash())


def test_both_pair_probes_share_the_figures_settings_and_json_wrapper(parent: Benchmark, tmp_path: Path) -> None:
    made = {
        "counterfactual": (make_pairs(parent, types=["negation", "reorder"]), counterfactual_figures),
        "bias": (make_bias_pairs(parent), bias_figures),
    }
    for probe, ((cases, tally), measure) in made.items():
        derived = derived_benchmark(probe, parent, cases)
        run_probe(derived, JUDGES, tmp_path / probe)
        with Store.in_dir(tmp_path / probe) as store:
            figures = measure(load_probe_data(store, derived.data_hash()), n_resamples=200, confidence=0.9)
        assert isinstance(figures, ProbeFigures) and probe == figures.PROBE
        document = figures.document(derived, parent, tally)
        assert list(document)[:8] == [
            "probe", "data", "pairs", "dimension", "confidence", "n_resamples", "n_parents",
            "pairs_per_type" if probe == "counterfactual" else "cards",
        ]  # fmt: skip
        assert document["probe"] == probe and document["pairs"] == tally.as_dict()
        assert document["data"] == {
            "name": derived.name,
            "source": derived.source,
            "data_hash": derived.data_hash(),
            "parent": parent.source,
        }
        assert (document["confidence"], document["n_resamples"], document["n_parents"]) == (0.9, 200, len(parent))
        json.dumps(document, allow_nan=False)
    assert issubclass(BiasFigures, ProbeFigures) and issubclass(CounterfactualFigures, ProbeFigures)


def test_a_rate_every_parent_agrees_on_is_not_zero_width() -> None:
    """0 of 12 parents show the event: [0, 1 - 0.025^(1/12)], not the bootstrap's [0, 0]; all 12: the mirror."""
    den = np.full((12, 2), 3)
    num = np.stack([np.zeros(12), np.full(12, 3)], axis=1)
    rates = grouped_rates(num, den, ["none", "all"], stats.bootstrap_weights(12, 300, seed=0))
    bound = 1 - 0.025 ** (1 / 12)
    assert (rates["none"].low, rates["none"].high) == pytest.approx((0.0, bound))
    assert (rates["all"].low, rates["all"].high) == pytest.approx((1 - bound, 1.0))
    assert rates["none"].n == 36 and rates["all"].successes == 36.0
