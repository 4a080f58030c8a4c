"""``build import``: questions from differently shaped sources, validated like the case loaders, pooled."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from helpers.curation import (
    HF_MAP,
    HF_ROWS,
    VQA_MAP,
    VQA_ROWS,
    build_fake_hf_dataset,
    hf_parquet_bytes,
    write_jsonl,
    write_vqa_source,
)

from medrewardbench.curation.importer import ColumnMapping, import_questions
from medrewardbench.curation.project import open_project
from medrewardbench.curation.store import BuildError
from medrewardbench.data.questions import read_questions
from medrewardbench.errors import DataError, OutputLockedError


def all_questions(store):  # type: ignore[no-untyped-def]
    return [q for chunk in store.iter_questions() for q in chunk]


def test_a_jsonl_source_with_its_own_columns_and_relative_images(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    with open_project(tmp_path / "p", create=True) as store:
        summary = import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]), source_name="vqa")
        questions = all_questions(store)
        assert summary.imported == 6 and summary.rows == 6
        assert [q.qid for q in questions] == ["v1", "v2", "v3", "v4", "v5", "v6"]
        first = questions[0]
        assert (first.source, first.source_id, first.source_dataset) == ("vqa", "v1", "vqa")
        assert first.organ_system == "abdomen" and first.reference_answer == "yes"
        # the answer type is inferred from the reference: yes/no, a number with its unit, an option letter
        assert {q.answer_type for q in questions} == {"closed"}
        assert first.image_kind == "bytes" and first.image_name == "ct.png"
        # images live in the store now: the source files are no longer needed
        for path in (tmp_path / "vqa" / "images").iterdir():
            path.unlink()
        images = store.images(questions)
        assert images["v1"].raw_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert images["v1"].content_hash() == images["v2"].content_hash()  # one CT image, kept once
        with closing(sqlite3.connect(store.path)) as db:
            assert db.execute("SELECT COUNT(*) FROM images").fetchone()[0] == 3


def test_an_hf_dataset_in_the_local_cache_with_image_structs(fake_hf_home: Path) -> None:
    build_fake_hf_dataset(
        fake_hf_home / "hub",
        "someone/med-vqa",
        {"data/test-00000-of-00001.parquet": hf_parquet_bytes(), "README.md": b"# a card"},
    )
    with open_project(fake_hf_home.parent / "p", create=True) as store:
        summary = import_questions(store, "hf:someone/med-vqa", ColumnMapping.parse([HF_MAP]))
        questions = all_questions(store)
    assert summary.source == "med-vqa" and summary.files == ["hf:someone/med-vqa/data/test-00000-of-00001.parquet"]
    assert [q.qid for q in questions] == ["100", "101", "102", "103"]  # integer ids become text
    assert [q.question for q in questions] == [r["question"] for r in HF_ROWS]
    assert {q.answer_type for q in questions} == {"closed"}  # "CLOSED" read in any case
    assert questions[1].organ_system == "gastrointestinal_tract"
    assert questions[0].metadata == {"split": "test"}  # unmapped scalar columns go to metadata
    assert questions[0].image_kind == "bytes" and questions[0].image_name == "img_0.png"


def test_an_hf_dataset_that_is_not_cached_says_how_to_fetch_it(fake_hf_home: Path) -> None:
    with open_project(fake_hf_home.parent / "p", create=True) as store, pytest.raises(DataError) as info:
        import_questions(store, "hf:someone/absent", ColumnMapping.parse([HF_MAP]))
    message = str(info.value)
    assert (
        "not in the local Hugging Face cache" in message and "hf download someone/absent --repo-type dataset" in message
    )


def test_sources_pool_into_one_project_with_unique_ids_and_their_source(tmp_path: Path, fake_hf_home: Path) -> None:
    build_fake_hf_dataset(fake_hf_home / "hub", "someone/med-vqa", {"test.parquet": hf_parquet_bytes()})
    second = write_jsonl(
        tmp_path / "other" / "q.jsonl",
        [{"qid": "v1", "q": "Is there free air?", "ans": "no", "img": None, "body": "abdomen"}],
    )
    with open_project(tmp_path / "p", create=True) as store:
        import_questions(
            store, str(write_vqa_source(tmp_path / "vqa")), ColumnMapping.parse([VQA_MAP]), source_name="vqa"
        )
        import_questions(store, "hf:someone/med-vqa", ColumnMapping.parse([HF_MAP]), source_name="hfvqa")
        summary = import_questions(store, str(second), ColumnMapping.parse([VQA_MAP]), source_name="other")
        questions = {q.qid: q for q in all_questions(store)}
        sources = store.sources()
    assert summary.renamed == 1 and "other/v1" in questions  # "v1" was taken by the first source
    assert questions["other/v1"].source == "other" and questions["other/v1"].source_id == "v1"
    assert questions["v1"].source == "vqa" and questions["100"].source == "hfvqa"
    assert [(s["name"], s["questions"]) for s in sources] == [("vqa", 6), ("hfvqa", 4), ("other", 1)]
    assert len(questions) == 11


def test_every_problem_names_file_row_and_field_and_nothing_is_imported(tmp_path: Path) -> None:
    rows = [
        dict(VQA_ROWS[0]),
        {"qid": "v1", "q": "Again?", "ans": "yes", "img": None, "body": "x"},  # duplicate id
        {"qid": "v3", "q": "", "ans": "yes", "img": None, "body": "x"},  # empty question
        {"qid": "v4", "q": "Outside?", "ans": "yes", "img": "../../secret.png", "body": "x"},  # escapes the data
        {"qid": "v5", "q": "Missing?", "ans": "yes", "img": "images/nope.png", "body": "x"},  # unreadable
        "not an object",
        {"qid": ["v7"], "q": "Bad id", "ans": 5, "img": None, "body": "x"},
    ]
    source = write_vqa_source(tmp_path / "vqa", rows)
    (tmp_path / "secret.png").write_bytes(b"\x89PNG")
    with open_project(tmp_path / "p", create=True) as store:
        with pytest.raises(DataError) as info:
            import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]))
        assert store.count_questions() == 0 and store.sources() == []
    found = {(p.row, p.field) for p in info.value.problems}
    assert {(2, "id"), (3, "question"), (4, "image"), (5, "image"), (6, None), (7, "id")} <= found
    assert all(p.file == str(source) for p in info.value.problems)
    outside = next(p for p in info.value.problems if p.row == 4)
    assert "outside the data directory" in outside.message and "--allow-external-images" in outside.message
    assert "duplicate id 'v1'" in str(info.value)


def test_external_images_are_accepted_when_allowed(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa", [{**VQA_ROWS[0], "img": "../elsewhere/ct.png"}])
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "ct.png").write_bytes((tmp_path / "vqa" / "images" / "ct.png").read_bytes())
    with open_project(tmp_path / "p", create=True) as store:
        with pytest.raises(DataError, match="outside the data directory"):
            import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]))
        assert (
            import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]), allow_external_images=True).imported
            == 1
        )


def test_a_mapped_column_that_is_missing_and_foreign_columns_without_a_map_are_named(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    with open_project(tmp_path / "p", create=True) as store:
        with pytest.raises(DataError, match=r"row 1.*no column 'answer_text' \(mapped to reference_answer\)"):
            import_questions(store, str(source), ColumnMapping.parse(["question=q,answer=answer_text,image=img"]))
        with pytest.raises(DataError, match=r"columns ans, body, img, q, qid are not fields.*--map FIELD=COLUMN"):
            import_questions(store, str(source))


def test_importing_a_source_again_skips_what_is_there_and_refuses_changed_questions(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    with open_project(tmp_path / "p", create=True) as store:
        import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]), source_name="vqa")
        again = import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]), source_name="vqa")
        assert (again.imported, again.already) == (0, 6) and store.count_questions() == 6
        changed = [dict(VQA_ROWS[0], q="Is there a mass in the spleen?"), *VQA_ROWS[1:]]
        write_jsonl(source, changed)
        with pytest.raises(DataError, match="changed since it was imported"):
            import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]), source_name="vqa")
        assert store.question("v1").question == "Is there a mass in the liver?"


def test_set_gives_every_row_a_value_and_bad_maps_are_refused(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    with open_project(tmp_path / "p", create=True) as store:
        import_questions(
            store, str(source), ColumnMapping.parse([VQA_MAP], ["modality=CT,department=radiology"]), source_name="s"
        )
        assert {(q.modality, q.department) for q in all_questions(store)} == {("CT", "radiology")}
    with pytest.raises(BuildError, match="not a field of the questions format"):
        ColumnMapping.parse(["colour=c"])
    with pytest.raises(BuildError, match="both mapped"):
        ColumnMapping.parse(["organ=body"], ["organ_system=chest"])
    with pytest.raises(BuildError, match="FIELD=VALUE"):
        ColumnMapping.parse(["question"])
    with pytest.raises(BuildError, match="must be closed or open"):
        ColumnMapping.parse([], ["answer_type=yesno"])


def test_the_questions_format_is_one_format_for_build_and_annotate(tmp_path: Path) -> None:
    rows = [
        {"id": "q1", "image": {"builtin": "pydicom:CT_small.dcm"}, "question": "Is there a pneumothorax?",
         "reference_answer": "No.", "answer_type": "closed", "organ_system": "chest", "source_dataset": "SLAKE",
         "metadata": {"screening": {"decision": "accept"}}},
        {"id": "q2", "image": {"builtin": "skimage:retina"}, "question": "Grade the retinopathy.",
         "answer_type": "open"},
        {"id": "q3", "image": None, "question": "What is shown?"},
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "questions.jsonl", rows)
    assert [q.question_id for q in read_questions(path)] == ["q1", "q2", "q3"]  # what annotate reads
    with open_project(tmp_path / "p", create=True) as store:
        import_questions(store, str(path))  # no --map: the same format
        questions = all_questions(store)
    assert [(q.qid, q.answer_type, q.image_kind) for q in questions] == [
        ("q1", "closed", "builtin"),
        ("q2", "open", "builtin"),
        ("q3", "open", "none"),
    ]
    assert questions[0].metadata == {"screening": {"decision": "accept"}} and questions[0].source_dataset == "SLAKE"
    # a parquet questions file is read by both too
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "questions.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"id": "p1", "question": "Is it normal?", "image": None, "metadata": "{}"}]), parquet
    )
    assert read_questions(parquet)[0].question_id == "p1"


def test_a_directory_source_reads_its_data_files_but_not_a_dataset_card(tmp_path: Path) -> None:
    root = tmp_path / "dir"
    write_jsonl(root / "a.jsonl", [{"id": "a1", "question": "One?", "image": None}])
    write_jsonl(root / "sub" / "b.jsonl", [{"id": "b1", "question": "Two?", "image": None}])
    (root / "dataset.json").write_text(json.dumps({"name": "x"}))
    with open_project(tmp_path / "p", create=True) as store:
        summary = import_questions(store, str(root))
        assert summary.files == [str(root / "a.jsonl"), str(root / "sub" / "b.jsonl")]
        assert [q.qid for q in all_questions(store)] == ["a1", "b1"]


def test_a_second_command_on_a_held_project_stops_at_once(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    with (
        open_project(tmp_path / "p", create=True),
        pytest.raises(OutputLockedError, match="is using"),
        open_project(tmp_path / "p"),
    ):
        pass
    with open_project(tmp_path / "p") as store:  # released
        import_questions(store, str(source), ColumnMapping.parse([VQA_MAP]))
    with pytest.raises(BuildError, match="not a build project"), open_project(tmp_path / "nothing"):
        pass


def test_with_a_map_and_no_id_column_ids_are_row_numbers(tmp_path: Path) -> None:
    one = write_jsonl(tmp_path / "src" / "a.jsonl", [{"q": "First?"}, {"q": "Second?"}])
    write_jsonl(tmp_path / "src" / "b.jsonl", [{"q": "Third?"}])
    with open_project(tmp_path / "p", create=True) as store:
        import_questions(store, str(one), ColumnMapping.parse(["question=q"]), source_name="single")
        import_questions(store, str(tmp_path / "src"), ColumnMapping.parse(["question=q"]), source_name="several")
        ids = [(q.source, q.qid) for q in all_questions(store)]
    assert ids == [("single", "1"), ("single", "2"), ("several", "a/1"), ("several", "a/2"), ("several", "b/1")]
