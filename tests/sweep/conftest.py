"""Fixtures of the sweep tests: one test OpenAI server, one tiny model and one Ray cluster per session.

The server is reset for every test and a fake key is set in :data:`sweep_helpers.API_KEY_ENV`; the
tiny Qwen2-VL is built offline once; the Ray cluster (``ray.init(num_cpus=2)``, no dashboard) is
started by the first test that asks for it and shut down when the session ends.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sweep_helpers import API_KEY_ENV, FAKE_KEY, write_cases

from medrewardbench.testing.openai_server import OpenAIServer


@pytest.fixture(scope="session")
def sweep_server_session() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def server(sweep_server_session: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """The session's test server, reset, with the fake key in the environment."""
    sweep_server_session.control.reset()
    monkeypatch.setenv(API_KEY_ENV, FAKE_KEY)
    yield sweep_server_session
    sweep_server_session.control.reset()


@pytest.fixture
def cases(tmp_path: Path) -> Path:
    """Six labelled cases with PNG images, in a canonical JSONL file."""
    return write_cases(tmp_path / "data", 6)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Qwen2-VL directory (built once per session, offline)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from medrewardbench.testing.tiny_models import build_tiny_qwen2_vl

    return build_tiny_qwen2_vl(tmp_path_factory.mktemp("sweep-models") / "tiny-qwen2-vl")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A local Ray cluster on 2 CPUs for the session (workers inherit this process's environment)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
