"""A Markdown report: leaderboard with intervals and tiers, dimension and organ tables, bias checks.

Numbers are percentages with one decimal, intervals written ``71.2 [68.0, 74.3]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import (
    Analysis,
    ColumnTable,
    Estimate,
    HumanCeiling,
    Sensitivity,
    Settings,
)
from medrewardbench.report.columns import LEFT, MD, Column, Kind, Table
from medrewardbench.report.format import (
    FEW_MARK,
    METRIC,
    STAND_IN_METHOD,
    cell_cases,
    detectable_sentence,
    estimate,
    few_cases,
    percent,
    points,
    small_sample_banner,
)
from medrewardbench.report.human import HumanTables
from medrewardbench.report.probes import PROBE_TITLES, ProbeSection, probe_columns, probe_intro, probe_lines
from medrewardbench.report.tables import ANSWERED_HEADER, ReportTables, answering, report_tables, report_title

MAX_PAIRS_LISTED = 60


_SPECIAL = str.maketrans({ch: "\\" + ch for ch in "\\`*_[]<>#"})


def _esc(text: object) -> str:
    """Literal text (judge labels, group names, failure reasons): Markdown specials escaped."""
    return str(text).translate(_SPECIAL)


def _cell(text: object) -> str:
    """Table-safe text: pipes escaped, line breaks flattened."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[bool] | None = None) -> list[str]:
    align = right if right is not None else [False] + [True] * (len(header) - 1)
    lines = [
        "| " + " | ".join(_cell(h) for h in header) + " |",
        "|" + "|".join("---:" if r else ":---" for r in align) + "|",
    ]
    lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)
    return lines


def _text(column: Column[Any], value: Any) -> str:
    """One cell of a built table as Markdown: literal text escaped, baselines and the human row marked."""
    if column.kind is Kind.JUDGE:
        if value.human:
            return f"*{_esc(value.label)}*"
        return _esc(value.label) + (" *(baseline)*" if value.is_baseline else "")
    if column.kind is Kind.GROUP:
        return _esc(value.name) + (f" ({FEW_MARK})" if value.few else "")
    if column.kind is Kind.TIERED:
        return f"{estimate(value.estimate)} t{'' if value.tier is None else value.tier}"
    shown = column.text(value)
    if column.kind in (Kind.TEXT, Kind.REASONS):
        shown = _esc(shown)
    return f"**{shown}**" if column.strong else shown


def _write(table: Table[Any], extra_rows: Sequence[Sequence[object]] = ()) -> list[str]:
    """A built table as Markdown: its Markdown columns, numbers right-aligned; ``extra_rows`` as given."""
    columns = table.shown(MD)
    rows: list[Sequence[object]] = [
        [_text(c, v) for c, v in zip(columns, values, strict=True)] for values in table.values(MD)
    ]
    return _table([c.header for c in columns], [*rows, *extra_rows], [c.kind not in LEFT for c in columns])


def _points(table: ColumnTable[Estimate]) -> list[str]:
    """The points of the six dimensions and the pooled column, in percent."""
    return [percent(value.point) for _, value in table.columns()]


def _marked_points(table: ColumnTable[Estimate], n_orders: int, size: int) -> list[str]:
    """Like :func:`_points`, with cells resting on 1-3 cases marked (shown, not to be compared).

    A dimension's cell rests on the group's cases labelled on it; the pooled cell on the group's cases.
    """
    out = []
    for column, value in table.columns():
        cases = size if column == "all" else min(size, cell_cases(value, n_orders))
        out.append(f"({percent(value.point)}) {FEW_MARK}" if few_cases(cases) else percent(value.point))
    return out


def _with_n(value: Estimate) -> str:
    return f"{percent(value.point)} ({value.n})"


def _note(sentence: str) -> list[str]:
    return ["", sentence] if sentence else []


