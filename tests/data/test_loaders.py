"""Loaders: reference layout, Hub cache, canonical files, demo set, and the Benchmark they return."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.data import (
    build_canonical_set,
    build_fake_hf_cache,
    build_reference_layout,
    canonical_rows,
    reference_rows,
    write_canonical_parquet_rows,
    write_jsonl,
    write_reference_parquet,
)
from helpers.images import png_bytes

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data import demo as demo_module
from medrewardbench.data import load_benchmark, read_canonical, sources, write_canonical
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.data.canonical import cases_from_records
from medrewardbench.data.hub import DEFAULT_REPO, parse_hf_source
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError

# --------------------------------------------------------------------------- reference layout


def test_reference_layout_loads_cases_labels_and_metadata(reference_dir: Path) -> None:
    bench = load_benchmark(str(reference_dir))

    assert bench.name == "Med-RewardBench"
    assert bench.source == str(reference_dir)
    assert [c.case_id for c in bench] == ["brain/0", "brain/1", "chest/0", "chest/1", "chest/2"]
    assert bench.organ_systems() == ("brain", "chest")
    assert bench.warnings == ()
    chest1 = bench.cases[3]
    # question 1 is odd: every label is "B" = answer2 = response_2
    assert dict(chest1.labels) == {dim: 2 for dim in DIMENSIONS}
    assert dict(bench.cases[2].labels) == {dim: 1 for dim in DIMENSIONS}
    assert chest1.question == "What does this chest image show? (#1)"
    assert chest1.response_1 == "Answer one for chest 1."
    assert chest1.response_2.startswith("A longer second answer for chest 1")
    assert chest1.organ_system == "chest"
    assert chest1.source_dataset == "FixtureSet"
    assert chest1.question_type == "open"
    assert chest1.body_part == "Chest"
    assert chest1.modality is None and chest1.department is None
    assert dict(chest1.metadata) == {
        "question_id": "1",
        "image_id": "img-chest-1",
        "labels_file": "pair_gt_all/chest.jsonl",
        "parquet_file": "pair_gt_all/parquet/chest.parquet",
    }


def test_reference_images_are_the_parquet_image_struct_bytes(reference_dir: Path) -> None:
    parquet = reference_dir / "pair_gt_all" / "parquet" / "chest.parquet"
    assert pq.ParquetFile(parquet).num_row_groups == 2  # three rows, row groups of two: streamed
    bench = load_benchmark(str(reference_dir), organs=["chest"])

    image = bench.cases[2].image
    assert image.kind == "bytes"
    assert image.location == "chest_2.png"
    assert image.data == reference_rows("chest", 3)[2]["image"]["bytes"]
    assert image.data is not None and image.data.startswith(b"\x89PNG")


def test_reference_layout_can_be_given_as_the_pair_gt_all_directory(reference_dir: Path) -> None:
    whole = load_benchmark(str(reference_dir))
    inner = load_benchmark(str(reference_dir / "pair_gt_all"))

    assert inner.case_ids() == whole.case_ids()
    assert [c.labels for c in inner] == [c.labels for c in whole]


def test_organ_selection_reads_only_the_selected_organs(reference_dir: Path) -> None:
    chest = load_benchmark(str(reference_dir), organs=["chest"])
    assert chest.case_ids() == ("chest/0", "chest/1", "chest/2")

    both = load_benchmark(str(reference_dir), organs=["Chest", "BRAIN"])
    assert len(both) == 5


def test_unknown_organ_is_an_error_listing_the_available_ones(reference_dir: Path) -> None:
    with pytest.raises(DataError) as caught:
        load_benchmark(str(reference_dir), organs=["chest", "spleen"])

    message = str(caught.value)
    assert "'spleen'" in message
    assert "available: brain, chest" in message


def test_unlabeled_cases_are_kept_and_orphan_labels_reported(tmp_path: Path) -> None:
    root = build_reference_layout(tmp_path / "mrb", unlabeled={"chest": [1]}, orphan_labels={"brain": [7, 8]})

    bench = load_benchmark(str(root))

    assert len(bench) == 5
    unlabeled = bench.cases[3]
    assert unlabeled.case_id == "chest/1"
    assert dict(unlabeled.labels) == {} and not unlabeled.is_labeled
    messages = [str(w) for w in bench.warnings]
    assert len(messages) == 3
    assert any(
        "pair_gt_all/parquet/chest.parquet, row 2 (case chest/1)" in m and "case without expert labels" in m
        for m in messages
    )
    orphan = [w for w in bench.warnings if "labels without a case" in w.message]
    assert [(w.file.endswith("pair_gt_all/brain.jsonl"), w.row, w.case_id) for w in orphan] == [
        (True, 3, "brain/7"),
        (True, 4, "brain/8"),
    ]
    assert bench.labeled().case_ids() == ("brain/0", "brain/1", "chest/0", "chest/2")


def test_department_and_modality_columns_are_used_when_present(tmp_path: Path) -> None:
    rows = reference_rows("eye", 2)
    rows[0]["department"] = "ophthalmology"
    rows[0]["modality"] = "fundus photography"
    gt = tmp_path / "pair_gt_all"
    path = gt / "parquet" / "eye.parquet"
    write_reference_parquet(path, rows)
    # the fixture writer keeps only the reference columns: add the two extra ones by hand
    table = pq.read_table(path)
    table = table.append_column("department", pa.array(["ophthalmology", None]))
    table = table.append_column("modality", pa.array(["fundus photography", None]))
    pq.write_table(table, path)
    write_jsonl(gt / "eye.jsonl", [{"question_id": 0, "human_answer": {"overall": "A"}}])

    bench = load_benchmark(str(gt), strict=False)

    assert bench.cases[0].department == "ophthalmology"
    assert bench.cases[0].modality == "fundus photography"
    assert bench.cases[1].department is None and bench.cases[1].modality is None


def test_limit_keeps_the_first_cases_in_a_stable_order(reference_dir: Path) -> None:
    first = load_benchmark(str(reference_dir), limit=3)
    again = load_benchmark(str(reference_dir), limit=3)

    assert first.case_ids() == ("brain/0", "brain/1", "chest/0") == again.case_ids()
    assert len(load_benchmark(str(reference_dir), limit=0)) == 0
    assert len(load_benchmark(str(reference_dir), limit=99)) == 5
    with pytest.raises(ValueError, match="limit"):
        load_benchmark(str(reference_dir), limit=-1)


def test_benchmark_select_by_organ_and_limit(tmp_path: Path) -> None:
    root = build_reference_layout(tmp_path / "mrb", unlabeled={"chest": [2]}, orphan_labels={"brain": [9]})
    bench = load_benchmark(str(root))

    chest = bench.select(organs=["chest"])
    assert chest.case_ids() == ("chest/0", "chest/1", "chest/2")
    assert [w.case_id for w in chest.warnings] == ["chest/2"]  # the brain orphan belongs to brain

    brain = bench.select(organs=["brain"], limit=1)
    assert brain.case_ids() == ("brain/0",)
    assert [w.case_id for w in brain.warnings] == ["brain/9"]

    with pytest.raises(DataError, match="available: brain, chest"):
        bench.select(organs=["liver"])


# --------------------------------------------------------------------------- Hub cache


@pytest.fixture
def fake_hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point huggingface_hub at an empty cache under tmp_path, offline.

    huggingface_hub reads HF_HOME/HF_HUB_CACHE/HF_HUB_OFFLINE into ``huggingface_hub.constants`` once,
    at import; ``snapshot_download`` then reads ``constants.HF_HUB_CACHE`` at call time. Setting
    the environment alone would therefore not move the cache, so both are patched.
    """
    from huggingface_hub import constants

    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return home


