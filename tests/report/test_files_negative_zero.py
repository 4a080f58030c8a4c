"""metrics.json never holds ``-0.0`` (:func:`medrewardbench.report.files.write_metrics_json`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

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
