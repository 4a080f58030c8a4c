"""The report's "Corrected estimates" section, and the budget planner's table.

Renders :class:`~medrewardbench.metrics.corrected.CorrectedEstimates` (``report --labels``): a
leaderboard by agreement with the doctors over the whole pool, each prediction-powered interval
beside the one from the doctors' labels alone and the variance ratio between them; per-dimension
agreement; the doctors' preference rate; the design and the assumptions. Written as
``estimates.md`` and ``estimates.json`` beside the other report files, and printed as a table.
The same section is added to ``report.md`` (at its end) and ``report.html`` (before the footer,
with a link in the table of contents) by :func:`add_to_reports`, so the shared renderers need not
know of it. Renders :class:`~medrewardbench.metrics.budget.BudgetPlan` (``annotate plan``) as a table.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from rich.table import Table

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.budget import BudgetPlan
from medrewardbench.metrics.corrected import POOLED, CorrectedEstimates
from medrewardbench.metrics.ppi import MeanInterval, PPIResult
from medrewardbench.report.files import json_text
from medrewardbench.report.format import interval, percent, signed_percent
from medrewardbench.report.terminal import plain

__all__ = [
    "BUDGET_DROP_ORDER",
    "ESTIMATES_DROP_ORDER",
    "ESTIMATES_JSON",
    "ESTIMATES_MD",
    "add_to_reports",
    "budget_table",
    "estimates_html",
    "estimates_markdown",
    "estimates_table",
    "write_estimates",
]

ESTIMATES_MD = "estimates.md"
ESTIMATES_JSON = "estimates.json"
ESTIMATES_DROP_ORDER: tuple[str, ...] = ("effective labels", "variance ratio", "rank", "vs leader (PPI)")
"""The columns of :func:`estimates_table` a narrow terminal loses first (for ``fit_table``)."""
BUDGET_DROP_ORDER: tuple[str, ...] = ("labels only: total", "PPI: total")
"""The columns of :func:`budget_table` a narrow terminal loses first."""


def _mean(value: MeanInterval, *, signed: bool = False) -> str:
    if math.isnan(value.estimate):
        return f"- ({value.note})" if value.note else "-"
    point = signed_percent(value.estimate) if signed else percent(value.estimate)
    bounds = interval(value.low, value.high, signed=signed)
    return f"{point} {bounds}" if bounds else point


def _ratio(result: PPIResult) -> str:
    ratio = result.variance_ratio
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


def _effective(result: PPIResult) -> str:
    labels = result.effective_labels
    return "-" if math.isnan(labels) else f"{labels:.0f}"


def _design_line(found: CorrectedEstimates) -> str:
    design = found.design
    if design is None:
        return (
            f"Pool: {found.pool_size} pairs; {found.labelled} with doctors' labels, taken as a uniform random sample "
            f"(no selection design in the labels). Proxy: {found.reference}."
        )
    return (
        f"Pool: {found.pool_size} pairs of data {str(design['data_hash'])[:12]}. Design {design['design']}: the "
        f"{design['least_confident']} pairs {design['judge_spec']} ({design['run_id']}) was least sure of (ranked by "
        f"{design.get('ranked_by', 'mean')}), labelled in full, and a uniform random slice of {design['random']} "
        f"of the rest (seed {design.get('seed')}); {found.labelled} pairs have labels. Proxy: {found.reference}."
    )


def estimates_table(found: CorrectedEstimates) -> Table:
    """The leaderboard of corrected estimates for the terminal.

    Args:
        found: the estimates.

    Returns:
        A rich table: judge, agreement by PPI, by the labels alone, the variance ratio, the
        difference from the leader.
    """
    level = f"{100 * found.confidence:g}%"
    table = Table(
        "rank",
        "judge",
        f"agreement, PPI [{level}]",
        "labels only",
        "variance ratio",
        "effective labels",
        "vs leader (PPI)",
        title=f"Corrected estimates: agreement with the doctors over all {found.pool_size} pairs",
    )
    for rank, judge in enumerate(found.judges, start=1):
        pooled = judge.pooled
        table.add_row(
            str(rank),
            plain(judge.judge_spec),
            _mean(pooled.ppi),
            _mean(pooled.classical),
            _ratio(pooled),
            _effective(pooled),
            "" if judge.vs_leader is None else _mean(judge.vs_leader.ppi, signed=True),
        )
    return table


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def estimates_markdown(found: CorrectedEstimates) -> str:
    """The "Corrected estimates" section in Markdown.

    Args:
        found: the estimates.

    Returns:
        The section, starting with its heading.
    """
    level = f"{100 * found.confidence:g} %"
    lines = [
        "## Corrected estimates",
        "",
        "Agreement with the doctors over the **whole pool**, estimated by prediction-powered inference (PPI++): "
        "every judge's verdicts on every pair, corrected by the doctors' labels on the slice. Beside each "
        f"interval ({level}, CLT), the interval from the doctors' labels alone under the same design. The variance "
        "ratio is how many labels-only labels one label is worth; effective labels, what labels-only would need "
        "from the random slice for the same precision.",
        "",
        _design_line(found),
        "",
        _row(["rank", "judge", "agreement, PPI", "labels only", "variance ratio", "effective labels", "vs leader"]),
        _row(["---"] * 7),
    ]
    for rank, judge in enumerate(found.judges, start=1):
        pooled = judge.pooled
        lines.append(
            _row(
                [
                    str(rank),
                    f"`{judge.judge_spec}`",
                    _mean(pooled.ppi),
                    _mean(pooled.classical),
                    _ratio(pooled),
                    _effective(pooled),
                    "" if judge.vs_leader is None else _mean(judge.vs_leader.ppi, signed=True),
                ]
            )
        )
    lines += ["", "### Agreement per dimension (PPI; labels only)", ""]
    lines.append(_row(["judge", *DIMENSIONS]))
    lines.append(_row(["---"] * (len(DIMENSIONS) + 1)))
    for judge in found.judges:
        cells = [f"{_mean(judge.dimensions[d].ppi)}; {_mean(judge.dimensions[d].classical)}" for d in DIMENSIONS]
        lines.append(_row([f"`{judge.judge_spec}`", *cells]))
    lines += [
        "",
        "### The doctors' preference for response 1",
        "",
        _row(["dimension", "PPI", "labels only", "variance ratio"]),
        _row(["---"] * 4),
    ]
    for name in (*DIMENSIONS, POOLED):
        result = found.preference[name]
        lines.append(_row([name, _mean(result.ppi), _mean(result.classical), _ratio(result)]))
    if found.notes:
        lines += ["", *[f"- {note}" for note in found.notes]]
    return "\n".join(lines) + "\n"


def write_estimates(found: CorrectedEstimates, out_dir: str | Path) -> dict[str, Path]:
    """Write ``estimates.md`` and ``estimates.json`` into a report folder.

    Args:
        found: the estimates.
        out_dir: the report folder.

    Returns:
        ``{"estimates": md path, "estimates_json": json path}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md = out / ESTIMATES_MD
    md.write_text(estimates_markdown(found), encoding="utf-8")
    data = out / ESTIMATES_JSON
    data.write_text(json_text(found.to_json(), indent=2, sort_keys=True), encoding="utf-8")
    return {"estimates": md, "estimates_json": data}


