"""Command-line values turned into Python values without pydantic, where that is plainly the same.

typer 0.29 coerces every parameter through a pydantic ``TypeAdapter``, built the first time the
parameter is parsed. For ``medrewardbench eval`` that is importing pydantic and building some thirty
adapters: about 0.1 s of a command whose own work starts only after it, for values that are text,
flags, whole numbers, decimals, paths and lists of them.

:func:`plain_coercion` gives each such parameter a :class:`PlainValues` coercion before typer
parses: the common forms (``"12"`` for an integer, ``"0.5"`` for a decimal, any text for a text or a
path) become what pydantic would have made of them; anything else (``" 12"``, ``"1e3"``, a number
out of its range, a parser of the command's own) goes to typer's own adapter, built only then, so
that typer checks it and words the error exactly as before. ``tests/cli/test_coercion.py`` holds
both paths to the same results on every parameter of every command.

This relies on typer's internals (``_runtime_param``, ``type_descriptor``, ``RuntimeParam``), as the
plain help pages already do (:mod:`medrewardbench.cli.support`). Where they are missing, nothing is
preset and typer coerces as it always does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

__all__ = ["plain_coercion"]

try:
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # pragma: no cover - another typer: it coerces on its own
    RuntimeParam = None  # type: ignore[assignment,misc]

_INTEGER = re.compile(r"-?[0-9]{1,18}")
_DECIMAL = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?")
_PLAIN_TYPES = (str, bool, int, float, Path)


class _NotPlain(Exception):
    """The value is not in a form this module turns alike; typer's own coercion takes it."""


def _number(value: Any, kind: type, info: Any) -> Any:
    number: Any
    if type(value) is kind:
        number = value
    elif type(value) is str and (_INTEGER if kind is int else _DECIMAL).fullmatch(value):
        number = kind(value)
    else:
        raise _NotPlain
    if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
        raise _NotPlain  # typer words the range error
    return number


def _leaf(value: Any, kind: type, info: Any, param: Any, ctx: Any) -> Any:
    if kind is str or kind is bool:  # a flag's value is a bool already
        if type(value) is not kind:
            raise _NotPlain
        return value
    if kind is Path:
        if type(value) is str:
            value = Path(value)  # what pydantic makes of text
        elif not isinstance(value, Path):  # a default given as a path passes as it is, in typer too
            raise _NotPlain
        return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)  # typer's checks and errors
    return _number(value, kind, info)


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class PlainValues(RuntimeParam):
        """Coercion of a text, flag, number or path parameter (or a list of one); pydantic only for the rest."""

        descriptor: TypeDescriptor
        kind: type
        many: bool

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info = self.parameter_info
            try:
                if not self.many:
                    return _leaf(value, self.kind, info, param, ctx)
                if type(value) not in (tuple, list):
                    raise _NotPlain
                return [_leaf(item, self.kind, info, param, ctx) for item in value]
            except _NotPlain:
                full = build_runtime_param(self.descriptor)
                param._runtime_param = full  # this parameter's later values go straight to typer
                return full._coerce_value(value, param=param, ctx=ctx)


def _plain_kind(descriptor: Any) -> tuple[type, bool] | None:
    """``(leaf type, is a list)`` for an annotation :class:`PlainValues` turns, else None."""
    info = descriptor.parameter_info
    if info.parser is not None or getattr(info, "clamp", False) or getattr(info, "path_type", None) is not None:
        return None
    annotation, many = descriptor.annotation, False
    if get_origin(annotation) is list:
        (annotation,), many = get_args(annotation), True
    if annotation not in _PLAIN_TYPES or descriptor.file_annotation is not None:
        return None
    return annotation, many


def plain_coercion(params: list[Any]) -> None:
    """Give each plain parameter of a command a :class:`PlainValues` coercion (others keep typer's own).

    Args:
        params: the command's parameters, as typer made them (``command.get_params(ctx)``).
    """
    if RuntimeParam is None:  # pragma: no cover
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            continue  # not typer's, or already coerced once
        plain = _plain_kind(descriptor)
        if plain is not None:
            param._runtime_param = PlainValues(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
                kind=plain[0],
                many=plain[1],
            )
