"""The Hub dataset folder: images as the Hub shows them, originals kept, shards, and the README's data files."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data import load_benchmark
from medrewardbench.data.hub_folder import hub_data_files, is_hub_folder, write_hub_data
from medrewardbench.errors import DataError


def folder_of(cases: list[Case], root: Path, readme: str = "---\nlicense: other\n---\n", shard: int = 1000) -> Path:
    write_hub_data(cases, root, rows_per_shard=shard)
    (root / "README.md").write_text(readme)
    return root


def test_demo_cases_round_trip_across_shards_with_their_builtin_images(tmp_path: Path) -> None:
    demo = load_benchmark("demo").cases[:10]
    root = folder_of(list(demo), tmp_path / "hub", shard=4)
    names = sorted(p.name for p in (root / "data").iterdir())
    assert names == [f"test-0000{i}-of-00003.parquet" for i in range(3)]
    back = load_benchmark(str(root))
    assert back.cases == tuple(demo)  # builtin images come back as builtins, labels and texts equal
    row = pq.read_table(root / "data" / names[0]).to_pylist()[0]
    assert row["image_builtin"] == demo[0].image.location
    Image.open(io.BytesIO(row["image"]["bytes"])).verify()  # what the Hub shows is a PNG PIL opens


def test_a_dicom_file_is_shown_rendered_and_kept_whole(tmp_path: Path) -> None:
    from pydicom.data import get_testdata_file

    dicom = Path(str(get_testdata_file("CT_small.dcm", download=False)))
    case = Case("ct1", ImageRef.from_bytes(dicom.read_bytes(), "CT_small.dcm"), "q?", "a", "b", labels={"overall": 1})
    root = folder_of([case], tmp_path / "hub")
    row = pq.read_table(root / "data" / "test-00000-of-00001.parquet").to_pylist()[0]
    assert row["image_original"] == {"bytes": dicom.read_bytes(), "path": "CT_small.dcm"}
    assert Image.open(io.BytesIO(row["image"]["bytes"])).format == "PNG" and row["image"]["path"] == "CT_small.dcm.png"
    (back,) = load_benchmark(str(root)).cases
    assert back.image.raw_bytes() == dicom.read_bytes() and dict(back.labels) == {"overall": 1}


def test_the_readme_configs_choose_the_files_and_may_not_leave_the_folder(tmp_path: Path) -> None:
    cases = list(load_benchmark("demo").cases[:3])
    root = folder_of(cases, tmp_path / "hub")
    assert is_hub_folder(root) and not is_hub_folder(tmp_path)
    assert hub_data_files(root).patterns == ["data/*.parquet"]  # no configs: the Hub's default
    (root / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files: ../*.parquet\n---\n")
    with pytest.raises(DataError, match="leaves the folder"):
        hub_data_files(root)
    header = "configs:\n- config_name: x\n  data_files:\n  - split: test\n    path: d/*.parquet\n"
    (root / "README.md").write_text(f"---\n{header}---\n")
    with pytest.raises(DataError, match="no file matches"):
        load_benchmark(str(root))
    (root / "README.md").write_text("---\nconfigs: [unclosed\n")
    with pytest.raises(DataError, match="never closed"):
        hub_data_files(root)


def test_doctors_harm_flags_and_comments_survive_the_folder(tmp_path: Path) -> None:
    from dataclasses import replace

    from medrewardbench.cases import Annotation

    (case,) = load_benchmark("demo").cases[:1]
    flagged = replace(
        case,
        annotations=(
            Annotation("dr-a", dict(case.labels), comment="B invents a mass", harm={2: "severe"}),
            Annotation("dr-b", dict(case.labels)),
            Annotation("dr-c", dict(case.labels), harm={1: "minor", 2: "critical"}),
        ),
    )
    (back,) = load_benchmark(str(folder_of([flagged], tmp_path / "hub"))).cases
    assert back.annotations == flagged.annotations
