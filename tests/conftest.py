"""Test configuration: offline, and the shared fixtures of ``tests/helpers/`` as plugins.

Test folders mirror the package (``tests/data/`` for ``medrewardbench.data``, ...). pytest imports
test files with ``--import-mode=importlib`` (pyproject.toml), so two folders may hold files of the
same name and no folder needs an ``__init__.py``; ``tests/`` is on ``sys.path``
(``pythonpath = ["tests"]``), so every test imports shared code as ``helpers.<module>``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub
# the annotation app hashes passwords with argon2's cheapest parameters (8 KiB, one pass) instead of
# 64 MiB and three passes (0.1-0.4 s per login); children (served apps, CLI runs) inherit it. The tests of
# the hash gate and login bursts, and of the production parameters, unset it
# (tests/annotate/test_annotate_security.py); the name is medrewardbench.annotate.security.FAST_HASHING_ENV
os.environ.setdefault("MEDREWARDBENCH_ANNOTATE_TEST_ONLY_FAST_HASHING", "1")

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
