"""Server-rendered pages: the Jinja templates (escaping everything they show), their filters, redirects."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from medrewardbench.annotate.deps import get_project, root
from medrewardbench.dimensions import DIMENSIONS

PACKAGE_DIR = Path(__file__).resolve().parent
DIMENSION_LABELS = {dim: dim.capitalize() for dim in DIMENSIONS}


def template_environment() -> Environment:
    """The app's templates, autoescaped, with the filters the pages use."""
    templates = Environment(
        loader=FileSystemLoader(str(PACKAGE_DIR / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters.update(
        pct=_pct, fixed=_fixed, band=_band, band_label=_band_label, seconds=_seconds_text, pooled=_pooled
    )
    return templates


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page from a template, with the helpers every template uses.

    Args:
        request: the request (the app's templates and project, the mount path for URLs).
        name: the template's file name.
        status: the status code.
        **context: the template's variables.

    Returns:
        The page.
    """
    base = root(request)
    templates = cast(Environment, request.app.state.templates)
    html = templates.get_template(name).render(
        request=request,
        url=lambda path: base + path,
        project=get_project(request).settings,
        dimension_labels=DIMENSION_LABELS,
        **context,
    )
    return HTMLResponse(html, status_code=status)


def redirect(request: Request, path: str) -> RedirectResponse:
    """A 303 redirect to a path of the app (after a form post: the browser then GETs it)."""
    return RedirectResponse(root(request) + path, status_code=303)


def _missing(value: float | None) -> bool:
    return value is None or value != value


def _pct(value: float | None) -> str:
    return "\u2014" if _missing(value) else f"{100 * float(value):.0f}%"  # type: ignore[arg-type]


def _fixed(value: float | None) -> str:
    return "\u2014" if _missing(value) else f"{float(value):.2f}"  # type: ignore[arg-type]


_BANDS = ((0.0, "poor"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial"))


def _band(value: float | None) -> str:
    """Landis and Koch's band of a kappa, as a CSS class."""
    if _missing(value):
        return "band-none"
    name = "almost"
    for upper, band in _BANDS:
        if float(value) < upper:  # type: ignore[arg-type]
            name = band
            break
    return f"band-{name}"


def _band_label(value: float | None) -> str:
    labels = {
        "band-poor": "poor",
        "band-slight": "slight",
        "band-fair": "fair",
        "band-moderate": "moderate",
        "band-substantial": "substantial",
        "band-almost": "almost perfect",
    }
    return labels.get(_band(value), "")


def _seconds_text(value: float | None) -> str:
    if _missing(value):
        return "\u2014"
    seconds = float(value)  # type: ignore[arg-type]
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def _pooled(cells: dict[str, tuple[float, int]]) -> float | None:
    total = sum(n for _, n in cells.values())
    if not total:
        return None
    return sum(v * n for v, n in cells.values() if n) / total
