"""A missing optional dependency names the install command that fits how medrewardbench was installed.

The distributions are real ``.dist-info`` directories written here and read through
:class:`importlib.metadata.PathDistribution`, as pip leaves them (PEP 610's ``direct_url.json``
for an install from a directory, none for an install from an index).
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest

from medrewardbench.errors import MissingExtraError, install_command, require


def dist_info(tmp_path: Path, direct_url: dict[str, object] | None) -> PathDistribution:
    info = tmp_path / "site" / "medrewardbench-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: medrewardbench\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return PathDistribution(info)


def test_an_install_from_an_index_names_the_package(tmp_path: Path) -> None:
    assert install_command("api", dist_info(tmp_path, None)) == "pip install 'medrewardbench[api]'"
    assert install_command(None, dist_info(tmp_path / "b", None)) == "pip install 'medrewardbench'"


def test_a_wheel_file_install_is_not_a_source_checkout(tmp_path: Path) -> None:
    wheel = {"url": "file:///tmp/dist/medrewardbench-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert install_command("hf", dist_info(tmp_path, wheel)) == "pip install 'medrewardbench[hf]'"


def test_a_source_checkout_names_dot_in_the_checkout_and_the_path_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = tmp_path / "medrewardbench-src"
    checkout.mkdir()
    dist = dist_info(tmp_path, {"url": checkout.as_uri(), "dir_info": {}})
    monkeypatch.chdir(checkout)
    assert install_command("api", dist) == "pip install '.[api]'"
    monkeypatch.chdir(tmp_path)
    assert install_command("serve", dist) == f"pip install '{checkout}[serve]'"


def test_an_editable_checkout_keeps_the_editable_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = tmp_path / "repo"
    checkout.mkdir()
    dist = dist_info(tmp_path, {"url": checkout.as_uri(), "dir_info": {"editable": True}})
    monkeypatch.chdir(checkout)
    assert install_command("train", dist) == "pip install -e '.[train]'"


def test_missing_extra_error_uses_the_same_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "surely_not_installed", None)
    with pytest.raises(MissingExtraError) as caught:
        require("surely_not_installed", "api", "The API judge")
    message = str(caught.value)
    assert message.endswith(f"Install it with: {install_command('api')}")
    assert "'surely_not_installed'" in message and "'api' extra" in message
    assert caught.value.extra == "api" and caught.value.module == "surely_not_installed"