COMMIT_MAIN = "1" * 40
COMMIT_V1 = "2" * 40


def test_hf_source_resolves_from_the_local_cache_offline(fake_hf_home: Path) -> None:
    build_fake_hf_cache(fake_hf_home / "hub", "owner/name", COMMIT_MAIN)

    bench = load_benchmark("hf:owner/name")

    assert bench.source == "hf:owner/name"
    assert bench.case_ids() == ("brain/0", "brain/1", "chest/0", "chest/1", "chest/2")
    assert dict(bench.cases[1].labels) == {dim: 2 for dim in DIMENSIONS}
    assert bench.cases[0].image.data == reference_rows("brain", 1)[0]["image"]["bytes"]


def test_hf_source_with_a_revision_uses_that_snapshot(fake_hf_home: Path) -> None:
    build_fake_hf_cache(fake_hf_home / "hub", "owner/name", COMMIT_MAIN, organs={"chest": 3})
    build_fake_hf_cache(fake_hf_home / "hub", "owner/name", COMMIT_V1, refs=("v1.0",), organs={"lung": 1})

    assert load_benchmark("hf:owner/name").organ_systems() == ("chest",)
    assert load_benchmark("hf:owner/name@v1.0").case_ids() == ("lung/0",)
    assert load_benchmark(f"hf:owner/name@{COMMIT_V1}").case_ids() == ("lung/0",)
    assert load_benchmark("hf:owner/name@v1.0", organs=["LUNG"]).organ_systems() == ("lung",)


