"""``medrewardbench push``: argument checks and the refusals that come before any upload."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data.hub_folder import write_hub_data

runner = CliRunner()


def folder(root: Path) -> Path:
    from medrewardbench.data import load_benchmark

    write_hub_data(load_benchmark("demo").cases[:2], root)
    (root / "README.md").write_text("---\nlicense: unknown\n---\n")
    return root


def test_push_refuses_without_a_token_and_never_shows_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    result = runner.invoke(app, ["push", str(folder(tmp_path / "hub")), "me/set"])
    assert result.exit_code == 2
    assert "no licence is set" in result.output and "no Hub token: set HF_TOKEN" in result.output
    monkeypatch.setenv("HF_TOKEN", "hf_do_not_print_me")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = runner.invoke(app, ["push", str(tmp_path / "hub"), "me/set"])
    assert result.exit_code == 2 and "HF_HUB_OFFLINE is set" in result.output
    assert "hf_do_not_print_me" not in result.output


def test_push_checks_the_folder_and_the_repository_id_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["push", str(tmp_path / "empty"), "me/set"])
    assert result.exit_code == 2 and "not a Hub dataset folder" in result.output
    result = runner.invoke(app, ["push", str(folder(tmp_path / "hub")), "just-a-name"])
    assert result.exit_code == 2 and "OWNER/NAME" in result.output
    result = runner.invoke(app, ["push", str(tmp_path / "hub")])
    assert result.exit_code == 2 and "Missing argument" in result.output
