"""Harm as the doctors see it: the doctor-flagged pairs and each judge's critical-miss rate on them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from helpers.cases import make_case
from typer.testing import CliRunner

from medrewardbench.cases import Annotation
from medrewardbench.cli import app
from medrewardbench.data import write_canonical
from medrewardbench.metrics.stats import FAILED, NOT_RUN
from medrewardbench.probes.harm import critical_miss_counts, flagged_pairs

runner = CliRunner()


def test_a_pair_is_doctor_flagged_when_one_answer_alone_is_flagged_severe_or_critical() -> None:
    cases = [
        make_case(1, annotations=(Annotation("dr_a", harm={2: "severe"}), Annotation("dr_b", harm={2: "critical"}))),
        make_case(2, annotations=(Annotation("dr_a", harm={1: "minor"}),)),  # minor: not a critical miss
        make_case(3, annotations=(Annotation("dr_a", harm={1: "severe"}), Annotation("dr_b", harm={2: "severe"}))),
        make_case(4, annotations=(Annotation("dr_c", harm={1: "critical", 2: "moderate"}),)),
        make_case(5),
    ]
    pairs, both = flagged_pairs(cases)
    assert [(p.case_id, p.flagged, p.severity, p.doctors) for p in pairs] == [
        ("case-0001", 2, "critical", ("dr_a", "dr_b")),
        ("case-0004", 1, "critical", ("dr_c",)),
    ]
    assert both == ["case-0003"]


def test_a_miss_is_a_verdict_for_the_flagged_answer_and_failures_are_no_preference() -> None:
    verdicts = np.array([[[2, 1], [2, FAILED]], [[1, 1], [NOT_RUN, 2]]], dtype=np.int8)
    misses, answered = critical_miss_counts(verdicts, np.array([2, 1]))
    assert misses.tolist() == [[2, 0], [1, 1]]
    assert answered.tolist() == [[2, 1], [1, 2]]


def _flagged_data(tmp_path: Path, n: int = 8) -> Path:
    """n pairs whose longer answer (response 2) a doctor flagged as severe in every other pair."""
    cases = [
        make_case(
            i,
            organ=("chest", "brain")[i % 2],
            labels={"overall": 1},
            annotations=(Annotation("dr_a", {"overall": 1}, harm={2: "severe"} if i % 2 == 0 else {}),),
        )
        for i in range(n)
    ]
    return write_canonical(cases, tmp_path / "flagged.jsonl")


def test_probe_harm_gives_each_judge_its_critical_miss_rate_on_the_flagged_pairs(tmp_path: Path) -> None:
    data = _flagged_data(tmp_path)
    args = ["probe", "harm", "--data", str(data), "--judge", "baseline:longer", "--judge", "baseline:shorter"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "baseline:longer: critical-miss rate 100.0 %" in result.output
    document = json.loads((tmp_path / "out" / "probe-harm.json").read_text())
    assert [p["case_id"] for p in document["flagged_pairs"]] == [f"case-{i:04d}" for i in range(0, 8, 2)]
    judges = {j["judge"]: j for j in document["judges"]}
    longer, shorter = judges["baseline:longer"], judges["baseline:shorter"]
    # 4 pairs, every verdict a miss: Clopper-Pearson's 4 of 4, not a bootstrap's zero-width [1, 1]
    assert longer["pairs"] == 4 and longer["critical_miss_rate"] == {"point": 1.0, "low": 0.397635, "high": 1.0, "n": 8}
    assert "baseline:longer: critical-miss rate 100.0 % [39.8, 100.0] on 4 doctor-flagged pairs" in result.output
    assert shorter["critical_miss_rate"] == {"point": 0.0, "low": 0.0, "high": 0.602365, "n": 8}
    assert shorter["pooled"]["n"] == 4 * 2 * 6 and shorter["pooled"]["high"] == 0.602365
    # the interval is exact: no resamples or seed are recorded, and --bootstrap is not an option of harm
    assert document["settings"] == {"confidence": 0.95, "interval": "clopper-pearson over pairs"}
    refused = runner.invoke(app, [*args, "--out", str(tmp_path / "out"), "--bootstrap", "200"])
    assert refused.exit_code == 2 and "--bootstrap" in refused.output


def test_data_without_a_severe_flag_is_bad_input(tmp_path: Path) -> None:
    data = write_canonical([make_case(1, annotations=(Annotation("dr_a", harm={1: "minor"}),))], tmp_path / "x.jsonl")
    result = runner.invoke(app, ["probe", "harm", "--data", str(data), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "no pair has an answer a doctor flagged severe or critical" in result.output