def render_markdown(analysis: Analysis, *, title: str | None = None, probes: ProbeSection | None = None) -> str:
    """The report as Markdown.

    Args:
        analysis: the output of :func:`medrewardbench.metrics.analysis.analyze`.
        title: the top heading; None: :func:`~medrewardbench.report.tables.report_title` of the data set's name.
        probes: the probe files' figures (:mod:`medrewardbench.report.probes`), or None to leave the section out.

    Returns:
        The document (ends with a newline).
    """
    tables = report_tables(analysis)
    analysis = answering(analysis)
    settings = analysis.settings
    dataset = analysis.dataset
    conf = round(100 * settings.confidence)
    human = analysis.human
    out = _introduction(analysis, report_title(dataset.name) if title is None else title)
    out += _leaderboard_section(analysis, tables)
    out += ["", "## Per dimension", "", f"{METRIC.capitalize()} [{conf} % CI]; `t` = tier on that dimension.", ""]
    sensitivity = analysis.sensitivity
    detectable_row = (
        []
        if sensitivity is None
        else [["*detectable (from chance / between judges)*", *_detectable_cells(sensitivity)]]
    )
    out += _write(tables.dimensions, detectable_row)
    if sensitivity is not None:
        out += [
            "",
            "The last row: the smallest differences (points) the cases of each dimension can detect (80 % power, "
            "two-sided 5 %); judges closer than that to chance or to each other on a dimension cannot be told apart.",
        ]

    out += _organ_tables(analysis)
    out += _organ_notes(analysis)

    out += [
        "## Agreement beyond chance",
        "",
        "Cohen's κ with the labels per dimension and Gwet's AC1 (overall) over answered judgments; 0 = chance, "
        "1 = perfect.",
        "",
    ]
    out += _write(tables.agreement)

    out += [
        "",
        "## Position bias",
        "",
        "Consistent: same winner in both orders. First shown: share of picks of the answer shown first "
        "(50 = no preference). Strict: right in both orders. All dimensions pooled.",
        "",
    ]
    out += _write(tables.position)

    out += [
        "",
        "## Length bias",
        "",
        f"The labelled winner is the longer answer in {percent(dataset.expert_longer_rate['overall'])} % of "
        "cases (overall). A length-biased judge picks the longer answer much more often, and agrees with the labels "
        "far more often when their winner is the longer answer.",
        "",
    ]
    out += _write(tables.length)

    significant = tables.pairwise.rows
    if probes is not None:
        out += _probes_section(probes)

    out += [
        "",
        "## Pairwise differences",
        "",
        f"{len(significant)} of {len(analysis.pairwise.on_score())} pairs differ significantly on the score (paired "
        "bootstrap, Holm). Both tests resample or permute whole cases; every dimension is in the CSV, JSON and "
        "spreadsheet outputs.",
        "",
    ]
    if significant:
        out += _write(replace(tables.pairwise, rows=significant[:MAX_PAIRS_LISTED]))
        if len(significant) > MAX_PAIRS_LISTED:
            out.append(f"\n…and {len(significant) - MAX_PAIRS_LISTED} more.")

    out += _note(
        f"With {sensitivity.n_cases.pooled} cases, score differences under {points(sensitivity.between_judges.pooled)} "
        "points between two judges cannot be detected (80 % power, two-sided 5 %)."
        if sensitivity is not None and sensitivity.between_judges.pooled == sensitivity.between_judges.pooled
        else ""
    )

    if human is not None and tables.human is not None:
        out += _human_section(human, tables.human, sensitivity)
        out += _stand_in_section(human, settings, tables.human)

    if tables.failures.rows:
        out += ["", "## Failures", ""]
        out += _write(tables.failures)
    out.append("")
    return "\n".join(out)


def _probes_section(section: ProbeSection) -> list[str]:
    columns = probe_columns(section)
    lines = probe_lines(section)
    out = ["", "## Probes", "", probe_intro(section), ""]
    out += _table(
        ["Judge", *(header for _, header in columns)],
        [[_esc(line["judge"]), *(line[key] for key, _ in columns)] for line in lines],
        [False] * (len(columns) + 1),
    )
    if section.pages:
        links = ", ".join(f"[{PROBE_TITLES[p]}]({href})" for p, href in section.pages.items())
        out += ["", f"Each probe's own page: {links}."]
    return out


def _never(analysis: Analysis) -> str:
    """`` (N never answered)`` when some judges are listed apart, else nothing."""
    n = len(analysis.runs) - len(analysis.leaderboard)
    return f" ({n} never answered)" if n else ""


