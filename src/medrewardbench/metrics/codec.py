"""One codec between the typed results and JSON, driven by type hints and field metadata.

Every record of :mod:`medrewardbench.metrics.results` that is written to a file derives from
:class:`JsonRecord`: its ``to_json()`` and ``from_json()`` are this module's :func:`encode` and
:func:`decode`, applied field by field according to the field's type hint:

* ``float``: NaN is written as null and read back as NaN; numbers are rounded to six decimals
  (:func:`~medrewardbench.metrics.results.number`), p-values keep four significant digits below
  0.001 (``p_value=True``), and settings are written as given (``exact=True``).
* ``int``, ``str``, ``bool``: as they are; ``Mapping[str, Any]``: a plain copy.
* nested records, ``Estimate``, tables (``ColumnTable``, ``DimensionTable``), tuples, mappings and
  optional fields (``X | None``: null) recurse on their element types.

Field metadata (:func:`spec`) names the JSON key when it differs from the field (``key``; a path
such as ``("alt_test", "epsilon")`` puts it in a section), what a file written before the field
existed reads as (``missing``), how a mapping read back is ordered (``order``), and whether an
estimate is written without its interval (``point_only``). A record adds computed keys (a
repeated score, the column names) with ``_json_extra``; reading ignores them. Backward-compatible
readers (``analysis.json`` schemas 1-2 read with ``p_case`` null, ``cv.json`` version 3) come from
``missing``: a key a file lacks takes it, or the field's default.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

R = TypeVar("R", bound="JsonRecord")

REQUIRED: Any = object()
"""A key every file holds (a file without it is malformed)."""

ORDER_AS_WRITTEN = "as written"
ORDER_BY_NAME = "name"
ORDER_BY_COUNT = "count"
"""most frequent first, ties by name (failure reasons)"""
ORDER_BY_DIMENSION = "dimension"
"""the dimensions present, in dimension order"""


def spec(
    key: str | tuple[str, ...] | None = None,
    *,
    p_value: bool = False,
    exact: bool = False,
    point_only: bool = False,
    missing: Any = REQUIRED,
    order: str = ORDER_AS_WRITTEN,
    order_by: str | None = None,
    empty_as_none: bool = False,
    read: bool = True,
) -> dict[str, Any]:
    """Field metadata for the codec (pass as ``dataclasses.field(metadata=spec(...))``).

    Args:
        key: the JSON key, or a path into sections; None: the field's name.
        p_value: a float written as a p-value (four significant digits below 0.001).
        exact: a float written as given (settings), not rounded.
        point_only: estimates written as ``{"point", "n"}``.
        missing: what a file without the key reads as (default: the field's default, else required).
        order: the order of a mapping read back: as written, by name, by count, by dimension.
        order_by: order a mapping's keys as this (already decoded) sequence field lists them.
        empty_as_none: None is written as ``{}`` and ``{}`` reads as None.
        read: False: written only; reading always gives the field's default (the schema a reader speaks).

    Returns:
        The metadata mapping.
    """
    return {
        "key": key,
        "p_value": p_value,
        "exact": exact,
        "point_only": point_only,
        "missing": missing,
        "order": order,
        "order_by": order_by,
        "empty_as_none": empty_as_none,
        "read": read,
    }


_NO_SPEC = spec()


def real(value: Any) -> float:
    """A float in memory: None and NaN as :data:`math.nan` (one object), numpy scalars as floats."""
    if value is None:
        return math.nan
    number_ = float(value)
    return math.nan if number_ != number_ else number_


def number(value: float) -> float | None:
    """A float as written to files: NaN as None, otherwise rounded to 6 decimals as numpy rounds.

    The rounding is numpy's (``np.round(value, 6)``: half to even on ``value * 1e6``), so files
    written from arrays and from records agree to the last digit.
    """
    if value != value:
        return None
    rounded = round(value * 1e6) / 1e6
    return math.copysign(rounded, value) if rounded == 0 else rounded


P_DIGITS_BELOW = 0.001
"""p-values below this are written with four significant digits instead of six decimals."""


def p_number(value: float) -> float | None:
    """A p-value as written to files: like :func:`number` from 0.001 up, four significant digits below."""
    if value != value:
        return None
    if 0 < value < P_DIGITS_BELOW:
        return float(f"{value:.4g}")
    return number(value)


class JsonRecord:
    """A frozen dataclass written to and read from JSON by the codec.

    Subclasses may define ``_json_extra(self) -> dict`` (computed keys to write, merged into the
    sections they name) and override :meth:`from_json` to check a document before reading it.
    """

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready values (see :mod:`medrewardbench.metrics.codec`)."""
        return encode_record(self)

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        """Read :meth:`to_json` output (and the older files listed in the class' field metadata)."""
        return decode_record(cls, data)


_FIELDS: dict[type, tuple[tuple[dataclasses.Field[Any], Any, Mapping[str, Any]], ...]] = {}


def _fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any, Mapping[str, Any]], ...]:
    """Each init field of a record class with its resolved type hint and metadata (computed once per class)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = get_type_hints(cls)
        found = tuple((f, hints[f.name], {**_NO_SPEC, **f.metadata}) for f in dataclasses.fields(cls) if f.init)
        _FIELDS[cls] = found
    return found


def _path(f: dataclasses.Field[Any], meta: Mapping[str, Any]) -> tuple[str, ...]:
    key = meta["key"]
    if key is None:
        return (f.name,)
    return (key,) if isinstance(key, str) else tuple(key)


def _merge(out: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            _merge(out[key], value)
        else:
            out[key] = value


def encode_record(record: Any) -> dict[str, Any]:
    """A record as JSON-ready values, field by field, then its ``_json_extra`` keys."""
    out: dict[str, Any] = {}
    for f, hint, meta in _fields(type(record)):
        path = _path(f, meta)
        target = out
        for section in path[:-1]:
            target = target.setdefault(section, {})
        target[path[-1]] = encode(getattr(record, f.name), hint, meta)
    extra: Callable[[], Mapping[str, Any]] | None = getattr(record, "_json_extra", None)
    if extra is not None:
        _merge(out, extra())
    return out


def _inner(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """The metadata the values inside a container are written and read with (no field-level options)."""
    if not meta["empty_as_none"] and meta["order_by"] is None:
        return meta
    return {**meta, "empty_as_none": False, "order_by": None}


def _optional(hint: Any) -> Any:
    """``X`` for ``X | None``; the hint itself otherwise."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def encode(value: Any, hint: Any, meta: Mapping[str, Any] = _NO_SPEC) -> Any:
    """One value as written to files, by its type hint.

    Args:
        value: the value.
        hint: its type hint.
        meta: the field's metadata (:func:`spec`).

    Returns:
        JSON-ready values.
    """
    if value is None:
        return {} if meta["empty_as_none"] else None
    hint = _optional(hint)
    if hint is float:
        if meta["exact"]:
            return value
        return p_number(value) if meta["p_value"] else number(value)
    if hint in (int, str, bool) or hint is Any:
        return value
    if meta["point_only"] and hasattr(value, "point_to_json"):
        return value.point_to_json()
    args = get_args(hint)
    meta = _inner(meta)
    if hasattr(value, "to_json"):
        # a record or an Estimate; a generic table (ColumnTable[T]) writes each value with T's codec
        return value.to_json(lambda v: encode(v, args[0], meta)) if args else value.to_json()
    if isinstance(value, Mapping):
        if len(args) < 2 or args[1] is Any:
            return dict(value)
        return {k: encode(v, args[1], meta) for k, v in value.items()}
    if isinstance(value, tuple | list):
        if len(args) == 2 and args[1] is Ellipsis:
            return [encode(v, args[0], meta) for v in value]
        return [encode(v, a, meta) for v, a in zip(value, args, strict=True)]
    raise TypeError(f"the codec cannot write {type(value).__name__} as {hint!r}")


