"""The report's section on calibration and abstention: reliability diagrams (inline SVG) and the abstention table.

Render only: the figures come from the analysis' :class:`~medrewardbench.metrics.results.SelectiveJudging`.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from medrewardbench.metrics.results import Analysis, Calibration, Estimate, JudgeSelective
from medrewardbench.report.format import MISSING, estimate, percent
from medrewardbench.report.plots import BLUE, GREY, LIGHT, ORANGE, _open_svg, _text

__all__ = ["reliability_svg", "risk_coverage_svg", "selective_context"]

_SIZE = 240
_PAD = 40


def _xy(confidence: float, accuracy: float) -> tuple[float, float]:
    """Plot coordinates: confidence 0.5..1 across, accuracy 0..1 up."""
    x = _PAD + (confidence - 0.5) / 0.5 * (_SIZE - _PAD - 10)
    y = 10 + (1.0 - accuracy) * (_SIZE - _PAD - 10)
    return x, y


def reliability_svg(calibration: Calibration, label: str, recalibrated: Calibration | None = None) -> str:
    """A reliability diagram: accuracy against confidence per bin, dot area by verdicts, the diagonal for reference.

    Args:
        calibration: the judge's calibration (pooled bins are drawn).
        label: the judge's name (the title).
        recalibrated: cross-fitted recalibrated bins, drawn as hollow orange dots.

    Returns:
        An SVG element.
    """
    parts = [_open_svg(_SIZE, _SIZE, f"Reliability of {label}: accuracy against confidence", "reliability")]
    x0, y0 = _xy(0.5, 0.0)
    x1, y1 = _xy(1.0, 1.0)
    parts.append(
        f'<rect x="{x0:.1f}" y="{y1:.1f}" width="{x1 - x0:.1f}" height="{y0 - y1:.1f}" fill="none" stroke="{LIGHT}"/>'
    )
    d0 = _xy(0.5, 0.5)
    parts.append(
        f'<line x1="{d0[0]:.1f}" y1="{d0[1]:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{GREY}" stroke-dasharray="4 3"/>'
    )
    for tick in (0.5, 0.75, 1.0):
        x, _ = _xy(tick, 0.0)
        parts.append(_text(x, y0 + 14, f"{round(100 * tick)}", size=10, anchor="middle", fill=GREY))
    for tick in (0.0, 0.5, 1.0):
        _, y = _xy(0.5, tick)
        parts.append(_text(x0 - 4, y + 4, f"{round(100 * tick)}", size=10, anchor="end", fill=GREY))
    parts.append(_text((x0 + x1) / 2, _SIZE - 4, "confidence (%)", size=10, anchor="middle", fill=GREY))
    parts.append(
        _text(
            10,
            (y0 + y1) / 2,
            "accuracy (%)",
            size=10,
            anchor="middle",
            fill=GREY,
            extra=f' transform="rotate(-90 10 {(y0 + y1) / 2:.1f})"',
        )
    )
    for series, colour, hollow in ((calibration, BLUE, False), (recalibrated, ORANGE, True)):
        if series is None:
            continue
        total = max(1, sum(b.n for b in series.reliability))
        for b in series.reliability:
            if b.n == 0 or math.isnan(b.accuracy):
                continue
            x, y = _xy(b.confidence, b.accuracy)
            r = 3 + 9 * math.sqrt(b.n / total)
            fill = "none" if hollow else colour
            tip = f"confidence {percent(b.confidence)} %, accuracy {percent(b.accuracy)} %, {b.n} verdicts"
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="{fill}" fill-opacity="0.7" stroke="{colour}">'
                f"<title>{escape(tip)}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def risk_coverage_svg(judge: JudgeSelective, alpha: float) -> str:
    """The held-out risk-coverage curve of the pooled column, with the risk level alpha as a line.

    Args:
        judge: the judge's record (its abstention must exist).
        alpha: the risk level.

    Returns:
        An SVG element ("" when the judge has no abstention record).
    """
    if judge.abstention is None:
        return ""
    column = judge.abstention.pooled
    top = max([alpha * 2, *(r for r in column.curve_risk if not math.isnan(r))], default=0.5)
    top = min(1.0, max(top, 0.05))

    def xy(coverage: float, risk: float) -> tuple[float, float]:
        return _PAD + coverage * (_SIZE - _PAD - 10), 10 + (1 - risk / top) * (_SIZE - _PAD - 10)

    parts = [_open_svg(_SIZE, _SIZE, f"Risk against coverage, {judge.label} (held-out cases)", "risk-coverage")]
    (ax, ay), (bx, by) = xy(0, 0), xy(1, top)
    parts.append(
        f'<rect x="{ax:.1f}" y="{by:.1f}" width="{bx - ax:.1f}" height="{ay - by:.1f}" fill="none" stroke="{LIGHT}"/>'
    )
    _, ya = xy(0, alpha)
    parts.append(
        f'<line x1="{ax:.1f}" y1="{ya:.1f}" x2="{bx:.1f}" y2="{ya:.1f}" stroke="{ORANGE}" stroke-dasharray="4 3"/>'
    )
    parts.append(_text(bx - 2, ya - 4, f"risk {round(100 * alpha)} %", size=10, anchor="end", fill=ORANGE))
    points = [xy(c, r) for c, r in zip(column.curve_coverage, column.curve_risk, strict=True) if not math.isnan(r)]
    if points:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{BLUE}" stroke-width="2"/>')
        parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{BLUE}"/>' for x, y in points)
    if column.qualified:
        x, _ = xy(column.coverage, 0)
        parts.append(f'<line x1="{x:.1f}" y1="{by:.1f}" x2="{x:.1f}" y2="{ay:.1f}" stroke="{GREY}"/>')
    for tick in (0.0, 0.5, 1.0):
        x, _ = xy(tick, 0)
        parts.append(_text(x, ay + 14, f"{round(100 * tick)}", size=10, anchor="middle", fill=GREY))
    parts.append(_text(ax - 4, by + 4, f"{round(100 * top)}", size=10, anchor="end", fill=GREY))
    parts.append(_text(ax - 4, ay + 4, "0", size=10, anchor="end", fill=GREY))
    parts.append(_text((ax + bx) / 2, _SIZE - 4, "coverage (%)", size=10, anchor="middle", fill=GREY))
    parts.append(
        _text(
            10,
            (ay + by) / 2,
            "error among accepted (%)",
            size=10,
            anchor="middle",
            fill=GREY,
            extra=f' transform="rotate(-90 10 {(ay + by) / 2:.1f})"',
        )
    )
    parts.append("</svg>")
    return "".join(parts)


def _coefficient(value: Estimate | None) -> str:
    """A score in [0, 1] with three decimals and its interval."""
    if value is None or not value.defined:
        return MISSING
    if value.has_interval:
        return f"{value.point:.3f} [{value.low:.3f}, {value.high:.3f}]"
    return f"{value.point:.3f}"


def selective_context(analysis: Analysis) -> dict[str, Any] | None:
    """What the template's section shows: settings, one row per judge, the diagrams (SVG strings).

    Args:
        analysis: the analysis.

    Returns:
        None without a section (no labels, or an analysis file written before it existed).
    """
    section = analysis.selective
    if section is None:
        return None
    rows = []
    for judge in section.judges:
        cal, recal, abst = judge.calibration, judge.recalibrated, judge.abstention
        pooled = None if abst is None else abst.pooled
        rows.append(
            {
                "label": judge.label,
                "source": judge.source,
                "note": judge.note,
                "ece": MISSING if cal is None else _coefficient(cal.ece.pooled),
                "ece_mass": MISSING if cal is None else _coefficient(cal.ece_equal_mass.pooled),
                "brier": MISSING if cal is None else _coefficient(cal.brier.pooled),
                "recal_ece": MISSING if recal is None else _coefficient(recal.ece.pooled),
                "recal_brier": MISSING if recal is None else _coefficient(recal.brier.pooled),
                "threshold": MISSING
                if pooled is None
                else (f"{pooled.threshold:.3f}" if pooled.qualified else "none qualifies"),
                "coverage": MISSING if pooled is None else percent(pooled.coverage),
                "accepted": "" if pooled is None else f"{pooled.accepted} of {pooled.n}",
                "risk": MISSING if pooled is None else estimate(pooled.risk),
                "qualified": pooled is not None and pooled.qualified,
                "reliability": "" if cal is None else reliability_svg(cal, judge.label, recal),
                "curve": risk_coverage_svg(judge, section.alpha),
            }
        )
    return {
        "alpha_pct": f"{100 * section.alpha:g}",
        "delta_pct": f"{100 * section.delta:g}",
        "recalibration": section.recalibration,
        "calibration_cases": section.calibration_cases,
        "heldout_cases": section.heldout_cases,
        "folds": section.folds,
        "method": section.method,
        "rows": rows,
    }
