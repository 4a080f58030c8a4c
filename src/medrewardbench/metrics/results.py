"""The typed results of medrewardbench, built and read by ``eval``, ``report``, ``leaderboard``, ``compare``, ``cv``.

Every record is a frozen dataclass; the ones written to files have one ``to_json()`` and one
``from_json()``. In memory an undefined value is NaN; in files it is null. Fractions are rounded
to six decimals (:func:`number`; a p-value below 0.001 keeps four significant digits instead,
:func:`p_number`), once, when a record is built (:func:`fixed`), so ``from_json(to_json())``
gives back an equal record and reports render the same text from a fresh analysis and from its
file.

Tables have one value per dimension (:class:`DimensionTable`, ``table["overall"]``) or, for
accuracy-like measures, the six dimensions plus the **pooled** column (:class:`ColumnTable`,
``table.pooled``): the measure over every dimension's requests together (correct / counted
summed over dimensions). The pooled accuracy is the leaderboard's score everywhere; it equals the
mean of the six dimensions when every case is labelled on all six. Files call the pooled column
:data:`POOLED` (``"all"``).

Two documents are written from these records:

* ``analysis.json`` (:data:`SCHEMA`, written by ``report``): :class:`Analysis`, with the human
  ceiling (:class:`HumanCeiling`) when the data has per-annotator labels.
* ``metrics.json`` (:data:`METRICS_SCHEMA`, written by ``eval``): per run the counts behind the
  point estimates (:class:`RunMetrics`) and the leaderboard (:class:`LeaderboardRow`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import ResultsFormatError

SCHEMA = "medrewardbench.analysis/3"
"""Schema of ``analysis.json`` (:class:`Analysis`). Version 2 added the human ceiling
(:class:`HumanCeiling`, ``LeaderboardRow.vs_annotators``); version 3 replaced the per-request
McNemar test of :class:`PairwiseComparison` (``mcnemar_b``, ``mcnemar_c``, ``p_mcnemar``,
``p_mcnemar_holm``) by the case-level sign-flip test (``cases_a_better``, ``cases_b_better``,
``p_case``, ``p_case_holm``) and resamples organ systems with the rescaled bootstrap."""
READABLE_SCHEMAS: tuple[str, ...] = (SCHEMA, "medrewardbench.analysis/2", "medrewardbench.analysis/1")
"""``analysis.json`` schemas this version reads (version 1 files have no human ceiling; versions 1-2
have no case-level test: their ``p_case`` reads as undefined)."""
HUMAN_LABEL = "human (leave-one-out)"
"""How reports name the human-ceiling row: each annotator against the majority of the others."""
CAN_STAND_IN = "can stand in for an annotator"
"""The alt-test's verdict when the judge wins against at least half of the annotators (:class:`AltTest`)."""
CANNOT = "cannot"
"""The alt-test's verdict when it fails and the judge is shown worse by more than epsilon, or the cases
would have let an equally good judge pass."""
TOO_FEW = "too few cases to tell"
"""The alt-test's verdict when the data cannot decide (too few annotators, cases or power)."""
VERDICTS: tuple[str, ...] = (CAN_STAND_IN, CANNOT, TOO_FEW)
"""Every verdict, in the words every report uses."""
DEFAULT_EPSILON = 0.1
"""The alt-test's cost-benefit margin ε (in winning probability) unless set (``--epsilon``)."""
METRICS_SCHEMA = "medrewardbench.metrics/2"
"""Schema of eval's ``metrics.json``."""
POOLED = "all"
"""Name of the pooled column in files (JSON keys, CSV ``dimension`` values)."""
COLUMNS: tuple[str, ...] = (*DIMENSIONS, POOLED)
"""Columns of an accuracy-like table in files: the six dimensions, then the pooled column."""
STRATA = "organ_system"
P_DIGITS_BELOW = 0.001
"""p-values below this are written with four significant digits instead of six decimals."""
"""The case field that stratifies the bootstrap and defines macro averages."""

T = TypeVar("T")
U = TypeVar("U")

_DIMENSION_INDEX = {name: i for i, name in enumerate(DIMENSIONS)}


# --------------------------------------------------------------------------------------------
# Numbers at the JSON boundary
# --------------------------------------------------------------------------------------------


def real(value: Any) -> float:
    """A float for in-memory records.

    None and NaN become :data:`math.nan` (one object, so that records holding undefined values
    still compare equal), numpy scalars plain floats.

    Args:
        value: a number, None or NaN.

    Returns:
        The value as a Python float.
    """
    if value is None:
        return math.nan
    number_ = float(value)
    return math.nan if number_ != number_ else number_


def number(value: float) -> float | None:
    """A float as written to files: NaN as None (JSON has no NaN), otherwise rounded to 6 decimals.

    The rounding is numpy's (``np.round(value, 6)``: half to even on ``value * 1e6``), so files
    written from arrays and from records agree to the last digit.

    Args:
        value: the number.

    Returns:
        The rounded number, or None for NaN.
    """
    if value != value:
        return None
    rounded = round(value * 1e6) / 1e6
    return math.copysign(rounded, value) if rounded == 0 else rounded


def p_number(value: float) -> float | None:
    """A p-value as written to files.

    Like :func:`number` from 0.001 up; below that, four significant digits, so that small p-values
    (an exact test's p can be 1e-70) keep their size.

    Args:
        value: the p-value.

    Returns:
        The rounded p-value, or None for NaN.
    """
    if value != value:
        return None
    if 0 < value < P_DIGITS_BELOW:
        return float(f"{value:.4g}")
    return number(value)


def fixed(value: Any) -> float:
    """A number as a record holds it: rounded as :func:`number` writes it, NaN for missing.

    Builders round once, so a record in memory equals the record read back from its file and
    every report renders the same text from either.

    Args:
        value: a number, None or NaN.

    Returns:
        The rounded float.
    """
    rounded = number(real(value))
    return math.nan if rounded is None else rounded


def fixed_p(value: Any) -> float:
    """A p-value as a record holds it: rounded as :func:`p_number` writes it, NaN for missing.

    Args:
        value: a p-value, None or NaN.

    Returns:
        The rounded float.
    """
    rounded = p_number(real(value))
    return math.nan if rounded is None else rounded


def _numbers(values: Iterable[float]) -> list[float | None]:
    return [number(v) for v in values]


def _mapping_numbers(values: Mapping[str, float]) -> dict[str, float | None]:
    return {k: number(v) for k, v in values.items()}


def _by_dimension(data: Mapping[str, Any]) -> dict[str, float]:
    """The dimensions present in ``data``, in dimension order, as floats."""
    return {d: real(data[d]) for d in DIMENSIONS if d in data}


def _failures_in_order(failures: Mapping[str, Any]) -> dict[str, int]:
    """Failure reasons, most frequent first (ties by reason), as every reader expects them."""
    return dict(sorted(((str(k), int(v)) for k, v in failures.items()), key=lambda kv: (-kv[1], kv[0])))


def _require(data: Mapping[str, Any], expected: str, what: str, also: Sequence[str] = ()) -> None:
    found = data.get("schema")
    if found != expected and found not in also:
        raise ResultsFormatError(f"{what}: expected schema {expected!r}, found {found!r}")


