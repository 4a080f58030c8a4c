"""``serve`` checks its dependencies before it loads anything or claims to be serving."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.errors import install_command

runner = CliRunner()


@pytest.mark.parametrize(("module", "extra"), [("fastapi", "serve"), ("uvicorn", "serve"), ("transformers", "hf")])
def test_a_missing_dependency_is_named_before_anything_is_served(
    module: str, extra: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if extra == "hf":
        pytest.importorskip("torch")  # without it, torch is the dependency named
    monkeypatch.setitem(sys.modules, module, None)  # as if the package were not installed
    result = runner.invoke(app, ["serve", f"hf:{tmp_path / 'model'}", "--port", "1"], catch_exceptions=False)
    assert result.exit_code == 2
    flat = result.output.replace("\n", "")
    assert f"'{module}'" in flat and install_command(extra) in flat
    assert "serving" not in result.output and "loading" not in result.output


def test_an_adapter_needs_peft_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")  # without torch or transformers, they are the dependency named
    pytest.importorskip("transformers")
    monkeypatch.setitem(sys.modules, "peft", None)
    result = runner.invoke(app, ["serve", "hf:x", "--adapter", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 2 and "'peft'" in result.output and "serving" not in result.output


def test_a_model_that_cannot_load_never_claims_to_be_serving(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("transformers")
    result = runner.invoke(app, ["serve", f"hf:{tmp_path / 'nowhere'}", "--port", "1"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "loading" in result.output and "serving" not in result.output
