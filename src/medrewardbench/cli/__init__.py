"""The ``medrewardbench`` command line: :mod:`~medrewardbench.cli.main` adds one module per command group.

Nothing outside this package imports it; it alone knows every other part of the package.
"""

from typing import Any

from medrewardbench.cli.main import main

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    """``app``, built on first use (see :func:`medrewardbench.cli.main.build_app`)."""
    if name == "app":
        from importlib import import_module

        return import_module("medrewardbench.cli.main").app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
