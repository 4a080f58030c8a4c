"""``medrewardbench probe grounding`` on the demo data: the files it writes, the flags it prints, bad input;
grounding and harm on data whose images lie outside its directory."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from helpers.cases import make_case
from typer.testing import CliRunner

from medrewardbench.cases import Annotation
from medrewardbench.cli import app
from medrewardbench.data import write_canonical

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


def _data_with_images_outside(tmp_path: Path) -> Path:
    """Four doctor-flagged pairs whose image files lie in a sibling of the data's directory."""
    cases = [
        make_case(i, labels={"overall": 1}, annotations=(Annotation("dr_a", {"overall": 1}, harm={2: "severe"}),))
        for i in range(4)
    ]
    embedded = write_canonical(cases, tmp_path / "embedded.jsonl")
    (tmp_path / "outside").mkdir()
    (tmp_path / "data").mkdir()
    rows = []
    for line in embedded.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        name = row["image"]["path"]
        (tmp_path / "outside" / name).write_bytes(base64.b64decode(row["image"]["bytes"]))
        rows.append(json.dumps({**row, "image": f"../outside/{name}"}))
    path = tmp_path / "data" / "cases.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("probe", "extra"), [("grounding", ["--bootstrap", "200", "--controls", "no-image,blank"]), ("harm", [])]
)
def test_grounding_and_harm_read_images_outside_the_data_directory_only_when_allowed(
    probe: str, extra: list[str], tmp_path: Path
) -> None:
    data = _data_with_images_outside(tmp_path)
    args = [
        "probe",
        probe,
        "--data",
        str(data),
        "--judge",
        "baseline:longer",
        *extra,
        "-q",
    ]  # harm takes no --bootstrap
    refused = runner.invoke(app, [*args, "--out", str(tmp_path / "refused")])
    assert refused.exit_code == 2, refused.output
    assert "outside the data directory" in refused.output and "--allow-external-images" in refused.output
    assert not (tmp_path / "refused" / f"probe-{probe}.json").exists()
    allowed = runner.invoke(app, [*args, "--out", str(tmp_path / "allowed"), "--allow-external-images"])
    assert allowed.exit_code == 0, allowed.output
    document = json.loads((tmp_path / "allowed" / f"probe-{probe}.json").read_text())
    assert [j["judge"] for j in document["judges"]] == ["baseline:longer"]
