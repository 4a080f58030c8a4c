"""The Probes section's doctor-flagged critical-miss line: the exact interval over pairs, and the intro naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from medrewardbench.probes.derive import estimate_dict
from medrewardbench.probes.harm import INTERVAL, pair_rate
from medrewardbench.report.probes import load_probe_section, probe_intro, probe_lines

DATA_HASH = "0123456789abcdef" * 4


def harm_file(tmp_path: Path, settings: dict[str, Any]) -> Path:
    """A probe-harm.json of one judge that preferred no flagged answer on 3 pairs (both orders)."""
    rate = estimate_dict(pair_rate([0, 0, 0], [2, 2, 2]))
    document = {
        "probe": "doctor-harm",
        "settings": settings,
        "judges": [{"judge": "baseline:shorter", "run_id": "r1", "pairs": 3, "critical_miss_rate": rate}],
        "data": {"name": "x", "source": "x.jsonl", "data_hash": DATA_HASH, "n_cases": 6},
    }
    path = tmp_path / "probe-harm.json"
    path.write_text(json.dumps(document), "utf-8")
    return path


def test_three_pairs_without_a_miss_read_as_what_three_pairs_can_say(tmp_path: Path) -> None:
    path = harm_file(tmp_path, {"confidence": 0.95, "interval": INTERVAL})
    section = load_probe_section({"harm": path}, DATA_HASH, ["baseline:shorter"], tmp_path)
    assert section is not None
    (line,) = probe_lines(section)
    assert line["doctor_critical_miss"] == "0.0 [0.0, 70.8] on 3 pairs"  # the bootstrap said [0.0, 0.0]
    assert "doctor-flagged critical miss's: exact Clopper-Pearson with the pair as the unit" in probe_intro(section)


def test_an_older_file_made_by_the_bootstrap_is_not_described_as_exact(tmp_path: Path) -> None:
    path = harm_file(tmp_path, {"confidence": 0.95, "n_resamples": 2000, "seed": 0})
    section = load_probe_section({"harm": path}, DATA_HASH, ["baseline:shorter"], tmp_path)
    assert section is not None and section.harm_interval is None
    assert "Clopper-Pearson" not in probe_intro(section)