def test_hf_source_not_cached_gives_a_clear_error(fake_hf_home: Path) -> None:
    build_fake_hf_cache(fake_hf_home / "hub", "owner/name", COMMIT_MAIN)

    with pytest.raises(DataError) as missing_repo:
        load_benchmark("hf:owner/absent")
    message = str(missing_repo.value)
    assert "owner/absent" in message
    assert "not in the local Hugging Face cache" in message
    assert str(fake_hf_home / "hub") in message
    assert "hf download owner/absent --repo-type dataset" in message

    with pytest.raises(DataError, match=r"revision v9.*not in the local Hugging Face cache"):
        load_benchmark("hf:owner/name@v9")

    with pytest.raises(DataError, match="Nandzy/Med-RewardBench"):
        load_benchmark("hf:")


def test_parse_hf_source() -> None:
    assert parse_hf_source("hf:") == (DEFAULT_REPO, None)
    assert parse_hf_source("hf:a/b") == ("a/b", None)
    assert parse_hf_source("hf:a/b@v2") == ("a/b", "v2")
    assert parse_hf_source("hf:@dev") == (DEFAULT_REPO, "dev")
    for bad in ("hf:justname", "hf:a/b/c", "hf:/b"):
        with pytest.raises(DataError, match="expected hf:OWNER/NAME"):
            parse_hf_source(bad)


# --------------------------------------------------------------------------- canonical files


def _expected_canonical(root: Path) -> list[Case]:
    images = root / "images"
    return [
        Case(
            case_id="c1",
            image=ImageRef.from_path(str(images / "green.png")),
            question="Is there a lesion?",
            response_1="Yes, in the upper left.",
            response_2="No lesion is visible.",
            labels={"accuracy": 1, "relevance": 2, "overall": 1},
            organ_system="chest",
            department="radiology",
            modality="X-ray",
            source_dataset="Fixture",
            question_type="closed",
            body_part="Chest",
            metadata={"difficulty": "easy", "rank": 3},
        ),
        Case(
            case_id="c2",
            image=ImageRef.from_path(str(images / "ct.dcm")),
            question="Which window shows the bone best?",
            response_1="The bone window.",
            response_2="The lung window, clearly.",
            labels={"accuracy": 2, "comprehensiveness": 2},
            organ_system="abdomen",
            modality="CT",
        ),
        Case(
            case_id="c3",
            image=ImageRef.from_bytes(png_bytes((5, 5, 250)), "blue.png"),
            question="Describe the colour.",
            response_1="Blue.",
            response_2="Red.",
            labels={"accuracy": 1},
            organ_system="eye",
        ),
        Case(
            case_id="c4",
            image=ImageRef.builtin("pydicom:CT_small.dcm"),
            question="What is the modality?",
            response_1="CT.",
            response_2="MRI.",
            organ_system="brain",
        ),
        Case(
            case_id="c5",
            image=ImageRef.empty(),
            question="A question without an image?",
            response_1="First.",
            response_2="Second.",
            labels={"overall": 2},
        ),
    ]


def test_canonical_jsonl_reads_every_image_form(canonical_file: Path) -> None:
    cases, problems = read_canonical(canonical_file)

    assert problems == []
    assert cases == _expected_canonical(canonical_file.parent)
    assert cases[2].image.data == png_bytes((5, 5, 250))
    assert cases[4].organ_system == "unknown"
    assert list(cases[0].labels) == ["accuracy", "relevance", "overall"]  # dimension order


