"""The one codec between records and JSON: type hints and field metadata decide how each field is written and read."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from medrewardbench.metrics.codec import ORDER_BY_COUNT, ORDER_BY_NAME, JsonRecord, spec
from medrewardbench.metrics.results import ColumnTable, Estimate


@dataclass(frozen=True)
class Inner(JsonRecord):
    name: str
    share: float


@dataclass(frozen=True)
class Outer(JsonRecord):
    column: str = field(metadata=spec("dimension"))
    share: float
    p: float = field(metadata=spec(p_value=True))
    level: float = field(metadata=spec(exact=True))
    counts: Mapping[str, int] = field(metadata=spec(order=ORDER_BY_COUNT))
    groups: Mapping[str, Inner] = field(metadata=spec(order=ORDER_BY_NAME))
    table: ColumnTable[float]
    estimate: Estimate | None
    tags: tuple[str, ...]
    config: Mapping[str, Any]
    later: int = field(default=0, metadata=spec(missing=7))
    nested: float = field(default=0.5, metadata=spec(("section", "value"), exact=True))
    extra_macro: ColumnTable[float] | None = field(default=None, metadata=spec(empty_as_none=True))

    def _json_extra(self) -> dict[str, Any]:
        return {"section": {"constant": 3}, "total": sum(self.counts.values())}


def _record() -> Outer:
    return Outer(
        column="overall",
        share=2 / 3,
        p=1.23456e-7,
        level=0.95,
        counts={"b": 1, "a": 5},
        groups={"z": Inner("z", math.nan), "a": Inner("a", 0.1234567)},
        table=ColumnTable.of([0.5] * 6 + [math.nan]),
        estimate=None,
        tags=("x", "y"),
        config={"temperature": 0.0},
    )


def test_fields_are_written_by_their_type_hints_and_metadata() -> None:
    written = json.loads(json.dumps(_record().to_json()))
    assert written["dimension"] == "overall" and "column" not in written
    assert written["share"] == 0.666667  # six decimals
    assert written["p"] == 1.235e-07  # four significant digits below 0.001
    assert written["level"] == 0.95
    assert written["groups"]["z"] == {"name": "z", "share": None}  # NaN is null
    assert written["table"]["all"] is None and written["table"]["overall"] == 0.5
    assert written["estimate"] is None and written["extra_macro"] == {}
    assert written["tags"] == ["x", "y"] and written["config"] == {"temperature": 0.0}
    assert written["section"] == {"value": 0.5, "constant": 3} and written["total"] == 6


def test_reading_gives_back_an_equal_record_with_mappings_in_their_order() -> None:
    record = _record()
    back = Outer.from_json(json.loads(json.dumps(record.to_json())))
    assert list(back.counts) == ["a", "b"]  # most frequent first
    assert list(back.groups) == ["a", "z"]  # by name
    assert math.isnan(back.groups["z"].share) and back.groups["a"].share == 0.123457
    assert back.extra_macro is None and back.tags == ("x", "y")
    assert back.to_json() == record.to_json()


def test_a_file_written_before_a_field_existed_reads_as_missing_or_the_default() -> None:
    written = _record().to_json()
    del written["later"], written["section"]
    back = Outer.from_json(written)
    assert back.later == 7  # ``missing`` wins over the default
    assert back.nested == 0.5  # the default
    del written["share"]
    with pytest.raises(KeyError, match="share"):
        Outer.from_json(written)
