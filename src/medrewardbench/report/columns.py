"""Declarative table columns: what a column shows, and how Markdown, HTML and the spreadsheet write it.

A :class:`Column` says what one column of a table shows: its machine name (``key``: the
spreadsheet's header and the HTML template's field), the header Markdown and HTML print, how to
get the value from a row (``value``), what kind of value it is (``kind``: decides how each format
writes it: text with an interval in Markdown and HTML, the number and its bounds in the
spreadsheet) and in which formats it appears (``shown_in``). A :class:`Table` holds rows and their
columns. The tables themselves are listed in :mod:`~medrewardbench.report.tables` and
:mod:`~medrewardbench.report.human`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from medrewardbench.metrics.results import Estimate, number, p_number
from medrewardbench.report.format import (
    MISSING,
    coefficient,
    coefficient_estimate,
    dollars,
    estimate,
    p_value,
    percent,
    ratio,
    verdict,
)

R = TypeVar("R")

MD = "md"
HTML = "html"
XLSX = "xlsx"
EVERYWHERE: frozenset[str] = frozenset({MD, HTML, XLSX})
PAGES: frozenset[str] = frozenset({MD, HTML})
"""Markdown and HTML: the formats that print text."""
SHEET: frozenset[str] = frozenset({XLSX})
PERCENT_FORMAT = "0.0%"
RATIO_FORMAT = "0.00"


class Kind(Enum):
    """What a column holds; each format writes each kind its own way."""

    TEXT = "text"
    """text (Markdown escapes it; left-aligned)"""
    JUDGE = "judge"
    """a :class:`Judge` (Markdown marks baselines and the human row)"""
    GROUP = "group"
    """a :class:`Group`: a group's name, marked when it rests on too few cases"""
    COUNT = "count"
    """an integer"""
    TIER = "tier"
    """a tier number, or None (printed ``–``)"""
    FLAG = "flag"
    """a bool (spreadsheet only)"""
    PERCENT = "percent"
    """a fraction, printed in percent"""
    ESTIMATE = "estimate"
    """an :class:`Estimate` or None, printed in percent with its interval"""
    SIGNED = "signed"
    """an :class:`Estimate` of a difference, printed in points with signs and its interval"""
    POINT = "point"
    """an :class:`Estimate` or None, printed in percent without its interval"""
    COUNTED = "counted"
    """an :class:`Estimate`, printed ``"61.8 (34)"``: point in percent, then n"""
    TIERED = "tiered"
    """a :class:`Tiered` estimate: an interval and the tier on that dimension"""
    COEFFICIENT = "coefficient"
    """a coefficient (two decimals), a float or an :class:`Estimate`'s point"""
    COEFFICIENT_ESTIMATE = "coefficient_estimate"
    """an :class:`Estimate` of a coefficient, printed with its interval"""
    RATIO = "ratio"
    """an :class:`Estimate` of a ratio (two decimals) or None"""
    P_VALUE = "p_value"
    """a :class:`PValue`: three decimals, or below the floor its resamples can resolve"""
    DOLLARS = "dollars"
    """dollars, or NaN when unknown"""
    VERDICT = "verdict"
    """an :class:`AltTest`: the verdict with its winning rate"""
    REASONS = "reasons"
    """(reason, count) pairs, most frequent first"""


LEFT: frozenset[Kind] = frozenset({Kind.TEXT, Kind.JUDGE, Kind.GROUP, Kind.VERDICT, Kind.REASONS})
"""Kinds aligned left in Markdown; every other kind is a number, aligned right."""


@dataclass(frozen=True)
class Judge:
    """A judge's name in a table: baselines and the human row are marked by each format."""

    label: str
    is_baseline: bool = False
    human: bool = False


@dataclass(frozen=True)
class Group:
    """A group's name (an organ system); ``few``: its numbers rest on one to three cases."""

    name: str
    few: bool = False


@dataclass(frozen=True)
class PValue:
    """A p-value and the bootstrap resamples behind it (None: from an exact distribution)."""

    p: float
    resamples: int | None = None


@dataclass(frozen=True)
class Tiered:
    """An estimate and the judge's tier on that dimension (None without tiers)."""

    estimate: Estimate
    tier: int | None


@dataclass(frozen=True)
class Column(Generic[R]):
    """One column of a table.

    ``bounds`` names the spreadsheet columns that hold an estimate's interval (``key`` holds its
    point); ``count`` names the one that holds a :attr:`Kind.COUNTED` estimate's n.
    """

    key: str
    header: str
    value: Callable[[R], Any]
    kind: Kind = Kind.TEXT
    shown_in: frozenset[str] = EVERYWHERE
    bounds: tuple[str, str] | None = None
    count: str | None = None
    blank: str = MISSING
    """what Markdown and HTML print for a missing value"""
    strong: bool = False
    """Markdown prints the value in bold"""

    def text(self, value: Any) -> str:
        """A value of this column as Markdown and HTML print it (before Markdown's escaping)."""
        return self.blank if value is None else text(self.kind, value)

    def cell_keys(self) -> list[str]:
        """The spreadsheet columns this column fills."""
        return [self.key, *(self.bounds or ()), *([self.count] if self.count else [])]