# --------------------------------------------------------------------------------------------
# Estimates and tables
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A point estimate, its bootstrap percentile interval (NaN when none was computed) and its n.

    ``n`` is the denominator behind the point: requests or cases counted, answered pairs for
    agreement, or the number of groups averaged for a macro average.
    """

    point: float
    low: float = math.nan
    high: float = math.nan
    n: int = 0

    def __post_init__(self) -> None:
        for name in ("point", "low", "high"):
            object.__setattr__(self, name, real(getattr(self, name)))
        object.__setattr__(self, "n", int(self.n))

    @property
    def defined(self) -> bool:
        """Whether the point exists (something was counted)."""
        return not math.isnan(self.point)

    @property
    def has_interval(self) -> bool:
        """Whether both interval bounds exist."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    def to_json(self) -> dict[str, Any]:
        """``{"point", "low", "high", "n"}``, rounded, NaN as null."""
        return {"point": number(self.point), "low": number(self.low), "high": number(self.high), "n": self.n}

    def point_to_json(self) -> dict[str, Any]:
        """``{"point", "n"}``: for estimates that never carry an interval."""
        return {"point": number(self.point), "n": self.n}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Estimate:
        """Read :meth:`to_json` or :meth:`point_to_json` output."""
        return cls(real(data.get("point")), real(data.get("low")), real(data.get("high")), int(data.get("n") or 0))


@dataclass(frozen=True)
class DimensionTable(Generic[T]):
    """One value per dimension, in :data:`~medrewardbench.dimensions.DIMENSIONS` order.

    Read one value with ``table["overall"]``; ``items()`` gives ``(dimension, value)`` pairs.
    """

    values: tuple[T, ...]

    def __post_init__(self) -> None:
        if len(self.values) != len(DIMENSIONS):
            raise ValueError(f"a dimension table needs {len(DIMENSIONS)} values, got {len(self.values)}")

    def __getitem__(self, dimension: str) -> T:
        try:
            return self.values[_DIMENSION_INDEX[dimension]]
        except KeyError:
            raise KeyError(f"unknown dimension {dimension!r}; expected one of {', '.join(DIMENSIONS)}") from None

    def __iter__(self) -> Iterator[T]:
        return iter(self.values)

    def items(self) -> list[tuple[str, T]]:
        """``(dimension, value)`` pairs in dimension order."""
        return list(zip(DIMENSIONS, self.values, strict=True))

    def to_json(self, encode: Callable[[T], Any]) -> dict[str, Any]:
        """``{dimension: encode(value)}``."""
        return {name: encode(value) for name, value in self.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], decode: Callable[[Any], U]) -> DimensionTable[U]:
        """Read :meth:`to_json` output; every dimension must be present."""
        return DimensionTable(tuple(decode(data[name]) for name in DIMENSIONS))


@dataclass(frozen=True)
class ColumnTable(Generic[T]):
    """The six dimensions and the pooled column of one measure.

    ``table["overall"]`` reads a dimension, ``table.pooled`` the pooled column; ``columns()``
    gives every column with its file name (the pooled one last, as :data:`POOLED`).
    """

    dimensions: DimensionTable[T]
    pooled: T

    def __getitem__(self, column: str) -> T:
        return self.pooled if column == POOLED else self.dimensions[column]

    def columns(self) -> list[tuple[str, T]]:
        """``(column name, value)`` for the six dimensions, then ``(POOLED, pooled)``."""
        return [*self.dimensions.items(), (POOLED, self.pooled)]

    @classmethod
    def of(cls, values: Sequence[U]) -> ColumnTable[U]:
        """A table from seven values in :data:`COLUMNS` order."""
        if len(values) != len(COLUMNS):
            raise ValueError(f"a column table needs {len(COLUMNS)} values, got {len(values)}")
        return ColumnTable(DimensionTable(tuple(values[:-1])), values[-1])

    def to_json(self, encode: Callable[[T], Any]) -> dict[str, Any]:
        """``{column name: encode(value)}`` with the pooled column under :data:`POOLED`."""
        return {name: encode(value) for name, value in self.columns()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], decode: Callable[[Any], U]) -> ColumnTable[U]:
        """Read :meth:`to_json` output; every column must be present."""
        return ColumnTable(DimensionTable.from_json(data, decode), decode(data[POOLED]))


def _estimates_to_json(table: ColumnTable[Estimate]) -> dict[str, Any]:
    return table.to_json(Estimate.to_json)


def _estimates_from_json(data: Mapping[str, Any]) -> ColumnTable[Estimate]:
    return ColumnTable.from_json(data, Estimate.from_json)


# --------------------------------------------------------------------------------------------
# One run, analysed
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestCounts:
    """Requests judged (run, with or without a verdict) and failed on every dimension."""

    judged: int
    failed: int

    def to_json(self) -> dict[str, int]:
        """``{"judged", "failed"}``."""
        return {"judged": self.judged, "failed": self.failed}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestCounts:
        """Read :meth:`to_json` output."""
        return cls(int(data["judged"]), int(data["failed"]))


