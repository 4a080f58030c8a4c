"""Judge options: typed per-backend settings, their checks, and fingerprints that do not move.

The fingerprints below were computed on commit 787aae5 (before the settings were typed, when the
API tuning went through ``JudgeOptions.extra``) with the same configurations; a store written then
must still resume now.
"""

from __future__ import annotations

import re

import pytest

from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.api import ApiJudge, ProcessPoolApiJudge
from medrewardbench.judges.registry import build_judge
from medrewardbench.models.options import ApiSettings, JudgeOptions, LocalSettings

KEY_ENV = "MRB_FP_KEY"

# (spec, options) -> fingerprint on commit 787aae5
API_FULL = "3f3535703c015a6fcf9fc51d79300ed740d81932b2880dee06c0ffe53063d207"
API_DEFAULT = "635dad476a9c1e6d13b0a24294ec531dec6cb0cdc418905042f485a04d938d5a"
BASELINE_RANDOM_7 = "0d70b47a87bf201a42edc837fc14c424c2793f0abd796e25f5d087b9d65f459e"
BASELINE_LONGER = "d0313e56aeb145a344b3cfb8631a4c3f1f08dec30683f7b36db521e1583a8afe"


@pytest.fixture
def api_env(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv(KEY_ENV, "sk-test-fingerprint")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _full_api_options(**api: object) -> JudgeOptions:
    return JudgeOptions(
        seed=3,
        template="pairwise",
        temperature=0.2,
        top_p=0.9,
        max_tokens=256,
        api=ApiSettings(base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV, structured=True, **api),  # type: ignore[arg-type]
    )


# ------------------------------------------------------------------------------ fingerprints
def test_api_judge_fingerprints_equal_those_before_the_settings_were_typed(api_env: None) -> None:
    assert build_judge("api:gpt-4o-mini", _full_api_options()).fingerprint() == API_FULL
    default = JudgeOptions(api=ApiSettings(base_url="http://localhost:8000/v1"))
    assert build_judge("api:local-model", default).fingerprint() == API_DEFAULT


def test_how_requests_are_sent_does_not_change_the_fingerprint(api_env: None) -> None:
    tuned = _full_api_options(
        timeout_s=5,
        max_retries=1,
        backoff_base_s=0.01,
        backoff_max_s=0.1,
        retry_after_max_s=1.0,
        image_cache_size=4,
        image_passthrough=False,
        http_backend="httpx",
        client_processes=2,
    ).with_changes(concurrency=32)
    pool = build_judge("api:gpt-4o-mini", tuned)
    assert isinstance(pool, ProcessPoolApiJudge)
    assert pool.fingerprint() == API_FULL


def test_baseline_fingerprints_are_unchanged() -> None:
    assert build_judge("baseline:random", JudgeOptions(seed=7)).fingerprint() == BASELINE_RANDOM_7
    assert build_judge("baseline:longer", JudgeOptions()).fingerprint() == BASELINE_LONGER


# ------------------------------------------------------------------------------ settings reach the judge
def test_api_settings_reach_the_judge(api_env: None) -> None:
    options = _full_api_options(
        backoff_base_s=0.2,
        backoff_max_s=2.0,
        retry_after_max_s=3.0,
        image_cache_size=5,
        image_passthrough=False,
        http_backend="httpx",
        max_retries=4,
        timeout_s=7.5,
    )
    judge = build_judge("api:m", options)
    assert isinstance(judge, ApiJudge)
    policy = judge.chat.retry_policy
    assert (policy.max_retries, policy.backoff_base_s, policy.backoff_max_s, policy.retry_after_max_s) == (
        4,
        0.2,
        2.0,
        3.0,
    )
    assert judge.chat.http_backend == "httpx"
    metadata = judge.metadata()
    assert metadata["image_passthrough"] is False and metadata["timeout_s"] == 7.5
    assert metadata["structured_requested"] is True


def test_the_pool_gives_each_client_process_one_process_and_a_share_of_the_concurrency(api_env: None) -> None:
    pool = build_judge("api:m", _full_api_options(client_processes=3).with_changes(concurrency=10))
    assert isinstance(pool, ProcessPoolApiJudge)
    assert pool.processes == 3
    assert pool.worker_options.api.client_processes == 1
    assert pool.worker_options.concurrency == 4
    assert pool.worker_options.api.base_url == "http://127.0.0.1:9/v1"
    assert pool.metadata()["client_processes"] == 3


# ------------------------------------------------------------------------------ checks
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timeout_s": 0}, "--timeout must be a number of seconds greater than 0, not 0"),
        ({"timeout_s": float("nan")}, "--timeout must be a number of seconds greater than 0"),
        ({"max_retries": -1}, "--max-retries must be a whole number >= 0, not -1"),
        ({"max_retries": 1.5}, "--max-retries must be a whole number >= 0, not 1.5"),
        ({"base_url": "ftp://example.org/v1"}, "--base-url must be an http:// or https:// URL"),
        ({"client_processes": 0}, "client_processes must be a whole number >= 1, not 0"),
        ({"backoff_base_s": -0.5}, "backoff_base_s must be a number of seconds >= 0, not -0.5"),
        ({"backoff_max_s": float("inf")}, "backoff_max_s must be a number of seconds >= 0, not inf"),
        ({"retry_after_max_s": "60"}, "retry_after_max_s must be a number of seconds >= 0, not '60'"),
        ({"image_cache_size": -1}, "image_cache_size must be a whole number >= 0, not -1"),
        ({"image_passthrough": "maybe"}, "image_passthrough must be true or false, not 'maybe'"),
        ({"structured": 1}, "structured must be true or false, not 1"),
        ({"http_backend": "curl"}, "unknown http_backend 'curl'; expected auto, aiohttp or httpx"),
    ],
)
def test_bad_api_settings_are_refused_when_made_naming_the_setting(changes: dict[str, object], message: str) -> None:
    with pytest.raises(JudgeSpecError) as caught:
        ApiSettings(**changes)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_password_in_the_base_url_is_never_repeated() -> None:
    with pytest.raises(JudgeSpecError, match="must not carry credentials") as caught:
        ApiSettings(base_url="https://user:hunter2secret@api.example.org/v1")
    assert "hunter2secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"device": ""}, "device must be a non-empty text, not ''"),
        ({"dtype": None}, "dtype must be a non-empty text, not None"),
        ({"adapter": 3}, "adapter must be a non-empty text or null, not 3"),
        ({"force_prefix": 7}, "force_prefix must be a text or null, not 7"),
        ({"constrained": "yes"}, "option constrained must be true or false, not 'yes'"),
    ],
)
def test_bad_local_settings_are_refused_naming_the_setting(changes: dict[str, object], message: str) -> None:
    with pytest.raises(JudgeSpecError, match="^" + re.escape(message) + "$"):
        LocalSettings(**changes)  # type: ignore[arg-type]


