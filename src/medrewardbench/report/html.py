"""One self-contained HTML report: inline CSS, SVG charts and script, embedded images, no network.

The page is rendered from an :func:`~medrewardbench.metrics.analysis.analyze` result with a
jinja2 template (autoescaping on: judge outputs and case texts are always escaped) and, when
given, a :class:`~medrewardbench.report.gallery.CaseGallery` of cases that judges got wrong,
with every judge's picks on them.
A few lines of inline JavaScript filter the page by organ system, judge and dimension and open
images full size; without JavaScript everything is shown and the page reads (and prints) the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.metrics.results import (
    CAN_STAND_IN,
    CANNOT,
    TOO_FEW,
    Analysis,
    Estimate,
    HumanCeiling,
    LeaderboardRow,
    PairwiseComparison,
    RunAnalysis,
    Sensitivity,
)
from medrewardbench.report import plots
from medrewardbench.report.columns import HTML
from medrewardbench.report.format import (
    FEW_MARK,
    METRIC,
    STAND_IN_METHOD,
    cell_cases,
    detectable_sentence,
    estimate,
    few_cases,
    optional,
    p_value,
    percent,
    points,
    signed_percent,
    small_sample_banner,
)
from medrewardbench.report.gallery import CaseGallery, gallery_context
from medrewardbench.report.human import HumanTables
from medrewardbench.report.probes import ProbeSection, probe_context
from medrewardbench.report.selective import selective_context
from medrewardbench.report.tables import answering, report_tables, report_title
from medrewardbench.report.viewer import viewer_payload

TEMPLATES = Path(__file__).parent / "templates"
SMALL_N = 20
"""Heatmap cells counting fewer judgments than this (10 cases in both orders) are muted."""
VERDICT_CLASSES = {CAN_STAND_IN: "pass", CANNOT: "fail", TOO_FEW: "unknown"}
"""The CSS class of each stand-in verdict."""

SHORT = {
    "accuracy": "Accuracy",
    "relevance": "Relevance",
    "comprehensiveness": "Compreh.",
    "creativity": "Creativity",
    "responsiveness": "Respons.",
    "overall": "Overall",
}


def _diverging(value: float, scale: float) -> str:
    """Blue (positive) to orange (negative) through white, colour-blind safe (PuOr-like)."""
    t = max(-1.0, min(1.0, value / scale)) if scale else 0.0
    end = (33, 102, 172) if t >= 0 else (179, 88, 6)
    f = abs(t) * 0.85
    r, g, b = (round(255 + (e - 255) * f) for e in end)
    return f"#{r:02x}{g:02x}{b:02x}"


# --------------------------------------------------------------------------------------------
# Context
# --------------------------------------------------------------------------------------------


def _sampling(config: Mapping[str, Any]) -> str:
    """The sampling settings of a judge configuration in a few words (what an API or local judge sent)."""
    sampling = config.get("sampling")
    source: Mapping[str, Any] = sampling if isinstance(sampling, Mapping) else config
    parts: list[str] = []
    for key, name in (
        ("temperature", "temperature"),
        ("top_p", "top-p"),
        ("max_tokens", "max tokens"),
        ("max_new_tokens", "max tokens"),
    ):
        value = source.get(key)
        if value is not None and name not in " ".join(parts):
            parts.append(f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}")
    if config.get("structured"):
        parts.append("JSON schema")
    if config.get("constrained"):
        parts.append("constrained")
    return ", ".join(parts)


def _seed(config: Mapping[str, Any]) -> Any:
    sampling = config.get("sampling")
    if isinstance(sampling, Mapping) and sampling.get("seed") is not None:
        return sampling["seed"]
    return config.get("seed")


def _configuration_rows(ordered: Sequence[RunAnalysis], run_dates: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per judge: what produced its numbers (model, adapter, template, sampling, seed, version, date)."""
    rows = []
    for run in ordered:
        config = run.config
        spec_name = run.judge.partition(":")[2] or run.judge
        model = config.get("model") or config.get("base_model") or spec_name
        template = config.get("template")
        seed = _seed(config)
        rows.append(
            {
                "label": run.label,
                "judge": run.judge,
                "run_id": run.run_id,
                "model": str(model),
                "adapter": str(config["adapter"]) if config.get("adapter") else "",
                "template": "" if template is None else str(template),
                "sampling": _sampling(config),
                "seed": "" if seed is None else str(seed),
                "version": str(run.metadata.get("medrewardbench_version", "")),
                "date": run_dates.get(run.run_id, ""),
                "orders": ", ".join(run.orders),
            }
        )
    return rows


