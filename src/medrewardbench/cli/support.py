"""What every command-line module shares: consoles, error exits, logging set-up, list flags, help pages.

Shared options live in :mod:`medrewardbench.cli.options`, the error handler in :mod:`medrewardbench.cli.errors`.

Text that came from data is printed through :func:`terminal_safe`, so that no data can send
escape sequences to the terminal.
"""

from __future__ import annotations

import logging
import os
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
import typer.core

from medrewardbench.cli.coercion import plain_coercion
from medrewardbench.utils.safe_text import terminal_safe

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "console",
    "err_console",
    "fail",
    "nonempty_path",
    "nonempty_text",
    "plain_help",
    "setup_logging",
    "split_list",
    "split_option",
    "terminal_safe",
]

# Piped output (logs, CI) gets a wide fixed width so that tables are not squeezed to 80 columns,
# unless COLUMNS says how wide (rich reads it). Tables are fitted to console.width (report.terminal.fit_table).
# No emoji codes: a judge named api:x followed by ": 6 failed" would print as "api❌ 6 failed".
_WIDTH_SET = bool(os.environ.get("COLUMNS", "").strip().isdigit())


class _ConsoleOnFirstUse:
    """A rich ``Console`` made when it is first used, so that a run that prints nothing never imports rich.

    ``eval --quiet`` prints nothing when all goes well, and importing rich took about 50 ms of every
    start. On first use the object becomes the console itself (its class and state are the
    console's from then on), so rich and the callers see a plain ``Console``.
    """

    def __init__(self, **settings: Any) -> None:
        self._settings = settings

    def _become_console(self) -> None:
        from rich.console import Console

        settings = self.__dict__.pop("_settings")
        object.__setattr__(self, "__class__", Console)
        Console.__init__(cast(Console, self), **settings)

    def __getattr__(self, name: str) -> Any:  # called for what the object lacks: everything but _settings
        if name == "_settings":
            raise AttributeError(name)
        self._become_console()
        return getattr(self, name)

    # a with statement looks both up on the class before entering: the console's own, once it is one
    def __enter__(self) -> Console:
        self._become_console()
        return cast("Console", self).__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        cast("Console", self).__exit__(*exc_info)


console = cast("Console", _ConsoleOnFirstUse(width=None if sys.stdout.isatty() or _WIDTH_SET else 160, emoji=False))
err_console = cast(
    "Console",
    _ConsoleOnFirstUse(stderr=True, width=None if sys.stderr.isatty() or _WIDTH_SET else 160, emoji=False),
)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print an error on stderr and return the exit to raise."""
    # escape: messages carry user text and extras such as 'medrewardbench[api]' that rich would eat as markup;
    # terminal_safe: and data (ids, file names) that could carry terminal escape sequences
    from rich.markup import escape

    err_console.print(f"[bold red]error:[/] {escape(terminal_safe(message))}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


class _SafeFormatter(logging.Formatter):
    """Log lines carry data (ids, paths, reasons): their control characters are escaped."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


