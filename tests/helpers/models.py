"""Session-scoped tiny random-weight models, built once per test session into a temporary directory.

A pytest plugin (registered in tests/conftest.py): tests name the fixtures as arguments. Building
all four takes a few seconds on CPU (most of it the first import of torch and transformers); every
model is under 1 MB. Without torch or transformers the tests that ask for a model are skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from medrewardbench.testing.tiny_models import (
    build_tiny_llava,
    build_tiny_qwen2_5_vl,
    build_tiny_qwen2_vl,
    build_tiny_text_llama,
)

#: family name -> fixture name, for parametrised tests
VLM_FAMILIES: dict[str, str] = {
    "qwen2_vl": "tiny_qwen2_vl",
    "qwen2_5_vl": "tiny_qwen2_5_vl",
    "llava": "tiny_llava",
}


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's tiny models are built (skips the test without torch and transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return tmp_path_factory.mktemp("tiny-models")


@pytest.fixture(scope="session")
def tiny_qwen2_vl(tiny_models_dir: Path) -> Path:
    """A tiny random Qwen2-VL directory."""
    return build_tiny_qwen2_vl(tiny_models_dir / "qwen2-vl")


@pytest.fixture(scope="session")
def tiny_qwen2_5_vl(tiny_models_dir: Path) -> Path:
    """A tiny random Qwen2.5-VL directory."""
    return build_tiny_qwen2_5_vl(tiny_models_dir / "qwen2.5-vl")


@pytest.fixture(scope="session")
def tiny_llava(tiny_models_dir: Path) -> Path:
    """A tiny random LLaVA (CLIP + Llama) directory."""
    return build_tiny_llava(tiny_models_dir / "llava")


@pytest.fixture(scope="session")
def tiny_text_llama(tiny_models_dir: Path) -> Path:
    """A tiny text-only LlamaForCausalLM directory (not a vision-language model)."""
    return build_tiny_text_llama(tiny_models_dir / "llama-text")


@pytest.fixture(scope="session", params=sorted(VLM_FAMILIES))
def tiny_vlm(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """``(family, directory)`` for each tiny vision-language model family."""
    family: str = request.param
    path: Path = request.getfixturevalue(VLM_FAMILIES[family])
    return family, path
