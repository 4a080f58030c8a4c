"""The typed results of medrewardbench, built and read by ``eval``, ``report``, ``leaderboard``, ``compare``, ``cv``.

Every record is a frozen dataclass; the ones written to files derive from
:class:`~medrewardbench.metrics.codec.JsonRecord`, whose ``to_json()`` and ``from_json()`` are one
codec driven by the fields' type hints and metadata (:mod:`medrewardbench.metrics.codec`: JSON
keys that differ from field names, p-values, what older files lack). In memory an undefined value
is NaN; in files it is null. Fractions are rounded to six decimals (:func:`number`; a p-value below
0.001 keeps four significant digits instead, :func:`p_number`), once, when a record is built
(:func:`fixed`), so ``from_json(to_json())`` gives back an equal record and reports render the
same text from a fresh analysis and from its file.

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

This module is longer than most (about 1,070 lines, half of them docstrings): it is the schema of
both documents, every record with what each field means, kept in one file so that a reader of a
file finds every key here; the writing and reading are the codec's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from medrewardbench.data.provenance import UNKNOWN_LABELS, LabelProvenance
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import ResultsFormatError
from medrewardbench.metrics.codec import (
    ORDER_BY_COUNT,
    ORDER_BY_DIMENSION,
    ORDER_BY_NAME,
    JsonRecord,
    decode_record,
    spec,
)
from medrewardbench.metrics.codec import P_DIGITS_BELOW as P_DIGITS_BELOW
from medrewardbench.metrics.codec import number as number
from medrewardbench.metrics.codec import p_number as p_number
from medrewardbench.metrics.codec import real as real

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
"""The case field that stratifies the bootstrap and defines macro averages."""

T = TypeVar("T")
U = TypeVar("U")

_DIMENSION_INDEX = {name: i for i, name in enumerate(DIMENSIONS)}


# --------------------------------------------------------------------------------------------
# Numbers at the JSON boundary
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# One run, analysed
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestCounts(JsonRecord):
    """Requests judged (run, with or without a verdict) and failed on every dimension."""

    judged: int
    failed: int


@dataclass(frozen=True)
class Agreement(JsonRecord):
    """Chance-corrected agreement with the labels per dimension, over answered requests."""

    kappa: DimensionTable[Estimate]
    ac1: DimensionTable[Estimate]


@dataclass(frozen=True)
class PositionBias(JsonRecord):
    """Same winner in both orders, and the share of picks of the response shown first."""

    consistency: ColumnTable[Estimate]
    first_position_rate: ColumnTable[Estimate]


@dataclass(frozen=True)
class LengthBias(JsonRecord):
    """How often the longer response is picked, and accuracy split by the labels' length choice."""

    longer_preference: ColumnTable[Estimate]
    accuracy_expert_longer: DimensionTable[Estimate] = field(metadata=spec(point_only=True))
    """accuracy on cases whose labelled winner is the longer response (point and n only)"""
    accuracy_expert_shorter: DimensionTable[Estimate] = field(metadata=spec(point_only=True))


@dataclass(frozen=True)
class GroupBreakdown(JsonRecord):
    """Accuracy per group of one case field, with the pooled (micro) and mean-of-groups (macro) rows."""

    groups: Mapping[str, ColumnTable[Estimate]] = field(metadata=spec(order=ORDER_BY_NAME))
    """group name -> accuracy, groups sorted by name"""
    micro: ColumnTable[Estimate]
    macro: ColumnTable[Estimate]
    """``n`` is the number of groups averaged"""


