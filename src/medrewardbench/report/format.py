"""How numbers read in every report, table and chart: percentages, intervals, estimates, p-values.

Written once, used by the terminal tables, the Markdown and HTML reports, ``compare`` and ``cv``.
Fractions in [0, 1] print as percentages with one decimal; an estimate reads
``"69.6 [60.3, 78.4]"``; a p-value reads ``"0.023"``, or ``"<0.001"`` below one in a thousand;
a missing value (None or NaN) prints as :data:`MISSING`.
"""

from __future__ import annotations

import math

from medrewardbench.metrics.results import Estimate

METRIC = "agreement with the labels"
"""What the headline metric is called in every table, plot and caption. "Accuracy" is a dimension
(and the reference layout's ``{dimension}_acc`` column names), never the metric's name."""
MISSING = "–"
"""What a missing number prints as."""
P_FLOOR = 0.001
"""p-values below this print as ``"<0.001"``."""


def missing(value: float | None) -> bool:
    """Whether a number is absent: None or NaN."""
    return value is None or math.isnan(value)


def optional(value: float) -> float | None:
    """None for NaN, else the value (for code that marks absent numbers with None, such as charts)."""
    return None if math.isnan(value) else value


def percent(value: float | None, digits: int = 1, *, blank: str = MISSING) -> str:
    """A fraction as a percentage without the sign: ``0.6958 -> "69.6"``.

    Args:
        value: a fraction, None or NaN.
        digits: decimals.
        blank: what to print for a missing value.

    Returns:
        The text.
    """
    if value is None or math.isnan(value):
        return blank
    return f"{100 * value:.{digits}f}"


def signed_percent(value: float | None, digits: int = 1, *, blank: str = MISSING) -> str:
    """A difference of fractions in percentage points with its sign: ``0.184 -> "+18.4"``.

    Args:
        value: a difference of fractions, None or NaN.
        digits: decimals.
        blank: what to print for a missing value.

    Returns:
        The text.
    """
    if value is None or math.isnan(value):
        return blank
    return f"{100 * value:+.{digits}f}"


def interval(low: float, high: float, digits: int = 1, *, signed: bool = False) -> str:
    """An interval of fractions in percent, ``"[60.3, 78.4]"``; empty when a bound is missing.

    Args:
        low: lower bound (fraction).
        high: upper bound (fraction).
        digits: decimals.
        signed: print the signs (for differences).

    Returns:
        The text.
    """
    if missing(low) or missing(high):
        return ""
    show = signed_percent if signed else percent
    return f"[{show(low, digits)}, {show(high, digits)}]"


def estimate(value: Estimate | None, digits: int = 1, *, signed: bool = False, blank: str = MISSING) -> str:
    """An estimate in percent with its interval: ``"69.6 [60.3, 78.4]"``, the point alone without one.

    Args:
        value: the estimate, or None.
        digits: decimals.
        signed: print signs (for a difference between judges, in points).
        blank: what to print when the point is missing.

    Returns:
        The text.
    """
    if value is None or not value.defined:
        return blank
    point = signed_percent(value.point, digits) if signed else percent(value.point, digits)
    bounds = interval(value.low, value.high, digits, signed=signed)
    return f"{point} {bounds}" if bounds else point


def coefficient(value: float | None, *, blank: str = MISSING) -> str:
    """A coefficient such as kappa with two decimals, never ``"-0.00"``.

    Args:
        value: the coefficient, None or NaN.
        blank: what to print for a missing value.

    Returns:
        The text.
    """
    if value is None or math.isnan(value):
        return blank
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def coefficient_estimate(value: Estimate, *, blank: str = MISSING) -> str:
    """A coefficient with its interval: ``"0.53 [0.40, 0.66]"``.

    Args:
        value: the estimate.
        blank: what to print when the point is missing.

    Returns:
        The text.
    """
    if not value.defined:
        return blank
    if not value.has_interval:
        return coefficient(value.point)
    return f"{coefficient(value.point)} [{coefficient(value.low)}, {coefficient(value.high)}]"


def fraction(value: float | None, digits: int = 4, *, blank: str = MISSING) -> str:
    """A fraction as a fraction, rounded half to even: ``0.61764 -> "0.6176"`` (the reference layout).

    Args:
        value: the fraction, None or NaN.
        digits: decimals.
        blank: what to print for a missing value.

    Returns:
        The text.
    """
    if value is None or math.isnan(value):
        return blank
    return f"{round(value, digits):.{digits}f}"


def p_value(value: float | None, *, resamples: int | None = None, blank: str = MISSING) -> str:
    """A p-value with three decimals, or ``"<0.001"`` below :data:`P_FLOOR`.

    A bootstrap p-value cannot resolve less than one resample in ``resamples``: with fewer than
    1,000 resamples the floor is ``1 / resamples`` (``"<0.0033"`` for 300).

    Args:
        value: the p-value, None or NaN.
        resamples: the bootstrap resamples behind it; None for a p-value from an exact distribution
            (the case-level sign-flip test).
        blank: what to print for a missing value.

    Returns:
        The text.
    """
    if value is None or math.isnan(value):
        return blank
    floor = max(P_FLOOR, 1.0 / resamples) if resamples else P_FLOOR
    return f"<{floor:.2g}" if value < floor else f"{value:.3f}"


def dollars(value: float | None, *, blank: str = MISSING) -> str:
    """Dollars with cents, and more digits below a cent: ``12.3456 -> "$12.35"``, ``0.00042 -> "$0.00042"``.

    Args:
        value: dollars, None or NaN.
        blank: what to print for a missing value.

    Returns:
        The text.
    """
    if value is None or missing(value):
        return blank
    if value == 0 or abs(value) >= 0.01:
        return f"${value:,.2f}"
    return f"${value:.2g}"
