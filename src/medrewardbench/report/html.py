"""One self-contained HTML report: inline CSS, inline SVG charts, embedded thumbnails, no network.

The page is rendered from an :func:`~medrewardbench.metrics.analysis.analyze` result with a
jinja2 template (autoescaping on: judge outputs and case texts are always escaped) and, when
given, a :class:`CaseGallery` of cases that judges got wrong.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.cases import ImageRef
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.images import load_image
from medrewardbench.metrics.results import Analysis, LeaderboardRow, PairwiseComparison
from medrewardbench.report import plots
from medrewardbench.report.format import (
    METRIC,
    coefficient,
    coefficient_estimate,
    estimate,
    optional,
    p_value,
    percent,
    signed_percent,
)

TEMPLATES = Path(__file__).parent / "templates"
THUMBNAIL_MAX_SIDE = 256
RAW_OUTPUT_LIMIT = 6000
"""Characters of a judge's raw output shown per request; the rest is cut with a note."""

SHORT = {
    "accuracy": "Accuracy",
    "relevance": "Relevance",
    "comprehensiveness": "Compreh.",
    "creativity": "Creativity",
    "responsiveness": "Respons.",
    "overall": "Overall",
}


# --------------------------------------------------------------------------------------------
# Cases shown in the report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OrderOutcome:
    """What a judge answered for a case in one presentation order (verdicts in source order)."""

    order: str
    verdicts: Mapping[str, int | None]
    """dimension -> 1 or 2, None where the judge gave no verdict."""
    raw_output: str | None
    failure: str | None


@dataclass(frozen=True)
class JudgeMistake:
    """One judge's answers on a case it got wrong."""

    judge: str
    outcomes: tuple[OrderOutcome, ...]


@dataclass(frozen=True)
class CaseView:
    """A case as the report shows it; texts and image are None when the source is unavailable."""

    case_id: str
    organ_system: str
    labels: Mapping[str, int]
    question: str | None = None
    response_1: str | None = None
    response_2: str | None = None
    image_uri: str | None = None
    notes: tuple[str, ...] = ()
    mistakes: tuple[JudgeMistake, ...] = ()


@dataclass(frozen=True)
class CaseGallery:
    """The cases judges got wrong, each case once, with an index per judge."""

    cases: tuple[CaseView, ...]
    by_judge: Mapping[str, Sequence[str]]
    """judge label -> the case ids shown for it (in display order)."""
    dimension: str = "overall"
    per_judge: int = 50
    notes: tuple[str, ...] = field(default=())


def thumbnail_data_uri(image: ImageRef, max_side: int = THUMBNAIL_MAX_SIDE) -> str:
    """A small JPEG of an image as a ``data:`` URI, for embedding.

    Args:
        image: the image reference.
        max_side: the longest side in pixels after shrinking (images are never enlarged).

    Returns:
        ``data:image/jpeg;base64,...``.

    Raises:
        ImageError: the image cannot be decoded.
    """
    picture = load_image(image)
    picture.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    picture.save(buffer, format="JPEG", quality=78, optimize=True)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


# --------------------------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------------------------


def _clip(text: str | None, limit: int = RAW_OUTPUT_LIMIT) -> tuple[str | None, int]:
    if text is None or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


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