@dataclass(frozen=True)
class RunAnalysis(JsonRecord):
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
    failures: Mapping[str, int] = field(metadata=spec(order=ORDER_BY_COUNT))
    """failure reason -> count, most frequent first"""
    accuracy: ColumnTable[Estimate]
    answered_accuracy: ColumnTable[Estimate]
    failure_rate: ColumnTable[float]
    n_counted: ColumnTable[int]
    by_order: Mapping[str, ColumnTable[Estimate]] = field(metadata=spec(order_by="orders"))
    """order name -> accuracy in that order, for the orders run"""
    strict_accuracy: ColumnTable[Estimate]
    agreement: Agreement
    position: PositionBias
    length: LengthBias
    coherence: Mapping[str, float] = field(metadata=spec(order=ORDER_BY_DIMENSION))
    """dimension -> how often its winner equals the overall winner (every dimension but overall)"""
    groups: Mapping[str, GroupBreakdown]
    """case field -> accuracy per group, fields in the analysis' order"""
    tiers: ColumnTable[int] | None = None
    """tier per column (None without pairwise tests)"""

    @property
    def score(self) -> Estimate:
        """The leaderboard score: accuracy pooled over the six dimensions."""
        return self.accuracy.pooled

    def _json_extra(self) -> dict[str, Any]:
        return {"score": self.score.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], group_fields: Sequence[str] = ()) -> RunAnalysis:
        """Read :meth:`to_json` output; ``group_fields`` restores the order of the groups."""
        return decode_record(cls, data).in_group_order(group_fields)

    def in_group_order(self, group_fields: Sequence[str]) -> RunAnalysis:
        """The run with its groups in the order of ``group_fields`` (others after, by name)."""
        fields = [f for f in group_fields if f in self.groups] + sorted(set(self.groups) - set(group_fields))
        return replace(self, groups={f: self.groups[f] for f in fields})


# --------------------------------------------------------------------------------------------
# Across runs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderboardRow(JsonRecord):
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
    coverage_at_risk: float = math.nan
    """share of held-out verdicts accepted at risk alpha (:class:`SelectiveJudging`; NaN: not computed)"""

    @property
    def has_cost(self) -> bool:
        """Whether a cost was recorded for the run."""
        return not math.isnan(self.cost_usd)


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
class PairwiseComparison(JsonRecord):
    """Judge ``a`` against judge ``b`` on one column, on the labelled requests both were run on."""

    a: str
    b: str
    column: str = field(metadata=spec("dimension"))
    """a dimension, or :data:`POOLED`"""
    acc_a: float
    acc_b: float
    diff: float
    """acc_a - acc_b"""
    low: float
    high: float
    p_bootstrap: float = field(metadata=spec(p_value=True))
    """paired case bootstrap, two-sided"""
    p_bootstrap_holm: float = field(metadata=spec(p_value=True))
    significant: bool
    """Holm-adjusted bootstrap p-value below the analysis' alpha"""
    cases_a_better: int = field(metadata=spec(missing=0))
    """cases on which ``a`` got more of the column's requests right than ``b``"""
    cases_b_better: int = field(metadata=spec(missing=0))
    """cases on which ``b`` got more of them right"""
    p_case: float = field(metadata=spec(p_value=True, missing=math.nan))
    """case-level sign-flip test of the difference (the case is the unit): two-sided mid-p of its exact distribution"""
    p_case_holm: float = field(metadata=spec(p_value=True, missing=math.nan))
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


@dataclass(frozen=True)
class PairwiseTests(JsonRecord):
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

    def _json_extra(self) -> dict[str, Any]:
        return {"columns": list(COLUMNS)}


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
class AnnotatorComparison(JsonRecord):
    """The alt-test against one left-out annotator: who represents the others better, judge or annotator."""

    annotator: str
    n_cases: int
    """cases of this annotator with an instance in the column (the t-test's n)"""
    judge_wins: float
    """the judge's winning rate against this annotator (rho_j; ties count as a win for both)"""
    annotator_wins: float
    """this annotator's winning rate against the judge"""
    p_value: float = field(metadata=spec(p_value=True))
    """one-sided t-test of H0: judge_wins <= annotator_wins - epsilon (NaN: not tested)"""
    judge_beats: bool
    """H0 rejected after Benjamini-Yekutieli over the tested annotators"""
    detectable_margin: float
    """the margin (winning-rate difference) this annotator's test detects with 80 % power at the level it needs"""
    judge_worse: bool = False
    """the mirror test rejected: the judge wins less often than this annotator by more than epsilon"""


