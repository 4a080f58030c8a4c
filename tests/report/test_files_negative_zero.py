"""metrics.json never holds ``-0.0`` (:func:`medrewardbench.report.files.write_metrics_json`)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from helpers.runs import RunsFixture

from medrewardbench.metrics.codec import number
from medrewardbench.report.files import without_negative_zero, write_metrics_json


def _signs(value: object) -> list[float]:
    if isinstance(value, float):
        return [math.copysign(1.0, value)] if value == 0 else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _signs(v)]
    if isinstance(value, list):
        return [s for v in value for s in _signs(v)]
    return []


def test_negative_zeros_from_rounding_are_written_as_zero(tmp_path: Path) -> None:
    tiny = number(-1e-9)  # a difference that rounds to a signed zero, as the metrics' rounding keeps it
    assert tiny == 0 and math.copysign(1.0, tiny) == -1.0
    document = {
        "leaderboard": [{"score": tiny, "macro": None, "rank": 1}],
        "runs": [{"metrics": {"bias": {"first_minus_second": tiny, "pair": (tiny, -0.25)}, "name": "x"}}],
        "schema": "medrewardbench.metrics/2",
    }
    path = tmp_path / "metrics.json"
    write_metrics_json(document, path)
    text = path.read_text()
    assert "-0.0" not in text and '"score": 0.0' in text
    back = json.loads(text)
    assert _signs(back) == [1.0, 1.0, 1.0]
    assert back["runs"][0]["metrics"]["bias"]["pair"] == [0.0, -0.25]  # other values kept as they were
    assert back["leaderboard"][0] == {"macro": None, "rank": 1, "score": 0.0}
    assert without_negative_zero({"a": [1, "b", True]}) == {"a": [1, "b", True]}


def test_analysis_probe_and_estimate_files_hold_no_negative_zero_either(
    tmp_path: Path, runs_fixture: RunsFixture
) -> None:
    from typing import Any, cast

    from medrewardbench.report.files import json_text
    from medrewardbench.report.render import ReportSettings, read_analysis_json, render_report, write_analysis_json

    tiny = number(-1e-9)
    text = json_text({"drop": tiny, "rows": [{"delta": tiny, "n": 3}]}, indent=2, allow_nan=False)
    assert "-0.0" not in text and text.endswith("}\n") and _signs(json.loads(text)) == [1.0, 1.0]

    class Signed:  # what write_analysis_json asks of an analysis: its JSON
        def __init__(self, document: dict[str, Any]) -> None:
            self.document = document

        def to_json(self) -> dict[str, Any]:
            return self.document

    written = render_report([runs_fixture.run_dir], tmp_path / "report", settings=ReportSettings(n_resamples=0))
    document = read_analysis_json(written["json"]).to_json()
    document["leaderboard"][0]["score"]["point"] = tiny  # a rounded difference, as the codec keeps its sign
    path = write_analysis_json(cast(Any, Signed(document)), tmp_path / "analysis.json")
    assert re.search(r"-0\.0(?![0-9])", path.read_text()) is None
    assert read_analysis_json(path).leaderboard[0].score.point == 0.0