def test_relative_image_paths_resolve_against_the_data_file_not_the_cwd(
    canonical_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    relative_source = os.path.relpath(canonical_file, elsewhere)
    bench = load_benchmark(relative_source)

    assert bench.cases[0].image.location == str(canonical_file.parent / "images" / "green.png")
    assert Path(bench.cases[0].image.location).is_file()
    assert Path(bench.cases[1].image.location).read_bytes()[128:132] == b"DICM"


def test_canonical_parquet_written_by_another_tool(canonical_file: Path) -> None:
    root = canonical_file.parent
    parquet = write_canonical_parquet_rows(root / "cases.parquet", canonical_rows())

    cases, problems = read_canonical(parquet)

    assert problems == []
    assert cases == _expected_canonical(root)
    assert cases[2].image.data == png_bytes((5, 5, 250))


def test_canonical_directory_reads_every_file_in_name_order(tmp_path: Path) -> None:
    rows = canonical_rows()
    build_canonical_set(tmp_path / "set", name="b.jsonl", rows=rows[:2])
    write_jsonl(tmp_path / "set" / "a.jsonl", rows[2:])
    (tmp_path / "set" / "notes.txt").write_text("ignored")

    bench = load_benchmark(str(tmp_path / "set"))

    assert bench.name == "set"
    assert bench.case_ids() == ("c3", "c4", "c5", "c1", "c2")


def test_canonical_json_file_with_a_cases_list(tmp_path: Path) -> None:
    build_canonical_set(tmp_path, name="unused.jsonl")
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"name": "x", "cases": canonical_rows()}))

    cases, problems = read_canonical(path)

    assert problems == [] and [c.case_id for c in cases] == ["c1", "c2", "c3", "c4", "c5"]


def test_canonical_organ_selection(canonical_file: Path) -> None:
    bench = load_benchmark(str(canonical_file), organs=["chest", "eye"])
    assert bench.case_ids() == ("c1", "c3")
    with pytest.raises(DataError, match="available: abdomen, brain, chest, eye, unknown"):
        load_benchmark(str(canonical_file), organs=["liver"])


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".json"])
def test_canonical_round_trip(canonical_file: Path, tmp_path: Path, suffix: str) -> None:
    cases, _ = read_canonical(canonical_file)
    out = tmp_path / "out" / "nested" / f"copy{suffix}"

    write_canonical(cases, out)
    # the copy names images outside its own directory: reading it back needs them allowed
    assert any("outside the data directory" in p.message for p in read_canonical(out)[1])
    again, problems = read_canonical(out, image_roots=[canonical_file.parent])

    assert problems == []
    assert again == cases
    assert [c.image.data for c in again] == [c.image.data for c in cases]
    assert not list(out.parent.glob(".*.tmp"))


def test_canonical_round_trip_writes_relative_paths(canonical_file: Path, tmp_path: Path) -> None:
    cases, _ = read_canonical(canonical_file)
    out = tmp_path / "out" / "copy.jsonl"
    write_canonical(cases, out)

    first = json.loads(out.read_text().splitlines()[0])
    assert first["image"] == os.path.join("..", "canon", "images", "green.png")
    assert first["labels"] == {"accuracy": 1, "relevance": 2, "overall": 1}


def test_canonical_embed_images_makes_a_self_contained_file(canonical_file: Path, tmp_path: Path) -> None:
    cases, _ = read_canonical(canonical_file)
    out = tmp_path / "embedded.parquet"

    write_canonical(cases, out, embed_images=True)
    again, problems = read_canonical(out)

    assert problems == []
    assert [c.image.kind for c in again] == ["bytes", "bytes", "bytes", "builtin", "none"]
    assert again[0].image.data == (canonical_file.parent / "images" / "green.png").read_bytes()
    assert again[1].image.location == "ct.dcm"
    assert [c.labels for c in again] == [c.labels for c in cases]


def test_write_canonical_refuses_unknown_suffix_and_unserialisable_metadata(tmp_path: Path) -> None:
    case = Case("x", ImageRef.empty(), "q", "a", "b", metadata={"when": object()})
    with pytest.raises(ValueError, match="suffix"):
        write_canonical([case], tmp_path / "cases.csv")
    for suffix in (".jsonl", ".parquet"):
        with pytest.raises(ValueError, match="JSON-serialisable"):
            write_canonical([case], tmp_path / f"cases{suffix}")
        assert not (tmp_path / f"cases{suffix}").exists()


def test_cases_from_records_reports_problems_with_the_given_file_name(tmp_path: Path) -> None:
    records = [
        {"id": "a", "question": "q", "response_1": "x", "response_2": "y", "image": "img.png"},
        {"id": "b", "question": "q", "response_1": "x"},
    ]
    cases, problems = cases_from_records(records, "memory.json", tmp_path)

    assert [c.case_id for c in cases] == ["a"]
    assert cases[0].image == ImageRef.from_path(str(tmp_path / "img.png"))
    assert [str(p) for p in problems] == ["memory.json, row 2 (case b), field 'response_2': missing required field"]


