"""What every command-line module shares: consoles, error exits, logging set-up, list flags.

Text that came from data is printed through :func:`terminal_safe`, so that no data can send
escape sequences to the terminal.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from medrewardbench.safe_text import terminal_safe

__all__ = [
    "DataOpt",
    "ExternalImagesOpt",
    "OrgansOpt",
    "console",
    "err_console",
    "fail",
    "setup_logging",
    "split_list",
    "split_option",
    "terminal_safe",
]

# Piped output (logs, CI) gets a wide fixed width so that tables are not squeezed to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

DataOpt = Annotated[
    str,
    typer.Option(
        "--data",
        "-d",
        help="demo | DIR in the reference layout | hf:[OWNER/NAME[@REV]] | canonical .jsonl/.parquet",
    ),
]
OrgansOpt = Annotated[
    list[str] | None, typer.Option("--organs", help="organ systems to keep (repeat or comma-separate)")
]
ExternalImagesOpt = Annotated[
    bool,
    typer.Option(
        "--allow-external-images",
        help="accept image paths outside the data's directory (or list directories in MEDREWARDBENCH_IMAGE_ROOTS)",
    ),
]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print an error on stderr and return the exit to raise."""
    # escape: messages carry user text and extras such as 'medrewardbench[api]' that rich would eat as markup;
    # terminal_safe: and data (ids, file names) that could carry terminal escape sequences
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
