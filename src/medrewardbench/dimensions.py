"""The six clinical dimensions, verdict and order types, and the organ systems of Med-RewardBench.

Two vocabularies exist and must never be mixed:

* **source order**: ``1`` means ``response_1`` of a case, ``2`` means ``response_2``. Expert labels
  and stored verdicts are always in source order.
* **presentation order**: ``"A"`` is the response shown first to a judge, ``"B"`` the one shown
  second. Judges answer in presentation order; the runner maps back with :func:`to_source`.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

DIMENSIONS: tuple[str, ...] = (
    "accuracy",
    "relevance",
    "comprehensiveness",
    "creativity",
    "responsiveness",
    "overall",
)

ORGAN_SYSTEMS: tuple[str, ...] = (
    "abdomen",
    "brain",
    "breast",
    "chest",
    "eye",
    "foot",
    "gastrointestinal_tract",
    "heart",
    "lower_limb",
    "lung",
    "oral_cavity",
    "pelvic_cavity",
    "upper_limb",
)

Winner = Literal[1, 2]
"""The better response in source order."""

Position = Literal["A", "B"]
"""The better response in presentation order."""


class Order(str, Enum):
    """How a case's two responses are presented to a judge."""

    ORIGINAL = "original"
    """response_1 is shown as A."""
    SWAPPED = "swapped"
    """response_2 is shown as A."""

    @classmethod
    def parse_selection(cls, text: str) -> tuple[Order, ...]:
        """Turn a ``--orders`` value (``both``, ``original``, ``swapped``) into orders.

        Args:
            text: the user's selection, case-insensitive.

        Returns:
            The orders to judge, original first.

        Raises:
            ValueError: for any other value.
        """
        value = text.strip().lower()
        if value == "both":
            return (cls.ORIGINAL, cls.SWAPPED)
        for order in cls:
            if order.value == value:
                return (order,)
        raise ValueError(f"unknown order selection {text!r}; expected both, original or swapped")


def to_source(position: Position, order: Order) -> Winner:
    """Map a presentation-order verdict back to source order.

    Args:
        position: ``"A"`` (shown first) or ``"B"`` (shown second).
        order: how the case was presented.

    Returns:
        1 for response_1, 2 for response_2.
    """
    first_shown: Winner = 1 if order is Order.ORIGINAL else 2
    second_shown: Winner = 2 if order is Order.ORIGINAL else 1
    return first_shown if position == "A" else second_shown


def to_position(winner: Winner, order: Order) -> Position:
    """Map a source-order winner to the letter it carries in a given presentation order.

    Args:
        winner: 1 for response_1, 2 for response_2.
        order: how the case is presented.

    Returns:
        ``"A"`` when that response is shown first, else ``"B"``.
    """
    if order is Order.ORIGINAL:
        return "A" if winner == 1 else "B"
    return "A" if winner == 2 else "B"


def normalize_dimension(name: str) -> str | None:
    """Return the canonical dimension for a loosely written key, or None when it is not one.

    Accepts case and spacing variations (``"Overall"``, ``" comprehensiveness "``,
    ``"overall_winner"`` is *not* accepted).
    """
    if name in DIMENSIONS:  # written as the dimension itself: most keys of most files
        return name
    key = name.strip().lower().replace(" ", "").replace("-", "").replace("_", "")
    for dim in DIMENSIONS:
        if key == dim:
            return dim
    return None


def parse_winner(value: object) -> Winner | None:
    """Turn a label value into a source-order winner.

    Args:
        value: ``1``/``2``, ``"1"``/``"2"`` or ``"A"``/``"B"`` (any case; A = response_1).

    Returns:
        1 or 2, or None when the value is none of those.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return 1 if value == 1 else 2 if value == 2 else None
    if isinstance(value, str):
        text = value.strip().upper()
        if text in ("A", "1"):
            return 1
        if text in ("B", "2"):
            return 2
    return None
