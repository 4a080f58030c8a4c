"""mkdocs hook: the command-line reference is generated from the commands' own ``--help`` pages.

A page that contains the marker ``<!-- cli-reference -->`` gets, in its place, one section per
command and command group of ``medrewardbench`` with the text ``--help`` prints (in click's plain layout), so the
reference cannot drift from the code.
"""

from __future__ import annotations

import os
from typing import Any

import click
import typer

MARKER = "<!-- cli-reference -->"


def _walk(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            found.extend(_walk(command.commands[name], [*path, name]))
    return found


def cli_reference() -> str:
    """Every command's help page as Markdown, in the order a user meets them."""
    os.environ.setdefault("COLUMNS", "100")  # help pages wrapped alike on every machine
    from medrewardbench.cli.main import app

    typer.core.HAS_RICH = False  # click's plain layout: the same text without the terminal's boxes
    root = typer.main.get_command(app)
    sections = []
    for path, command in _walk(root, ["medrewardbench"]):
        parent = None
        for name in path:
            parent = click.Context(command if name == path[-1] else root, info_name=name, parent=parent)
        assert parent is not None
        text = command.get_help(parent).rstrip()
        level = "#" * min(len(path) + 1, 4)
        title = " ".join(path)
        sections.append(f"{level} `{title}`\n\n```text\n{text}\n```\n")
    return "\n".join(sections)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Replace the marker by the generated reference."""
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_reference())
    return markdown