@dataclass(frozen=True)
class AltTest(JsonRecord):
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


@dataclass(frozen=True)
class JudgeVerdict(JsonRecord):
    """One judge's alt-test per dimension and pooled: can it stand in for one of the annotators?"""

    label: str
    run_id: str
    is_baseline: bool
    tests: ColumnTable[AltTest]

    @property
    def verdict(self) -> str:
        """The verdict on the six dimensions pooled (the leaderboard's column)."""
        return self.tests.pooled.verdict

    def _json_extra(self) -> dict[str, Any]:
        return {"verdict": self.verdict}


@dataclass(frozen=True)
class PanelAgreement(JsonRecord):
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


@dataclass(frozen=True)
class AnnotatorAgreement(JsonRecord):
    """One annotator against the leave-one-out majority of the other annotators."""

    annotator: str
    n_cases: int
    """cases this annotator labelled"""
    vs_others: ColumnTable[Estimate]


@dataclass(frozen=True)
class JudgeVsAnnotators(JsonRecord):
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


@dataclass(frozen=True)
class HumanCeiling(JsonRecord):
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
    by_group: Mapping[str, PanelAgreement] = field(metadata=spec(order=ORDER_BY_NAME))
    """group of :attr:`group_field` -> agreement between the annotators on its cases, groups sorted"""
    human: ColumnTable[Estimate]
    """the :data:`HUMAN_LABEL` row"""
    annotators_vs_others: tuple[AnnotatorAgreement, ...]
    judges: tuple[JudgeVsAnnotators, ...]
    """in the order of the analysis' runs"""
    group_field: str = STRATA
    label: str = HUMAN_LABEL
    targets: str = LOO_DEFINITION
    verdicts: tuple[JudgeVerdict, ...] = field(default=(), metadata=spec(("alt_test", "verdicts")))
    """per judge (the analysis' order), the alt-test: can it stand in for an annotator? (empty in files
    written before it existed)"""
    epsilon: float = field(default=DEFAULT_EPSILON, metadata=spec(("alt_test", "epsilon"), exact=True))
    """the alt-test's cost-benefit margin"""
    alt_test: str = field(default=ALT_TEST_DEFINITION, metadata=spec(("alt_test", "method")))

    def _json_extra(self) -> dict[str, Any]:
        return {"alt_test": {"min_annotators": ALT_TEST_MIN_ANNOTATORS, "min_cases": ALT_TEST_MIN_CASES}}

    def judge(self, label: str) -> JudgeVsAnnotators | None:
        """The judge with this label, or None."""
        return next((j for j in self.judges if j.label == label), None)

    def verdict(self, label: str) -> JudgeVerdict | None:
        """The alt-test of the judge with this label, or None."""
        return next((v for v in self.verdicts if v.label == label), None)


@dataclass(frozen=True)
class DatasetSummary(JsonRecord):
    """The data every run of an analysis was made on."""

    name: str | None
    data_hash: str
    n_cases: int
    n_labelled: DimensionTable[int]
    groups: Mapping[str, Mapping[str, int]] = field(metadata=spec(order=ORDER_BY_NAME))
    """case field -> group -> number of cases"""
    expert_longer_rate: DimensionTable[float]
    """how often the labelled winner is the longer response (length ties left out)"""
    expert_coherence: Mapping[str, float] = field(metadata=spec(order=ORDER_BY_DIMENSION))
    """dimension -> how often the labels' winner equals their overall winner"""
    mean_length: tuple[float, float]
    """mean characters of response_1 and response_2"""
    labels: LabelProvenance = UNKNOWN_LABELS
    """where the labels come from (every report states it in a banner)"""


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
class Sensitivity(JsonRecord):
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
    by_group: Mapping[str, float] = field(default_factory=dict, metadata=spec(order=ORDER_BY_NAME))
    """group of :attr:`group_field` -> detectable difference from chance, all dimensions pooled"""
    group_field: str = STRATA
    threshold: float = field(default=TOO_SMALL_TO_RANK, metadata=spec(exact=True))
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

    def _json_extra(self) -> dict[str, Any]:
        return {"largest": number(self.largest), "too_small_to_rank": self.too_small_to_rank}


