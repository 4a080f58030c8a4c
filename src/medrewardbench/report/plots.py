"""Inline SVG charts for the HTML report, drawn in Python with no plotting library.

Every chart is a self-contained ``<svg>`` string with a ``viewBox`` (it scales with the page),
a ``<title>`` for screen readers, and numbers printed next to or inside every mark, so that a
chart still reads in print and in greyscale. Colours: viridis (sequential, colour-blind safe)
for heatmaps and the Okabe-Ito palette for categories, always paired with a second cue (marker
shape or printed value).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from medrewardbench.metrics.results import Estimate, real
from medrewardbench.report.format import estimate as format_estimate
from medrewardbench.report.format import percent as pct
from medrewardbench.utils.shorten import shorten_distinct

VIRIDIS: tuple[tuple[float, str], ...] = (
    (0.0, "#440154"),
    (0.125, "#482878"),
    (0.25, "#3e4989"),
    (0.375, "#31688e"),
    (0.5, "#26828e"),
    (0.625, "#1f9e89"),
    (0.75, "#35b779"),
    (0.875, "#6ece58"),
    (1.0, "#fde725"),
)
"""Anchor colours of matplotlib's viridis map; values in between are interpolated linearly."""

BLUE = "#0072B2"
ORANGE = "#D55E00"
GREY = "#6b6b6b"
LIGHT = "#d9d9d9"
MISSING = "#f0f0f0"
FONT = "font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif\""

Value = float | None


def _hex_to_rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def viridis(t: float) -> str:
    """The viridis colour at ``t`` in [0, 1] (clipped), as ``#rrggbb``."""
    t = min(1.0, max(0.0, t))
    for (t0, c0), (t1, c1) in zip(VIRIDIS, VIRIDIS[1:], strict=False):
        if t <= t1:
            f = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
            a, b = _hex_to_rgb(c0), _hex_to_rgb(c1)
            r, g, bl = (round(x + (y - x) * f) for x, y in zip(a, b, strict=True))
            return f"#{r:02x}{g:02x}{bl:02x}"
    return VIRIDIS[-1][1]


def text_colour_on(background: str) -> str:
    """Black or white, whichever reads better on ``background`` (relative luminance)."""
    r, g, b = (c / 255 for c in _hex_to_rgb(background))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if luminance > 0.45 else "#ffffff"


def _text(
    x: float,
    y: float,
    content: str,
    *,
    size: int = 12,
    anchor: str = "start",
    fill: str = "#222",
    weight: str = "normal",
    extra: str = "",
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
        f'font-weight="{weight}"{extra}>{escape(content)}</text>'
    )


def _open_svg(width: float, height: float, title: str, css_class: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{css_class}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" {FONT}><title>{escape(title)}</title>'
    )


def _clip_labels(labels: Sequence[str], max_chars: int) -> list[str]:
    """Labels cut in the middle to about ``max_chars``, never so that two read the same."""
    return shorten_distinct(labels, max_chars)


def _label_width(labels: Sequence[str], size: int = 12, max_chars: int = 34) -> float:
    """Room for the longest label (at about 0.64 em per character, enough for bold text)."""
    longest = max((len(s) for s in _clip_labels(labels, max_chars)), default=4)
    return 14 + longest * size * 0.64


def _axis_title(x: float, y: float, content: str = "percent") -> str:
    return _text(x, y, content, size=10, anchor="middle", fill=GREY)


