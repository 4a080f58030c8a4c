"""The report analysis: values against hand computation, intervals, tiers, pairing, data checks."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator

import numpy as np
import pytest
from helpers.runs import RunsFixture

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import StoreError
from medrewardbench.metrics.analysis import (
    analyze,
    check_same_data,
    judge_labels,
    load_run_bundles,
    load_runs,
    select_wrong_cases,
)
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.results import COLUMNS, POOLED, Analysis, Estimate, RunAnalysis

# Four cases, two organ systems; every dimension has the same labels and verdicts.
LABELS = [1, 2, 1, 2]
ORGANS = ("brain", "brain", "chest", "chest")
LENGTHS = [(10, 20), (30, 5), (7, 7), (50, 60)]  # longer: 2, 1, tie, 2
JUDGE_A = [(1, 1), (2, 0), (2, 1), (1, 1)]  # right+right, right+failure, wrong+right, wrong+wrong


def tiny_run(run_id: str, rows: list[tuple[int, int]], spec: str | None = None, data_hash: str = "tiny") -> RunData:
    verdicts = np.repeat(np.array(rows, dtype=np.int8)[:, :, None], len(DIMENSIONS), axis=2)
    labels = np.repeat(np.array(LABELS, dtype=np.int8)[:, None], len(DIMENSIONS), axis=1)
    return RunData(
        run_id=run_id,
        judge_spec=spec or f"test:{run_id}",
        data_hash=data_hash,
        case_ids=tuple(f"c{i}" for i in range(len(rows))),
        verdicts=verdicts,
        labels=labels,
        lengths=np.array(LENGTHS, dtype=np.int64),
        groups={"organ_system": ORGANS, "department": ("radiology",) * 4},
        orders=(Order.ORIGINAL, Order.SWAPPED),
    )


@pytest.fixture(scope="module")
def tiny() -> Analysis:
    runs = [
        tiny_run("a", JUDGE_A),
        tiny_run("twin", JUDGE_A),
        tiny_run("broken", [(0, 0)] * 4),
        tiny_run("first", [(1, 2)] * 4, spec="baseline:first"),
    ]
    return analyze(runs, n_resamples=400, seed=1)


def by_label(analysis: Analysis, label: str) -> RunAnalysis:
    return analysis.run(label)


def test_accuracies_match_hand_computation(tiny: Analysis) -> None:
    a = by_label(tiny, "test:a")
    for column in COLUMNS:
        assert a.accuracy[column].point == pytest.approx(4 / 8)  # failures count wrong
        assert a.answered_accuracy[column].point == pytest.approx(4 / 7)
        assert a.failure_rate[column] == pytest.approx(1 / 8)
        assert a.by_order["original"][column].point == pytest.approx(2 / 4)
        assert a.by_order["swapped"][column].point == pytest.approx(2 / 4)
        assert a.strict_accuracy[column].point == pytest.approx(1 / 4)
    assert a.accuracy["overall"].n == 8
    assert a.accuracy.pooled.n == 8 * len(DIMENSIONS)
    assert a.score == a.accuracy.pooled
    assert a.requests.judged == 8 and a.requests.failed == 1


def test_position_and_length_diagnostics_match_hand_computation(tiny: Analysis) -> None:
    a = by_label(tiny, "test:a")
    d = "overall"
    assert a.position.consistency[d].point == pytest.approx(2 / 3)  # cases 0 and 3 of 0, 2, 3
    assert a.position.first_position_rate[d].point == pytest.approx(2 / 7)
    assert a.length.longer_preference[d].point == pytest.approx(0 / 5)  # the tie is left out
    assert a.length.accuracy_expert_longer[d] == Estimate(0.0, n=2)
    assert a.length.accuracy_expert_shorter[d].point == pytest.approx(3 / 4)
    assert tiny.dataset.expert_longer_rate[d] == pytest.approx(1 / 3)
    first = by_label(tiny, "baseline:first")
    assert first.position.first_position_rate[d].point == 1.0
    assert first.position.consistency[d].point == 0.0


def test_groups_micro_and_macro(tiny: Analysis) -> None:
    organ = by_label(tiny, "test:a").groups["organ_system"]
    assert organ.groups["brain"]["overall"].point == pytest.approx(3 / 4)
    assert organ.groups["chest"]["overall"].point == pytest.approx(1 / 4)
    assert organ.micro["overall"].point == pytest.approx(4 / 8)
    assert organ.macro["overall"].point == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert organ.macro["overall"].n == 2
    assert tiny.dataset.groups["organ_system"] == {"brain": 2, "chest": 2}
    # organ_system is always analysed; other requested fields come too
    assert list(tiny.settings.group_fields) == ["organ_system"]
    runs = [tiny_run("a", JUDGE_A)]
    with_department = analyze(runs, n_resamples=50, group_fields=("department", "modality"))
    grouped = with_department.runs[0].groups
    assert set(grouped) == {"organ_system", "department", "modality"}
    assert grouped["department"].groups["radiology"]["overall"].point == pytest.approx(0.5)
    assert list(grouped["modality"].groups) == ["unknown"]


def test_kappa_and_ac1_match_hand_computation(tiny: Analysis) -> None:
    a = by_label(tiny, "test:a")
    # answered requests, confusion [pred][gold]: (1,1)=3, (1,2)=2, (2,1)=1, (2,2)=1
    p_o, p_e = 4 / 7, (5 / 7) * (4 / 7) + (2 / 7) * (3 / 7)
    assert a.agreement.kappa["overall"].point == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-6)
    pi = ((5 / 7) + (4 / 7)) / 2
    ac1_e = 2 * pi * (1 - pi)
    assert a.agreement.ac1["overall"].point == pytest.approx((p_o - ac1_e) / (1 - ac1_e), abs=1e-6)
    assert a.agreement.kappa["overall"].n == 7
    assert a.coherence["accuracy"] == 1.0
    assert tiny.dataset.expert_coherence["accuracy"] == 1.0


def test_a_judge_that_fails_everything(tiny: Analysis) -> None:
    broken = by_label(tiny, "test:broken")
    assert broken.accuracy.pooled.point == 0.0
    assert not broken.answered_accuracy.pooled.defined
    assert broken.failure_rate.pooled == 1.0
    assert not broken.agreement.kappa["overall"].defined
    assert not broken.position.consistency["overall"].defined
    assert (broken.requests.judged, broken.requests.failed) == (8, 8)
    board = tiny.leaderboard
    assert board[-1].label == "test:broken" and board[-1].rank == len(board)
    written = broken.to_json()  # undefined values are null in files
    assert written["answered_accuracy"][POOLED]["point"] is None
    assert written["agreement"]["kappa"]["overall"]["low"] is None


def test_identical_judges_share_a_tier_and_do_not_differ(tiny: Analysis) -> None:
    board = {row.label: row for row in tiny.leaderboard}
    assert board["test:a"].tier == board["test:twin"].tier
    pair = [c for c in tiny.pairwise.on_score() if {c.a, c.b} == {"test:a", "test:twin"}]
    assert len(pair) == 1
    assert pair[0].diff == 0.0 and pair[0].p_bootstrap == 1.0 and pair[0].p_case == 1.0
    assert pair[0].cases_a_better == pair[0].cases_b_better == 0
    assert not pair[0].significant


def _estimates(run: RunAnalysis) -> Iterator[tuple[Estimate, bool]]:
    """Every estimate of a run, and whether it is a ratio of sums (not kappa or AC1)."""
    tables = [
        run.accuracy,
        run.answered_accuracy,
        run.strict_accuracy,
        run.position.consistency,
        run.position.first_position_rate,
        run.length.longer_preference,
        *run.by_order.values(),
    ]
    for grouped in run.groups.values():
        tables += [*grouped.groups.values(), grouped.micro, grouped.macro]
    for table in tables:
        yield from ((value, True) for _, value in table.columns())
    yield from ((value, False) for value in (*run.agreement.kappa, *run.agreement.ac1))


def test_every_interval_contains_its_point(runs_fixture: RunsFixture) -> None:
    analysis = analyze(load_runs([runs_fixture.run_dir]), n_resamples=300)
    found = 0
    for est, ratio in (e for run in analysis.runs for e in _estimates(run)):
        if not est.defined:
            assert math.isnan(est.low) and math.isnan(est.high)
            continue
        found += 1
        assert est.has_interval and est.low <= est.high
        # a percentile interval need not contain its point where the statistic sits at its bound
        # (baseline:first's AC1 is 0 at a balanced label mix and above 0 in every other resample)
        assert not ratio or est.low - 1e-9 <= est.point <= est.high + 1e-9, est
        assert est.low >= -1.0 - 1e-9 and est.high <= 1.0 + 1e-9
    assert found > 500
    for comparison in analysis.pairwise.comparisons:
        if comparison.difference.defined:
            assert comparison.low - 1e-9 <= comparison.diff <= comparison.high + 1e-9


def test_stored_runs_end_to_end(runs_fixture: RunsFixture) -> None:
    analysis = analyze(load_runs([runs_fixture.run_dir]), n_resamples=300)
    board = {row.label: row for row in analysis.leaderboard}
    assert set(board) == set(runs_fixture.specs)
    assert board["test:oracle"].score.point == 1.0
    assert board["test:oracle"].tier == board["test:oracle-twin"].tier == 1
    assert board["test:broken"].score.point == 0.0
    assert board["test:broken"].tier > board["baseline:random"].tier > 1
    assert board["test:planted"].score.point == pytest.approx(0.5)  # right on even cases only
    assert [row.is_baseline for row in analysis.leaderboard] == [
        row.judge.startswith("baseline:") for row in analysis.leaderboard
    ]
    assert [row.rank for row in analysis.leaderboard] == list(range(1, len(board) + 1))
    n_judges = len(board)
    pairs = analysis.pairwise.comparisons
    assert len(pairs) == n_judges * (n_judges - 1) // 2 * len(COLUMNS)
    [oracle_vs_broken] = [c for c in analysis.pairwise.between("test:oracle", "test:broken") if c.column == "overall"]
    n_requests = 2 * runs_fixture.benchmark.cases.__len__()
    n_cases = len(runs_fixture.benchmark.cases)
    assert oracle_vs_broken.cases_a_better == n_cases and oracle_vs_broken.n_pairs == n_requests
    # every case goes the oracle's way: the sign-flip mid-p value is 2^-cases
    assert oracle_vs_broken.p_case == pytest.approx(2.0**-n_cases, rel=1e-3) and oracle_vs_broken.significant
    # in the file, a p-value too small for six decimals keeps significant digits instead of becoming 0
    assert 0 < oracle_vs_broken.to_json()["p_case"] < 1e-3
    for c in pairs:
        if c.difference.defined:
            assert c.diff == pytest.approx(c.acc_a - c.acc_b, abs=1e-5)
            assert c.p_bootstrap_holm >= c.p_bootstrap - 1e-12
    assert analysis.dataset.name is None
    assert analysis.dataset.n_cases == len(runs_fixture.benchmark)


def test_same_seed_same_numbers_other_seed_other_intervals(runs_fixture: RunsFixture) -> None:
    runs = load_runs([runs_fixture.run_dir])
    one = analyze(runs, n_resamples=200, seed=5)
    assert one == analyze(runs, n_resamples=200, seed=5)
    other = analyze(runs, n_resamples=200, seed=6)

    def summary(analysis: Analysis) -> list[tuple[float, ...]]:
        return [(r.accuracy[c].point, r.accuracy[c].low, r.accuracy[c].high) for r in analysis.runs for c in COLUMNS]

    assert [p for p, _, _ in summary(one)] == [p for p, _, _ in summary(other)]
    assert summary(one) != summary(other)


def test_mixing_data_fingerprints_is_refused_naming_the_runs(runs_fixture: RunsFixture) -> None:
    mixed = load_run_bundles([runs_fixture.run_dir, runs_fixture.other_dir])
    other = [b for b in mixed if b.store_path.parent == runs_fixture.other_dir]
    assert len(other) == 1
    with pytest.raises(StoreError) as info:
        analyze([b.data for b in mixed])
    message = str(info.value)
    assert "data fingerprints differ" in message
    assert other[0].record.run_id in message
    assert other[0].record.data_hash[:12] in message
    assert mixed[0].record.run_id in message
    with pytest.raises(StoreError, match="data fingerprints differ"):
        check_same_data([tiny_run("a", JUDGE_A), tiny_run("b", JUDGE_A, data_hash="elsewhere")])
    with pytest.raises(StoreError, match="no runs"):
        check_same_data([])


def test_same_fingerprint_but_different_labels_is_refused() -> None:
    good = tiny_run("a", JUDGE_A)
    bad = tiny_run("b", JUDGE_A)
    object.__setattr__(bad, "labels", 3 - bad.labels)
    with pytest.raises(StoreError, match="inconsistent"):
        check_same_data([good, bad])


def test_load_runs_reads_every_store_once(runs_fixture: RunsFixture) -> None:
    once = load_runs([runs_fixture.run_dir])
    twice = load_runs([runs_fixture.run_dir, runs_fixture.run_dir / "medrewardbench.sqlite"])
    assert [r.run_id for r in once] == [r.run_id for r in twice]
    assert len(once) == len(runs_fixture.specs)
    with pytest.raises(StoreError):
        load_runs([runs_fixture.root / "does-not-exist"])
    empty = runs_fixture.root / "empty-dir"
    empty.mkdir(exist_ok=True)
    with pytest.raises(StoreError, match="no runs"):
        load_runs([empty])


def test_judge_labels_say_what_differs_between_runs_of_one_spec() -> None:
    def configured(run_id: str, **config: object) -> RunData:
        return dataclasses.replace(tiny_run(run_id, JUDGE_A, spec="api:m"), config={"spec": "api:m", **config})

    seeds = [
        configured("r1", seed=1, sampling={"temperature": 0.0}),
        configured("r2", seed=2, sampling={"temperature": 0.0}),
    ]
    assert judge_labels(seeds) == ["api:m (seed 1)", "api:m (seed 2)"]
    temperatures = [
        configured("r1", sampling={"temperature": 0.0}, template_sha256="aaa"),
        configured("r2", sampling={"temperature": 0.7}, template_sha256="aaa"),
        tiny_run("other", JUDGE_A, spec="baseline:first"),
    ]
    assert judge_labels(temperatures) == ["api:m (temperature 0)", "api:m (temperature 0.7)", "baseline:first"]
    templates = [
        configured("r1", template="pairwise", template_sha256="a"),
        configured("r2", template="cot", template_sha256="b"),
    ]
    assert judge_labels(templates) == ["api:m (template pairwise)", "api:m (template cot)"], (
        "a readable setting beats its hash"
    )
    assert judge_labels([configured("r1", seed=None), configured("r2", seed=3)]) == [
        "api:m (seed unset)",
        "api:m (seed 3)",
    ]


def test_judge_labels_keep_apart_two_servers_of_one_model() -> None:
    def served(run_id: str, url: str, **config: object) -> RunData:
        run = tiny_run(run_id, JUDGE_A, spec="api:tiny-qwen")
        return dataclasses.replace(run, config={"spec": "api:tiny-qwen", "base_url": url, **config})

    ports = [served("r1", "http://127.0.0.1:18001/v1"), served("r2", "http://127.0.0.1:18002/v1")]
    assert judge_labels(ports) == ["api:tiny-qwen @127.0.0.1:18001", "api:tiny-qwen @127.0.0.1:18002"]
    paths = [served("r1", "http://host:8000/a/v1"), served("r2", "http://host:8000/b/v1")]
    assert judge_labels(paths) == ["api:tiny-qwen @host:8000/a/v1", "api:tiny-qwen @host:8000/b/v1"]
    mixed = [served("r1", "http://127.0.0.1:18001/v1", seed=1), served("r2", "http://127.0.0.1:18002/v1", seed=2)]
    assert judge_labels(mixed) == [
        "api:tiny-qwen (@127.0.0.1:18001, seed 1)",
        "api:tiny-qwen (@127.0.0.1:18002, seed 2)",
    ]


def test_long_differing_values_are_cut_in_the_middle_and_stay_apart() -> None:
    def adapter(run_id: str, path: str) -> RunData:
        return dataclasses.replace(tiny_run(run_id, JUDGE_A, spec="hf:m"), config={"spec": "hf:m", "note": path})

    long = "a-very-long-setting-value-that-only-differs-at-the-"
    labels = judge_labels([adapter("r1", long + "end-one"), adapter("r2", long + "end-two")])
    assert len(set(labels)) == 2 and all("…" in label for label in labels)
    assert labels[0].endswith("one)") and labels[1].endswith("two)")


def test_a_sweep_entry_reads_by_its_name() -> None:
    runs = [
        dataclasses.replace(tiny_run("r1", JUDGE_A, spec="api:m"), metadata={"sweep_entry": "qwen-a"}),
        dataclasses.replace(tiny_run("r2", JUDGE_A, spec="api:m"), metadata={"sweep_entry": "qwen-b"}),
        dataclasses.replace(tiny_run("r3", JUDGE_A, spec="baseline:first"), metadata={"sweep_entry": "baseline:first"}),
    ]
    assert judge_labels(runs) == ["qwen-a", "qwen-b", "baseline:first"]


def test_judge_labels_fall_back_to_the_run_id_when_configurations_are_equal() -> None:
    runs = [tiny_run("run-aaaaaaaaaa", JUDGE_A, spec="x:y"), tiny_run("run-bbbbbbbbbb", JUDGE_A, spec="x:y")]
    assert judge_labels(runs) == ["x:y (run aaaaaaaaaa)", "x:y (run bbbbbbbbbb)"]
    assert len(set(judge_labels([tiny_run("r", JUDGE_A, spec="s"), tiny_run("r", JUDGE_A, spec="s")]))) == 2


def test_wrong_cases_are_capped_and_hardest_first() -> None:
    runs = [
        tiny_run("a", JUDGE_A),
        tiny_run("broken", [(0, 0)] * 4),
        tiny_run("oracle", [(1, 1), (2, 2), (1, 1), (2, 2)]),
    ]
    selection = select_wrong_cases(runs, per_judge=3)
    assert selection["oracle"] == []
    # case 0 is missed by one judge, cases 1-3 by two: those come first, in case order
    assert selection["broken"] == [1, 2, 3]
    assert selection["a"] == [1, 2, 3]
    assert select_wrong_cases(runs, per_judge=10)["broken"] == [1, 2, 3, 0]
    with pytest.raises(ValueError, match="unknown dimension"):
        select_wrong_cases(runs, dimension="beauty")


def test_runs_with_one_order_or_nothing_judged() -> None:
    from medrewardbench.report.html import render_html
    from medrewardbench.report.markdown import render_markdown

    original_only = tiny_run("orig", [(1, -1), (2, -1), (2, -1), (1, -1)])
    object.__setattr__(original_only, "orders", (Order.ORIGINAL,))
    nothing = tiny_run("empty", [(-1, -1)] * 4)
    analysis = analyze([tiny_run("a", JUDGE_A), original_only, nothing], n_resamples=100)
    orig = by_label(analysis, "test:orig")
    assert list(orig.by_order) == ["original"]
    assert orig.score.point == pytest.approx(2 / 4) and orig.score.n == 4 * len(DIMENSIONS)
    assert not orig.position.consistency["overall"].defined  # never answered in both orders
    assert orig.strict_accuracy["overall"].n == 0
    [pair] = [c for c in analysis.pairwise.between("test:a", "test:orig") if c.column == "overall"]
    assert pair.n_pairs == 4  # only the original-order requests are shared
    empty = next(r for r in analysis.leaderboard if r.label == "test:empty")
    assert not empty.score.defined and empty.tier == 0 and empty.rank == 3
    assert "test:empty" in render_html(analysis) and "| 3 | – | test:empty | – |" in render_markdown(analysis)


def test_analysis_is_json_ready_and_round_trips(tiny: Analysis) -> None:
    document = tiny.to_json()
    text = json.dumps(document, allow_nan=False)
    assert "NaN" not in text
    assert set(document) == {
        "schema",
        "settings",
        "dataset",
        "runs",
        "leaderboard",
        "pairwise",
        "human",
        "sensitivity",
        "selective",
    }
    assert document["schema"] == "medrewardbench.analysis/3"
    assert document["human"] is None and all(row["vs_annotators"] is None for row in document["leaderboard"])
    assert all(v is None or not math.isnan(v) for v in document["runs"][0]["failure_rate"].values())
    # NaN -> null -> NaN: the record read back equals the one written, and writes the same document
    broken = tiny.run("test:broken")
    assert math.isnan(broken.answered_accuracy.pooled.point)
    back = Analysis.from_json(json.loads(text))
    assert math.isnan(back.run("test:broken").answered_accuracy.pooled.point)
    assert back.to_json() == document
    assert Analysis.from_json(back.to_json()) == back
    assert [r.label for r in back.ranked_runs()] == [row.label for row in tiny.leaderboard]
    # a version 1 file (no human ceiling, no vs_annotators) still reads
    old = json.loads(text)
    old["schema"] = "medrewardbench.analysis/1"
    del old["human"]
    for row in old["leaderboard"]:
        del row["vs_annotators"]
    assert Analysis.from_json(old) == tiny
    # a file written before the detectable differences, the verdicts and epsilon still reads
    del old["sensitivity"], old["settings"]["epsilon"]
    for row in old["leaderboard"]:
        del row["verdict"], row["normalised"]
    earlier = Analysis.from_json(old)
    assert earlier.sensitivity is None and earlier.settings.epsilon == tiny.settings.epsilon


def test_point_estimates_only() -> None:
    """What eval prints: no resamples, so no intervals, tests or tiers, and the same points."""
    runs = [tiny_run("a", JUDGE_A), tiny_run("first", [(1, 2)] * 4, spec="baseline:first")]
    points = analyze(runs, n_resamples=0)
    full = analyze(runs, n_resamples=100)
    assert points.pairwise.comparisons == () and all(run.tiers is None for run in points.runs)
    assert [row.tier for row in points.leaderboard] == [None, None]
    for fast, slow in zip(points.runs, full.runs, strict=True):
        for column in COLUMNS:
            assert fast.accuracy[column].point == slow.accuracy[column].point
            assert not fast.accuracy[column].has_interval
    assert Analysis.from_json(points.to_json()).to_json() == points.to_json()
    with pytest.raises(ValueError, match="n_resamples"):
        analyze(runs, n_resamples=-1)