def _context(
    analysis: Analysis, gallery: CaseGallery | None, title: str | None, run_dates: Mapping[str, str]
) -> dict[str, Any]:
    tables = report_tables(analysis)
    # the judges that never answered keep a filter token (the case gallery shows them) but no rank
    every_run = analysis.ranked_runs()
    every_label = [r.label for r in every_run]
    analysis = answering(analysis)
    board = analysis.leaderboard
    ordered = analysis.ranked_runs()
    labels = [r.label for r in ordered]
    settings = analysis.settings
    dataset = analysis.dataset
    provenance = dataset.labels
    leaderboard = [
        {
            **record,
            "label": row.label,
            "run_id": row.run_id,
            "is_baseline": row.is_baseline,
            "band": (row.tier or 0) % 2 == 0,
            "orders": ", ".join(run.orders),
        }
        for record, row, run in zip(tables.leaderboard.records(HTML), board, ordered, strict=True)
    ]
    example = None
    if board and board[0].score.defined:
        top = board[0]
        example = {
            "label": top.label,
            "text": estimate(top.score),
            "point": percent(top.score.point),
            "low": percent(top.score.low),
            "high": percent(top.score.high),
            "has_interval": top.score.has_interval,
        }
    dimension_rows = [
        {
            "label": r.label,
            "is_baseline": r.is_baseline,
            "cells": [
                {"dim": c.key, "text": c.text(v), "tier": "" if v.tier is None else v.tier}
                for c, v in zip(tables.dimensions.shown(HTML)[1:], values[1:], strict=True)
            ],
        }
        for r, values in zip(tables.dimensions.rows, tables.dimensions.values(HTML), strict=True)
    ]
    organ_tokens = {name: f"o{i}" for i, name in enumerate(sorted(dataset.groups.get("organ_system", {})))}
    charts = _charts(analysis, organ_tokens)
    agreement_rows = tables.agreement.records(HTML)
    position_rows = tables.position.records(HTML)
    length_rows = tables.length.records(HTML)
    failures = tables.failures.records(HTML)

    sensitivity = analysis.sensitivity
    return {
        "small_sample_banner": small_sample_banner(sensitivity),
        "notes": _sensitivity_notes(sensitivity, analysis.human is not None, dataset.groups.get("organ_system", {})),
        "few_mark": FEW_MARK,
        "title": report_title(dataset.name) if title is None else title,
        "schema": analysis.schema,
        "dataset": dataset,
        "labels_banner": provenance.banner(),
        "labels_text": provenance.text(),
        "labels_by_experts": provenance.by_experts,
        "metric": METRIC,
        "example": example,
        "settings": settings,
        "confidence_pct": round(100 * settings.confidence),
        "n_judges": len(every_run),
        "n_never_answered": len(every_run) - len(board),
        "dimensions": DIMENSIONS,
        "short": SHORT,
        "leaderboard": leaderboard,
        "configuration": _configuration_rows(every_run, run_dates),
        "with_cost": any(row.has_cost for row in board),
        "forest": charts["forest"],
        "dimension_rows": dimension_rows,
        "dimension_bars": charts["dimension_bars"],
        "heatmaps": charts["heatmaps"],
        "small_n": SMALL_N,
        "colour_scale": plots.colour_scale(),
        "organ_sizes": dataset.groups.get("organ_system", {}),
        "judge_labels": labels,
        # filter tokens: labels and organ names may hold spaces, the data-* lists may not
        "judge_tokens": {label: f"j{i}" for i, label in enumerate(every_label)},
        "organ_tokens": organ_tokens,
        "agreement_rows": agreement_rows,
        "labels_coherence": percent(dataset.expert_coherence.get("accuracy")),
        "position_rows": position_rows,
        "position_plot": charts["position_plot"],
        "length_rows": length_rows,
        "length_plot": charts["length_plot"],
        "labels_longer": percent(dataset.expert_longer_rate["overall"]),
        "pairwise": _pairwise_matrix(analysis, board),
        "failures": failures,
        "failed": tables.failed.records(HTML),
        "gallery": None if gallery is None else gallery_context(gallery, every_label),
        "selective": selective_context(analysis),
        "human": None
        if analysis.human is None or tables.human is None
        else _human_context(analysis.human, board, settings.confidence, tables.human, settings.alpha),
    }