def _introduction(analysis: Analysis, title: str) -> list[str]:
    """The title, the data set, the banners and how to read the numbers (one example from the first row)."""
    settings = analysis.settings
    dataset = analysis.dataset
    board = analysis.leaderboard
    conf = round(100 * settings.confidence)
    out: list[str] = [f"# {title}", ""]
    name = f"Dataset **{_esc(dataset.name)}** · " if dataset.name else ""
    out.append(
        f"{name}{dataset.n_cases} cases · {len(analysis.runs)} judges{_never(analysis)} · "
        f"data fingerprint `{dataset.data_hash[:12]}` · "
        f"{conf} % bootstrap intervals ({settings.n_resamples} resamples, seed {settings.seed})"
    )
    out += ["", f"> **{_esc(dataset.labels.banner())}**", ""]
    banner = small_sample_banner(analysis.sensitivity)
    if banner:
        out += [f"> **⚠ {banner}**", ""]
    if board and board[0].score.defined:
        top = board[0]
        if top.score.has_interval:
            example = (
                f"- `{estimate(top.score)}`, the score of {_esc(top.label)} (first row below), reads: "
                f"{percent(top.score.point)} % of its judgments agree with the labels, with a {conf} % interval from "
                f"{percent(top.score.low)} to {percent(top.score.high)} (cases resampled within organ systems). "
                "50 % is chance."
            )
        else:
            example = (
                f"- `{estimate(top.score)}`, the score of {_esc(top.label)} (first row below), reads: "
                f"{percent(top.score.point)} % of its judgments agree with the labels. 50 % is chance."
            )
    else:
        example = "- 50 % is chance."
    out += [
        "## How to read",
        "",
        f"- Numbers are the {METRIC}: the share (%) of judgments that name the answer the labels prefer "
        f"(labels: {_esc(dataset.labels.text())}). Each case is judged in both presentation orders and both count; "
        "a failed judgment (error, unparseable) counts as wrong.",
        example,
        "- **Score** pools all six dimensions (equal to their mean when every case is labelled on all six); "
        "**macro** weights every organ system equally. Consistent and 1st pos. pool the six dimensions too. "
        '"Accuracy" is one of the six dimensions, never the score.',
        f"- **Tier**: tier 1 is the leader plus every judge not significantly different from it (paired bootstrap, "
        f"Holm-corrected, α = {settings.alpha}); the rule repeats on the rest. Members of one tier may still "
        "differ from each other.",
        "- Judges marked *(baseline)* are simple rules; a useful judge beats them.",
        "",
        "## Leaderboard",
        "",
    ]
    return out


def _leaderboard_section(analysis: Analysis, tables: ReportTables) -> list[str]:
    """The leaderboard table and what its columns mean."""
    board = analysis.leaderboard
    out: list[str] = []
    with_cost = any(row.has_cost for row in board)
    human = analysis.human
    out += _write(tables.leaderboard)
    out += [
        "",
        "**Response rate**: the share of requests the judge answered with a verdict it could read. "
        f"**{ANSWERED_HEADER}**: the {METRIC} over those answered requests only (the score counts the "
        "others as wrong).",
    ]
    if tables.failed.rows:
        out += [
            "",
            "### Judges that never answered",
            "",
            "Every request of these judges failed: they are not ranked and in no tier (a score of 0 would only "
            "say that nothing was answered).",
            "",
        ]
        out += _write(tables.failed)
    if human is not None:
        out += [
            "",
            f"*{_esc(human.label)}* is not a judge and is not ranked: it is each annotator against the majority of the "
            "other annotators. **Vs annotators** puts every judge against exactly those majorities; a judge that "
            f"reaches the *{_esc(human.label)}* row agrees with the annotators as often as one of them does "
            "(see [Human ceiling](#human-ceiling)). **÷ human** divides the two (1.00 = as often as an annotator). "
            "**Stands in for an annotator?** is the alternative annotator test on all dimensions "
            f"(ε = {human.epsilon:g}; see [Can a judge stand in for an annotator?]"
            "(#can-a-judge-stand-in-for-an-annotator)).",
        ]
    out += _note(detectable_sentence(analysis.sensitivity, human=human is not None))
    if with_cost:
        out += [
            "",
            "Cost: what the run's stored judgments cost at the prices the sweep was given (dollars per million "
            "input and output tokens; Batch API answers at batch prices); a jury costs what its members cost. "
            "Per 1,000 cases: per case judged in every order.",
        ]

    return out


def _organ_tables(analysis: Analysis) -> list[str]:
    """One table per judge and grouping field: groups x dimensions, cells on 1-3 cases marked."""
    dataset = analysis.dataset
    out: list[str] = []
    out += ["", "## Organ systems × dimensions", ""]
    for field_name in analysis.settings.group_fields:
        for r in analysis.ranked_runs():
            grouped = r.groups.get(field_name)
            if not grouped:
                continue
            sizes = dataset.groups.get(field_name, {})
            out += [f"### {_esc(r.label)} — by {field_name.replace('_', ' ')}", ""]
            n_orders = len(r.orders)
            table_rows = [
                [_esc(group), sizes.get(group, ""), *_marked_points(est, n_orders, sizes.get(group, 0))]
                for group, est in grouped.groups.items()
            ]
            table_rows.append(["all (pooled)", dataset.n_cases, *_points(grouped.micro)])
            table_rows.append(["macro (mean)", "", *_points(grouped.macro)])
            out += _table(
                [field_name.replace("_", " "), "cases", *[d.capitalize() for d in DIMENSIONS], "All"], table_rows
            )
            out.append("")
    return out


