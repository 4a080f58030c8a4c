"""Names shortened to fit a column or a plot's margin, without two of them reading the same.

Judge labels are cut in the middle, not at the end: runs of one model differ in their ends (a port,
a seed, an adapter), and a label cut at its end hides exactly what tells them apart.
"""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"


def middle_ellipsis(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters in the middle (``api:very…-model-b``).

    Args:
        text: the text.
        width: at most this many characters (at least 5 are kept).

    Returns:
        The text, unchanged when it fits.
    """
    width = max(width, 5)
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    head = width - 1 - tail
    return text[:head] + ELLIPSIS + text[len(text) - tail :]


def shorten_distinct(texts: Sequence[str], width: int) -> list[str]:
    """Each text cut to ``width`` in the middle, widening the cut where two would read the same.

    Args:
        texts: the texts (distinct texts stay distinct).
        width: the width aimed at.

    Returns:
        The shortened texts, in the same order; as long as needed to keep them apart.
    """
    n_distinct = len(set(texts))
    longest = max((len(t) for t in texts), default=0)
    for room in range(max(width, 5), longest + 1):
        short = [middle_ellipsis(t, room) for t in texts]
        if len(set(short)) == n_distinct:
            return short
    return list(texts)
