"""``push``'s checks and its calls to the Hub (through a recording stand-in: nothing leaves the machine),
and ``--data hf:OWNER/NAME`` on a pushed folder found in the local Hub cache."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from medrewardbench.data import load_benchmark
from medrewardbench.data.hub import PUSH_PATTERNS, check_push, push_dataset_folder
from medrewardbench.data.hub_folder import write_hub_data
from medrewardbench.errors import DataError


class RecordingHubApi:
    """Records the calls ``push`` makes, with their arguments, and answers like HfApi would."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def create_repo(self, repo_id: str, **kwargs: Any) -> str:
        self.calls.append(("create_repo", (repo_id,), kwargs))
        return f"https://huggingface.co/datasets/{repo_id}"

    def upload_folder(self, **kwargs: Any) -> dict[str, str]:
        self.calls.append(("upload_folder", (), kwargs))
        return {"commit_url": f"https://huggingface.co/datasets/{kwargs['repo_id']}/commit/abc"}


def hub_folder(root: Path, license_id: str = "cc-by-4.0") -> Path:
    write_hub_data(load_benchmark("demo").cases[:4], root)
    configs = "configs:\n- config_name: default\n  data_files:\n  - split: test\n    path: data/test-*.parquet\n"
    header = f"license: {license_id}\n{configs}"
    (root / "README.md").write_text(f"---\n{header}---\n# demo\n")
    (root / "dataset.json").write_text(
        '{"name": "demo4", "labels": {"provenance": "illustrative", "kind": "illustrative"}}'
    )
    return root


def test_push_creates_the_dataset_repository_and_uploads_the_folder_in_one_commit(tmp_path: Path) -> None:
    folder = hub_folder(tmp_path / "hub")
    (folder / "notes.txt").write_text("not for the Hub")
    api = RecordingHubApi()
    commit = push_dataset_folder(folder, "someone/chest-pairs", token="hf_secret", api=api, private=True)
    assert commit["commit_url"].endswith("/commit/abc")
    assert api.calls == [
        ("create_repo", ("someone/chest-pairs",), {"repo_type": "dataset", "private": True, "exist_ok": True,
                                                    "token": "hf_secret"}),
        ("upload_folder", (), {"folder_path": str(folder), "repo_id": "someone/chest-pairs", "repo_type": "dataset",
                               "revision": None, "token": "hf_secret", "allow_patterns": list(PUSH_PATTERNS),
                               "commit_message": api.calls[1][2]["commit_message"]}),
    ]  # fmt: skip
    assert api.calls[1][2]["commit_message"].startswith("Upload with medrewardbench")


@pytest.mark.parametrize("repo", ["no-owner", "a/b/c", "../x", "owner/", "o/na me"])
def test_a_malformed_repository_id_is_refused_before_any_call(tmp_path: Path, repo: str) -> None:
    api = RecordingHubApi()
    with pytest.raises(DataError, match="OWNER/NAME"):
        push_dataset_folder(hub_folder(tmp_path / "hub"), repo, token="t", api=api)
    assert api.calls == []


def test_only_a_hub_folder_is_pushed_and_a_missing_licence_is_warned_about(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(DataError, match="not a Hub dataset folder"):
        check_push(tmp_path / "plain", "me/set")
    assert check_push(hub_folder(tmp_path / "ok"), "me/set") == []
    (warning,) = check_push(hub_folder(tmp_path / "unset", license_id="unknown"), "me/set")
    assert "no licence is set" in warning


def test_a_pushed_folder_loads_from_the_hub_cache_with_hf_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Laid out in the Hub cache as snapshot_download leaves it (blobs and links), read offline."""
    folder = hub_folder(tmp_path / "hub")
    repo_dir = tmp_path / "cache" / "datasets--someone--demo4"
    commit = "c" * 40
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        blob = repo_dir / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, blob)
        link = repo_dir / "snapshots" / commit / file.relative_to(folder)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo_dir / "refs").mkdir()
    (repo_dir / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "cache"))
    loaded = load_benchmark("hf:someone/demo4")
    assert loaded.cases == load_benchmark("demo").cases[:4] and loaded.name == "demo4"
