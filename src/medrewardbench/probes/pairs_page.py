"""The HTML pages of the pair probes: ``probe-counterfactual.html`` and ``probe-bias.html``.

Self-contained like the report (:mod:`medrewardbench.report.html`): the report's stylesheet inlined,
no script, no network; jinja2 with autoescaping, so judge names and edit details are escaped. Each
judge gets a card: for the counterfactual probe its detection rates by type and severity, its
critical-miss rate and its harmless-variant control; for the bias card one row per bias with its
rate and interval. Tables keep to three or four narrow columns so that a phone (390 px) reads them
without sideways scrolling.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2

from medrewardbench.probes.bias import BiasFigures
from medrewardbench.probes.counterfactual import CounterfactualFigures
from medrewardbench.probes.edits import SEVERITY_NAMES
from medrewardbench.probes.pairs import Rate

__all__ = ["render_bias_page", "render_counterfactual_page"]

_CSS = Path(__file__).resolve().parents[1] / "report" / "templates" / "report.css"

_EXTRA_CSS = """
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 520px), 1fr)); gap: 18px 24px; }
.card { border: 1px solid var(--rule); border-radius: 6px; padding: 10px 14px; min-width: 0; }
.card h3 { margin-top: 4px; overflow-wrap: anywhere; }
.card table { width: 100%; }
.card td, .card th { white-space: normal; }
.bar { display: block; height: 6px; background: var(--band); border-radius: 3px; margin-top: 3px; position: relative; }
.bar span { position: absolute; top: 0; bottom: 0; background: var(--accent); border-radius: 3px; opacity: 0.75; }
.verdict { display: inline-block; padding: 1px 8px; border-radius: 9px; font-size: 0.85rem; }
.verdict.fail { background: #fde7dc; color: #8a3300; }
.verdict.pass { background: #e3f1fb; color: #0b4f80; }
.summary td { overflow-wrap: anywhere; }
"""

_TEMPLATE = Path(__file__).resolve().parent / "templates" / "pairs.html.j2"


def _pct(value: float) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.0%}"


def _cell(rate: Rate | None, signed: bool = False) -> dict[str, Any]:
    """A rate as ``72% (60–83%)`` with a bar spanning its interval."""
    if rate is None or math.isnan(rate.point):
        return {"text": "not measurable" if rate is None else "–", "bar": None}
    point = f"{rate.point:+.0%}" if signed else f"{rate.point:.0%}"
    text = f"{point} ({_pct(rate.low)}–{_pct(rate.high)})"
    if signed or math.isnan(rate.low):
        return {"text": text, "bar": None}
    left = max(0.0, min(100.0, rate.low * 100))
    width = max(1.0, min(100.0 - left, (rate.high - rate.low) * 100))
    return {"text": text, "bar": (round(left, 1), round(width, 1))}


def _plain(value: object) -> dict[str, Any]:
    return {"text": str(value), "bar": None}


def _environment() -> jinja2.Environment:
    return jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def _page(context: dict[str, Any], path: Path) -> Path:
    context = {"css": _CSS.read_text(encoding="utf-8"), "extra_css": _EXTRA_CSS, **context}
    html = _environment().from_string(_TEMPLATE.read_text(encoding="utf-8")).render(**context)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path


def _tally_rows(tally: dict[str, Any]) -> list[tuple[str, int, str]]:
    kinds = list(dict.fromkeys([*tally.get("made", {}), *tally.get("skipped", {})]))
    rows = []
    for kind in kinds:
        reasons = tally.get("skipped", {}).get(kind, {})
        text = "; ".join(f"{n} ({reason})" for reason, n in reasons.items()) or "none"
        rows.append((kind, int(tally.get("made", {}).get(kind, 0)), text))
    return rows


def render_counterfactual_page(
    figures: CounterfactualFigures, path: Path, *, data_name: str, source: str, tally: dict[str, Any]
) -> Path:
    """Write the counterfactual page.

    Args:
        figures: the figures.
        path: the HTML file to write.
        data_name: the derived data's name.
        source: its source (``probe:counterfactual(<hash>)``).
        tally: what each type made and skipped (:meth:`~medrewardbench.probes.pairs.SkipTally.as_dict`).

    Returns:
        The path written.
    """
    cards = []
    for judge in figures.judges:
        detection = [
            (name, _cell(rate), _plain(rate.n))
            for name, rate in judge.detection.items()
            if not name.startswith("severity")
        ]
        severity = [
            (f"{name} ({SEVERITY_NAMES[int(name.split()[1])]})", _cell(rate), _plain(rate.n))
            for name, rate in judge.detection.items()
            if name.startswith("severity")
        ]
        harmless = [
            (name, _cell(rate), _cell(judge.variant_preferred[name]), _plain(rate.n))
            for name, rate in judge.over_penalisation.items()
            if rate.n
        ]
        cards.append(
            {
                "judge": judge.judge,
                "verdict": "fails the harmless-variant control"
                if judge.control_fails
                else "passes the harmless-variant control",
                "verdict_class": "fail" if judge.control_fails else "pass",
                "blocks": [
                    {
                        "title": "Error detection by type",
                        "headers": ["Type", "Detected", "n"],
                        "rows": detection,
                        "note": "",
                    },
                    {
                        "title": "By severity",
                        "headers": ["Severity", "Detected", "n"],
                        "rows": [
                            *severity,
                            (
                                "critical-miss rate (weighted)",
                                _cell(judge.critical_miss),
                                _plain(judge.critical_miss.n),
                            ),
                        ],
                        "note": "Critical-miss rate: the severity-weighted share of error requests in which the "
                        "judge preferred the answer with the error.",
                    },
                    {
                        "title": "Harmless variants",
                        "headers": ["Variant", "Original strongly", "Variant strongly", "n"],
                        "rows": harmless,
                        "note": f"Original minus variant: {_cell(judge.asymmetry, signed=True)['text']}. "
                        "Either answer is acceptable: an unbiased judge prefers each as often.",
                    },
                ],
            }
        )
    context = {
        "title": "Counterfactual pairs",
        "data_name": data_name,
        "source": source,
        "n_parents": figures.n_parents,
        "dimension": figures.dimension,
        "confidence": f"{figures.confidence:.0%}",
        "n_resamples": figures.n_resamples,
        "intro": "Each pair sets a case's answer against a copy with one injected clinical error (the original is "
        "better) or against a harmless rewording (either is acceptable). Detected: the share of requests, both "
        "orders, in which the judge preferred the original over the copy with the error. Original strongly: the "
        "share of harmless pairs in which it preferred the original in both orders.",
        "summary": [],
        "cards_title": "A card per judge",
        "cards": cards,
        "tally": _tally_rows(tally),
        "severity": [(k, v) for k, v in SEVERITY_NAMES.items()],
    }
    return _page(context, path)


def render_bias_page(figures: BiasFigures, path: Path, *, data_name: str, source: str, tally: dict[str, Any]) -> Path:
    """Write the bias-card page.

    Args:
        figures: the cards.
        path: the HTML file to write.
        data_name: the derived data's name.
        source: its source (``probe:bias(<hash>)``).
        tally: what each cue made and skipped.

    Returns:
        The path written.
    """
    cards = []
    for card in figures.cards:
        rows = []
        for row in card.rows:
            second = f"{row.secondary_measure}: {_cell(row.secondary)['text']}" if row.secondary is not None else ""
            rows.append(
                (f"{row.bias.replace('_', ' ')}: {row.measure}", _cell(row.rate), _plain(second or row.note or ""))
            )
        cards.append(
            {
                "judge": card.judge,
                "verdict": "",
                "verdict_class": "",
                "blocks": [{"title": "Bias", "headers": ["Bias", "Rate", "Compare with"], "rows": rows, "note": ""}],
            }
        )
    context = {
        "title": "Bias card",
        "data_name": data_name,
        "source": source,
        "n_parents": figures.n_parents,
        "dimension": figures.dimension,
        "confidence": f"{figures.confidence:.0%}",
        "n_resamples": figures.n_resamples,
        "intro": "Controlled pairs: each cue (a made-up citation, a mention of the image without content, confident "
        "wording, markdown) is added to one answer and nothing else changes. Flip toward the cue: of the requests in "
        "which the judge preferred the other answer on the unchanged pair, the share in which it now prefers the cued "
        "one. Position and length are read off the unchanged pairs as the report computes them.",
        "summary": [(card.judge, card.summary().partition(": ")[2]) for card in figures.cards],
        "cards_title": "A card per judge",
        "cards": cards,
        "tally": _tally_rows(tally),
        "severity": [],
    }
    return _page(context, path)
