"""find_cases: a few cases of a source by id, in one reading, problems skipped."""

from __future__ import annotations

import json
from pathlib import Path

from medrewardbench.data.sources import find_cases


def test_find_cases_returns_the_wanted_cases_and_skips_bad_rows(tmp_path: Path) -> None:
    rows = [
        {"id": f"c{i}", "image": {"builtin": "pydicom:CT_small.dcm"}, "question": f"q{i}?", "response_1": "a",
         "response_2": "b", "labels": {"overall": 1}}
        for i in range(5)
    ]  # fmt: skip
    rows.insert(2, {"id": "broken", "question": "no answers"})
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    found = find_cases(str(path), ["c1", "c4", "broken", "absent"])
    assert sorted(found) == ["c1", "c4"]
    assert found["c4"].question == "q4?" and found["c1"].labels == {"overall": 1}
