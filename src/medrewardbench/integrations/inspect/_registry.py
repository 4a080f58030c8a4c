"""What inspect_ai loads through this package's ``inspect_ai`` entry point: the registered task.

Importing the task module runs its ``@task`` decorator, which registers ``medrewardbench/pairwise``
(inspect names an installed package's objects after the package).
"""

from __future__ import annotations

from medrewardbench.integrations.inspect.task import pairwise

__all__ = ["pairwise"]
