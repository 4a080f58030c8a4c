"""The number formatters every report, table and chart uses."""

from __future__ import annotations

import math
import re

import pytest

from medrewardbench.metrics.results import Estimate
from medrewardbench.report import format as fmt


def test_percent_and_signed_percent() -> None:
    assert fmt.percent(0.69583) == "69.6"
    assert fmt.percent(1.0) == "100.0"
    assert fmt.percent(0.5, 0) == "50"
    assert fmt.signed_percent(0.184) == "+18.4" and fmt.signed_percent(-0.103) == "-10.3"
    for missing in (None, math.nan):
        assert fmt.percent(missing) == fmt.signed_percent(missing) == fmt.MISSING == "–"
        assert fmt.percent(missing, blank="n/a") == "n/a"


def test_a_zero_never_prints_with_a_minus_sign() -> None:
    assert fmt.percent(-0.0) == "0.0" and fmt.percent(-0.0004) == "0.0" and fmt.percent(-0.0, 0) == "0"
    assert fmt.signed_percent(-0.0) == "+0.0" and fmt.signed_percent(-0.0004) == "+0.0"
    assert fmt.percent(-0.0006) == "-0.1" and fmt.signed_percent(-0.0006) == "-0.1"
    # compare B A of two identical runs: the difference and its bounds are the negated zeros of A B
    assert fmt.estimate(Estimate(-0.0, -0.0, -0.0)) == "0.0 [0.0, 0.0]"
    assert fmt.estimate(Estimate(-0.0, -0.0, -0.0), signed=True) == "+0.0 [+0.0, +0.0]"


def test_interval_and_estimate() -> None:
    assert fmt.interval(0.603, 0.784) == "[60.3, 78.4]"
    assert fmt.interval(-0.162, 0.221, signed=True) == "[-16.2, +22.1]"
    assert fmt.interval(math.nan, 0.5) == ""
    assert fmt.estimate(Estimate(0.696, 0.603, 0.784, 408)) == "69.6 [60.3, 78.4]"
    assert fmt.estimate(Estimate(0.184, 0.084, 0.273), signed=True) == "+18.4 [+8.4, +27.3]"
    assert fmt.estimate(Estimate(0.5)) == "50.0"  # a point estimate without an interval
    assert fmt.estimate(Estimate(math.nan)) == "–" and fmt.estimate(None) == "–"


def test_coefficients_never_print_minus_zero() -> None:
    assert fmt.coefficient(0.3519) == "0.35" and fmt.coefficient(-0.351) == "-0.35"
    assert fmt.coefficient(-0.001) == "0.00"
    assert fmt.coefficient(math.nan) == "–"
    assert fmt.coefficient_estimate(Estimate(0.53, 0.4, 0.66)) == "0.53 [0.40, 0.66]"
    assert fmt.coefficient_estimate(Estimate(-0.004)) == "0.00"
    assert fmt.coefficient_estimate(Estimate(math.nan)) == "–"


def test_fraction_keeps_the_reference_layout() -> None:
    assert fmt.fraction(0.617647) == "0.6176"
    assert fmt.fraction(1.0) == "1.0000"
    assert fmt.fraction(None) == "–"


@pytest.mark.parametrize(
    ("value", "resamples", "text"),
    [
        (0.02345, None, "0.023"),
        (1.0, None, "1.000"),
        (0.001, None, "0.001"),
        (0.0009999, None, "<0.001"),
        (2.9e-70, None, "<0.001"),
        (0.0, 2000, "<0.001"),  # 2,000 resamples resolve 0.0005: the usual floor holds
        (0.0, 300, "<0.0033"),  # 300 resamples cannot resolve below 1/300
        (0.002, 300, "<0.0033"),
        (0.02, 300, "0.020"),
        (0.0, 100, "<0.01"),
        (math.nan, None, "–"),
        (None, 2000, "–"),
    ],
)
def test_p_values_print_one_way(value: float | None, resamples: int | None, text: str) -> None:
    assert fmt.p_value(value, resamples=resamples) == text


def test_every_renderer_prints_p_values_through_the_one_formatter() -> None:
    """The terminal, Markdown, HTML and cv tables format p-values only with format.p_value."""
    from pathlib import Path

    import medrewardbench

    package = Path(medrewardbench.__file__).parent
    for path in (*package.glob("report/*.py"), *package.glob("cli/*.py")):
        if path.name == "format.py":
            continue
        text = path.read_text("utf-8")
        assert "<0.001" not in text and ":.3g}" not in text and ":.2g}" not in text, path.name


def test_plots_keep_apart_labels_that_differ_only_at_their_end() -> None:
    from medrewardbench.report.plots import forest

    labels = [f"api:tiny-qwen (base url http://127.0.0.1:{port}/v1, x)" for port in (18001, 18002)]
    svg = forest(labels, [0.5, 0.6], [0.4, 0.5], [0.6, 0.7], title="t")
    shown = re.findall(r"<text[^>]*>([^<]*18\d{3}[^<]*)</text>", svg)
    assert len(set(shown)) == 2, shown