def _ordered(items: dict[str, Any], meta: Mapping[str, Any], decoded: Mapping[str, Any]) -> dict[str, Any]:
    from medrewardbench.dimensions import DIMENSIONS

    order = meta["order"]
    if meta["order_by"] is not None:
        return {k: items[k] for k in decoded[meta["order_by"]] if k in items}
    if order == ORDER_BY_NAME:
        return dict(sorted(items.items()))
    if order == ORDER_BY_COUNT:
        return dict(sorted(items.items(), key=lambda kv: (-kv[1], kv[0])))
    if order == ORDER_BY_DIMENSION:
        return {d: items[d] for d in DIMENSIONS if d in items}
    return items


def decode(data: Any, hint: Any, meta: Mapping[str, Any] = _NO_SPEC, decoded: Mapping[str, Any] = {}) -> Any:
    """One value read from a file, by its type hint (the inverse of :func:`encode`).

    Args:
        data: the JSON value.
        hint: the type hint of what it becomes.
        meta: the field's metadata (:func:`spec`).
        decoded: the record's fields read so far (for ``order_by``).

    Returns:
        The value.
    """
    optional = _optional(hint) is not hint
    if meta["empty_as_none"] and not data:
        return None
    if data is None and optional:
        return None
    hint = _optional(hint)
    origin = get_origin(hint) or hint
    if hint is float:
        return float(data) if meta["exact"] else real(data)
    if hint is int:
        return int(data)
    if hint is str:
        return str(data)
    if hint is bool:
        return bool(data)
    if hint is Any:
        return data
    args = get_args(hint)
    if isinstance(origin, type) and hasattr(origin, "from_json"):
        meta = _inner(meta)
        if args:
            return origin.from_json(data, lambda v: decode(v, args[0], meta))
        return origin.from_json(data)
    if origin in (Mapping, dict):
        if len(args) < 2 or args[1] is Any:
            return dict(data)
        items = {str(k): decode(v, args[1], _inner(meta)) for k, v in data.items()}
        return _ordered(items, meta, decoded)
    if origin is tuple:
        meta = _inner(meta)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(v, args[0], meta) for v in data)
        return tuple(decode(v, a, meta) for v, a in zip(data, args, strict=True))
    raise TypeError(f"the codec cannot read {hint!r}")


def _get(data: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    current: Any = data
    for key in path:
        if not isinstance(current, Mapping) or key not in current:
            return False, None
        current = current[key]
    return True, current


def decode_record(cls: type[R], data: Mapping[str, Any]) -> R:
    """A record read from a file, field by field; keys a file lacks take ``missing`` or the default.

    Raises:
        KeyError: a required key is missing.
    """
    values: dict[str, Any] = {}
    for f, hint, meta in _fields(cls):
        found, raw = _get(data, _path(f, meta)) if meta["read"] else (False, None)
        if not found:
            if meta["missing"] is not REQUIRED and meta["read"]:
                values[f.name] = meta["missing"]
                continue
            if f.default is not dataclasses.MISSING:
                values[f.name] = f.default
                continue
            if f.default_factory is not dataclasses.MISSING:
                values[f.name] = f.default_factory()
                continue
            raise KeyError(f"{cls.__name__}: no {'.'.join(_path(f, meta))!r} in the document")
        values[f.name] = decode(raw, hint, meta, values)
    return cls(**values)