@dataclass(frozen=True)
class Table(Generic[R]):
    """Rows and the columns that show them; ``footer`` holds rows given as key -> value (the human row)."""

    name: str
    columns: tuple[Column[R], ...]
    rows: tuple[R, ...]
    footer: tuple[dict[str, Any], ...] = ()

    def shown(self, where: str) -> list[Column[R]]:
        """The columns one format shows, in order."""
        return [c for c in self.columns if where in c.shown_in]

    def values(self, where: str) -> list[list[Any]]:
        """The values of every row, then of the footer rows (None where a footer row has none)."""
        columns = self.shown(where)
        rows = [[c.value(row) for c in columns] for row in self.rows]
        return rows + [[extra.get(c.key) for c in columns] for extra in self.footer]

    def records(self, where: str = HTML) -> list[dict[str, str]]:
        """Every row as key -> text (the HTML template's fields)."""
        columns = self.shown(where)
        return [{c.key: c.text(c.value(row)) for c in columns} for row in self.rows]


# --------------------------------------------------------------------------------------------
# How each kind reads
# --------------------------------------------------------------------------------------------


def text(kind: Kind, value: Any) -> str:
    """A value as Markdown and HTML print it (before Markdown's escaping).

    Args:
        kind: the column's kind.
        value: the value its getter returned (None prints ``–`` for numbers).

    Returns:
        The text.
    """
    if kind in (Kind.ESTIMATE, Kind.TIERED):
        return estimate(value.estimate if isinstance(value, Tiered) else value)
    if kind is Kind.SIGNED:
        return estimate(value, signed=True)
    if kind is Kind.PERCENT:
        return percent(value)
    if kind is Kind.POINT:
        return MISSING if value is None else percent(value.point)
    if kind is Kind.COUNTED:
        return f"{percent(value.point)} ({value.n})"
    if kind is Kind.COEFFICIENT:
        return coefficient(value.point if isinstance(value, Estimate) else value)
    if kind is Kind.COEFFICIENT_ESTIMATE:
        return MISSING if value is None else coefficient_estimate(value)
    if kind is Kind.RATIO:
        return ratio(value)
    if kind is Kind.DOLLARS:
        return dollars(value)
    if kind is Kind.P_VALUE:
        return p_value(value.p, resamples=value.resamples)
    if kind is Kind.TIER:
        return str(value) if value else MISSING
    if kind is Kind.VERDICT:
        return verdict(value)
    if kind is Kind.JUDGE:
        return str(value.label)
    if kind is Kind.GROUP:
        return str(value.name)
    if kind is Kind.REASONS:
        return "; ".join(f"{reason} ({n})" for reason, n in value)
    return MISSING if value is None else str(value)


def cells(column: Column[Any], value: Any) -> list[Any]:
    """A value as the spreadsheet writes it: one cell, or the point and its bounds or its n.

    Args:
        column: the column.
        value: the value its getter returned.

    Returns:
        The cells (numbers rounded as the files write them; None for missing).
    """
    kind = column.kind
    if kind in (Kind.ESTIMATE, Kind.SIGNED, Kind.POINT, Kind.RATIO, Kind.COUNTED, Kind.COEFFICIENT_ESTIMATE):
        if value is None:
            return [None] * len(column.cell_keys())
        out = [number(value.point)]
        if column.bounds:
            out += [number(value.low), number(value.high)]
        if column.count:
            out.append(value.n)
        return out
    if kind is Kind.JUDGE:
        return [value.label]
    if kind is Kind.REASONS:
        return [text(kind, value)]
    if kind is Kind.GROUP:
        return [value.name]
    if kind is Kind.TIER:
        return [value if isinstance(value, int) else None]
    if kind is Kind.P_VALUE:
        return [p_number(value.p)]
    if kind in (Kind.PERCENT, Kind.COEFFICIENT, Kind.DOLLARS):
        return [None if value is None else number(value)]
    return [value]


def number_formats(column: Column[Any]) -> list[str | None]:
    """The spreadsheet's number format of each cell a column fills (None: the default; an n has none)."""
    shown = None
    if column.kind in (Kind.ESTIMATE, Kind.POINT, Kind.PERCENT, Kind.COUNTED):
        shown = PERCENT_FORMAT
    elif column.kind is Kind.RATIO:
        shown = RATIO_FORMAT
    return [shown, *([shown] * len(column.bounds or ())), *([None] if column.count else [])]


def per_dimension(get: Callable[[R, str], Any], dimension: str) -> Callable[[R], Any]:
    """A column's getter for one dimension: ``get(row, dimension)``."""
    return lambda row: get(row, dimension)