@dataclass(frozen=True)
class Settings(JsonRecord):
    """How an analysis was computed."""

    confidence: float = field(metadata=spec(exact=True))
    n_resamples: int
    """bootstrap resamples; 0 = point estimates only (no intervals, tests or tiers)"""
    seed: int
    alpha: float = field(metadata=spec(exact=True))
    group_fields: tuple[str, ...]
    strata: str = STRATA
    interval: str = "case bootstrap, percentile"
    failures: str = "counted as wrong (accuracy); excluded from answered accuracy and agreement"
    epsilon: float = field(default=DEFAULT_EPSILON, metadata=spec(exact=True))
    """the alt-test's cost-benefit margin (the stand-in verdicts of the human ceiling)"""

    def _json_extra(self) -> dict[str, Any]:
        return {"dimensions": list(DIMENSIONS), "columns": list(COLUMNS), "score": POOLED}

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
        return decode_record(cls, data)


# --------------------------------------------------------------------------------------------
# Calibration and selective judging (metrics.calibration, metrics.selective)
# --------------------------------------------------------------------------------------------

SELECTIVE_METHOD = (
    "Learn then Test: thresholds fixed from the held-out confidences, tested on the calibration cases from the "
    "most confident down (fixed sequence at level delta; exact binomial p-value per dimension, betting p-value on "
    "cases for the pooled column); the lowest threshold rejected is chosen, so P(risk > alpha) <= delta"
)
"""How the abstention threshold is chosen (:mod:`medrewardbench.metrics.selective`)."""
NO_CONFIDENCE = "the judge has no confidence (one order and no probability): nothing to calibrate or abstain on"
"""The note of a judge whose confidence source is ``"none"``."""


@dataclass(frozen=True)
class ReliabilityBin(JsonRecord):
    """One bin of a reliability diagram: verdicts with confidence in [low, high)."""

    low: float = field(metadata=spec(exact=True))
    high: float = field(metadata=spec(exact=True))
    n: int
    confidence: float
    """mean confidence of the bin's verdicts (NaN when empty)"""
    accuracy: float
    """their accuracy (a tie counts half)"""


@dataclass(frozen=True)
class Calibration(JsonRecord):
    """Calibration of one judge's confidences (:mod:`medrewardbench.metrics.calibration`), per column."""

    n: ColumnTable[int]
    """labelled verdicts counted"""
    ece: ColumnTable[Estimate]
    """expected calibration error, equal-width bins on [0.5, 1]"""
    ece_equal_mass: ColumnTable[Estimate]
    brier: ColumnTable[Estimate]
    """Brier score of p(response_1 better) against the label"""
    reliability: tuple[ReliabilityBin, ...]
    """the pooled column's equal-width reliability bins"""


@dataclass(frozen=True)
class SelectiveColumn(JsonRecord):
    """Abstention at risk alpha on one column: the threshold from the calibration cases, measured on held-out ones."""

    threshold: float
    """accept verdicts with confidence >= this; NaN when no threshold qualifies (nothing accepted)"""
    coverage: float
    """share of held-out labelled verdicts accepted"""
    accepted: int
    n: int
    """held-out labelled verdicts"""
    risk: Estimate
    """realised error among accepted held-out verdicts, with its interval"""
    calibration_accepted: int
    calibration_errors: int
    p_value: float = field(metadata=spec(p_value=True))
    """the chosen threshold's p-value (NaN when none qualifies)"""
    curve_coverage: tuple[float, ...]
    """the held-out risk-coverage curve, most confident first"""
    curve_risk: tuple[float, ...]

    @property
    def qualified(self) -> bool:
        """Whether some threshold was shown safe."""
        return not math.isnan(self.threshold)


