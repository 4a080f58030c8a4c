"""YAML read with the line of every value, so that a check can say where a problem is.

:func:`read_located` composes the document with :func:`yaml.compose` and keeps, for every
mapping, sequence and scalar, the line its node starts on (``node.start_mark``). Values are built
by PyYAML's safe constructor (the same types ``yaml.safe_load`` gives); a key given twice in one
mapping is an error here, where ``yaml.safe_load`` silently keeps the last.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from medrewardbench.sweep.errors import SweepFileError

__all__ = ["Located", "read_located"]


@dataclass
class Located:
    """A value of a YAML document and where it starts.

    Attributes:
        value: a scalar, a ``dict`` of key -> :class:`Located`, or a ``list`` of :class:`Located`.
        line: 1-based line where the node starts.
        key_lines: for a mapping, key -> 1-based line of the key.
        path: the file, for messages.
        where: how messages name the value (``judges[2].serve``).
    """

    value: Any
    line: int
    path: Path
    where: str = ""
    key_lines: dict[str, int] = field(default_factory=dict)

    def error(self, message: str, *, key: str | None = None) -> SweepFileError:
        """An error at this value (or at one of its keys), naming where it is."""
        line = self.key_lines.get(key, self.line) if key is not None else self.line
        name = self.child_name(key) if key is not None else self.where
        return SweepFileError(self.path, line, f"{name}: {message}" if name else message)

    def child_name(self, key: str | int) -> str:
        """How messages name a child of this value."""
        if isinstance(key, int):
            return f"{self.where}[{key}]"
        return f"{self.where}.{key}" if self.where else str(key)

    @property
    def is_mapping(self) -> bool:
        """Whether the value is a mapping."""
        return isinstance(self.value, dict)

    @property
    def is_sequence(self) -> bool:
        """Whether the value is a list."""
        return isinstance(self.value, list)

    def mapping(self, what: str = "a mapping of names to values") -> dict[str, Located]:
        """The value as a mapping.

        Raises:
            SweepFileError: it is not one.
        """
        if not isinstance(self.value, dict):
            raise self.error(f"must be {what}, not {_kind(self.plain())}")
        return self.value

    def sequence(self, what: str = "a list") -> list[Located]:
        """The value as a list.

        Raises:
            SweepFileError: it is not one.
        """
        if not isinstance(self.value, list):
            raise self.error(f"must be {what}, not {_kind(self.plain())}")
        return self.value

    def items(self) -> Iterator[tuple[str, Located]]:
        """The entries of a mapping value (none for other values)."""
        if isinstance(self.value, dict):
            yield from self.value.items()

    def plain(self) -> Any:
        """The value without locations: dicts, lists and scalars, as ``yaml.safe_load`` gives."""
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _locate(node: yaml.Node, constructor: yaml.constructor.SafeConstructor, path: Path, where: str) -> Located:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)  # merge keys (<<: *anchor)
        values: dict[str, Located] = {}
        key_lines: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = constructor.construct_object(key_node, deep=True)
            key_line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise SweepFileError(path, key_line, f"{where or 'the document'}: key {key!r} is not a name")
            if key in values:
                raise SweepFileError(
                    path, key_line, f"{where + '.' if where else ''}{key}: given twice (first on line {key_lines[key]})"
                )
            child = f"{where}.{key}" if where else key
            values[key] = _locate(value_node, constructor, path, child)
            key_lines[key] = key_line
        return Located(values, line, path, where, key_lines)
    if isinstance(node, yaml.SequenceNode):
        return Located(
            [_locate(item, constructor, path, f"{where}[{i}]") for i, item in enumerate(node.value)], line, path, where
        )
    return Located(constructor.construct_object(node, deep=True), line, path, where)


def read_located(path: str | Path, text: str | None = None) -> Located:
    """Read a YAML (or JSON) file with the line of every value.

    Args:
        path: the file.
        text: its content, when already read.

    Returns:
        The document's root (an empty mapping for an empty file).

    Raises:
        SweepFileError: the file cannot be read or is not valid YAML (with the line of the problem).
    """
    file = Path(path)
    if text is None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SweepFileError(file, None, f"cannot read it ({exc})") from exc
    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = None if mark is None else mark.line + 1
            raise SweepFileError(file, line, f"not valid YAML: {exc.problem or exc}") from exc
        except yaml.YAMLError as exc:
            raise SweepFileError(file, None, f"not valid YAML: {exc}") from exc
        if node is None:
            return Located({}, 1, file)
        try:
            return _locate(node, loader, file, "")
        except yaml.constructor.ConstructorError as exc:
            mark = exc.problem_mark or exc.context_mark
            raise SweepFileError(file, None if mark is None else mark.line + 1, f"{exc.problem or exc}") from exc
    finally:
        loader.dispose()