def _charts(analysis: Analysis, organ_tokens: Mapping[str, str]) -> dict[str, Any]:
    """The report's SVG charts: score forest, per-dimension bars, organ heatmaps, position and length plots."""
    board = analysis.leaderboard
    ordered = analysis.ranked_runs()
    labels = [r.label for r in ordered]
    settings = analysis.settings
    dataset = analysis.dataset
    forest = plots.forest(
        [("◆ " if r.is_baseline else "") + r.label for r in board],
        [optional(r.score.point) for r in board],
        [optional(r.score.low) for r in board],
        [optional(r.score.high) for r in board],
        title=f"Score: {METRIC}, all six dimensions ({round(100 * settings.confidence)} % intervals)",
        groups=[r.tier or 0 for r in board],
        reference=0.5,
        reference_label="chance",
        width=900,
        axis=f"{METRIC}, %",
    )

    dimension_bars = [
        {
            "dim": d,
            "svg": plots.interval_bars(
                labels,
                [optional(r.accuracy[d].point) for r in ordered],
                [optional(r.accuracy[d].low) for r in ordered],
                [optional(r.accuracy[d].high) for r in ordered],
                title=d.capitalize(),
                highlight=[r.is_baseline for r in ordered],
                reference=0.5,
                reference_label="chance",
                axis=f"{METRIC}, %",
            ),
        }
        for d in DIMENSIONS
    ]

    heatmaps = []
    for r in ordered:
        organ = r.groups.get("organ_system")
        if not organ:
            continue
        organ_tables = [*organ.groups.values(), organ.micro, organ.macro]
        sizes = dataset.groups.get("organ_system", {})
        few = [
            [few_cases(min(sizes.get(name, 0), cell_cases(table[d], len(r.orders)))) for d in DIMENSIONS]
            for name, table in organ.groups.items()
        ] + [[False] * len(DIMENSIONS)] * 2
        heatmaps.append(
            {
                "label": r.label,
                "svg": plots.heatmap(
                    [*organ.groups, "all (pooled)", "macro (mean)"],
                    [SHORT[d] for d in DIMENSIONS],
                    [[optional(table[d].point) for d in DIMENSIONS] for table in organ_tables],
                    title=r.label,
                    caption_rows=("all (pooled)", "macro (mean)"),
                    counts=[[table[d].n for d in DIMENSIONS] for table in organ.groups.values()]
                    + [[organ.micro[d].n for d in DIMENSIONS], [None] * len(DIMENSIONS)],
                    small_n=SMALL_N,
                    row_attributes=[f'data-organ="{organ_tokens.get(name, "o-none")}"' for name in organ.groups],
                    few=few,
                    few_label=FEW_MARK,
                ),
            }
        )

    first_shown = [r.position.first_position_rate.pooled for r in ordered]
    position_plot = plots.forest(
        labels,
        [optional(e.point) for e in first_shown],
        [optional(e.low) for e in first_shown],
        [optional(e.high) for e in first_shown],
        title="Share of picks of the response shown first (50 = no position preference)",
        reference=0.5,
        reference_label="no preference",
        domain=(0.0, 1.0),
        width=900,
        axis="picks of the response shown first, %",
    )

    length_plot = plots.dumbbell(
        labels,
        [optional(r.length.accuracy_expert_longer["overall"].point) for r in ordered],
        [optional(r.length.accuracy_expert_shorter["overall"].point) for r in ordered],
        title=f"Overall: {METRIC} when the labelled winner is the longer vs. the shorter response",
        first_label="labelled winner longer",
        second_label="labelled winner shorter",
        width=900,
        axis=f"{METRIC}, %",
    )

    return {
        "forest": forest,
        "dimension_bars": dimension_bars,
        "heatmaps": heatmaps,
        "position_plot": position_plot,
        "length_plot": length_plot,
    }


def _sensitivity_notes(
    sensitivity: Sensitivity | None, with_human: bool, organ_sizes: Mapping[str, int]
) -> dict[str, str]:
    """What each table's cases can detect, one sentence per table ("" where nothing can be said)."""
    if sensitivity is None:
        return {"leaderboard": "", "dimensions": "", "organs": "", "pairwise": "", "human": ""}
    per_dimension = ", ".join(
        f"{d} {points(sensitivity.vs_chance[d])} / {points(sensitivity.between_judges[d])}" for d in DIMENSIONS
    )
    organs = "; ".join(
        f"{group} ({organ_sizes.get(group, '?')} cases) {points(value, blank='nothing')}"
        for group, value in sensitivity.by_group.items()
    )
    n = sensitivity.n_cases.pooled
    between = sensitivity.between_judges.pooled
    human = ""
    if sensitivity.vs_human is not None:
        human = (
            f"With {n} cases, gaps to the human row under {points(sensitivity.vs_human.pooled)} points (all "
            "dimensions) cannot be detected (80 % power, two-sided 5 %); per dimension: "
            + ", ".join(f"{d} {points(sensitivity.vs_human[d])}" for d in DIMENSIONS)
            + "."
        )
    return {
        "leaderboard": detectable_sentence(sensitivity, human=with_human),
        "dimensions": "Smallest differences each dimension's cases can detect, in points from chance / between two "
        f"judges (80 % power, two-sided 5 %): {per_dimension}.",
        "organs": f"Per organ system, differences from chance (all dimensions) under these many points cannot be "
        f"detected: {organs}."
        if organs
        else "",
        "pairwise": f"With {n} cases, score differences under {points(between)} points between two judges cannot be "
        "detected (80 % power, two-sided 5 %)."
        if between == between
        else "",
        "human": human,
    }


