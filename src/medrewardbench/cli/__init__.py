"""The ``medrewardbench`` command line: :mod:`~medrewardbench.cli.main` adds one module per command group.

Nothing outside this package imports it; it alone knows every other part of the package.
"""

from medrewardbench.cli.main import app, main

__all__ = ["app", "main"]
