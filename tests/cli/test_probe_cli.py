"""``medrewardbench probe grounding`` on the demo data: the files it writes, the flags it prints, bad input."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from medrewardbench.cli import app

runner = CliRunner()


def test_probe_grounding_on_the_demo_cannot_clear_the_baselines_and_writes_json_and_html(tmp_path: Path) -> None:
    args = ["probe", "grounding", "--data", "demo", "--judge", "baseline:longer", "--judge", "baseline:first"]
    args += ["--out", str(tmp_path), "--bootstrap", "200", "--controls", "no-image,dicom-window"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    # no verdict moves, but 34 cases bound the flip rate only below 10.3 %: too few to tell
    assert "unknown" in result.output and "too few cases to tell" in result.output  # the flag and its rule
    document = json.loads((tmp_path / "probe-grounding.json").read_text())
    assert document["settings"]["controls"] == ["no-image", "dicom-window"]
    assert [j["flag"] for j in document["judges"]] == ["unknown"] * 2
    flip = document["judges"][0]["controls"]["no-image"]["flip_rate"]
    assert flip["point"] == 0.0 and flip["high"] == round(1 - 0.025 ** (1 / 34), 6)
    html = (tmp_path / "probe-grounding.html").read_text()
    assert "Grounding: does the verdict depend on the image?" in html and "baseline:first" in html
    # the parent run is in the same store as the controls, and the eval files describe the parent data
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert document["data"]["data_hash"] in json.dumps(metrics)


def test_an_unknown_control_is_bad_input(tmp_path: Path) -> None:
    result = runner.invoke(app, ["probe", "grounding", "--out", str(tmp_path), "--controls", "no-image,sideways"])
    assert result.exit_code == 2
    assert "sideways" in result.output and "wrong-patient" in result.output
    assert not (tmp_path / "probe-grounding.json").exists()