def _stand_in_context(human: HumanCeiling, tables: HumanTables, alpha: float) -> dict[str, Any]:
    """The stand-in section: the method in two sentences and every judge's verdicts."""
    rows = [
        {
            **record,
            "label": found.row.label,
            "is_baseline": found.row.is_baseline,
            "cls": VERDICT_CLASSES.get(record["verdict"], "unknown"),
            "dims": dims,
        }
        for record, found, dims in zip(
            tables.stand_in.records(HTML), tables.stand_in.rows, tables.stand_in_dimensions.records(HTML), strict=True
        )
    ]
    return {
        "method": STAND_IN_METHOD.format(epsilon=f"{human.epsilon:g}", q=f"{alpha:g}"),
        "epsilon": f"{human.epsilon:g}",
        "rows": rows,
    }


def _human_context(
    human: HumanCeiling,
    board: Sequence[LeaderboardRow],
    confidence: float,
    tables: HumanTables,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """The human-ceiling section.

    Judges and annotators against the leave-one-out majorities, and the agreement between
    annotators per dimension and organ system; and whether each judge can stand in for an annotator.
    """
    entries: list[tuple[str, Estimate]] = [(human.label, human.human.pooled)]
    for row in board:
        judge = human.judge(row.label)
        if judge is not None:
            entries.append((("◆ " if row.is_baseline else "") + row.label, judge.agreement.pooled))
    vs = tables.vs_annotators
    human_row, *judge_rows = vs.records(HTML)
    judges = [
        {**record, "label": row.judge.label, "is_baseline": row.judge.is_baseline}
        for record, row in zip(judge_rows, vs.rows[1:], strict=True)
    ]
    group_rows = [
        {**record, "few": few_cases(row.panel.n_cases)}
        for record, row in zip(tables.groups.records(HTML), tables.groups.rows, strict=True)
    ]
    ceiling = human.human.pooled
    plot = plots.forest(
        [label for label, _ in entries],
        [optional(e.point) for _, e in entries],
        [optional(e.low) for _, e in entries],
        [optional(e.high) for _, e in entries],
        title=f"Agreement with the annotators' leave-one-out majorities ({round(100 * confidence)} % intervals)",
        reference=optional(ceiling.point),
        reference_label=human.label,
        width=900,
    )
    return {
        "label": human.label,
        "annotators": human.annotators,
        "n_annotators": len(human.annotators),
        "n_cases": human.n_cases,
        "n_annotations": human.n_annotations,
        "row": human_row,
        "judges": judges,
        "dimension_rows": tables.panel.records(HTML),
        "group_field": human.group_field.replace("_", " "),
        "group_rows": group_rows,
        "annotator_rows": tables.annotators.records(HTML),
        "plot": plot,
        "stand_in": _stand_in_context(human, tables, alpha),
    }


def _pairwise_matrix(analysis: Analysis, board: Sequence[LeaderboardRow]) -> dict[str, Any]:
    """The upper triangle of score differences: row judge (higher rank) minus column judge, in points.

    Rows are ranks 1..J-1 and columns ranks 2..J, so every pair appears once. Each cell prints the
    difference and, under it, its Holm-adjusted paired-bootstrap p-value (so they survive print).
    Significant cells are bold on a blue background whose depth grows with the difference; the
    others are grey text.
    """
    labels = [row.label for row in board]
    resamples = analysis.settings.n_resamples
    lookup: dict[tuple[str, str], PairwiseComparison] = {}
    for pair in analysis.pairwise.on_score():
        lookup[(pair.a, pair.b)] = pair
        lookup[(pair.b, pair.a)] = pair.flipped()
    diffs = [abs(c.diff) for c in analysis.pairwise.on_score() if c.diff == c.diff]
    scale = max(diffs, default=0.0) or 1.0
    rows = []
    for i, a in enumerate(labels[:-1]):
        cells = []
        for j, b in enumerate(labels[1:], start=1):
            if j <= i:
                cells.append({"text": "", "p": "", "style": "", "cls": "empty", "title": ""})
                continue
            comparison = lookup.get((a, b))
            if comparison is None or comparison.diff != comparison.diff:
                cells.append(
                    {"text": "–", "p": "", "style": "", "cls": "ns", "title": f"{a} vs {b}: no shared judgments"}
                )
                continue
            diff = comparison.diff
            text = percent(diff).replace("-", "−")
            if text in ("0.0", "−0.0"):
                text = "0.0"
            significant = comparison.significant
            shown_p = p_value(comparison.p_bootstrap_holm, resamples=resamples)
            cells.append(
                {
                    "text": text,
                    "p": "p " + shown_p,
                    "style": f"background:{_diverging(diff, scale)}" if significant else "",
                    "cls": "sig" if significant else "ns",
                    "title": f"{a} minus {b}: {signed_percent(diff)} points, Holm-adjusted p = {shown_p}"
                    + ("" if significant else " (not significant)"),
                }
            )
        rows.append({"rank": i + 1, "label": a, "cells": cells})
    return {
        "rows": rows,
        "columns": list(range(2, len(labels) + 1)),
        "n": len(labels),
        "n_pairs": len(analysis.pairwise.on_score()),
        "n_significant": sum(1 for c in analysis.pairwise.on_score() if c.significant),
    }


def render_html(
    analysis: Analysis,
    gallery: CaseGallery | None = None,
    *,
    title: str | None = None,
    run_dates: Mapping[str, str] | None = None,
    viewer: Mapping[str, Any] | None = None,
    probes: ProbeSection | None = None,
) -> str:
    """The report page as one string.

    Args:
        analysis: the output of :func:`medrewardbench.metrics.analysis.analyze`.
        gallery: cases judges got wrong, or None to leave that section out.
        title: the page title (``<title>`` and ``<h1>``); None: the data set's name
            (:func:`~medrewardbench.report.tables.report_title`).
        run_dates: run id -> the date the run was last evaluated (the configuration table's date).
        viewer: every case's data for the per-case viewer
            (:func:`~medrewardbench.report.viewer.viewer_data`), or None to leave it out.
        probes: the probe files' figures (:mod:`medrewardbench.report.probes`), or None to leave the section out.

    Returns:
        A complete HTML document that loads nothing from the network.
    """
    import jinja2  # a core dependency, imported here to keep the command line quick to start
    from markupsafe import Markup as markup  # jinja2's own dependency

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    template = env.get_template("report.html.j2")
    context = _context(analysis, gallery, title, run_dates or {})
    for key in ("forest", "colour_scale", "position_plot", "length_plot"):
        context[key] = markup(context[key])
    for item in context["dimension_bars"]:
        item["svg"] = markup(item["svg"])
    for item in context["heatmaps"]:
        item["svg"] = markup(item["svg"])
    if context["human"] is not None:
        context["human"]["plot"] = markup(context["human"]["plot"])
    for row in context["selective"]["rows"] if context["selective"] else ():
        row["reliability"], row["curve"] = markup(row["reliability"]), markup(row["curve"])
    context["probes"] = None if probes is None else probe_context(probes)
    context["css"] = markup((TEMPLATES / "report.css").read_text("utf-8"))
    context["script"] = markup((TEMPLATES / "report.js").read_text("utf-8"))
    payload = viewer_payload(viewer) if viewer is not None else ("json", "")
    context["viewer"] = (
        None
        if viewer is None
        else {
            "n_cases": len(viewer["cases"]),
            "page_size": viewer["page_size"],
            "notes": viewer.get("notes", []),
            "encoding": payload[0],
            "json": markup(payload[1]),
            "script": markup((TEMPLATES / "viewer.js").read_text("utf-8")),
        }
    )
    return str(template.render(**context))


def write_html(
    analysis: Analysis,
    path: str | Path,
    gallery: CaseGallery | None = None,
    *,
    title: str | None = None,
    run_dates: Mapping[str, str] | None = None,
    viewer: Mapping[str, Any] | None = None,
    probes: ProbeSection | None = None,
) -> Path:
    """Render the report and write it (UTF-8). Returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(analysis, gallery, title=title, run_dates=run_dates, viewer=viewer, probes=probes)
    out.write_text(page, encoding="utf-8")
    return out
