"""Test configuration: offline, and the shared fixtures of ``tests/helpers/`` as plugins.

Test folders mirror the package (``tests/data/`` for ``medrewardbench.data``, ...). pytest imports
test files with ``--import-mode=importlib`` (pyproject.toml), so two folders may hold files of the
same name and no folder needs an ``__init__.py``; ``tests/`` is on ``sys.path``
(``pythonpath = ["tests"]``), so every test imports shared code as ``helpers.<module>``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

import pytest

pytest.register_assert_rewrite("helpers")

pytest_plugins = [
    "helpers.data",
    "helpers.api",
    "helpers.models",
    "helpers.runs",
    "helpers.annotate",
    "helpers.curation",
    "helpers.sweep",
]