@dataclass(frozen=True)
class JudgeSelective(JsonRecord):
    """One judge's calibration and abstention; None where the judge has no confidence (``note`` says so)."""

    label: str
    run_id: str
    source: str
    """where the confidences come from: probability, order agreement, none"""
    calibration: Calibration | None
    recalibrated: Calibration | None
    """cross-fitted recalibration (None when not asked for)"""
    abstention: ColumnTable[SelectiveColumn] | None
    note: str = ""


@dataclass(frozen=True)
class SelectiveJudging(JsonRecord):
    """Calibration and abstention with a guarantee, for every judge (settings, then one record per run)."""

    alpha: float = field(metadata=spec(exact=True))
    """the largest error rate among accepted verdicts"""
    delta: float = field(metadata=spec(exact=True))
    """the chance the guarantee fails"""
    recalibration: str
    """none | isotonic | temperature (cross-fitted)"""
    seed: int
    calibration_fraction: float = field(metadata=spec(exact=True))
    folds: int
    calibration_cases: int
    heldout_cases: int
    judges: tuple[JudgeSelective, ...]
    method: str = SELECTIVE_METHOD

    def judge(self, label: str) -> JudgeSelective | None:
        """The record of the run with this label, if any."""
        return next((j for j in self.judges if j.label == label), None)


@dataclass(frozen=True)
class Analysis(JsonRecord):
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
    schema: str = field(default=SCHEMA, metadata=spec(read=False))
    """the schema this version writes (a file of an older readable schema reads as this one)"""
    sensitivity: Sensitivity | None = None
    """the smallest differences this data can detect (None in files written before it existed)"""
    selective: SelectiveJudging | None = None
    """calibration and abstention (None in files written before it existed, and without labels)"""

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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Analysis:
        """Read ``analysis.json`` content (schemas :data:`READABLE_SCHEMAS`).

        Raises:
            ResultsFormatError: the document is not an analysis of a readable schema.
        """
        _require(data, SCHEMA, "analysis", also=READABLE_SCHEMAS)
        analysis = decode_record(cls, data)
        fields = analysis.settings.group_fields
        return replace(analysis, runs=tuple(run.in_group_order(fields) for run in analysis.runs))


# --------------------------------------------------------------------------------------------
# Counts behind eval's point estimates (metrics.json)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccuracyCell(JsonRecord):
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

    def _json_extra(self) -> dict[str, Any]:
        # the three ratios are written for readers of the file; reading recomputes them from the counts
        return {
            "accuracy": number(self.accuracy),
            "answered_accuracy": number(self.answered_accuracy),
            "failure_rate": number(self.failure_rate),
        }


@dataclass(frozen=True)
class PositionCell(JsonRecord):
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

    def _json_extra(self) -> dict[str, Any]:
        return {"consistency": number(self.consistency), "first_position_rate": number(self.first_position_rate)}


@dataclass(frozen=True)
class RunMetrics(JsonRecord):
    """One run's point estimates with the counts behind them (eval's ``metrics.json``)."""

    n_cases: int
    orders: tuple[str, ...]
    accuracy: ColumnTable[AccuracyCell] = field(metadata=spec("dimensions"))
    by_order: Mapping[str, ColumnTable[AccuracyCell]] = field(metadata=spec(order_by="orders"))
    by: Mapping[str, Mapping[str, ColumnTable[AccuracyCell]]] = field(metadata=spec(order=ORDER_BY_NAME))
    """case field -> group -> accuracy, groups sorted by name"""
    macro: ColumnTable[float] | None = field(metadata=spec(empty_as_none=True))
    """mean over organ systems (None when not grouped by organ system)"""
    position: ColumnTable[PositionCell]
    requests: RequestCounts
    failures: Mapping[str, int] = field(metadata=spec(order=ORDER_BY_COUNT))

    @property
    def score(self) -> float:
        """The leaderboard score: accuracy pooled over the six dimensions."""
        return self.accuracy.pooled.accuracy

    def _json_extra(self) -> dict[str, Any]:
        return {"score": number(self.score)}