def _context(analysis: Analysis, gallery: CaseGallery | None, title: str) -> dict[str, Any]:
    board = analysis.leaderboard
    ordered = analysis.ranked_runs()
    labels = [r.label for r in ordered]
    settings = analysis.settings
    dataset = analysis.dataset

    leaderboard = [
        {
            "rank": row.rank,
            "tier": row.tier,
            "label": row.label,
            "run_id": row.run_id,
            "is_baseline": row.is_baseline,
            "score": estimate(row.score),
            "macro": estimate(row.macro),
            "answered": percent(row.answered_accuracy),
            "failures": percent(row.failure_rate),
            "consistency": percent(row.consistency),
            "first": percent(row.first_position_rate),
            "longer": percent(row.longer_preference),
            "band": (row.tier or 0) % 2 == 0,
            "orders": ", ".join(run.orders),
        }
        for row, run in zip(board, ordered, strict=True)
    ]
    forest = plots.forest(
        [("◆ " if r.is_baseline else "") + r.label for r in board],
        [optional(r.score.point) for r in board],
        [optional(r.score.low) for r in board],
        [optional(r.score.high) for r in board],
        title=f"Agreement with the experts, all six dimensions ({round(100 * settings.confidence)} % intervals)",
        groups=[r.tier or 0 for r in board],
        reference=0.5,
        reference_label="chance",
        width=900,
    )

    dimension_rows = [
        {
            "label": r.label,
            "is_baseline": r.is_baseline,
            "cells": [
                {"text": estimate(r.accuracy[d]), "tier": "" if r.tiers is None else r.tiers[d]} for d in DIMENSIONS
            ],
        }
        for r in ordered
    ]
    dimension_bars = [
        plots.interval_bars(
            labels,
            [optional(r.accuracy[d].point) for r in ordered],
            [optional(r.accuracy[d].low) for r in ordered],
            [optional(r.accuracy[d].high) for r in ordered],
            title=d.capitalize(),
            highlight=[r.is_baseline for r in ordered],
            reference=0.5,
            reference_label="chance",
        )
        for d in DIMENSIONS
    ]

    heatmaps = []
    for r in ordered:
        organ = r.groups.get("organ_system")
        if not organ:
            continue
        tables = [*organ.groups.values(), organ.micro, organ.macro]
        heatmaps.append(
            {
                "label": r.label,
                "svg": plots.heatmap(
                    [*organ.groups, "all (pooled)", "macro (mean)"],
                    [SHORT[d] for d in DIMENSIONS],
                    [[optional(table[d].point) for d in DIMENSIONS] for table in tables],
                    title=r.label,
                    caption_rows=("all (pooled)", "macro (mean)"),
                ),
            }
        )

    agreement_rows = [
        {
            "label": r.label,
            "kappa": [coefficient(r.agreement.kappa[d].point) for d in DIMENSIONS],
            "kappa_overall": coefficient_estimate(r.agreement.kappa["overall"]),
            "ac1_overall": coefficient_estimate(r.agreement.ac1["overall"]),
            "coherence": percent(r.coherence.get("accuracy")),
        }
        for r in ordered
    ]

    position_rows = [
        {
            "label": r.label,
            "consistency": estimate(r.position.consistency.pooled),
            "first": estimate(r.position.first_position_rate.pooled),
            "strict": estimate(r.strict_accuracy.pooled),
            "original": estimate(r.by_order["original"].pooled) if "original" in r.by_order else "not run",
            "swapped": estimate(r.by_order["swapped"].pooled) if "swapped" in r.by_order else "not run",
        }
        for r in ordered
    ]
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
    )

    length_rows = [
        {
            "label": r.label,
            "longer": estimate(r.length.longer_preference.pooled),
            "acc_longer": percent(r.length.accuracy_expert_longer["overall"].point),
            "n_longer": r.length.accuracy_expert_longer["overall"].n,
            "acc_shorter": percent(r.length.accuracy_expert_shorter["overall"].point),
            "n_shorter": r.length.accuracy_expert_shorter["overall"].n,
        }
        for r in ordered
    ]
    length_plot = plots.dumbbell(
        labels,
        [optional(r.length.accuracy_expert_longer["overall"].point) for r in ordered],
        [optional(r.length.accuracy_expert_shorter["overall"].point) for r in ordered],
        title=f"Overall {METRIC} when the experts preferred the longer vs. the shorter response",
        first_label="experts preferred the longer",
        second_label="experts preferred the shorter",
        width=900,
    )

    failures = [
        {"label": r.label, "rate": percent(r.failure_rate.pooled), "reasons": list(r.failures.items())[:5]}
        for r in ordered
        if r.failures
    ]

    return {
        "title": title,
        "schema": analysis.schema,
        "dataset": dataset,
        "settings": settings,
        "confidence_pct": round(100 * settings.confidence),
        "n_judges": len(board),
        "dimensions": DIMENSIONS,
        "short": SHORT,
        "leaderboard": leaderboard,
        "forest": forest,
        "dimension_rows": dimension_rows,
        "dimension_bars": dimension_bars,
        "heatmaps": heatmaps,
        "colour_scale": plots.colour_scale(),
        "organ_sizes": dataset.groups.get("organ_system", {}),
        "agreement_rows": agreement_rows,
        "expert_coherence": percent(dataset.expert_coherence.get("accuracy")),
        "position_rows": position_rows,
        "position_plot": position_plot,
        "length_rows": length_rows,
        "length_plot": length_plot,
        "expert_longer": percent(dataset.expert_longer_rate["overall"]),
        "pairwise": _pairwise_matrix(analysis, board),
        "failures": failures,
        "gallery": None if gallery is None else _gallery_context(gallery, labels),
    }