@dataclass(frozen=True)
class Agreement:
    """Chance-corrected agreement with the labels per dimension, over answered requests."""

    kappa: DimensionTable[Estimate]
    ac1: DimensionTable[Estimate]

    def to_json(self) -> dict[str, Any]:
        """``{"kappa": {dimension: estimate}, "ac1": {...}}``."""
        return {"kappa": self.kappa.to_json(Estimate.to_json), "ac1": self.ac1.to_json(Estimate.to_json)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Agreement:
        """Read :meth:`to_json` output."""
        return cls(
            DimensionTable.from_json(data["kappa"], Estimate.from_json),
            DimensionTable.from_json(data["ac1"], Estimate.from_json),
        )


@dataclass(frozen=True)
class PositionBias:
    """Same winner in both orders, and the share of picks of the response shown first."""

    consistency: ColumnTable[Estimate]
    first_position_rate: ColumnTable[Estimate]

    def to_json(self) -> dict[str, Any]:
        """``{"consistency": table, "first_position_rate": table}``."""
        return {
            "consistency": _estimates_to_json(self.consistency),
            "first_position_rate": _estimates_to_json(self.first_position_rate),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PositionBias:
        """Read :meth:`to_json` output."""
        return cls(_estimates_from_json(data["consistency"]), _estimates_from_json(data["first_position_rate"]))


@dataclass(frozen=True)
class LengthBias:
    """How often the longer response is picked, and accuracy split by the labels' length choice."""

    longer_preference: ColumnTable[Estimate]
    accuracy_expert_longer: DimensionTable[Estimate]
    """accuracy on cases whose labelled winner is the longer response (point and n only)"""
    accuracy_expert_shorter: DimensionTable[Estimate]

    def to_json(self) -> dict[str, Any]:
        """``{"longer_preference": table, "accuracy_expert_longer": ..., "accuracy_expert_shorter": ...}``."""
        return {
            "longer_preference": _estimates_to_json(self.longer_preference),
            "accuracy_expert_longer": self.accuracy_expert_longer.to_json(Estimate.point_to_json),
            "accuracy_expert_shorter": self.accuracy_expert_shorter.to_json(Estimate.point_to_json),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LengthBias:
        """Read :meth:`to_json` output."""
        return cls(
            _estimates_from_json(data["longer_preference"]),
            DimensionTable.from_json(data["accuracy_expert_longer"], Estimate.from_json),
            DimensionTable.from_json(data["accuracy_expert_shorter"], Estimate.from_json),
        )


@dataclass(frozen=True)
class GroupBreakdown:
    """Accuracy per group of one case field, with the pooled (micro) and mean-of-groups (macro) rows."""

    groups: Mapping[str, ColumnTable[Estimate]]
    """group name -> accuracy, groups sorted by name"""
    micro: ColumnTable[Estimate]
    macro: ColumnTable[Estimate]
    """``n`` is the number of groups averaged"""

    def to_json(self) -> dict[str, Any]:
        """``{"groups": {name: table}, "micro": table, "macro": table}``."""
        return {
            "groups": {name: _estimates_to_json(table) for name, table in self.groups.items()},
            "micro": _estimates_to_json(self.micro),
            "macro": _estimates_to_json(self.macro),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupBreakdown:
        """Read :meth:`to_json` output."""
        return cls(
            {str(name): _estimates_from_json(table) for name, table in sorted(data["groups"].items())},
            _estimates_from_json(data["micro"]),
            _estimates_from_json(data["macro"]),
        )


@dataclass(frozen=True)
class RunAnalysis:
    """Everything a report shows about one run; fractions in [0, 1], failures counted wrong."""

    label: str
    """display name, unique within the analysis"""
    judge: str
    run_id: str
    is_baseline: bool
    orders: tuple[str, ...]
    n_cases: int
    config: Mapping[str, Any]
    metadata: Mapping[str, Any]
    usage: Mapping[str, Any]
    """token counts summed over the run"""
    requests: RequestCounts
    failures: Mapping[str, int]
    """failure reason -> count, most frequent first"""
    accuracy: ColumnTable[Estimate]
    answered_accuracy: ColumnTable[Estimate]
    failure_rate: ColumnTable[float]
    n_counted: ColumnTable[int]
    by_order: Mapping[str, ColumnTable[Estimate]]
    """order name -> accuracy in that order, for the orders run"""
    strict_accuracy: ColumnTable[Estimate]
    agreement: Agreement
    position: PositionBias
    length: LengthBias
    coherence: Mapping[str, float]
    """dimension -> how often its winner equals the overall winner (every dimension but overall)"""
    groups: Mapping[str, GroupBreakdown]
    """case field -> accuracy per group, fields in the analysis' order"""
    tiers: ColumnTable[int] | None = None
    """tier per column (None without pairwise tests)"""

    @property
    def score(self) -> Estimate:
        """The leaderboard score: accuracy pooled over the six dimensions."""
        return self.accuracy.pooled

    def to_json(self) -> dict[str, Any]:
        """The run as written to ``analysis.json`` (``score`` repeats the pooled accuracy)."""
        return {
            "label": self.label,
            "judge": self.judge,
            "run_id": self.run_id,
            "is_baseline": self.is_baseline,
            "orders": list(self.orders),
            "n_cases": self.n_cases,
            "config": dict(self.config),
            "metadata": dict(self.metadata),
            "usage": dict(self.usage),
            "requests": self.requests.to_json(),
            "failures": dict(self.failures),
            "score": self.score.to_json(),
            "accuracy": _estimates_to_json(self.accuracy),
            "answered_accuracy": _estimates_to_json(self.answered_accuracy),
            "failure_rate": self.failure_rate.to_json(number),
            "n_counted": self.n_counted.to_json(int),
            "by_order": {order: _estimates_to_json(table) for order, table in self.by_order.items()},
            "strict_accuracy": _estimates_to_json(self.strict_accuracy),
            "agreement": self.agreement.to_json(),
            "position": self.position.to_json(),
            "length": self.length.to_json(),
            "coherence": _mapping_numbers(self.coherence),
            "groups": {name: grouped.to_json() for name, grouped in self.groups.items()},
            "tiers": None if self.tiers is None else self.tiers.to_json(int),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], group_fields: Sequence[str] = ()) -> RunAnalysis:
        """Read :meth:`to_json` output; ``group_fields`` restores the order of the groups."""
        orders = tuple(str(o) for o in data["orders"])
        fields = [f for f in group_fields if f in data["groups"]] + sorted(set(data["groups"]) - set(group_fields))
        tiers = data.get("tiers")
        return cls(
            label=str(data["label"]),
            judge=str(data["judge"]),
            run_id=str(data["run_id"]),
            is_baseline=bool(data["is_baseline"]),
            orders=orders,
            n_cases=int(data["n_cases"]),
            config=dict(data["config"]),
            metadata=dict(data["metadata"]),
            usage=dict(data["usage"]),
            requests=RequestCounts.from_json(data["requests"]),
            failures=_failures_in_order(data["failures"]),
            accuracy=_estimates_from_json(data["accuracy"]),
            answered_accuracy=_estimates_from_json(data["answered_accuracy"]),
            failure_rate=ColumnTable.from_json(data["failure_rate"], real),
            n_counted=ColumnTable.from_json(data["n_counted"], int),
            by_order={o: _estimates_from_json(data["by_order"][o]) for o in orders if o in data["by_order"]},
            strict_accuracy=_estimates_from_json(data["strict_accuracy"]),
            agreement=Agreement.from_json(data["agreement"]),
            position=PositionBias.from_json(data["position"]),
            length=LengthBias.from_json(data["length"]),
            coherence=_by_dimension(data["coherence"]),
            groups={f: GroupBreakdown.from_json(data["groups"][f]) for f in fields},
            tiers=None if tiers is None else ColumnTable.from_json(tiers, int),
        )


# --------------------------------------------------------------------------------------------
# Across runs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderboardRow:
    """One judge on the leaderboard, ranked by :attr:`score` (the pooled accuracy)."""

    rank: int
    label: str
    judge: str
    run_id: str
    is_baseline: bool
    tier: int | None
    """judges sharing a tier are not shown to differ from its leader; 0 = unranked; None = not tested"""
    score: Estimate
    macro: Estimate | None
    """mean over organ systems of the pooled accuracy"""
    accuracy: DimensionTable[Estimate]
    tiers: DimensionTable[int] | None
    answered_accuracy: float
    failure_rate: float
    consistency: float
    """pooled over the six dimensions, like every number of the row"""
    first_position_rate: float
    longer_preference: float
    kappa_overall: float
    cost_usd: float = math.nan
    """dollars the run's stored judgments cost (NaN: no price known); recorded by ``sweep``"""
    cost_per_1000_cases: float = math.nan
    """dollars per 1,000 cases judged in every order (NaN: no price known)"""
    vs_annotators: Estimate | None = None
    """agreement with the annotators' leave-one-out majorities, all dimensions pooled (the number to
    set beside the :data:`HUMAN_LABEL` row); None when the data has no per-annotator labels"""
    normalised: Estimate | None = None
    """``vs_annotators`` divided by the :data:`HUMAN_LABEL` row (1.0 = as often as an annotator)"""
    verdict: str | None = None
    """the alt-test on the six dimensions pooled (one of :data:`VERDICTS`); None without per-annotator labels"""

    @property
    def has_cost(self) -> bool:
        """Whether a cost was recorded for the run."""
        return not math.isnan(self.cost_usd)

    def to_json(self) -> dict[str, Any]:
        """The row as written to ``analysis.json``."""
        return {
            "rank": self.rank,
            "label": self.label,
            "judge": self.judge,
            "run_id": self.run_id,
            "is_baseline": self.is_baseline,
            "tier": self.tier,
            "score": self.score.to_json(),
            "macro": None if self.macro is None else self.macro.to_json(),
            "accuracy": self.accuracy.to_json(Estimate.to_json),
            "tiers": None if self.tiers is None else self.tiers.to_json(int),
            "answered_accuracy": number(self.answered_accuracy),
            "failure_rate": number(self.failure_rate),
            "consistency": number(self.consistency),
            "first_position_rate": number(self.first_position_rate),
            "longer_preference": number(self.longer_preference),
            "kappa_overall": number(self.kappa_overall),
            "cost_usd": number(self.cost_usd),
            "cost_per_1000_cases": number(self.cost_per_1000_cases),
            "vs_annotators": None if self.vs_annotators is None else self.vs_annotators.to_json(),
            "normalised": None if self.normalised is None else self.normalised.to_json(),
            "verdict": self.verdict,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LeaderboardRow:
        """Read :meth:`to_json` output."""
        tiers = data.get("tiers")
        return cls(
            rank=int(data["rank"]),
            label=str(data["label"]),
            judge=str(data["judge"]),
            run_id=str(data["run_id"]),
            is_baseline=bool(data["is_baseline"]),
            tier=None if data.get("tier") is None else int(data["tier"]),
            score=Estimate.from_json(data["score"]),
            macro=None if data.get("macro") is None else Estimate.from_json(data["macro"]),
            accuracy=DimensionTable.from_json(data["accuracy"], Estimate.from_json),
            tiers=None if tiers is None else DimensionTable.from_json(tiers, int),
            answered_accuracy=real(data["answered_accuracy"]),
            failure_rate=real(data["failure_rate"]),
            consistency=real(data["consistency"]),
            first_position_rate=real(data["first_position_rate"]),
            longer_preference=real(data["longer_preference"]),
            kappa_overall=real(data["kappa_overall"]),
            cost_usd=real(data.get("cost_usd")),
            cost_per_1000_cases=real(data.get("cost_per_1000_cases")),
            vs_annotators=None if data.get("vs_annotators") is None else Estimate.from_json(data["vs_annotators"]),
            normalised=None if data.get("normalised") is None else Estimate.from_json(data["normalised"]),
            verdict=None if data.get("verdict") is None else str(data["verdict"]),
        )


PAIRWISE_COLUMNS: tuple[str, ...] = (
    "a",
    "b",
    "dimension",
    "acc_a",
    "acc_b",
    "diff",
    "low",
    "high",
    "p_bootstrap",
    "p_bootstrap_holm",
    "significant",
    "cases_a_better",
    "cases_b_better",
    "p_case",
    "p_case_holm",
    "n_pairs",
)
"""The fields of one written pairwise comparison, in file order."""


@dataclass(frozen=True)
class PairwiseComparison:
    """Judge ``a`` against judge ``b`` on one column, on the labelled requests both were run on."""

    a: str
    b: str
    column: str
    """a dimension, or :data:`POOLED`"""
    acc_a: float
    acc_b: float
    diff: float
    """acc_a - acc_b"""
    low: float
    high: float
    p_bootstrap: float
    """paired case bootstrap, two-sided"""
    p_bootstrap_holm: float
    significant: bool
    """Holm-adjusted bootstrap p-value below the analysis' alpha"""
    cases_a_better: int
    """cases on which ``a`` got more of the column's requests right than ``b``"""
    cases_b_better: int
    """cases on which ``b`` got more of them right"""
    p_case: float
    """case-level sign-flip test of the difference (the case is the unit): two-sided mid-p of its exact distribution"""
    p_case_holm: float
    n_pairs: int
    """requests both judges were run on (counted, labelled)"""

    @property
    def is_pooled(self) -> bool:
        """Whether this compares the pooled column (the leaderboard score)."""
        return self.column == POOLED

    @property
    def difference(self) -> Estimate:
        """``diff`` with its interval and the number of paired requests."""
        return Estimate(self.diff, self.low, self.high, self.n_pairs)

    def flipped(self) -> PairwiseComparison:
        """The same comparison with ``b`` as the first judge."""
        return PairwiseComparison(
            a=self.b,
            b=self.a,
            column=self.column,
            acc_a=self.acc_b,
            acc_b=self.acc_a,
            diff=-self.diff,
            low=-self.high,
            high=-self.low,
            p_bootstrap=self.p_bootstrap,
            p_bootstrap_holm=self.p_bootstrap_holm,
            significant=self.significant,
            cases_a_better=self.cases_b_better,
            cases_b_better=self.cases_a_better,
            p_case=self.p_case,
            p_case_holm=self.p_case_holm,
            n_pairs=self.n_pairs,
        )

    def to_json(self) -> dict[str, Any]:
        """The fields of :data:`PAIRWISE_COLUMNS` (the column under ``"dimension"``)."""
        return {
            "a": self.a,
            "b": self.b,
            "dimension": self.column,
            "acc_a": number(self.acc_a),
            "acc_b": number(self.acc_b),
            "diff": number(self.diff),
            "low": number(self.low),
            "high": number(self.high),
            "p_bootstrap": p_number(self.p_bootstrap),
            "p_bootstrap_holm": p_number(self.p_bootstrap_holm),
            "significant": self.significant,
            "cases_a_better": self.cases_a_better,
            "cases_b_better": self.cases_b_better,
            "p_case": p_number(self.p_case),
            "p_case_holm": p_number(self.p_case_holm),
            "n_pairs": self.n_pairs,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairwiseComparison:
        """Read :meth:`to_json` output."""
        return cls(
            a=str(data["a"]),
            b=str(data["b"]),
            column=str(data["dimension"]),
            acc_a=real(data["acc_a"]),
            acc_b=real(data["acc_b"]),
            diff=real(data["diff"]),
            low=real(data["low"]),
            high=real(data["high"]),
            p_bootstrap=real(data["p_bootstrap"]),
            p_bootstrap_holm=real(data["p_bootstrap_holm"]),
            significant=bool(data["significant"]),
            # files written before the case-level test (analysis schema 1-2, cv version 3) hold a
            # per-request McNemar test instead: it is not read back as the case-level test
            cases_a_better=int(data.get("cases_a_better", 0)),
            cases_b_better=int(data.get("cases_b_better", 0)),
            p_case=real(data.get("p_case")),
            p_case_holm=real(data.get("p_case_holm")),
            n_pairs=int(data["n_pairs"]),
        )


@dataclass(frozen=True)
class PairwiseTests:
    """Every pair of judges on every column: paired case bootstrap and case sign-flip test, Holm-adjusted per column."""

    judges: tuple[str, ...]
    comparisons: tuple[PairwiseComparison, ...]
    """pairs (i < j in ``judges`` order) per column, columns in :data:`COLUMNS` order"""
    test: str = (
        "paired case bootstrap (p_bootstrap, used for tiers) and the case-level sign-flip test (p_case: mid-p of "
        "its exact distribution); both take the case as the unit"
    )
    adjustment: str = "Holm, per column over all pairs"

    def on_column(self, column: str) -> list[PairwiseComparison]:
        """The comparisons of one column (a dimension or :data:`POOLED`)."""
        return [c for c in self.comparisons if c.column == column]

    def on_score(self) -> list[PairwiseComparison]:
        """The comparisons of the leaderboard score (the pooled column)."""
        return [c for c in self.comparisons if c.is_pooled]

    def between(self, a: str, b: str) -> list[PairwiseComparison]:
        """Judge ``a`` against judge ``b`` on every column, oriented so that ``a`` comes first."""
        out = []
        for c in self.comparisons:
            if (c.a, c.b) == (a, b):
                out.append(c)
            elif (c.a, c.b) == (b, a):
                out.append(c.flipped())
        return out

    def to_json(self) -> dict[str, Any]:
        """``{"judges", "columns", "test", "adjustment", "comparisons"}``."""
        return {
            "judges": list(self.judges),
            "columns": list(COLUMNS),
            "test": self.test,
            "adjustment": self.adjustment,
            "comparisons": [c.to_json() for c in self.comparisons],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairwiseTests:
        """Read :meth:`to_json` output."""
        return cls(
            judges=tuple(str(j) for j in data["judges"]),
            comparisons=tuple(PairwiseComparison.from_json(c) for c in data["comparisons"]),
            test=str(data["test"]),
            adjustment=str(data["adjustment"]),
        )


# --------------------------------------------------------------------------------------------
# The human ceiling
# --------------------------------------------------------------------------------------------

LOO_DEFINITION = (
    "for every case, every annotator who labelled it and every dimension, the target is the strict majority of "
    "the other annotators' labels (with two annotators, the other one's label); where the others have no strict "
    "majority (a tie) there is no target and nothing is counted. An annotator scores 1 when their own label equals "
    "the target; a judge scores 1 per order it was run in when its verdict equals the target (failures count wrong). "
    "Every figure is correct over counted, summed over cases, annotators and dimensions"
)
"""How judges and annotators are scored against the leave-one-out majorities (written into the file)."""
ALT_TEST_DEFINITION = (
    "the alternative annotator test (Calderon, Reichart and Dror, ACL 2025, arXiv 2501.10970). For each annotator "
    "in turn, on the cases they labelled: the annotator's alignment on a (case, dimension) is the share of the other "
    "annotators who gave the same label, the judge's the share of those others who gave its verdict (averaged over "
    "the orders it was run in; a failure matches nobody); the judge wins when its alignment is at least the "
    "annotator's, the annotator wins when theirs is at least the judge's (a tie counts for both). A one-sided "
    "one-sample t-test over cases (a case's dimensions averaged first) tests H0: judge's winning rate <= "
    "annotator's - epsilon; Benjamini-Yekutieli over the annotators at q = the analysis' alpha; omega (winning rate) "
    "= share of annotators whose H0 is rejected, rho (advantage probability) = the judge's winning rate averaged "
    "over annotators. Verdict: omega >= 0.5 -> can stand in for an annotator; fewer than 3 annotators with at "
    "least 30 cases -> too few cases to tell; else cannot when the mirror test (H0: judge's winning rate >= "
    "annotator's - epsilon, BY likewise) shows the judge worse for at least half of the annotators, or when an "
    "equally good judge would have passed with 80 % power; else too few cases to tell"
)
"""How the stand-in verdict is reached (written into the file)."""
ALT_TEST_MIN_ANNOTATORS = 3
"""Annotators the alt-test needs (with :data:`ALT_TEST_MIN_CASES` cases each): fewer give "too few cases to tell"."""
ALT_TEST_MIN_CASES = 30
"""Cases an annotator needs to enter the alt-test: the t-test's normal approximation (the paper's minimum)."""


@dataclass(frozen=True)
class AnnotatorComparison:
    """The alt-test against one left-out annotator: who represents the others better, judge or annotator."""

    annotator: str
    n_cases: int
    """cases of this annotator with an instance in the column (the t-test's n)"""
    judge_wins: float
    """the judge's winning rate against this annotator (rho_j; ties count as a win for both)"""
    annotator_wins: float
    """this annotator's winning rate against the judge"""
    p_value: float
    """one-sided t-test of H0: judge_wins <= annotator_wins - epsilon (NaN: not tested)"""
    judge_beats: bool
    """H0 rejected after Benjamini-Yekutieli over the tested annotators"""
    detectable_margin: float
    """the margin (winning-rate difference) this annotator's test detects with 80 % power at the level it needs"""
    judge_worse: bool = False
    """the mirror test rejected: the judge wins less often than this annotator by more than epsilon"""

    def to_json(self) -> dict[str, Any]:
        """Every field; p-values keep their size below 0.001."""
        return {
            "annotator": self.annotator,
            "n_cases": self.n_cases,
            "judge_wins": number(self.judge_wins),
            "annotator_wins": number(self.annotator_wins),
            "p_value": p_number(self.p_value),
            "judge_beats": self.judge_beats,
            "judge_worse": self.judge_worse,
            "detectable_margin": number(self.detectable_margin),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnnotatorComparison:
        """Read :meth:`to_json` output."""
        return cls(
            annotator=str(data["annotator"]),
            n_cases=int(data["n_cases"]),
            judge_wins=real(data["judge_wins"]),
            annotator_wins=real(data["annotator_wins"]),
            p_value=real(data["p_value"]),
            judge_beats=bool(data["judge_beats"]),
            detectable_margin=real(data["detectable_margin"]),
            judge_worse=bool(data.get("judge_worse", False)),
        )


@dataclass(frozen=True)
class AltTest:
    """Whether a judge can stand in for an annotator on one column (a dimension, or the six pooled).

    ``verdict`` is one of :data:`VERDICTS`, in the words every report prints; ``reason`` says why in
    a few words. See :data:`ALT_TEST_DEFINITION`.
    """

    verdict: str
    reason: str
    winning_rate: float
    """omega: share of the tested annotators the judge beats (NaN when not tested)"""
    advantage: float
    """rho: the judge's winning rate averaged over the tested annotators (NaN when none)"""
    n_annotators: int
    """annotators tested (each with at least :data:`ALT_TEST_MIN_CASES` cases)"""
    n_cases: int
    """cases with an instance for at least one tested annotator"""
    detectable_margin: float
    """the smallest margin the test detects with 80 % power for as many annotators as a pass needs; above
    epsilon, an equally good judge would usually fail, and a failure reads :data:`TOO_FEW`"""
    annotators: tuple[AnnotatorComparison, ...] = ()
    """every annotator, tested or not (``p_value`` NaN when not)"""

    @property
    def passed(self) -> bool:
        """Whether the judge can stand in for an annotator."""
        return self.verdict == CAN_STAND_IN

    def to_json(self) -> dict[str, Any]:
        """Every field, with the annotators."""
        return {
            "verdict": self.verdict,
            "reason": self.reason,
            "winning_rate": number(self.winning_rate),
            "advantage": number(self.advantage),
            "n_annotators": self.n_annotators,
            "n_cases": self.n_cases,
            "detectable_margin": number(self.detectable_margin),
            "annotators": [a.to_json() for a in self.annotators],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AltTest:
        """Read :meth:`to_json` output."""
        return cls(
            verdict=str(data["verdict"]),
            reason=str(data["reason"]),
            winning_rate=real(data["winning_rate"]),
            advantage=real(data["advantage"]),
            n_annotators=int(data["n_annotators"]),
            n_cases=int(data["n_cases"]),
            detectable_margin=real(data["detectable_margin"]),
            annotators=tuple(AnnotatorComparison.from_json(a) for a in data.get("annotators", ())),
        )


@dataclass(frozen=True)
class JudgeVerdict:
    """One judge's alt-test per dimension and pooled: can it stand in for one of the annotators?"""

    label: str
    run_id: str
    is_baseline: bool
    tests: ColumnTable[AltTest]

    @property
    def verdict(self) -> str:
        """The verdict on the six dimensions pooled (the leaderboard's column)."""
        return self.tests.pooled.verdict

    def to_json(self) -> dict[str, Any]:
        """``{"label", "run_id", "is_baseline", "verdict", "tests"}`` (``verdict`` repeats the pooled one)."""
        return {
            "label": self.label,
            "run_id": self.run_id,
            "is_baseline": self.is_baseline,
            "verdict": self.verdict,
            "tests": self.tests.to_json(AltTest.to_json),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JudgeVerdict:
        """Read :meth:`to_json` output."""
        return cls(
            label=str(data["label"]),
            run_id=str(data["run_id"]),
            is_baseline=bool(data["is_baseline"]),
            tests=ColumnTable.from_json(data["tests"], AltTest.from_json),
        )


@dataclass(frozen=True)
class PanelAgreement:
    """Agreement between the annotators on one set of cases, per dimension and pooled.

    Every estimate's ``n`` is the number of items with at least two ratings (cases, or
    (case, dimension) items for the pooled column, where every labelled dimension of a case is
    one item).
    """

    n_cases: int
    """cases with at least two annotations"""
    percent_agreement: ColumnTable[Estimate]
    """agreeing annotator pairs over all annotator pairs on the same item"""
    fleiss_kappa: ColumnTable[Estimate]
    krippendorff_alpha: ColumnTable[Estimate]
    """nominal, missing ratings allowed"""

    def to_json(self) -> dict[str, Any]:
        """``{"n_cases", "percent_agreement", "fleiss_kappa", "krippendorff_alpha"}``."""
        return {
            "n_cases": self.n_cases,
            "percent_agreement": _estimates_to_json(self.percent_agreement),
            "fleiss_kappa": _estimates_to_json(self.fleiss_kappa),
            "krippendorff_alpha": _estimates_to_json(self.krippendorff_alpha),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PanelAgreement:
        """Read :meth:`to_json` output."""
        return cls(
            n_cases=int(data["n_cases"]),
            percent_agreement=_estimates_from_json(data["percent_agreement"]),
            fleiss_kappa=_estimates_from_json(data["fleiss_kappa"]),
            krippendorff_alpha=_estimates_from_json(data["krippendorff_alpha"]),
        )


@dataclass(frozen=True)
class AnnotatorAgreement:
    """One annotator against the leave-one-out majority of the other annotators."""

    annotator: str
    n_cases: int
    """cases this annotator labelled"""
    vs_others: ColumnTable[Estimate]

    def to_json(self) -> dict[str, Any]:
        """``{"annotator", "n_cases", "vs_others"}``."""
        return {"annotator": self.annotator, "n_cases": self.n_cases, "vs_others": _estimates_to_json(self.vs_others)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnnotatorAgreement:
        """Read :meth:`to_json` output."""
        return cls(str(data["annotator"]), int(data["n_cases"]), _estimates_from_json(data["vs_others"]))


@dataclass(frozen=True)
class JudgeVsAnnotators:
    """One judge against the same leave-one-out majorities the annotators are measured against."""

    label: str
    run_id: str
    is_baseline: bool
    agreement: ColumnTable[Estimate]
    """share of (target, order) pairs where the judge's verdict equals the target"""
    gap: ColumnTable[Estimate]
    """``agreement`` minus the :data:`HUMAN_LABEL` row, paired (same cases in every resample); a gap
    whose interval holds 0 cannot tell the judge from an annotator"""
    normalised: ColumnTable[Estimate] | None = None
    """``agreement`` divided by the :data:`HUMAN_LABEL` row (1.0 = as often as an annotator), interval
    from the same resamples; None in files written before it existed"""

    def to_json(self) -> dict[str, Any]:
        """``{"label", "run_id", "is_baseline", "agreement", "gap", "normalised"}``."""
        return {
            "label": self.label,
            "run_id": self.run_id,
            "is_baseline": self.is_baseline,
            "agreement": _estimates_to_json(self.agreement),
            "gap": _estimates_to_json(self.gap),
            "normalised": None if self.normalised is None else _estimates_to_json(self.normalised),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JudgeVsAnnotators:
        """Read :meth:`to_json` output."""
        return cls(
            label=str(data["label"]),
            run_id=str(data["run_id"]),
            is_baseline=bool(data["is_baseline"]),
            agreement=_estimates_from_json(data["agreement"]),
            gap=_estimates_from_json(data["gap"]),
            normalised=None if data.get("normalised") is None else _estimates_from_json(data["normalised"]),
        )


@dataclass(frozen=True)
class HumanCeiling:
    """How well the annotators agree with each other, and every judge measured the same way.

    Present in an :class:`Analysis` whenever the cases carry per-annotator labels. ``human`` is
    the :data:`HUMAN_LABEL` row: every annotator against the majority of the *others*, pooled over
    annotators; ``judges`` puts each judge against exactly the same targets (see
    :data:`LOO_DEFINITION`), so a judge whose agreement reaches ``human`` agrees with the annotators
    as often as one of them does. Intervals come from the analysis' one case-bootstrap weight
    matrix (NaN without resamples).
    """

    annotators: tuple[str, ...]
    n_cases: int
    """cases with at least one annotation"""
    n_annotations: int
    """(case, annotator) pairs"""
    agreement: PanelAgreement
    """between the annotators, over every case"""
    by_group: Mapping[str, PanelAgreement]
    """group of :attr:`group_field` -> agreement between the annotators on its cases, groups sorted"""
    human: ColumnTable[Estimate]
    """the :data:`HUMAN_LABEL` row"""
    annotators_vs_others: tuple[AnnotatorAgreement, ...]
    judges: tuple[JudgeVsAnnotators, ...]
    """in the order of the analysis' runs"""
    group_field: str = STRATA
    label: str = HUMAN_LABEL
    targets: str = LOO_DEFINITION
    verdicts: tuple[JudgeVerdict, ...] = ()
    """per judge (the analysis' order), the alt-test: can it stand in for an annotator? (empty in files
    written before it existed)"""
    epsilon: float = DEFAULT_EPSILON
    """the alt-test's cost-benefit margin"""
    alt_test: str = ALT_TEST_DEFINITION

    def judge(self, label: str) -> JudgeVsAnnotators | None:
        """The judge with this label, or None."""
        return next((j for j in self.judges if j.label == label), None)

    def verdict(self, label: str) -> JudgeVerdict | None:
        """The alt-test of the judge with this label, or None."""
        return next((v for v in self.verdicts if v.label == label), None)

    def to_json(self) -> dict[str, Any]:
        """The ``human`` section of ``analysis.json``."""
        return {
            "label": self.label,
            "targets": self.targets,
            "annotators": list(self.annotators),
            "n_cases": self.n_cases,
            "n_annotations": self.n_annotations,
            "agreement": self.agreement.to_json(),
            "group_field": self.group_field,
            "by_group": {name: panel.to_json() for name, panel in self.by_group.items()},
            "human": _estimates_to_json(self.human),
            "annotators_vs_others": [a.to_json() for a in self.annotators_vs_others],
            "judges": [j.to_json() for j in self.judges],
            "alt_test": {
                "method": self.alt_test,
                "epsilon": self.epsilon,
                "min_annotators": ALT_TEST_MIN_ANNOTATORS,
                "min_cases": ALT_TEST_MIN_CASES,
                "verdicts": [v.to_json() for v in self.verdicts],
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HumanCeiling:
        """Read :meth:`to_json` output."""
        alt_test = data.get("alt_test") or {}
        return cls(
            annotators=tuple(str(a) for a in data["annotators"]),
            n_cases=int(data["n_cases"]),
            n_annotations=int(data["n_annotations"]),
            agreement=PanelAgreement.from_json(data["agreement"]),
            by_group={str(g): PanelAgreement.from_json(p) for g, p in sorted(data["by_group"].items())},
            human=_estimates_from_json(data["human"]),
            annotators_vs_others=tuple(AnnotatorAgreement.from_json(a) for a in data["annotators_vs_others"]),
            judges=tuple(JudgeVsAnnotators.from_json(j) for j in data["judges"]),
            group_field=str(data["group_field"]),
            label=str(data["label"]),
            targets=str(data["targets"]),
            verdicts=tuple(JudgeVerdict.from_json(v) for v in alt_test.get("verdicts", ())),
            epsilon=float(alt_test.get("epsilon", DEFAULT_EPSILON)),
            alt_test=str(alt_test.get("method", ALT_TEST_DEFINITION)),
        )


@dataclass(frozen=True)
class DatasetSummary:
    """The data every run of an analysis was made on."""

    name: str | None
    data_hash: str
    n_cases: int
    n_labelled: DimensionTable[int]
    groups: Mapping[str, Mapping[str, int]]
    """case field -> group -> number of cases"""
    expert_longer_rate: DimensionTable[float]
    """how often the labelled winner is the longer response (length ties left out)"""
    expert_coherence: Mapping[str, float]
    """dimension -> how often the labels' winner equals their overall winner"""
    mean_length: tuple[float, float]
    """mean characters of response_1 and response_2"""
    labels: LabelProvenance = UNKNOWN_LABELS
    """where the labels come from (every report states it in a banner)"""

    def to_json(self) -> dict[str, Any]:
        """The dataset section of ``analysis.json``."""
        return {
            "name": self.name,
            "data_hash": self.data_hash,
            "labels": self.labels.to_json(),
            "n_cases": self.n_cases,
            "n_labelled": self.n_labelled.to_json(int),
            "groups": {name: dict(sizes) for name, sizes in self.groups.items()},
            "expert_longer_rate": self.expert_longer_rate.to_json(number),
            "expert_coherence": _mapping_numbers(self.expert_coherence),
            "mean_length": _numbers(self.mean_length),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DatasetSummary:
        """Read :meth:`to_json` output."""
        first, second = data["mean_length"]
        return cls(
            name=data.get("name"),
            data_hash=str(data["data_hash"]),
            n_cases=int(data["n_cases"]),
            n_labelled=DimensionTable.from_json(data["n_labelled"], int),
            groups={
                str(name): {str(g): int(n) for g, n in sorted(sizes.items())} for name, sizes in data["groups"].items()
            },
            expert_longer_rate=DimensionTable.from_json(data["expert_longer_rate"], real),
            expert_coherence=_by_dimension(data["expert_coherence"]),
            mean_length=(real(first), real(second)),
            labels=LabelProvenance.from_json(data.get("labels")),
        )


MDE_DEFINITION = (
    "minimum detectable difference at 80 % power, two-sided alpha = 0.05: (z_0.975 + z_0.80) s / sqrt(n) = "
    "2.80 s / sqrt(n), where n is the number of cases counted in the column and s the between-case standard "
    "deviation of the linearised per-case agreement ((c_i - R m_i) / mean(m) for an agreement R = sum c / sum m), "
    "so that the correlation of a case's judgments (two orders, six dimensions) is in s. vs_chance: one judge's "
    "agreement (root mean square of s over judges); between_judges: the paired per-case difference of two judges "
    "(root mean square over pairs); vs_human: the paired per-case difference of a judge's and the annotators' "
    "leave-one-out agreement (root mean square over judges). Too small to rank: the largest pooled one exceeds "
    "the threshold"
)
"""How the detectable differences are computed (written into the file)."""
TOO_SMALL_TO_RANK = 0.10
"""The largest pooled detectable difference above which reports say the data set is too small to rank."""


@dataclass(frozen=True)
class Sensitivity:
    """The smallest differences an analysis can detect, per column (fractions).

    Says when the analysis' n cannot separate a judge from chance, from another judge or from the
    human row (80 % power, two-sided 5 %; see :data:`MDE_DEFINITION`). NaN where nothing can be
    computed (one judge: no pair; no per-annotator labels: no human row).
    """

    n_cases: ColumnTable[int]
    """cases counted in each column"""
    vs_chance: ColumnTable[float]
    between_judges: ColumnTable[float]
    vs_human: ColumnTable[float] | None
    """None without per-annotator labels"""
    by_group: Mapping[str, float] = field(default_factory=dict)
    """group of :attr:`group_field` -> detectable difference from chance, all dimensions pooled"""
    group_field: str = STRATA
    threshold: float = TOO_SMALL_TO_RANK
    method: str = MDE_DEFINITION

    @property
    def largest(self) -> float:
        """The largest pooled detectable difference (NaN when none is defined)."""
        values = [self.vs_chance.pooled, self.between_judges.pooled]
        if self.vs_human is not None:
            values.append(self.vs_human.pooled)
        defined = [v for v in values if not math.isnan(v)]
        return max(defined) if defined else math.nan

    @property
    def too_small_to_rank(self) -> bool:
        """Whether the whole data set is too small to rank judges or to set them beside the annotators."""
        return not math.isnan(self.largest) and self.largest > self.threshold

    def to_json(self) -> dict[str, Any]:
        """The ``sensitivity`` section of ``analysis.json``."""
        return {
            "n_cases": self.n_cases.to_json(int),
            "vs_chance": self.vs_chance.to_json(number),
            "between_judges": self.between_judges.to_json(number),
            "vs_human": None if self.vs_human is None else self.vs_human.to_json(number),
            "group_field": self.group_field,
            "by_group": _mapping_numbers(self.by_group),
            "largest": number(self.largest),
            "threshold": self.threshold,
            "too_small_to_rank": self.too_small_to_rank,
            "method": self.method,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sensitivity:
        """Read :meth:`to_json` output."""
        return cls(
            n_cases=ColumnTable.from_json(data["n_cases"], int),
            vs_chance=ColumnTable.from_json(data["vs_chance"], real),
            between_judges=ColumnTable.from_json(data["between_judges"], real),
            vs_human=None if data.get("vs_human") is None else ColumnTable.from_json(data["vs_human"], real),
            by_group={str(g): real(v) for g, v in sorted(data.get("by_group", {}).items())},
            group_field=str(data.get("group_field", STRATA)),
            threshold=float(data.get("threshold", TOO_SMALL_TO_RANK)),
            method=str(data.get("method", MDE_DEFINITION)),
        )


@dataclass(frozen=True)
class Settings:
    """How an analysis was computed."""

    confidence: float
    n_resamples: int
    """bootstrap resamples; 0 = point estimates only (no intervals, tests or tiers)"""
    seed: int
    alpha: float
    group_fields: tuple[str, ...]
    strata: str = STRATA
    interval: str = "case bootstrap, percentile"
    failures: str = "counted as wrong (accuracy); excluded from answered accuracy and agreement"
    epsilon: float = DEFAULT_EPSILON
    """the alt-test's cost-benefit margin (the stand-in verdicts of the human ceiling)"""

    def to_json(self) -> dict[str, Any]:
        """The settings section of ``analysis.json`` (with the dimension and column names)."""
        return {
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "alpha": self.alpha,
            "group_fields": list(self.group_fields),
            "strata": self.strata,
            "dimensions": list(DIMENSIONS),
            "columns": list(COLUMNS),
            "score": POOLED,
            "interval": self.interval,
            "failures": self.failures,
            "epsilon": self.epsilon,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Settings:
        """Read :meth:`to_json` output.

        Raises:
            ResultsFormatError: the file was made with other dimensions or another score column.
        """
        if list(data.get("dimensions", DIMENSIONS)) != list(DIMENSIONS) or data.get("score", POOLED) != POOLED:
            raise ResultsFormatError(
                f"analysis settings name dimensions {data.get('dimensions')} and score {data.get('score')!r}; "
                f"this version reads {list(DIMENSIONS)} and {POOLED!r}"
            )
        return cls(
            confidence=float(data["confidence"]),
            n_resamples=int(data["n_resamples"]),
            seed=int(data["seed"]),
            alpha=float(data["alpha"]),
            group_fields=tuple(str(f) for f in data["group_fields"]),
            strata=str(data.get("strata", STRATA)),
            interval=str(data["interval"]),
            failures=str(data["failures"]),
            epsilon=float(data.get("epsilon", DEFAULT_EPSILON)),
        )


@dataclass(frozen=True)
class Analysis:
    """Runs of one dataset analysed together: every table of a report (schema :data:`SCHEMA`)."""

    settings: Settings
    dataset: DatasetSummary
    runs: tuple[RunAnalysis, ...]
    """in the order the runs were given"""
    leaderboard: tuple[LeaderboardRow, ...]
    """ranked by score"""
    pairwise: PairwiseTests
    human: HumanCeiling | None = None
    """the human ceiling, when the data has per-annotator labels"""
    schema: str = field(default=SCHEMA)
    sensitivity: Sensitivity | None = None
    """the smallest differences this data can detect (None in files written before it existed)"""

    def run(self, key: str) -> RunAnalysis:
        """The run with this label, run id or judge spec.

        Raises:
            KeyError: no run matches (the message lists the labels), or a judge spec names several
                runs (the message lists their run ids: one is never picked silently).
        """
        for run in self.runs:
            if key in (run.label, run.run_id):
                return run
        matches = [run for run in self.runs if run.judge == key]
        if len(matches) == 1:
            return matches[0]
        if matches:
            listed = "; ".join(f"{r.run_id} ({r.label})" for r in matches)
            raise KeyError(f"{key!r} names {len(matches)} runs: {listed}; name one by its run id")
        raise KeyError(f"no run {key!r} in the analysis; runs: {', '.join(r.label for r in self.runs)}")

    def ranked_runs(self) -> list[RunAnalysis]:
        """The runs in leaderboard order."""
        by_label = {run.label: run for run in self.runs}
        return [by_label[row.label] for row in self.leaderboard]

    def to_json(self) -> dict[str, Any]:
        """The whole analysis as written to ``analysis.json``: fractions in [0, 1], NaN as null."""
        return {
            "schema": self.schema,
            "settings": self.settings.to_json(),
            "dataset": self.dataset.to_json(),
            "runs": [run.to_json() for run in self.runs],
            "leaderboard": [row.to_json() for row in self.leaderboard],
            "pairwise": self.pairwise.to_json(),
            "human": None if self.human is None else self.human.to_json(),
            "sensitivity": None if self.sensitivity is None else self.sensitivity.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Analysis:
        """Read ``analysis.json`` content.

        Raises:
            ResultsFormatError: the document is not an analysis of this schema.
        """
        _require(data, SCHEMA, "analysis", also=READABLE_SCHEMAS)
        settings = Settings.from_json(data["settings"])
        return cls(
            settings=settings,
            dataset=DatasetSummary.from_json(data["dataset"]),
            runs=tuple(RunAnalysis.from_json(run, settings.group_fields) for run in data["runs"]),
            leaderboard=tuple(LeaderboardRow.from_json(row) for row in data["leaderboard"]),
            pairwise=PairwiseTests.from_json(data["pairwise"]),
            human=None if data.get("human") is None else HumanCeiling.from_json(data["human"]),
            sensitivity=None if data.get("sensitivity") is None else Sensitivity.from_json(data["sensitivity"]),
        )


# --------------------------------------------------------------------------------------------
# Counts behind eval's point estimates (metrics.json)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccuracyCell:
    """Accuracy of one column over one set of requests, as counts."""

    n: int
    """requests counted (run, labelled)"""
    correct: int
    answered: int

    @property
    def accuracy(self) -> float:
        """Correct over counted requests; failures count as wrong. NaN when nothing is counted."""
        return self.correct / self.n if self.n else math.nan

    @property
    def answered_accuracy(self) -> float:
        """Correct over answered requests. NaN when nothing was answered."""
        return self.correct / self.answered if self.answered else math.nan

    @property
    def failure_rate(self) -> float:
        """Failed over counted requests. NaN when nothing is counted."""
        return (self.n - self.answered) / self.n if self.n else math.nan

    def to_json(self) -> dict[str, Any]:
        """Counts and the three ratios."""
        return {
            "n": self.n,
            "correct": self.correct,
            "answered": self.answered,
            "accuracy": number(self.accuracy),
            "answered_accuracy": number(self.answered_accuracy),
            "failure_rate": number(self.failure_rate),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AccuracyCell:
        """Read :meth:`to_json` output (the ratios are recomputed from the counts)."""
        return cls(int(data["n"]), int(data["correct"]), int(data["answered"]))


@dataclass(frozen=True)
class PositionCell:
    """Position measures of one column as counts."""

    both_answered: int
    """cases answered in both orders"""
    consistent: int
    """of those, the same source winner in both"""
    answered: int
    """answered requests"""
    picked_first: int
    """of those, the response shown first picked"""

    @property
    def consistency(self) -> float:
        """Same winner in both orders, over cases answered in both. NaN when none."""
        return self.consistent / self.both_answered if self.both_answered else math.nan

    @property
    def first_position_rate(self) -> float:
        """Picks of the response shown first, over answered requests. NaN when none."""
        return self.picked_first / self.answered if self.answered else math.nan

    def to_json(self) -> dict[str, Any]:
        """Counts and the two ratios."""
        return {
            "both_answered": self.both_answered,
            "consistent": self.consistent,
            "consistency": number(self.consistency),
            "answered": self.answered,
            "picked_first": self.picked_first,
            "first_position_rate": number(self.first_position_rate),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PositionCell:
        """Read :meth:`to_json` output."""
        counts = (data["both_answered"], data["consistent"], data["answered"], data["picked_first"])
        return cls(*(int(c) for c in counts))


def _cells_to_json(table: ColumnTable[AccuracyCell]) -> dict[str, Any]:
    return table.to_json(AccuracyCell.to_json)


def _cells_from_json(data: Mapping[str, Any]) -> ColumnTable[AccuracyCell]:
    return ColumnTable.from_json(data, AccuracyCell.from_json)


@dataclass(frozen=True)
class RunMetrics:
    """One run's point estimates with the counts behind them (eval's ``metrics.json``)."""

    n_cases: int
    orders: tuple[str, ...]
    accuracy: ColumnTable[AccuracyCell]
    by_order: Mapping[str, ColumnTable[AccuracyCell]]
    by: Mapping[str, Mapping[str, ColumnTable[AccuracyCell]]]
    """case field -> group -> accuracy, groups sorted by name"""
    macro: ColumnTable[float] | None
    """mean over organ systems (None when not grouped by organ system)"""
    position: ColumnTable[PositionCell]
    requests: RequestCounts
    failures: Mapping[str, int]

    @property
    def score(self) -> float:
        """The leaderboard score: accuracy pooled over the six dimensions."""
        return self.accuracy.pooled.accuracy

    def to_json(self) -> dict[str, Any]:
        """The run's ``metrics`` block of ``metrics.json`` (the accuracy table under ``dimensions``)."""
        return {
            "n_cases": self.n_cases,
            "orders": list(self.orders),
            "score": number(self.score),
            "dimensions": _cells_to_json(self.accuracy),
            "by_order": {order: _cells_to_json(table) for order, table in self.by_order.items()},
            "by": {f: {g: _cells_to_json(table) for g, table in groups.items()} for f, groups in self.by.items()},
            "macro": {} if self.macro is None else self.macro.to_json(number),
            "position": self.position.to_json(PositionCell.to_json),
            "requests": self.requests.to_json(),
            "failures": dict(self.failures),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunMetrics:
        """Read :meth:`to_json` output."""
        orders = tuple(str(o) for o in data["orders"])
        return cls(
            n_cases=int(data["n_cases"]),
            orders=orders,
            accuracy=_cells_from_json(data["dimensions"]),
            by_order={o: _cells_from_json(data["by_order"][o]) for o in orders if o in data["by_order"]},
            by={
                str(f): {str(g): _cells_from_json(t) for g, t in sorted(groups.items())}
                for f, groups in data["by"].items()
            },
            macro=ColumnTable.from_json(data["macro"], real) if data["macro"] else None,
            position=ColumnTable.from_json(data["position"], PositionCell.from_json),
            requests=RequestCounts.from_json(data["requests"]),
            failures=_failures_in_order(data["failures"]),
        )
