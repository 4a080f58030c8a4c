"""How numbers read in every report, table and chart: percentages, intervals, estimates, p-values.

Written once, used by the terminal tables, the Markdown and HTML reports, ``compare`` and ``cv``.
Fractions in [0, 1] print as percentages with one decimal; an estimate reads
``"69.6 [60.3, 78.4]"``; a p-value reads ``"0.023"``, or ``"<0.001"`` below one in a thousand;
a missing value (None or NaN) prints as :data:`MISSING`.
"""

from __future__ import annotations

import math

from medrewardbench.metrics.results import POOLED, AltTest, Estimate, Sensitivity

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
    return _without_negative_zero(f"{100 * value:.{digits}f}")


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
    return _without_negative_zero(f"{100 * value:+.{digits}f}", positive="+")


def _without_negative_zero(text: str, *, positive: str = "") -> str:
    """A number's text without a minus sign on a zero: ``"-0.0"`` as ``"0.0"`` (``"+0.0"`` signed).

    A zero difference read the other way round is -0.0 (``compare B A`` of two identical runs reads
    the stored A-B difference negated), and a tiny negative value rounds to a zero too.
    """
    if text.startswith("-") and not text.strip("-0."):
        return positive + text[1:]
    return text


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
    return _without_negative_zero(f"{value:.2f}")


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


# --------------------------------------------------------------------------------------------
# Small-sample honesty and the stand-in verdict
# --------------------------------------------------------------------------------------------

FEW_CASES = 4
"""Cells (an organ system on a dimension) resting on fewer cases than this are marked "n<4" and not
compared: one to three cases say nothing about a judge."""
FEW_MARK = f"n<{FEW_CASES}"
"""How such a cell is marked."""
POWER_NOTE = "80 % power, two-sided 5 %"
STAND_IN_METHOD = (
    "For each annotator in turn, a one-sided paired t-test over cases asks whether the judge agrees with the other "
    "annotators at least as often as that annotator does, allowing the judge a cost-benefit margin of ε = {epsilon} "
    "in winning probability, and the annotators' tests are corrected together (Benjamini–Yekutieli, q = {q}): the "
    "alternative annotator test of Calderon, Reichart and Dror (ACL 2025). A judge can stand in for an annotator "
    "when it wins against at least half of them; when it does not, the verdict is “cannot” if it is shown worse than "
    "half of them by more than ε or if a judge as good as an annotator would have passed with these cases (80 % "
    "power), and “too few cases to tell” otherwise or with fewer than 3 annotators who labelled at least 30 cases "
    "each."
)
"""The method in two sentences (``{epsilon}`` and ``{q}`` are filled in)."""


def points(value: float | None, *, blank: str = MISSING) -> str:
    """A detectable difference (a fraction) in whole percentage points: ``0.274 -> "27"``.

    Args:
        value: a fraction, None or NaN.
        blank: what to print for a missing value.

    Returns:
        The text.
    """
    if value is None or math.isnan(value):
        return blank
    return f"{max(1, round(100 * value))}"


def ratio(value: Estimate | None, *, blank: str = MISSING) -> str:
    """The normalised ceiling (judge over human) with two decimals: ``"0.87 [0.80, 0.95]"``."""
    return blank if value is None else coefficient_estimate(value, blank=blank)


def detectable_sentence(sensitivity: Sensitivity | None, column: str = POOLED, *, human: bool = True) -> str:
    """What the cases of a table can detect: ``"With 34 cases, differences under 14 points from chance, ..."``.

    Args:
        sensitivity: the analysis' detectable differences (None: files written before they existed).
        column: a dimension or the pooled column.
        human: mention the human row (when the table sets judges beside it).

    Returns:
        One sentence, or "" when nothing can be said.
    """
    if sensitivity is None:
        return ""
    parts = []
    chance = sensitivity.vs_chance[column]
    between = sensitivity.between_judges[column]
    if not math.isnan(chance):
        parts.append(f"{points(chance)} points from chance")
    if not math.isnan(between):
        parts.append(f"{points(between)} points between two judges")
    if human and sensitivity.vs_human is not None and not math.isnan(sensitivity.vs_human[column]):
        parts.append(f"{points(sensitivity.vs_human[column])} points from the human row")
    if not parts:
        return ""
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]
    n = sensitivity.n_cases[column]
    return f"With {n} case{'s' if n != 1 else ''}, differences under {listed} cannot be detected ({POWER_NOTE})."


def small_sample_banner(sensitivity: Sensitivity | None) -> str | None:
    """The warning for a data set too small to rank, or None when it is not.

    Args:
        sensitivity: the analysis' detectable differences.

    Returns:
        ``"Too few cases to rank: with 10 cases, differences under 27 points cannot be detected ..."``.
    """
    if sensitivity is None or not sensitivity.too_small_to_rank:
        return None
    n = sensitivity.n_cases.pooled
    human = " or to the annotators" if sensitivity.vs_human is not None else ""
    return (
        f"Too few cases to rank: with {n} case{'s' if n != 1 else ''}, differences under "
        f"{points(sensitivity.largest)} points cannot be detected ({POWER_NOTE}). Judges closer than that to each "
        f"other, to chance{human} cannot be told apart; read every ranking below as provisional."
    )


def few_cases(cases: int) -> bool:
    """Whether a cell resting on this many cases is marked :data:`FEW_MARK` and not compared."""
    return 0 < cases < FEW_CASES


def cell_cases(value: Estimate, n_orders: int) -> int:
    """The cases behind an agreement cell: its counted judgments over the orders the judge ran."""
    return -(-value.n // max(1, n_orders))


def verdict(test: AltTest | None, *, blank: str = MISSING) -> str:
    """A stand-in verdict with its winning rate: ``"cannot (ω 0.33)"``; the verdict alone when untested."""
    if test is None:
        return blank
    return test.verdict if math.isnan(test.winning_rate) else f"{test.verdict} (ω {test.winning_rate:.2f})"
