"""The annotation guidelines: default text, the dimension definitions shown on hover, markdown rendering.

The six definitions are the ones the judges are given (the ``pairwise`` prompt template), so
doctors and judges work to the same wording. An admin may edit the guidelines; a list item that
starts with a dimension's name (``- **Accuracy**: ...`` or ``- accuracy: ...``) then replaces that
dimension's hover text, so the two never disagree.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from medrewardbench.dimensions import DIMENSIONS

SCREENING_REASONS: dict[str, str] = {
    "relevance": "The question is not clinically relevant to this image.",
    "accuracy": "The question or its reference answer is medically wrong or ambiguous.",
    "complexity": "The question is trivial, or cannot be answered from the image.",
    "image_quality": "The image is unreadable, cropped, or too poor to answer from.",
}
"""Reasons to reject a question in screening, with the meaning shown on hover."""

HARM_LABELS: dict[str, str] = {
    "minor": "inconvenience, no change in care",
    "moderate": "wrong or delayed care, temporary harm",
    "severe": "serious or lasting harm",
    "critical": "death or irreversible harm likely",
}
"""Each harm severity (:data:`medrewardbench.cases.HARM_SEVERITIES`) as the case page explains it."""

SCREENING_REASON_LABELS: dict[str, str] = {
    "relevance": "Relevance",
    "accuracy": "Accuracy",
    "complexity": "Complexity",
    "image_quality": "Image quality",
}


@lru_cache(maxsize=1)
def judge_definitions() -> dict[str, str]:
    """The six dimension definitions as the ``pairwise`` judge template words them.

    Returns:
        dimension -> one-sentence definition, in :data:`DIMENSIONS` order.

    Raises:
        RuntimeError: the template lost a definition (a packaging error).
    """
    text = resources.files("medrewardbench").joinpath("templates/pairwise.txt").read_text("utf-8")
    found: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^- (\w+): (.+)$", line.strip())
        if match and match.group(1) in DIMENSIONS:
            found[match.group(1)] = match.group(2).strip()
    missing = [dim for dim in DIMENSIONS if dim not in found]
    if missing:
        raise RuntimeError(f"the pairwise template has no definition for {', '.join(missing)}")
    return {dim: found[dim] for dim in DIMENSIONS}


def default_guidelines(mode: str) -> str:
    """The guidelines a new project starts with.

    Args:
        mode: ``pairs`` or ``screening``.

    Returns:
        Markdown text.
    """
    if mode == "screening":
        reasons = "\n".join(f"- **{SCREENING_REASON_LABELS[k]}**: {v}" for k, v in SCREENING_REASONS.items())
        return (
            "# Screening guidelines\n\n"
            "For each question, look at the image and decide whether the question belongs in the benchmark.\n\n"
            "**Accept** a question that is clinically relevant, medically correct, needs real reasoning about "
            "the image, and can be answered from an image of sufficient quality.\n\n"
            "**Reject** it otherwise, and tick every reason that applies:\n\n"
            f"{reasons}\n\n"
            "Add a comment whenever it helps the organisers (for example a better wording).\n"
        )
    definitions = "\n".join(f"- **{dim.capitalize()}**: {text}" for dim, text in judge_definitions().items())
    return (
        "# Labelling guidelines\n\n"
        "Each case shows a medical image, a question, and two answers written by AI assistants, "
        "**A** and **B**. For each of the six criteria, choose the better answer.\n\n"
        "## The six criteria\n\n"
        f"{definitions}\n\n"
        "## How to judge\n\n"
        "- Judge the content only. Which answer comes first means nothing: the order is random and "
        "differs between doctors.\n"
        "- Do not prefer an answer for being longer.\n"
        "- Use **Cannot judge** (with a reason) when the image or the question makes a fair comparison "
        "impossible; do not guess.\n"
        "- A comment is optional; use it for anything the organisers should know.\n"
        "- You can go back and change any case until the project is closed.\n"
    )


def definitions_from_guidelines(markdown: str) -> dict[str, str]:
    """The hover definition of each dimension: the guidelines' own wording where they give one.

    Args:
        markdown: the guidelines text.

    Returns:
        dimension -> definition, in :data:`DIMENSIONS` order (the judge wording where the
        guidelines say nothing).
    """
    return dict(_definitions(markdown))


@lru_cache(maxsize=8)
def _definitions(markdown: str) -> tuple[tuple[str, str], ...]:
    found = dict(judge_definitions())
    for line in markdown.splitlines():
        match = re.match(r"^\s*[-*+]\s+\**\s*([A-Za-z]+)\s*\**\s*[:\u2014-]\s*\**\s*(.+)$", line)
        if match and match.group(1).lower() in found:
            found[match.group(1).lower()] = match.group(2).strip()
    return tuple(found.items())


def render_markdown(markdown: str) -> str:
    """Render guidelines to HTML with raw HTML disabled (text that looks like a tag stays text).

    Args:
        markdown: CommonMark text.

    Returns:
        HTML safe to put in a page.
    """
    from markdown_it import MarkdownIt

    html: str = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").render(markdown)
    return html
