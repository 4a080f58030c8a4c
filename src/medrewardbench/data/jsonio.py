"""Strict JSON reading for data files: one-line reasons for everything that can go wrong.

``json.loads`` alone silently keeps the last of two equal keys, raises ``RecursionError`` on deeply
nested input, and rejects a UTF-8 byte-order mark. Data files are read with :func:`parse_json`,
which refuses duplicate keys (naming the key), turns excessive nesting into a reason instead of a
traceback, and accepts a leading byte-order mark. :func:`too_deep` bounds the nesting of accepted
values, so that later ``json.dumps`` calls (the results store) cannot fail on them either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

MAX_JSON_DEPTH = 64
"""Deepest nesting of objects and lists accepted in a row (the row object itself is level 1)."""

BOM = "\ufeff"


class JSONTextError(ValueError):
    """A JSON text cannot be accepted; the message is a one-line reason."""


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs)
"""One decoder for every row: ``json.loads`` with a hook builds a new one per call."""


def parse_json(text: str) -> Any:
    """Parse JSON text, refusing duplicate keys and accepting a leading byte-order mark.

    Args:
        text: the JSON text.

    Returns:
        The parsed value.

    Raises:
        JSONTextError: invalid JSON, a key given twice in one object, or nesting so deep that
            the parser gives up. The message is one line.
    """
    if text.startswith(BOM):
        text = text[len(BOM) :]
    try:
        return _DECODER.decode(text)
    except _DuplicateKey as exc:
        raise JSONTextError(f"duplicate key {exc.key!r} in one object") from None
    except json.JSONDecodeError as exc:
        raise JSONTextError(str(exc)) from None
    except RecursionError:
        raise JSONTextError(f"nested too deeply (more than {MAX_JSON_DEPTH} levels are refused)") from None


def too_deep(value: object, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether objects and lists nest more than ``limit`` levels (a scalar is level 0).

    Iterative, so that it works on any depth without recursion.

    Args:
        value: a parsed JSON value (or a row read from parquet).
        limit: the deepest nesting accepted.

    Returns:
        True when some object or list lies deeper than ``limit``.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        elif isinstance(item, Mapping):
            children = item.values()
        else:
            continue
        if depth > limit:
            return True
        # parsed JSON and parquet rows hold only dicts and lists: scalars are not pushed
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return False


def brief(value: object, limit: int = 80) -> str:
    """``repr`` of a value, shortened for a one-line message.

    Args:
        value: any value (nesting already bounded by :func:`too_deep`).
        limit: the longest text returned.

    Returns:
        The repr, cut with ``...`` when longer than ``limit``.
    """
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