def test_strict_false_skips_bad_rows_and_keeps_their_problems_as_warnings(tmp_path: Path) -> None:
    rows = canonical_rows()
    rows[1] = {**rows[1], "labels": {"accuracy": "C"}}
    path = build_canonical_set(tmp_path, rows=rows)

    with pytest.raises(DataError, match="row 2"):
        load_benchmark(str(path))
    bench = load_benchmark(str(path), strict=False)

    assert bench.case_ids() == ("c1", "c3", "c4", "c5")
    # the error of row 2, then the warning about c4, which has no labels
    assert [(w.row, w.field) for w in bench.warnings] == [(2, "labels.accuracy"), (4, "labels")]


# --------------------------------------------------------------------------- sources and Benchmark


def test_unknown_sources_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file or directory.*Expected 'demo'"):
        load_benchmark(str(tmp_path / "nothing-here"))
    (tmp_path / "cases.csv").write_text("id\n")
    with pytest.raises(DataError, match="unsupported file type '.csv'"):
        load_benchmark(str(tmp_path / "cases.csv"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="neither pair_gt_all/ nor canonical files"):
        load_benchmark(str(tmp_path / "empty"))


def test_data_hash_tracks_ids_content_and_labels(canonical_file: Path, tmp_path: Path) -> None:
    bench = load_benchmark(str(canonical_file))
    same = load_benchmark(str(canonical_file))
    assert bench.data_hash() == same.data_hash()
    assert len(bench.data_hash()) == 64

    relabeled_rows = canonical_rows()
    relabeled_rows[0]["labels"] = {**relabeled_rows[0]["labels"], "accuracy": 2}
    relabeled = load_benchmark(str(build_canonical_set(tmp_path / "relabeled", rows=relabeled_rows)))
    assert relabeled.data_hash() != bench.data_hash()

    recoloured = build_canonical_set(tmp_path / "recoloured")
    (recoloured.parent / "images" / "green.png").write_bytes(png_bytes((0, 0, 0)))
    assert load_benchmark(str(recoloured)).data_hash() != bench.data_hash()

    reordered = Benchmark(bench.name, bench.source, tuple(reversed(bench.cases)))
    assert reordered.data_hash() != bench.data_hash()
    assert bench.select(limit=2).data_hash() != bench.data_hash()


def test_fingerprinted_hashes_in_one_reading_and_keeps_a_small_set_in_memory(
    canonical_file: Path, tmp_path: Path
) -> None:
    expected = load_benchmark(str(canonical_file))
    loaded = load_benchmark(str(canonical_file), limit=4)
    held = loaded.fingerprinted()
    assert held.in_memory and not loaded.in_memory
    assert held.data_hash() == loaded.data_hash() == expected.select(limit=4).data_hash()
    assert [c.case_id for c in held] == [c.case_id for c in loaded]
    assert (held.name, held.source, held.labels, held.warnings) == (
        loaded.name,
        loaded.source,
        loaded.labels,
        loaded.warnings,
    )
    assert (len(held), held.n_labeled, held.organ_systems()) == (len(loaded), loaded.n_labeled, loaded.organ_systems())
    # the cases come back with their content hashes: nothing needs reading again
    assert all("content" in case._hash_cache for case in held)

    # over either bound, the benchmark streams on, hashed by the same reading
    for streamed in (
        load_benchmark(str(canonical_file)).fingerprinted(keep_cases=2),
        load_benchmark(str(canonical_file)).fingerprinted(keep_bytes=100),
    ):
        assert not streamed.in_memory
        assert streamed.data_hash() == expected.data_hash()
        assert streamed.content_hash_at(0) == next(iter(expected)).content_hash()

    # the source changed since it was loaded: an error, as when hashing it
    changed = load_benchmark(str(canonical_file))
    canonical_file.write_text(canonical_file.read_text() + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="changed since it was loaded"):
        changed.fingerprinted()


def test_a_kept_small_set_is_hashed_without_reading_the_source_again(
    canonical_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from medrewardbench.data import canonical

    expected = load_benchmark(str(canonical_file)).fingerprinted()
    rows = 0
    real = canonical.case_from_record

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal rows
        rows += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(canonical, "case_from_record", counted)
    loaded = load_benchmark(str(canonical_file), keep=True)
    read_when_loading = rows
    held = loaded.fingerprinted()
    assert rows == read_when_loading > 0  # hashing read no row again
    assert held.in_memory and not loaded.in_memory
    assert held.data_hash() == expected.data_hash()
    assert [c.case_id for c in held] == [c.case_id for c in expected]
    # the kept cases serve one hashing: afterwards the benchmark streams from its source as before
    assert list(loaded) and rows > read_when_loading

    # too many to keep: hashed by reading the source again, to the same fingerprint
    monkeypatch.setattr(sources, "KEEP_CASES", 2)
    big = load_benchmark(str(canonical_file), keep=True)
    assert big._prefetched is None and big.fingerprinted().data_hash() == expected.data_hash()

    # the source changed after loading: the kept cases are not used, and the change is an error
    changed = load_benchmark(str(canonical_file), keep=True)
    canonical_file.write_text(canonical_file.read_text() + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="changed since it was loaded"):
        changed.fingerprinted()


def test_data_hash_ignores_where_the_data_lives(tmp_path: Path) -> None:
    one = load_benchmark(str(build_canonical_set(tmp_path / "one")))
    two = load_benchmark(str(build_canonical_set(tmp_path / "two")))
    # image files at different absolute paths, same bytes: same fingerprint
    assert one.data_hash() == two.data_hash()


# --------------------------------------------------------------------------- demo


def _real_demo_present() -> bool:
    from importlib import resources

    return resources.files("medrewardbench.data").joinpath(demo_module.DEMO_RESOURCE).is_file()


@pytest.mark.skipif(not _real_demo_present(), reason="demo_cases.json is not written yet")
def test_real_demo_set_loads_and_carries_the_label_note() -> None:
    bench = load_benchmark("demo")

    assert len(bench) > 0
    assert bench.source == "demo"
    assert all(case.metadata.get("label_note") for case in bench)
    assert all(case.image.kind in ("builtin", "none") for case in bench)
    assert len({case.case_id for case in bench}) == len(bench)


def _point_demo_at(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    from contextlib import nullcontext

    monkeypatch.setattr(demo_module, "_demo_resource", lambda: nullcontext(path))


def test_demo_loader_reads_its_json_and_adds_the_notice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = canonical_rows()
    document = {
        "name": "tiny-demo",
        "version": 1,
        "notice": "Illustrative labels.",
        "cases": [rows[3], {**rows[4], "metadata": {"topic": "none"}}],
    }
    path = tmp_path / "demo_cases.json"
    path.write_text(json.dumps(document))
    _point_demo_at(monkeypatch, path)

    bench = load_benchmark("demo")

    assert bench.name == "tiny-demo"
    assert bench.case_ids() == ("c4", "c5")
    assert bench.cases[0].metadata == {"label_note": "Illustrative labels."}
    assert bench.cases[1].metadata == {"topic": "none", "label_note": "Illustrative labels."}
    assert demo_module.load_demo().case_ids() == ("c4", "c5")

    del document["notice"]
    path.write_text(json.dumps(document))
    assert load_benchmark("demo").cases[0].metadata["label_note"] == demo_module.DEMO_NOTICE


def test_demo_loader_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "demo_cases.json"
    _point_demo_at(monkeypatch, path)
    with pytest.raises(DataError, match="demo data file is missing"):
        load_benchmark("demo")
    path.write_text(json.dumps({"cases": [{"id": "x", "question": "q", "response_1": "a"}]}))
    with pytest.raises(DataError, match="field 'response_2': missing required field"):
        load_benchmark("demo")


def test_image_struct_with_only_a_path_resolves_next_to_the_parquet(tmp_path: Path) -> None:
    gt = tmp_path / "pair_gt_all"
    rows = reference_rows("foot", 1)
    rows[0]["image"] = {"bytes": None, "path": "img/foot.png"}
    write_reference_parquet(gt / "parquet" / "foot.parquet", rows)
    write_jsonl(gt / "foot.jsonl", [{"question_id": 0, "human_answer": {"overall": "B"}}])

    bench = load_benchmark(str(tmp_path))

    assert bench.cases[0].image == ImageRef.from_path(str(gt / "parquet" / "img" / "foot.png"))
    assert dict(bench.cases[0].labels) == {"overall": 2}