def _pairwise_matrix(analysis: Analysis, board: Sequence[LeaderboardRow]) -> dict[str, Any]:
    """The upper triangle of score differences: row judge (higher rank) minus column judge, in points.

    Rows are ranks 1..J-1 and columns ranks 2..J, so every pair appears once. Significant cells
    (Holm-adjusted paired bootstrap) are bold on a blue background whose depth grows with the
    difference; the others are grey text.
    """
    labels = [row.label for row in board]
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
                cells.append({"text": "", "style": "", "cls": "empty", "title": ""})
                continue
            comparison = lookup.get((a, b))
            if comparison is None or comparison.diff != comparison.diff:
                cells.append({"text": "–", "style": "", "cls": "ns", "title": f"{a} vs {b}: no shared judgments"})
                continue
            diff = comparison.diff
            text = percent(diff).replace("-", "−")
            if text in ("0.0", "−0.0"):
                text = "0.0"
            significant = comparison.significant
            cells.append(
                {
                    "text": text,
                    "style": f"background:{_diverging(diff, scale)}" if significant else "",
                    "cls": "sig" if significant else "ns",
                    "title": f"{a} minus {b}: {signed_percent(diff)} points, Holm-adjusted p = "
                    f"{p_value(comparison.p_bootstrap_holm, resamples=analysis.settings.n_resamples)}"
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


def _verdict_cell(case_label: int | None, outcomes: Sequence[OrderOutcome], dim: str) -> dict[str, Any]:
    """One dimension of one judge: its pick per order, each marked right or wrong."""
    parts = []
    wrong = False
    for outcome in outcomes:
        verdict = outcome.verdicts.get(dim)
        if verdict is None:
            parts.append({"text": "—", "cls": "fail", "title": f"{outcome.order}: no verdict"})
            wrong = True
        elif case_label is None:
            parts.append({"text": str(verdict), "cls": "nolabel", "title": f"{outcome.order}: response {verdict}"})
        elif verdict == case_label:
            parts.append({"text": f"{verdict}✓", "cls": "ok", "title": f"{outcome.order}: response {verdict}, right"})
        else:
            parts.append({"text": f"{verdict}✗", "cls": "bad", "title": f"{outcome.order}: response {verdict}, wrong"})
            wrong = True
    return {"parts": parts, "wrong": wrong}


def _gallery_context(gallery: CaseGallery, labels: Sequence[str]) -> dict[str, Any]:
    rank = {label: i for i, label in enumerate(labels)}
    cases = []
    for case in gallery.cases:
        rows = []
        raws = []
        for mistake in sorted(case.mistakes, key=lambda m: rank.get(m.judge, len(rank))):
            rows.append(
                {
                    "judge": mistake.judge,
                    "orders": "/".join(o.order[:4] for o in mistake.outcomes),
                    "cells": [_verdict_cell(case.labels.get(d), mistake.outcomes, d) for d in DIMENSIONS],
                }
            )
            for outcome in mistake.outcomes:
                if outcome.raw_output is None and outcome.failure is None:
                    continue  # rule-based judges produce no text
                raw, cut = _clip(outcome.raw_output)
                raws.append(
                    {"judge": mistake.judge, "order": outcome.order, "raw": raw, "cut": cut, "failure": outcome.failure}
                )
        cases.append(
            {
                "id": case.case_id,
                "anchor": "case-" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in case.case_id),
                "organ": case.organ_system,
                "labels": [case.labels.get(d) for d in DIMENSIONS],
                "question": case.question,
                "response_1": case.response_1,
                "response_2": case.response_2,
                "image": case.image_uri,
                "notes": case.notes,
                "rows": rows,
                "raws": raws,
                "n_raw_judges": len({r["judge"] for r in raws}),
            }
        )
    anchors = {c["id"]: c["anchor"] for c in cases}
    index = [
        {
            "label": label,
            "cases": [{"id": cid, "anchor": anchors[cid]} for cid in gallery.by_judge.get(label, []) if cid in anchors],
        }
        for label in labels
    ]
    return {
        "cases": cases,
        "index": index,
        "dimension": gallery.dimension,
        "per_judge": gallery.per_judge,
        "notes": gallery.notes,
    }


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def render_html(
    analysis: Analysis, gallery: CaseGallery | None = None, *, title: str = "Med-RewardBench report"
) -> str:
    """The report page as one string.

    Args:
        analysis: the output of :func:`medrewardbench.metrics.analysis.analyze`.
        gallery: cases judges got wrong, or None to leave that section out.
        title: the page title.

    Returns:
        A complete HTML document that loads nothing from the network.
    """
    import jinja2  # a core dependency, imported here to keep the command line quick to start
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    template = env.get_template("report.html.j2")
    context = _context(analysis, gallery, title)
    from markupsafe import Markup as markup  # jinja2's own dependency

    for key in ("forest", "colour_scale", "position_plot", "length_plot"):
        context[key] = markup(context[key])
    context["dimension_bars"] = [markup(svg) for svg in context["dimension_bars"]]
    for item in context["heatmaps"]:
        item["svg"] = markup(item["svg"])
    context["css"] = markup((TEMPLATES / "report.css").read_text("utf-8"))
    return str(template.render(**context))


def write_html(
    analysis: Analysis,
    path: str | Path,
    gallery: CaseGallery | None = None,
    *,
    title: str = "Med-RewardBench report",
) -> Path:
    """Render the report and write it (UTF-8). Returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(analysis, gallery, title=title), encoding="utf-8")
    return out