def test_changed_sections_are_checked_again() -> None:
    options = JudgeOptions()
    assert options.with_api(timeout_s=9).api.timeout_s == 9
    assert options.with_local(adapter="/a").local.adapter == "/a" and options.local.adapter is None
    with pytest.raises(JudgeSpecError, match="--timeout"):
        options.with_api(timeout_s=-1)
    with pytest.raises(JudgeSpecError, match="api must be ApiSettings, not dict"):
        JudgeOptions(api={"timeout_s": 3})  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ from a mapping
def test_from_mapping_reads_text_values_and_keeps_defaults() -> None:
    settings = ApiSettings.from_mapping(
        {"timeout_s": "5", "client_processes": "2", "backoff_base_s": "0.1", "image_passthrough": "no"}
    )
    assert settings == ApiSettings(timeout_s=5.0, client_processes=2, backoff_base_s=0.1, image_passthrough=False)
    assert LocalSettings.from_mapping({"device": "cpu", "constrained": "true"}) == LocalSettings(
        device="cpu", constrained=True
    )
    assert ApiSettings.from_mapping({}) == ApiSettings()


def test_from_mapping_names_every_unknown_key_and_lists_the_known_ones() -> None:
    with pytest.raises(JudgeSpecError) as caught:
        ApiSettings.from_mapping({"timeout": 5, "retries": 2, "base_url": "http://h/v1"})
    message = str(caught.value)
    assert message.startswith("unknown api settings 'retries', 'timeout'; known: base_url, api_key_env, timeout_s")
    with pytest.raises(JudgeSpecError, match="unknown local setting 'gpu'; known: device, dtype"):
        LocalSettings.from_mapping({"gpu": 1})


def test_from_mapping_prefixes_a_bad_value_with_its_section() -> None:
    with pytest.raises(JudgeSpecError, match=r"^api: --timeout must be a number of seconds greater than 0"):
        ApiSettings.from_mapping({"timeout_s": 0})
    with pytest.raises(JudgeSpecError, match=r"^sweep judge 2: api: option image_passthrough must be true or false"):
        JudgeOptions.from_mapping({"api": {"image_passthrough": "perhaps"}}, where="sweep judge 2")
    with pytest.raises(JudgeSpecError, match="must be a mapping of names to values, not list"):
        JudgeOptions.from_mapping({"local": ["cpu"]})


def test_judge_options_from_a_nested_mapping() -> None:
    options = JudgeOptions.from_mapping(
        {
            "seed": 3,
            "template": "pairwise-cot",
            "temperature": 0.5,
            "api": {"base_url": "http://localhost:8000/v1", "max_retries": 2, "http_backend": "httpx"},
            "local": {"device": "cpu", "dtype": "bf16", "constrained": True},
        }
    )
    assert options == JudgeOptions(
        seed=3,
        template="pairwise-cot",
        temperature=0.5,
        api=ApiSettings(base_url="http://localhost:8000/v1", max_retries=2, http_backend="httpx"),
        local=LocalSettings(device="cpu", dtype="bf16", constrained=True),
    )
    with pytest.raises(JudgeSpecError, match="unknown judge options setting 'temprature'; known: seed, template"):
        JudgeOptions.from_mapping({"temprature": 0.2})
    with pytest.raises(JudgeSpecError, match="unknown judge options: api setting 'key'"):
        JudgeOptions.from_mapping({"api": {"key": "sk-..."}})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"temperature": -0.5}, "--temperature must be a number >= 0"),
        ({"temperature": float("nan")}, "--temperature must be a number >= 0"),
        ({"temperature": True}, "--temperature must be a number >= 0"),
        ({"top_p": 0.0}, r"--top-p must be a number in \(0, 1\]"),
        ({"top_p": 1.5}, r"--top-p must be a number in \(0, 1\]"),
        ({"max_tokens": 0}, "--max-tokens must be a whole number >= 1"),
        ({"concurrency": 0}, "--concurrency must be a whole number >= 1"),
        ({"batch_size": 2.5}, "--batch-size must be a whole number >= 1"),
    ],
)
def test_sampling_and_size_options_out_of_range_are_refused_before_any_request(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(JudgeSpecError, match=message):
        JudgeOptions(**changes)  # type: ignore[arg-type]


def test_sampling_options_at_their_limits_are_accepted() -> None:
    options = JudgeOptions(temperature=0.0, top_p=1.0, max_tokens=1, concurrency=1, batch_size=1)
    assert (options.temperature, options.top_p) == (0.0, 1.0)
    assert JudgeOptions(temperature=1.7, top_p=0.05).top_p == 0.05
