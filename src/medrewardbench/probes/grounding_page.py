"""The grounding probe's HTML page, in the report's look (its stylesheet and script, inline; no network).

The page reads the ``probe-grounding.json`` document (:func:`~medrewardbench.probes.grounding.grounding_document`)
and shows: the flag of every judge with its flip rates and agreement drops under each control
(one card per judge on a phone, like the leaderboard), the figures per dimension and per organ
system (folded per judge), and what each control did, with the cases it left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from medrewardbench.report.format import percent, signed_percent
from medrewardbench.report.html import TEMPLATES

__all__ = ["CONTROL_TEXT", "render_grounding_html", "write_grounding_html"]

CONTROL_TEXT: dict[str, str] = {
    "no-image": "the case without its image",
    "blank": "an all-black image of the same size",
    "wrong-patient": "another case's image of the same organ system and modality (else the same modality)",
    "dicom-window": "the DICOM image under a wrong window (CT: the preset farthest from the file's own)",
}
"""One line per control, as the page explains it."""

TEMPLATE = Path(__file__).parent / "templates" / "grounding.html.j2"
"""The page's jinja2 template (autoescaped)."""

_FLAG_CLASSES = {"does not use the image": "flag-unused", "uses the image": "flag-uses"}


def _interval(cell: Mapping[str, Any] | None, *, signed: bool) -> str:
    """``12.5 [8.1, 17.0]`` for one estimate (``–`` when missing)."""
    if cell is None or cell.get("point") is None:
        return "–"
    show = signed_percent if signed else percent
    if cell.get("low") is None or cell.get("high") is None:
        return show(cell["point"])
    return f"{show(cell['point'])} [{show(cell['low'])}, {show(cell['high'])}]"


def _cells(figures: Mapping[str, Any], controls: list[str], pick: Any) -> list[dict[str, str]]:
    out = []
    for control in controls:
        found = figures.get(control)
        part = pick(found) if found is not None else None
        out.append(
            {
                "flip": _interval(part["flip_rate"] if part else None, signed=False),
                "drop": _interval(part["agreement_drop"] if part else None, signed=True),
            }
        )
    return out


def render_grounding_html(document: Mapping[str, Any]) -> str:
    """The page for a ``probe-grounding.json`` document.

    Args:
        document: the probe's document.

    Returns:
        One self-contained HTML page (inline CSS and script, no network).
    """
    controls = list(document["settings"]["controls"])
    judges = []
    for judge in document["judges"]:
        figures = judge["controls"]
        organs = sorted({organ for c in figures.values() for organ in c.get("organ_systems", {})})
        dims = list(next(iter(figures.values()))["dimensions"]) if figures else []
        judges.append(
            {
                "judge": judge["judge"],
                "flag": judge["flag"],
                "flag_class": _FLAG_CLASSES.get(judge["flag"], "flag-unknown"),
                "cells": _cells(figures, controls, lambda c: c),
                "dimensions": [
                    {"name": dim, "cells": _cells(figures, controls, lambda c, d=dim: c["dimensions"].get(d))}
                    for dim in dims
                ],
                "organs": [
                    {"name": organ, "cells": _cells(figures, controls, lambda c, o=organ: c["organ_systems"].get(o))}
                    for organ in organs
                ],
            }
        )
    control_rows = [{**c, "text": CONTROL_TEXT.get(c["control"], c["control"])} for c in document["controls"]]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(TEMPLATE.read_text(encoding="utf-8")).render(
        title=f"Grounding probe: {document['data']['name']}",
        css=Markup((TEMPLATES / "report.css").read_text(encoding="utf-8")),
        script=Markup((TEMPLATES / "report.js").read_text(encoding="utf-8")),
        data=document["data"],
        settings=document["settings"],
        confidence_pct=round(100 * float(document["settings"]["confidence"])),
        controls=controls,
        judges=judges,
        control_rows=control_rows,
    )


def write_grounding_html(document: Mapping[str, Any], path: str | Path) -> Path:
    """Write the page for a document.

    Args:
        document: the probe's document.
        path: the file to write.

    Returns:
        The path written.
    """
    out = Path(path)
    out.write_text(render_grounding_html(document), encoding="utf-8")
    return out