def setup_logging(verbose: bool) -> None:
    """Library logs go to stderr: INFO with ``--verbose``, else warnings only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def nonempty_path(name: str) -> Callable[[str], Path]:
    """A typer ``parser`` for a path argument or option that refuses an empty value.

    ``Path("")`` is ``Path(".")``: without this, ``--out ""`` (an unset shell variable) would
    write into the current directory.

    Args:
        name: the argument or flag, for the message (``PROJECT``, ``--out``).

    Returns:
        The parser.
    """

    def parse(value: str) -> Path:
        if isinstance(value, Path):
            return value
        if not value.strip():
            raise fail(f"{name} is empty; give a path")
        return Path(value)

    return parse


def nonempty_text(value: str | None, name: str) -> str | None:
    """A text option's value, refusing one that was given but holds nothing (``--name ''``).

    Args:
        value: the option's value; None when it was not given.
        name: the flag, for the message.

    Returns:
        The value as given (None when it was not given).

    Raises:
        typer.Exit: the value is empty or only spaces.
    """
    if value is not None and not value.strip():
        raise fail(f"{name} was given an empty value; give one, or leave the flag out")
    return value


def split_list(values: list[str] | None) -> list[str]:
    """Flatten repeated and comma-separated option values (``--organs a,b --organs c``)."""
    out: list[str] = []
    for value in values or []:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return out


def split_option(values: list[str] | None, flag: str) -> list[str] | None:
    """Like :func:`split_list`, but a flag given with nothing in it is an error, not "all".

    Args:
        values: the option's values; None when the flag was not given.
        flag: the flag's name, for the message (``"--organs"``).

    Returns:
        The names, or None when the flag was not given.

    Raises:
        typer.Exit: the flag was given but holds no name (``--organs ','``, ``--judge ''``).
    """
    if values is None:
        return None
    names = split_list(values)
    if not names:
        raise fail(f"{flag} was given an empty value; name at least one, or leave the flag out")
    return names


# ---------------------------------------------------------------------------------- help pages

_TYPE_NAMES: dict[object, str] = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH", bool: "BOOLEAN"}


def _value_name(annotation: Any) -> str:
    """The kind of value an option or argument takes, as click writes it (``TEXT``, ``INTEGER``, ``PATH``)."""
    origin = typing.get_origin(annotation)
    if origin in (list, tuple):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return _value_name(args[0]) if args else "TEXT"
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _value_name(args[0]) if len(args) == 1 else "TEXT"
    return _TYPE_NAMES.get(annotation, "TEXT")


class _PlainArgument(typer.core.TyperArgument):
    """An argument shown as click shows it.

    ``RUN_DIR...`` in the usage line and its kind of value (``PATH``) beside it, not typer's
    ``{runs}...`` and ``<list[path]>``.
    """

    def _name(self) -> str:
        name = self.metavar or self.name.upper()
        return name if self.nargs == 1 or name.endswith("...") else name + "..."

    def display_type_rich(self, ctx: Any) -> str | None:
        return _value_name(self.type_descriptor.annotation)

    def _rich_display_name(self) -> str:
        return self._name()

    def _usage_display_name(self) -> str:
        return self._name() if self.required else f"[{self._name()}]"


def _plain_params(params: list[Any]) -> None:
    from rich.markup import escape

    for param in params:
        if getattr(param, "_plain_help", False):
            continue
        param._plain_help = True
        if param.help:
            param.help = escape(param.help)  # help is plain text: "hf:OWNER/NAME[@REV]" is no markup tag
        if isinstance(param, typer.core.TyperOption) and param.metavar is None:
            # a flag is shown as the flag alone; a value as its kind (a metavar given in the code wins)
            param.metavar = "" if param.is_flag else _value_name(param.type_descriptor.annotation)
        elif type(param) is typer.core.TyperArgument:
            param.__class__ = _PlainArgument


class PlainHelpCommand(typer.core.TyperCommand):
    """A command whose help page writes flags as flags and values as ``TEXT``/``INTEGER``/``PATH``.

    typer's own help shows a type marker for every option (``<bool>`` beside a flag, ``<list[str]>``
    beside a repeatable option); these pages read like click's instead.
    """

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_params(self.get_params(ctx))
        super().format_help(ctx, formatter)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        plain_coercion(self.get_params(ctx))  # plain values without pydantic (see the module)
        return super().parse_args(ctx, args)


class PlainHelpGroup(typer.core.TyperGroup):
    """A command group whose help page shows its options like :class:`PlainHelpCommand`."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _plain_params(self.get_params(ctx))
        super().format_help(ctx, formatter)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        plain_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)


def plain_help(app: typer.Typer) -> None:
    """Give every command and group of ``app`` (sub-apps included) the plain help pages.

    Commands and groups that chose a class of their own keep it.

    Args:
        app: the typer app, after every command was added.
    """
    if not isinstance(app.info.cls, type) or app.info.cls is typer.core.TyperGroup:
        app.info.cls = PlainHelpGroup
    for command in app.registered_commands:
        if command.cls in (None, typer.core.TyperCommand):
            command.cls = PlainHelpCommand
    for group in app.registered_groups:
        if not isinstance(group.cls, type) or group.cls is typer.core.TyperGroup:
            group.cls = PlainHelpGroup
        if group.typer_instance is not None:
            plain_help(group.typer_instance)
