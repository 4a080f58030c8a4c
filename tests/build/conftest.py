"""Fixtures of the benchmark-builder tests (defined in build_helpers.py, which the tests also import).

A real OpenAI-compatible server on 127.0.0.1 (one per session, reset per test, answering questions
in free text), a tiny local vision-language model built once per session, and a fake Hugging Face
cache per test.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from build_helpers import answer_server, fake_hf_home, server_session, tiny_llava_dir  # noqa: F401