def heatmap(
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    values: Sequence[Sequence[Value]],
    *,
    title: str,
    caption_rows: Sequence[str] = (),
    counts: Sequence[Sequence[int | None]] | None = None,
    small_n: int = 0,
    row_attributes: Sequence[str] = (),
    cell_width: int = 58,
    cell_height: int = 24,
    few: Sequence[Sequence[bool]] | None = None,
    few_label: str = "n<4",
) -> str:
    """A rows x columns grid of fractions coloured with viridis on the fixed scale 0-100 %.

    Args:
        row_labels: one label per row (e.g. organ systems).
        col_labels: one label per column (e.g. dimensions).
        values: rows of fractions in [0, 1]; None draws a pale cell with a dash.
        title: the chart title (also the accessible name).
        caption_rows: row labels to set apart with a rule above them (e.g. "all", "macro").
        counts: the n behind each value, printed small under it (None leaves a cell's n out).
        small_n: cells whose n is below this are muted (pale, grey text, a dashed outline).
        row_attributes: per row, attributes for the row's ``<g>`` (``'data-organ="o1"'``), for page scripts.
        cell_width: cell width in pixels.
        cell_height: cell height in pixels (taller when counts are printed).
        few: per cell, whether it rests on too few cases to be compared: drawn grey, off the colour
            scale, its value in grey and ``few_label`` in place of its n.
        few_label: the mark of such a cell.

    Returns:
        The ``<svg>`` element; every cell prints its value in percent, and its n when given.
    """
    if counts is not None:
        cell_height = max(cell_height, 34)
    left = _label_width(row_labels, 12, 26)
    top = 30 + 44
    width = left + cell_width * len(col_labels) + 10
    height = top + cell_height * len(row_labels) + 8
    parts = [_open_svg(width, height, title, "chart heatmap")]
    parts.append(_text(0, 16, title, size=13, weight="600"))
    shown_cols, shown_rows = _clip_labels(col_labels, 12), _clip_labels(row_labels, 26)
    for c in range(len(col_labels)):
        x = left + c * cell_width + cell_width / 2
        parts.append(
            _text(
                x,
                top - 8,
                shown_cols[c],
                size=11,
                anchor="start",
                extra=f' transform="rotate(-35 {x:.1f} {top - 8:.1f})"',
            )
        )
    for r, label in enumerate(row_labels):
        y = top + r * cell_height
        bold = "600" if label in caption_rows else "normal"
        attributes = row_attributes[r] if r < len(row_attributes) else ""
        parts.append(f'<g class="row" {attributes}>' if attributes else '<g class="row">')
        parts.append(_text(left - 6, y + cell_height / 2 + 4, shown_rows[r], size=12, anchor="end", weight=bold))
        if label in caption_rows and (r == 0 or row_labels[r - 1] not in caption_rows):
            parts.append(
                f'<line x1="0" x2="{width - 10:.0f}" y1="{y - 1:.1f}" y2="{y - 1:.1f}" stroke="#333" stroke-width="1"/>'
            )
        for c, value in enumerate(values[r]):
            x = left + c * cell_width
            n = None if counts is None else counts[r][c]
            too_few = few is not None and few[r][c]
            muted = too_few or (n is not None and n < small_n)
            if value is None:
                fill, ink, content = MISSING, GREY, "–"
            elif too_few:
                fill, ink, content = MISSING, GREY, pct(value)
            else:
                fill = viridis(value)
                ink, content = text_colour_on(fill), pct(value)
            tip = f"{label}, {col_labels[c]}: {content} %" + ("" if n is None else f" of {n}")
            if too_few:
                tip += f" ({few_label} cases: not comparable)"
            elif muted:
                tip += " (few: read with care)"
            opacity = ' fill-opacity="0.4" stroke="#777" stroke-dasharray="3 2"' if muted else ""
            classes = "cell" + (" small-n" if muted else "") + (" few-cases" if too_few else "")
            parts.append(
                f'<g class="{classes}"><title>{escape(tip)}</title>'
                f'<rect x="{x + 1:.1f}" y="{y + 1:.1f}" width="{cell_width - 2}" height="{cell_height - 2}" '
                f'fill="{fill}" rx="2"{opacity}/>'
            )
            if muted:
                ink = "#444"
            text_y = y + cell_height / 2 + (0 if n is not None else 4)
            parts.append(_text(x + cell_width / 2, text_y, content, size=12, anchor="middle", fill=ink))
            if n is not None:
                shown = few_label if too_few else f"n {n}"
                parts.append(_text(x + cell_width / 2, y + cell_height - 6, shown, size=9, anchor="middle", fill=ink))
            parts.append("</g>")
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def colour_scale(width: int = 260) -> str:
    """A horizontal viridis legend from 0 % to 100 %."""
    height = 34
    stops = "".join(f'<stop offset="{t:.3f}" stop-color="{c}"/>' for t, c in VIRIDIS)
    return (
        _open_svg(width, height, "Colour scale: agreement with the labels from 0 to 100 percent", "chart legend")
        + f'<defs><linearGradient id="viridis-scale">{stops}</linearGradient></defs>'
        + f'<rect x="10" y="2" width="{width - 20}" height="12" fill="url(#viridis-scale)"/>'
        + _text(10, 28, "0 %", size=11)
        + _text(width / 2, 28, "50 %", size=11, anchor="middle")
        + _text(width - 10, 28, "100 %", size=11, anchor="end")
        + "</svg>"
    )


