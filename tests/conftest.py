"""Shared fixtures. Data fixtures build real files in temporary directories (see fixtures_data.py)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports huggingface_hub

from pathlib import Path

import pytest
from fixtures_data import build_canonical_set, build_reference_layout


@pytest.fixture
def reference_dir(tmp_path: Path) -> Path:
    """A clean reference-layout dataset: organs brain (2 cases) and chest (3 cases), all labeled."""
    return build_reference_layout(tmp_path / "mrb")


@pytest.fixture
def canonical_file(tmp_path: Path) -> Path:
    """A clean canonical JSONL file with a PNG, a DICOM, embedded bytes, a builtin and no image."""
    return build_canonical_set(tmp_path / "canon")
