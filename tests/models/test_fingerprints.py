"""Fingerprints stay byte-identical for the same settings: the stores key runs and answers by them.

The hashes below were computed on the release before model access moved into ``models/``
(commit 2677f04); a change here means stored runs, answers and filters would no longer be found.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from medrewardbench.curation.generators import build_generator, load_answer_template
from medrewardbench.judges import build_judge
from medrewardbench.models import config_hash
from medrewardbench.models.options import ApiSettings, JudgeOptions, LocalSettings

KEY_ENV = "MRB_FINGERPRINT_KEY"
API_GENERATOR = "0e2de6c0c2b48522af3fba0f03d2fb635606111c57db13893b7a70311787bc1d"
API_JUDGE_STRUCTURED = "3a386c5b2e5660d081a6cf8fee8f015586a17f9fdfdca9bb02b524f7092c292b"
HF_GENERATOR_WITHOUT_PATH = "4993be64b39167826060fcdbedc65d793dea24d74bce04bd25c9a073f8e2f19b"


@pytest.fixture
def api_options(monkeypatch: pytest.MonkeyPatch) -> JudgeOptions:
    monkeypatch.setenv(KEY_ENV, "sk-fingerprint")
    return JudgeOptions(
        seed=3,
        temperature=0.2,
        top_p=0.9,
        max_tokens=128,
        api=ApiSettings(base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV),
    )


def test_config_hash_is_sha256_over_sorted_keys_and_unescaped_text() -> None:
    assert config_hash({"b": 1, "a": "é"}) == config_hash({"a": "é", "b": 1})
    assert config_hash({"spec": "baseline:longer"}) == (
        "d0313e56aeb145a344b3cfb8631a4c3f1f08dec30683f7b36db521e1583a8afe"
    )


def test_api_generator_and_judge_fingerprints_are_unchanged(api_options: JudgeOptions) -> None:
    generator = build_generator("api:gpt-4o-mini", api_options, load_answer_template())
    assert generator.fingerprint() == API_GENERATOR
    assert list(generator.config()) == [
        "spec", "kind", "model", "base_url", "template", "template_sha256",
        "temperature", "top_p", "max_tokens", "seed",
    ]  # fmt: skip
    judge = build_judge("api:gpt-4o-mini", api_options.with_api(structured=True))
    assert judge.fingerprint() == API_JUDGE_STRUCTURED


def test_hf_generator_fingerprint_is_unchanged(tiny_qwen2_vl: Path) -> None:
    pytest.importorskip("torch")
    options = JudgeOptions(
        seed=5,
        temperature=0.7,
        top_p=0.8,
        max_tokens=64,
        batch_size=2,
        local=LocalSettings(device="cpu", dtype="float32"),
    )
    generator = build_generator(f"hf:{tiny_qwen2_vl}", options, load_answer_template())
    # the tiny model lives in a temporary directory: its path is replaced
    config = {**generator.config(), "model": "<tiny>", "spec": "hf:<tiny>"}
    assert config_hash(config) == HF_GENERATOR_WITHOUT_PATH
    assert generator.metadata()["batch_size"] == 2
