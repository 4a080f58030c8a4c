"""Session-scoped tiny random-weight models, built once per test session into a temporary directory.

Import with ``from fixtures_models import *`` in a test module. Building all four takes a few
seconds on CPU (most of it the first import of torch and transformers); every model is under 1 MB.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from medrewardbench.testing.tiny_models import (
    build_tiny_llava,
    build_tiny_qwen2_5_vl,
    build_tiny_qwen2_vl,
    build_tiny_text_llama,
)

__all__ = [
    "VLM_FAMILIES",
    "png_image_bytes",
    "tiny_llava",
    "tiny_models_dir",
    "tiny_qwen2_5_vl",
    "tiny_qwen2_vl",
    "tiny_text_llama",
    "tiny_vlm",
]

#: family name -> fixture name, for parametrised tests
VLM_FAMILIES: dict[str, str] = {
    "qwen2_vl": "tiny_qwen2_vl",
    "qwen2_5_vl": "tiny_qwen2_5_vl",
    "llava": "tiny_llava",
}


def png_image_bytes(color: tuple[int, int, int], size: tuple[int, int] = (64, 48)) -> bytes:
    """A real PNG file: a coloured square on a grey field, so images differ in content."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, (90, 90, 90))
    ImageDraw.Draw(image).rectangle((8, 8, size[0] // 2, size[1] // 2), fill=color)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
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