def _detectable_cells(sensitivity: Sensitivity) -> list[str]:
    return [f"{points(sensitivity.vs_chance[d])} / {points(sensitivity.between_judges[d])}" for d in DIMENSIONS]


def _organ_notes(analysis: Analysis) -> list[str]:
    """What the organ tables can and cannot show: the marked cells and each organ system's detectable difference."""
    out = [
        f"Cells marked {FEW_MARK} rest on one to three cases: shown in brackets, not to be compared with anything. "
        "Macro averages every organ system with equal weight, small ones included."
    ]
    sensitivity = analysis.sensitivity
    if sensitivity is not None and sensitivity.by_group:
        sizes = analysis.dataset.groups.get(sensitivity.group_field, {})
        listed = "; ".join(
            f"{_esc(group)} ({sizes.get(group, '?')} cases) {points(value, blank='nothing')}"
            for group, value in sensitivity.by_group.items()
        )
        out += [
            "",
            f"Per {sensitivity.group_field.replace('_', ' ')}, differences from chance (all dimensions) under these "
            f"many points cannot be detected (80 % power): {listed}.",
        ]
    return [*out, ""]


def _stand_in_section(human: HumanCeiling, settings: Settings, tables: HumanTables) -> list[str]:
    """Can a judge stand in for an annotator? The method in two sentences, then every judge's verdicts."""
    return [
        "",
        "## Can a judge stand in for an annotator?",
        "",
        STAND_IN_METHOD.format(epsilon=f"{human.epsilon:g}", q=f"{settings.alpha:g}"),
        "",
        *_write(tables.stand_in),
        "",
        "Per dimension (ω in brackets):",
        "",
        *_write(tables.stand_in_dimensions),
    ]


def _human_section(human: HumanCeiling, built: HumanTables, sensitivity: Sensitivity | None = None) -> list[str]:
    """The human-ceiling section.

    Judges and annotators against the leave-one-out majorities, and the agreement between
    annotators per dimension and organ system.
    """
    names = ", ".join(_esc(a) for a in human.annotators)
    out = [
        "",
        "## Human ceiling",
        "",
        f"{len(human.annotators)} annotators ({names}) labelled {human.n_cases} cases ({human.n_annotations} "
        "annotations). For every case, annotator and dimension, the *target* is the strict majority of the **other** "
        "annotators' labels (with two annotators, the other one's label); where the others tie there is no target "
        f"and nothing is counted. *{_esc(human.label)}*: how often an annotator's own label equals that target. "
        "**Vs annotators**: how often a judge's verdict equals the same targets (every order it judged counts, "
        "failures count wrong). **Gap**: judge minus human in points, paired on the same resamples; a gap whose "
        "interval includes 0 cannot tell the judge from an annotator. **÷ human**: judge divided by human "
        "(1.00 = as often as an annotator).",
        "",
    ]
    out += _write(built.vs_annotators)
    if sensitivity is not None and sensitivity.vs_human is not None:
        per_dimension = ", ".join(f"{d} {points(sensitivity.vs_human[d])}" for d in DIMENSIONS)
        out += [
            "",
            f"With {sensitivity.n_cases.pooled} cases, gaps to the human row under "
            f"{points(sensitivity.vs_human.pooled)} points (all dimensions) cannot be detected (80 % power, "
            f"two-sided 5 %); per dimension: {per_dimension}.",
        ]

    out += [
        "",
        "### Agreement between annotators",
        "",
        "Pairwise agreement: agreeing annotator pairs over all pairs on the same case. Fleiss' κ and Krippendorff's α "
        "correct it for chance (0 = chance, 1 = perfect). *n*: cases with at least two labels (for *all*, "
        "(case, dimension) items).",
        "",
    ]
    out += _write(built.panel)

    field = human.group_field.replace("_", " ")
    out += [
        "",
        f"### Agreement between annotators by {field}",
        "",
        f"All dimensions pooled; κ per dimension after. Rows marked {FEW_MARK} rest on one to three cases: not to be "
        "compared.",
    ]
    out.append("")
    out += _write(built.groups)

    out += ["", "### Each annotator against the others", ""]
    out += _write(built.annotators)
    return out