def _axis(x0: float, x1: float, y_top: float, y_bottom: float, ticks: Sequence[float], lo: float, hi: float) -> str:
    parts = []
    for t in ticks:
        x = x0 + (t - lo) / (hi - lo) * (x1 - x0)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y_top:.1f}" y2="{y_bottom:.1f}" stroke="{LIGHT}" stroke-width="1"/>'
        )
        parts.append(_text(x, y_bottom + 14, f"{100 * t:.0f}", size=11, anchor="middle", fill=GREY))
    return "".join(parts)


def interval_bars(
    labels: Sequence[str],
    points: Sequence[Value],
    lows: Sequence[Value],
    highs: Sequence[Value],
    *,
    title: str,
    highlight: Sequence[bool] = (),
    reference: float | None = None,
    reference_label: str = "",
    width: int = 590,
    row_height: int = 18,
    axis: str = "percent",
) -> str:
    """Horizontal bars (0-100 %) with interval whiskers and the value printed after each bar.

    Args:
        labels: one label per bar, top to bottom.
        points: bar lengths as fractions (None: no bar, "–" printed).
        lows: interval lower ends.
        highs: interval upper ends.
        title: chart title.
        highlight: per bar, True draws it in the second colour (used for baselines), hatched.
        reference: an optional vertical reference line (e.g. 0.5 = chance).
        reference_label: its label.
        width: total width in pixels.
        row_height: pixels per bar.
        axis: the title of the value axis.

    Returns:
        The ``<svg>`` element.
    """
    left = _label_width(labels, 11, 40)
    right = 44
    top = 26
    x0, x1 = left, width - right
    height = top + row_height * len(labels) + 34
    parts = [_open_svg(width, height, title, "chart bars")]
    parts.append(
        '<defs><pattern id="hatch" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        f'<rect width="5" height="5" fill="#f6c9a8"/><line x1="0" y1="0" x2="0" y2="5" stroke="{ORANGE}" '
        'stroke-width="2"/></pattern></defs>'
    )
    parts.append(_text(0, 15, title, size=13, weight="600"))
    bottom = top + row_height * len(labels)
    parts.append(_axis(x0, x1, top, bottom, (0.0, 0.25, 0.5, 0.75, 1.0), 0.0, 1.0))

    def sx(v: float) -> float:
        return x0 + min(1.0, max(0.0, v)) * (x1 - x0)

    shown = _clip_labels(labels, 40)
    for i in range(len(labels)):
        y = top + i * row_height
        parts.append(_text(x0 - 6, y + row_height / 2 + 4, shown[i], size=11, anchor="end"))
        point = points[i]
        if point is None:
            parts.append(_text(x0 + 4, y + row_height / 2 + 4, "–", size=11, fill=GREY))
            continue
        is_highlight = bool(highlight[i]) if i < len(highlight) else False
        fill = "url(#hatch)" if is_highlight else BLUE
        parts.append(
            f'<rect x="{x0:.1f}" y="{y + 3:.1f}" width="{sx(point) - x0:.1f}" height="{row_height - 6}" '
            f'fill="{fill}" opacity="0.85"/>'
        )
        low, high = lows[i], highs[i]
        if low is not None and high is not None:
            ym = y + row_height / 2
            parts.append(
                f'<line x1="{sx(low):.1f}" x2="{sx(high):.1f}" y1="{ym:.1f}" y2="{ym:.1f}" stroke="#111" '
                'stroke-width="1.3"/>'
            )
            for end in (low, high):
                parts.append(
                    f'<line x1="{sx(end):.1f}" x2="{sx(end):.1f}" y1="{ym - 4:.1f}" y2="{ym + 4:.1f}" '
                    'stroke="#111" stroke-width="1.3"/>'
                )
        text_x = sx(max(point, high if high is not None else point)) + 4
        parts.append(
            _text(
                min(text_x, width - 2),
                y + row_height / 2 + 4,
                pct(point),
                size=11,
                anchor="end" if text_x > width - right + 40 else "start",
            )
        )
    if reference is not None:
        xr = sx(reference)
        parts.append(
            f'<line x1="{xr:.1f}" x2="{xr:.1f}" y1="{top - 4:.1f}" y2="{bottom:.1f}" stroke="{ORANGE}" '
            'stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
        if reference_label:
            parts.append(_text(xr + 3, top - 6, reference_label, size=10, fill=ORANGE))
    parts.append(_axis_title(x0 + (x1 - x0) / 2, height - 3, axis))
    parts.append("</svg>")
    return "".join(parts)


def forest(
    labels: Sequence[str],
    points: Sequence[Value],
    lows: Sequence[Value],
    highs: Sequence[Value],
    *,
    title: str,
    groups: Sequence[int] = (),
    reference: float | None = None,
    reference_label: str = "",
    width: int = 640,
    row_height: int = 20,
    domain: tuple[float, float] | None = None,
    axis: str = "percent",
) -> str:
    """Point estimates with interval lines, one row each; alternating bands mark ``groups`` (tiers).

    Args:
        labels: row labels, top to bottom.
        points: the estimates (fractions).
        lows: interval lower ends.
        highs: interval upper ends.
        title: chart title.
        groups: per row, a group number (e.g. tier); consecutive rows of one group share a band
            and the group number is printed at the right.
        reference: optional vertical reference (e.g. 0.5).
        reference_label: its label.
        width: total width.
        row_height: pixels per row.
        domain: the x range; by default it is fitted to the intervals (padded, within [0, 1]).
        axis: the title of the value axis.

    Returns:
        The ``<svg>`` element.
    """
    known = [v for v in (*lows, *highs, *points) if v is not None]
    if reference is not None:
        known.append(reference)
    if domain is None:
        lo = max(0.0, math.floor((min(known, default=0.0) - 0.02) * 20) / 20)
        hi = min(1.0, math.ceil((max(known, default=1.0) + 0.02) * 20) / 20)
        if hi <= lo:
            lo, hi = 0.0, 1.0
    else:
        lo, hi = domain
    values = [
        format_estimate(Estimate(real(p), real(lo_), real(hi_)))
        for p, lo_, hi_ in zip(points, lows, highs, strict=True)
    ]
    left = _label_width(labels, 12, 42)
    value_width = 10 + max((len(v) for v in values), default=4) * 6.6
    right = value_width + (58 if groups else 6)
    top = 40
    x0, x1 = left, width - right
    height = top + row_height * len(labels) + 36
    bottom = top + row_height * len(labels)
    parts = [_open_svg(width, height, title, "chart forest")]
    parts.append(_text(0, 16, title, size=13, weight="600"))
    band = False
    for i in range(len(labels)):
        if groups and i > 0 and groups[i] != groups[i - 1]:
            band = not band
        if groups and band:
            parts.append(
                f'<rect x="0" y="{top + i * row_height:.1f}" width="{width:.0f}" height="{row_height}" fill="#f2f2f2"/>'
            )
    step = 0.05 if hi - lo <= 0.4 else 0.1 if hi - lo <= 0.8 else 0.25
    ticks = [lo + k * step for k in range(int(round((hi - lo) / step)) + 1)]
    parts.append(_axis(x0, x1, top, bottom, ticks, lo, hi))

    def sx(v: float) -> float:
        return x0 + (min(hi, max(lo, v)) - lo) / (hi - lo) * (x1 - x0)

    if reference is not None and lo <= reference <= hi:
        xr = sx(reference)
        parts.append(
            f'<line x1="{xr:.1f}" x2="{xr:.1f}" y1="{top - 4:.1f}" y2="{bottom:.1f}" stroke="{ORANGE}" '
            'stroke-width="1.5" stroke-dasharray="4 3"/>'
        )
        if reference_label:
            parts.append(_text(xr + 3, top - 6, reference_label, size=10, fill=ORANGE))
    shown = _clip_labels(labels, 42)
    for i in range(len(labels)):
        ym = top + i * row_height + row_height / 2
        parts.append(_text(x0 - 8, ym + 4, shown[i], size=12, anchor="end"))
        point, low, high = points[i], lows[i], highs[i]
        if low is not None and high is not None:
            parts.append(
                f'<line x1="{sx(low):.1f}" x2="{sx(high):.1f}" y1="{ym:.1f}" y2="{ym:.1f}" stroke="#222" '
                'stroke-width="1.6"/>'
            )
        if point is not None:
            parts.append(
                f'<circle cx="{sx(point):.1f}" cy="{ym:.1f}" r="4.2" fill="{BLUE}" stroke="#fff" stroke-width="1"/>'
            )
        parts.append(_text(x1 + 10, ym + 4, values[i], size=11, fill="#333"))
        if groups:
            parts.append(
                _text(width - 4, ym + 4, f"tier {groups[i]}" if groups[i] else "–", size=11, anchor="end", fill=GREY)
            )
    parts.append(_axis_title(x0 + (x1 - x0) / 2, height - 4, axis))
    parts.append("</svg>")
    return "".join(parts)


def dumbbell(
    labels: Sequence[str],
    first: Sequence[Value],
    second: Sequence[Value],
    *,
    title: str,
    first_label: str,
    second_label: str,
    width: int = 640,
    row_height: int = 20,
    axis: str = "percent",
) -> str:
    """Two values per row joined by a line: a circle (first, blue) and a square (second, orange).

    The two series differ in colour and in marker shape, so they stay apart in greyscale.

    Args:
        labels: row labels.
        first: first series (fractions).
        second: second series.
        title: chart title.
        first_label: legend text of the first series.
        second_label: legend text of the second series.
        width: total width.
        row_height: pixels per row.
        axis: the title of the value axis.

    Returns:
        The ``<svg>`` element.
    """
    left = _label_width(labels, 12, 42)
    right = 110
    top = 46
    x0, x1 = left, width - right
    height = top + row_height * len(labels) + 36
    bottom = top + row_height * len(labels)
    parts = [_open_svg(width, height, title, "chart dumbbell")]
    parts.append(_text(0, 16, title, size=13, weight="600"))
    parts.append(f'<circle cx="{x0 + 6:.1f}" cy="32" r="5" fill="{BLUE}"/>')
    parts.append(_text(x0 + 16, 36, first_label, size=11))
    offset = x0 + 26 + len(first_label) * 6.4
    parts.append(f'<rect x="{offset - 5:.1f}" y="27" width="10" height="10" fill="{ORANGE}"/>')
    parts.append(_text(offset + 10, 36, second_label, size=11))
    parts.append(_axis(x0, x1, top, bottom, (0.0, 0.25, 0.5, 0.75, 1.0), 0.0, 1.0))

    def sx(v: float) -> float:
        return x0 + min(1.0, max(0.0, v)) * (x1 - x0)

    shown = _clip_labels(labels, 42)
    for i in range(len(labels)):
        ym = top + i * row_height + row_height / 2
        parts.append(_text(x0 - 8, ym + 4, shown[i], size=12, anchor="end"))
        a, b = first[i], second[i]
        if a is not None and b is not None:
            parts.append(
                f'<line x1="{sx(a):.1f}" x2="{sx(b):.1f}" y1="{ym:.1f}" y2="{ym:.1f}" stroke="#999" stroke-width="2"/>'
            )
        # the square sits a little lower than the circle, so equal values still show both marks
        if b is not None:
            parts.append(f'<rect x="{sx(b) - 4.5:.1f}" y="{ym - 1:.1f}" width="9" height="9" fill="{ORANGE}"/>')
        if a is not None:
            parts.append(
                f'<circle cx="{sx(a):.1f}" cy="{ym - 2:.1f}" r="4.5" fill="{BLUE}" stroke="#fff" stroke-width="1"/>'
            )
        parts.append(_text(x1 + 8, ym + 4, f"{pct(a)} / {pct(b)}", size=11, fill="#333"))
    parts.append(_axis_title(x0 + (x1 - x0) / 2, height - 4, axis))
    parts.append("</svg>")
    return "".join(parts)