def estimates_html(found: CorrectedEstimates) -> str:
    """The "Corrected estimates" section as HTML for ``report.html`` (every value escaped).

    Args:
        found: the estimates.

    Returns:
        A ``<section id="corrected-estimates">`` with the leaderboard, the per-dimension table and
        the preference rate, in the report's table styles.
    """

    def cells(values: list[str], tag: str = "td") -> str:
        return "".join(f"<{tag}>{html.escape(v)}</{tag}>" for v in values)

    def table(header: list[str], rows: list[list[str]]) -> str:
        body = "".join(f"<tr>{cells(row)}</tr>" for row in rows)
        return (
            f'<div class="table-wrap"><table><thead><tr>{cells(header, "th")}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )

    leaderboard = [
        [
            str(rank),
            j.judge_spec,
            _mean(j.pooled.ppi),
            _mean(j.pooled.classical),
            _ratio(j.pooled),
            _effective(j.pooled),
            "" if j.vs_leader is None else _mean(j.vs_leader.ppi, signed=True),
        ]
        for rank, j in enumerate(found.judges, start=1)
    ]
    per_dimension = [
        [j.judge_spec, *[f"{_mean(j.dimensions[d].ppi)}; {_mean(j.dimensions[d].classical)}" for d in DIMENSIONS]]
        for j in found.judges
    ]
    preference = [
        [
            name,
            _mean(found.preference[name].ppi),
            _mean(found.preference[name].classical),
            _ratio(found.preference[name]),
        ]
        for name in (*DIMENSIONS, POOLED)
    ]
    notes = "".join(f"<li>{html.escape(note)}</li>" for note in found.notes)
    level = f"{100 * found.confidence:g} %"
    return (
        '<section id="corrected-estimates">\n  <h2>Corrected estimates</h2>\n'
        "  <p>Agreement with the doctors over the <strong>whole pool</strong>, by prediction-powered inference "
        "(PPI++): every judge's verdicts on every pair, corrected by the doctors' labels on the slice; beside "
        f"each interval ({level}, CLT), the one from the doctors' labels alone under the same design.</p>\n"
        f"  <p>{html.escape(_design_line(found))}</p>\n  "
        + table(
            ["rank", "judge", "agreement, PPI", "labels only", "variance ratio", "effective labels", "vs leader"],
            leaderboard,
        )
        + "\n  <h3>Agreement per dimension (PPI; labels only)</h3>\n  "
        + table(["judge", *DIMENSIONS], per_dimension)
        + "\n  <h3>The doctors' preference for response 1</h3>\n  "
        + table(["dimension", "PPI", "labels only", "variance ratio"], preference)
        + (f"\n  <ul>{notes}</ul>" if notes else "")
        + "\n</section>\n"
    )


HTML_ANCHOR = '\n<div id="image-viewer"'
"""Where ``report.html``'s sections end (the section goes just before it)."""
TOC_END = "</nav>"


def add_to_reports(found: CorrectedEstimates, files: dict[str, Path]) -> None:
    """Add the section to the report files written: the end of ``report.md``, and ``report.html``.

    Args:
        found: the estimates.
        files: format -> path, as :func:`medrewardbench.report.render.render_reports` wrote them.

    Raises:
        ValueError: a ``report.html`` that is not the report's own (no place for the section).
    """
    md = files.get("md")
    if md is not None:
        text = md.read_text(encoding="utf-8")
        md.write_text(text.rstrip("\n") + "\n\n" + estimates_markdown(found), encoding="utf-8")
    page = files.get("html")
    if page is not None:
        text = page.read_text(encoding="utf-8")
        at = text.find(HTML_ANCHOR)
        toc = text.find(TOC_END)
        if at < 0 or toc < 0 or toc > at:
            raise ValueError(f"{page}: not a medrewardbench report page; the corrected estimates are in estimates.md")
        link = '<a href="#corrected-estimates">Corrected estimates</a>\n  '
        text = text[:toc] + link + text[toc : at + 0] + "\n" + estimates_html(found) + text[at:]
        page.write_text(text, encoding="utf-8")


def budget_table(plan: BudgetPlan) -> Table:
    """The budget planner's answer for the terminal.

    Args:
        plan: the plan.

    Returns:
        A rich table: half-width, random labels and total doctor labels for PPI and for labels alone.
    """
    if plan.basis != "confidence":
        basis = f"the {plan.random_labelled} random labels so far"
    elif plan.ppi_bound:
        basis = "the worst case (the judge gives no probabilities; PPI needs at most as many: plan again with --labels)"
    else:
        basis = "the judge's confidences, taken as calibrated (no labels yet)"
    mark = "≤ " if plan.ppi_bound else ""
    table = Table(
        "± half-width",
        "PPI: random",
        "PPI: total",
        "labels only: random",
        "labels only: total",
        title=(
            f"Doctors' labels for {plan.judge_spec}'s agreement ({plan.dimension}) over {plan.pool} pairs, "
            f"{100 * plan.confidence:g}% intervals: {plan.least_confident} least confident in full + a random slice "
            f"of the other {plan.remainder}; from {basis}"
        ),
    )
    for row in plan.rows:
        table.add_row(
            f"{100 * row.half_width:g} points",
            f"{mark}{row.ppi}",
            f"{mark}{plan.least_confident + row.ppi}",
            str(row.labels_only),
            str(plan.least_confident + row.labels_only),
        )
    return table
