"""The sweep file: the shipped example parses, and every mistake is named with its file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.sweep import ROOT, write_sweep

from medrewardbench.dimensions import Order
from medrewardbench.metrics.cost import Price
from medrewardbench.sweep import SweepFileError, load_prices, load_sweep
from medrewardbench.sweep.budget import resolve_prices

EXAMPLE = ROOT / "sweeps" / "example.yaml"


def test_the_shipped_example_parses_into_hosted_served_local_and_baseline_judges_with_juries() -> None:
    config = load_sweep(EXAMPLE)
    text = EXAMPLE.read_text("utf-8")
    assert "EXAMPLE" in text and "NOT" in text and "paper" in text  # labelled as an example, not the paper's list
    kinds = {entry.name: entry for entry in config.judges}
    assert kinds["gpt-4o"].kind == "api" and kinds["gpt-4o"].options.api.api_key_env == "OPENAI_API_KEY"
    assert kinds["gpt-4o"].price == Price(2.5, 10.0, 1.25, 5.0)
    gemini = kinds["gemini-2.0-flash"]
    assert gemini.options.api.base_url.startswith("https://generativelanguage.googleapis.com")
    assert gemini.options.api.api_key_env == "GEMINI_API_KEY" and gemini.batch_api is False
    served = [e for e in config.judges if e.is_served]
    assert {e.name for e in served} >= {"qwen2.5-vl-7b", "qwen2.5-vl-72b", "internvl3-8b", "medgemma-4b", "lingshu-7b"}
    big = kinds["qwen2.5-vl-72b"]
    assert big.serve is not None and "vllm serve {model} --port {port}" in big.serve.command
    assert big.serve.gpus == 4 and big.ray_resources() == {"num_cpus": 8.0, "num_gpus": 4.0}
    assert big.serve.ready_timeout_s == 1800
    local = kinds["qwen2-vl-2b-lora"]
    assert local.is_local_model and local.options.local.device == "cuda" and local.options.batch_size == 8
    assert local.ray_resources() == {"num_cpus": 4.0, "num_gpus": 1.0}
    assert kinds["baseline:longer"].ray_resources() == {"num_cpus": 0.0, "num_gpus": 0.0}
    # defaults reach every judge; a judge's own value wins
    assert all(e.options.temperature == 0 and e.options.max_tokens == 512 for e in config.judges)
    assert kinds["gpt-4o"].options.concurrency == 16 and kinds["gpt-4o"].options.api.timeout_s == 180
    assert config.orders == (Order.ORIGINAL, Order.SWAPPED) and config.data.source == "hf:Nandzy/Med-RewardBench"
    juries = {j.name: j for j in config.juries}
    assert juries["medical"].members == (("medgemma-4b", 1.0), ("lingshu-7b", 1.0), ("gpt-4o", 2.0))
    assert config.endpoint_caps() == {"https://api.openai.com/v1": 24}


def test_the_example_checks_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from typer.testing import CliRunner

    from medrewardbench.cli.main import app

    result = CliRunner().invoke(app, ["sweep", str(EXAMPLE), "--check"])
    assert result.exit_code == 0, result.output
    assert "is valid" in result.output and "jury:medical" in result.output


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (  # a typo in a judge entry: the line of the key, the keys it could have meant
            """
            judges:
              - judge: hf:some/model
                devcie: cuda
            """,
            3,
            "judges[0].devcie: unknown key in a judge entry; known: judge, name, price, serve",
        ),
        (  # an API setting on a local model
            """
            judges:
              - judge: baseline:longer
              - judge: hf:some/model
                base_url: http://localhost:8000/v1
            """,
            4,
            "judges[1].base_url: is a setting of api: judges, not of hf: judges",
        ),
        (  # a local setting on an API judge
            """
            judges:
              - judge: api:gpt-4o
                adapter: lora/
            """,
            3,
            "judges[0].adapter: is a setting of local models (hf:, rm:), not of api: judges",
        ),
        (  # a value the typed settings refuse, blamed on its own line
            """
            judges:
              - judge: api:gpt-4o
                concurrency: 4
                timeout_s: 0
            """,
            4,
            "judges[0].timeout_s: --timeout must be a number of seconds greater than 0",
        ),
        (
            """
            judges:
              - judge: api:gpt-4o
                base_url: ftp://example.org
            """,
            3,
            "judges[0].base_url: --base-url must be an http:// or https:// URL",
        ),
        (
            """
            judges:
              - judge: hf:m
                local: {device: cuda, constrainted: true}
            """,
            3,
            "judges[0].local.constrainted: unknown local setting",
        ),
        (
            """
            judges:
              - judge: magic:thing
            """,
            2,
            "judges[0].judge: unknown judge kind 'magic'",
        ),
        (
            """
            judges:
              - judge: api:gpt-4o
              - judge: api:gpt-4o
            """,
            3,
            "judges[1]: 'api:gpt-4o' appears twice (first on line 2); give each entry its own name:",
        ),
        (  # YAML silently keeps the last of two equal keys; a sweep file refuses them
            """
            judges:
              - judge: api:gpt-4o
                concurrency: 2
                concurrency: 4
            """,
            4,
            "judges[0].concurrency: given twice (first on line 3)",
        ),
        (
            """
            judges:
              - judge: api:qwen
                serve: {command: "vllm serve {model}"}
            """,
            3,
            "judges[0].serve.command: must contain {port}",
        ),
        (
            """
            judges:
              - judge: hf:qwen
                serve: {command: "vllm serve {model} --port {port}"}
            """,
            2,
            "serve: starts an OpenAI-compatible server, so the judge must be api:MODEL, not hf:qwen",
        ),
        (
            """
            judges:
              - judge: api:qwen
                base_url: http://localhost:1/v1
                serve: {command: "vllm serve {model} --port {port}"}
            """,
            3,
            "judges[0].base_url: comes from the server the sweep starts",
        ),
        (
            """
            judges:
              - judge: api:a
              - judge: api:b
            juries:
              - name: pair
                members: [api:a, api:c]
            """,
            5,
            "jury 'pair': member 'api:c' is not a judge of this sweep; judges: api:a, api:b",
        ),
        (
            """
            judges:
              - judge: api:a
            juries:
              - name: alone
                members: [api:a]
            """,
            5,
            "juries[0].members: a jury needs at least two members",
        ),
        (
            """
            judges:
              - judge: api:a
              - judge: api:b
            juries:
              - name: pair
                members: [api:a, api:b]
                weights: {api:a: 2, api:z: 1}
            """,
            7,
            "juries[0].weights.api:z: is not a member of this jury",
        ),
        (
            """
            judges:
              - judge: api:a
                price: {input: 1}
            """,
            3,
            "judges[0].price: needs output",
        ),
        (
            """
            judges:
              - judge: api:a
                price: {input: -1, output: 2}
            """,
            3,
            "judges[0].price.input: must be a number >= 0",
        ),
        (
            """
            judges:
              - judge: api:a
                price: {input: .nan, output: 2}
            """,
            3,
            "judges[0].price.input: must be a finite number >= 0, not nan",
        ),
        (
            """
            judges: [{judge: api:a}]
            prices:
              a: {input: 1, output: .inf}
            """,
            3,
            "prices.a.output: must be a finite number >= 0, not inf",
        ),
        (
            """
            defaults: {top_p: 1.5}
            judges: [{judge: api:a}]
            """,
            1,
            "defaults.top_p: must be a number between 0 and 1, not 1.5",
        ),
        (
            """
            orders: sideways
            judges: [{judge: baseline:longer}]
            """,
            1,
            "orders: unknown order selection 'sideways'",
        ),
        (
            """
            judges: [{judge: baseline:longer}]
            endpoints:
              - {base_url: "https://api.openai.com/v1/", max_concurrency: 4}
              - {base_url: "https://API.openai.com/v1", max_concurrency: 8}
            """,
            4,
            "endpoints[1]: https://api.openai.com/v1 is capped twice (first on line 3)",
        ),
        (
            """
            judges: [{judge: baseline:longer}]
            report: {formats: [md, pdf]}
            """,
            2,
            "report.formats: unknown format 'pdf'",
        ),
        (
            """
            judges: [{judge: baseline:longer}]
            surprise: 1
            """,
            2,
            "surprise: unknown key in the sweep file; known: data, orders",
        ),
        (
            """
            judges:
              - judge: baseline:longer
                  bad: indentation
            """,
            3,
            "not valid YAML",
        ),
        ("data: demo\n", 1, "needs judges:"),
    ],
)
def test_every_mistake_is_named_with_file_line_and_key(
    tmp_path: Path, text: str, line: int | None, message: str
) -> None:
    path = write_sweep(tmp_path / "sweep.yaml", text)
    with pytest.raises(SweepFileError) as caught:
        load_sweep(path)
    where = f"{path}:{line}: " if line is not None else f"{path}"
    assert str(caught.value).startswith(where), str(caught.value)
    assert message in str(caught.value)
    assert caught.value.line == line


def test_defaults_and_top_level_settings_reach_each_judge_and_a_judge_may_override_them(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path / "sweeps" / "mine.yaml",
        """
        data: {source: ../data/cases.jsonl, organs: chest, limit: 3}
        orders: [swapped]
        template: pairwise-cot
        seed: 7
        defaults:
          max_tokens: 300
          api: {max_retries: 2}
          device: cpu
        judges:
          - judge: api:gpt-4o
            base_url: http://localhost:9000/v1/
            api_key_env: MY_KEY
          - name: own-sampling
            judge: api:gpt-4o
            base_url: http://localhost:9000/v1
            max_tokens: 100
            seed: 3
            template: pairwise
          - judge: hf:some/model
            batch_size: 2
            local: {dtype: bfloat16}
        """,
    )
    config = load_sweep(path)
    first, second, local = config.judges
    # a relative data path is relative to the sweep file
    assert config.data.source == str((tmp_path / "data" / "cases.jsonl").resolve())
    assert config.data.organs == ("chest",) and config.data.limit == 3
    assert config.orders == (Order.SWAPPED,)
    assert (first.options.template, first.options.seed, first.options.max_tokens) == ("pairwise-cot", 7, 300)
    assert first.options.api.max_retries == 2 and first.options.api.api_key_env == "MY_KEY"
    assert first.base_url() == "http://localhost:9000/v1"  # normalised as caps compare it
    assert (second.options.template, second.options.seed, second.options.max_tokens) == ("pairwise", 3, 100)
    assert second.name == "own-sampling" and first.name == "api:gpt-4o"
    assert local.options.local.device == "cpu" and local.options.local.dtype == "bfloat16"
    assert local.options.batch_size == 2 and local.is_heavy and not first.is_heavy


def test_a_jury_may_also_be_written_as_a_judge_entry_with_weighted_members(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path / "sweep.yaml",
        """
        judges:
          - judge: api:a
          - judge: api:b
          - judge: api:c
          - judge: jury:panel
            members: [{judge: api:a, weight: 2}, api:b, api:c]
        """,
    )
    config = load_sweep(path)
    assert [j.spec for j in config.juries] == ["jury:panel"]
    assert config.juries[0].members == (("api:a", 2.0), ("api:b", 1.0), ("api:c", 1.0))
    assert [e.spec for e in config.judges] == ["api:a", "api:b", "api:c"]


def test_prices_come_from_the_prices_file_then_the_entry_then_the_sweep_table(tmp_path: Path) -> None:
    path = write_sweep(
        tmp_path / "sweep.yaml",
        """
        judges:
          - name: four-o
            judge: api:gpt-4o
            price: {input: 5, output: 15}
          - judge: api:gpt-4o-mini
          - judge: api:unpriced
          - judge: baseline:longer
        prices:
          gpt-4o: {input: 1, output: 1}
          gpt-4o-mini: {input: 0.15, output: 0.6}
        """,
    )
    config = load_sweep(path)
    assert resolve_prices(config) == {
        "four-o": Price(5, 15),
        "api:gpt-4o-mini": Price(0.15, 0.6),
        "api:unpriced": None,
        "baseline:longer": None,
    }
    prices_file = tmp_path / "prices.yaml"
    prices_file.write_text("prices:\n  gpt-4o: {input: 2.5, output: 10}\n  api:unpriced: {input: 3, output: 4}\n")
    table = load_prices(prices_file)
    resolved = resolve_prices(config, table)
    assert resolved["four-o"] == Price(2.5, 10)  # the command line's file wins, looked up by model name
    assert resolved["api:unpriced"] == Price(3, 4)  # ... or by spec
    assert resolved["api:gpt-4o-mini"] == Price(0.15, 0.6)
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpt-4o:\n  input: 1\n  output: lots\n")
    with pytest.raises(SweepFileError, match=rf"^{bad}:3: gpt-4o.output: must be a number >= 0"):
        load_prices(bad)
    bad.write_text('{"gpt-4o": {"input": 1, "output": 1e999}}')  # JSON's way to an infinity
    with pytest.raises(SweepFileError, match=rf"^{bad}:1: gpt-4o.output: must be a"):
        load_prices(bad)
    for text in ("", "prices: {}\n", "{}"):
        bad.write_text(text)
        with pytest.raises(SweepFileError, match=rf"^{bad}: holds no prices"):
            load_prices(bad)
