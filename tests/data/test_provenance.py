"""Where labels come from: the dataset card (one schema with ``build export``), each source's default,
``eval --labels``, and the provenance kept per data fingerprint in the results store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.data import build_canonical_set, build_fake_hf_cache, build_reference_layout

from medrewardbench.curation.export import label_kind, label_provenance
from medrewardbench.data import load_benchmark
from medrewardbench.data.provenance import (
    DEMO_LABELS,
    MED_REWARDBENCH_LABELS,
    UNKNOWN_LABELS,
    LabelProvenance,
    card_path,
    parse_labels_option,
    read_dataset_card,
    write_dataset_card,
)
from medrewardbench.data.validate import validate_source
from medrewardbench.errors import DataError
from medrewardbench.evaluation.store import Store


def card(directory: Path, payload: object) -> Path:
    path = directory / "dataset.json"
    path.write_text(json.dumps(payload))
    return path


def test_a_build_export_card_reads_as_expert_majority_of_its_annotators(tmp_path: Path) -> None:
    # exactly what build export writes (labels.kind and raters included), and an older card without them
    labels = {"provenance": label_provenance(3, 3), "kind": label_kind(3, 3), "raters": 3, "declared": False,
              "annotations_per_case": {"min": 3, "max": 3}, "undecided_dimensions": 2}  # fmt: skip
    found = read_dataset_card(card(tmp_path, {"name": "chest-set", "labels": labels}))
    assert found is not None and found.name == "chest-set"
    assert found.labels == LabelProvenance(
        "expert_majority", 3, "expert majority of 3 annotators", f"dataset card {tmp_path / 'dataset.json'}"
    )
    older = {"provenance": "expert majority of 2-3 annotators", "annotations_per_case": {"min": 2, "max": 3}}
    inferred = read_dataset_card(card(tmp_path, {"labels": older}))
    assert inferred is not None and inferred.labels.kind == "expert_majority" and inferred.labels.raters is None
    single = read_dataset_card(
        card(tmp_path, {"labels": {"provenance": "x", "annotations_per_case": {"min": 1, "max": 1}}})
    )
    assert single is not None and single.labels.kind == "single_expert"
    assert label_kind(None, None) == "unknown" and label_kind(1, 1) == "single_expert"


@pytest.mark.parametrize(
    ("labels", "kind", "raters", "text"),
    [
        ("labels written by gpt-4o, a model", "model_generated", None, "labels written by gpt-4o, a model"),
        ({"provenance": "illustrative only"}, "illustrative", None, "illustrative only"),
        ({"provenance": "majority of 5 nurses"}, "expert_majority", 5, "majority of 5 nurses"),
        ({"provenance": "two residents, adjudicated"}, "unknown", None, "two residents, adjudicated"),
        ({"provenance": "unlabelled"}, "unknown", None, "no labels"),
        ({"provenance": "3 GPs", "kind": "expert_majority", "raters": 3}, "expert_majority", 3, "3 GPs"),
        ({}, "unknown", None, "unknown provenance"),
    ],
)
def test_card_fields_and_what_is_inferred_from_words(
    tmp_path: Path, labels: object, kind: str, raters: int | None, text: str
) -> None:
    found = read_dataset_card(card(tmp_path, {"labels": labels}))
    assert found is not None
    assert (found.labels.kind, found.labels.raters, found.labels.text()) == (kind, raters, text)
    assert found.labels.declared


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"labels": {"kind": "experts"}}, "labels.kind"),
        ({"labels": {"raters": 0}}, "labels.raters"),
        ({"labels": {"provenance": 3}}, "labels.provenance"),
        ({"labels": [1]}, "labels"),
        ({"name": 7}, "name"),
    ],
)
def test_a_bad_card_is_one_clear_problem_naming_file_and_field(tmp_path: Path, payload: object, field: str) -> None:
    path = card(tmp_path, payload)
    with pytest.raises(DataError) as caught:
        read_dataset_card(path)
    assert str(caught.value).startswith(f"{path}, field {field!r}:")
    (tmp_path / "dataset.json").write_text("{not json")
    with pytest.raises(DataError, match="unreadable dataset card"):
        read_dataset_card(path)
    assert read_dataset_card(tmp_path / "missing.json") is None


def test_sources_have_their_own_default_provenance(tmp_path: Path, fake_hf_home: Path) -> None:
    assert load_benchmark("demo").labels == DEMO_LABELS
    assert load_benchmark(str(build_reference_layout(tmp_path / "ref"))).labels == UNKNOWN_LABELS
    build_fake_hf_cache(fake_hf_home / "hub", "Nandzy/Med-RewardBench", "1" * 40)
    assert load_benchmark("hf:").labels == MED_REWARDBENCH_LABELS
    assert MED_REWARDBENCH_LABELS.text() == "expert majority of 3 general practitioners (Med-RewardBench)"
    build_fake_hf_cache(fake_hf_home / "hub", "someone/else", "2" * 40)
    assert load_benchmark("hf:someone/else").labels == UNKNOWN_LABELS


def test_a_card_beside_canonical_data_or_in_a_reference_directory_is_read(tmp_path: Path) -> None:
    data = build_canonical_set(tmp_path / "canon")
    assert load_benchmark(str(data)).labels == UNKNOWN_LABELS
    card(data.parent, {"name": "renamed", "labels": {"provenance": "one dermatologist", "kind": "single_expert"}})
    for source in (str(data), str(data.parent)):  # the file, or its directory of canonical files
        loaded = load_benchmark(source)
        assert loaded.name == "renamed" and loaded.labels.kind == "single_expert"
        assert loaded.labels.text() == "one dermatologist"
    reference = build_reference_layout(tmp_path / "ref")
    card(reference, {"labels": {"provenance": "majority of 3 radiologists"}})
    assert load_benchmark(str(reference)).labels.raters == 3
    assert load_benchmark(str(reference / "pair_gt_all")).labels.kind == "expert_majority"
    assert card_path(reference / "pair_gt_all") == reference / "dataset.json"
    card(reference, {"labels": {"kind": "nonsense"}})
    problems = validate_source(str(reference))
    assert len(problems) == 1 and problems[0].field == "labels.kind"


def test_the_labels_option(tmp_path: Path) -> None:
    assert parse_labels_option("expert-majority:3=three GPs") == LabelProvenance(
        "expert_majority", 3, "three GPs", "--labels"
    )
    assert parse_labels_option("illustrative").kind == "illustrative"
    assert parse_labels_option("model_generated=gpt-4o").text() == "gpt-4o"
    assert parse_labels_option("single-expert").text() == "a single expert"
    written = write_dataset_card(tmp_path, "x", LabelProvenance("expert_majority", 2, "two radiologists", "--labels"))
    from_card = parse_labels_option(str(written))
    assert (from_card.kind, from_card.raters, from_card.text()) == ("expert_majority", 2, "two radiologists")
    for bad, message in (("experts", "unknown kind 'experts'"), ("expert-majority:x", "whole number")):
        with pytest.raises(DataError, match=message):
            parse_labels_option(bad)


def test_the_banner_never_calls_labels_experts_unless_the_source_does() -> None:
    for labels in (UNKNOWN_LABELS, DEMO_LABELS, LabelProvenance("model_generated", description="gpt-4o")):
        assert not labels.by_experts
        assert labels.caveat() and labels.banner().startswith("Labels: ")
    assert "expert" not in UNKNOWN_LABELS.banner().lower()
    assert UNKNOWN_LABELS.banner() == (
        "Labels: unknown provenance. Nothing says who wrote these labels: declare it in a dataset card "
        "(dataset.json beside the data) or with eval --labels."
    )
    assert MED_REWARDBENCH_LABELS.by_experts and MED_REWARDBENCH_LABELS.caveat() == ""
    assert LabelProvenance.from_json(MED_REWARDBENCH_LABELS.to_json()) == MED_REWARDBENCH_LABELS
    assert LabelProvenance.from_json(None) == UNKNOWN_LABELS
    assert LabelProvenance.from_json({"kind": "nonsense"}) == UNKNOWN_LABELS


def test_the_store_keeps_the_provenance_per_data_fingerprint(tmp_path: Path) -> None:
    declared = LabelProvenance("expert_majority", 3, "three GPs", "--labels")
    with Store(tmp_path / "s.sqlite") as store:
        assert "label_provenance" in store.applied_migrations()
        assert store.label_provenance("aaa") == UNKNOWN_LABELS
        store.set_label_provenance("aaa", declared)
        store.set_label_provenance("bbb", DEMO_LABELS)
        store.set_label_provenance("aaa", UNKNOWN_LABELS)  # nothing declared: keeps what was
        assert store.label_provenance("aaa") == declared and store.label_provenance("bbb") == DEMO_LABELS
        replaced = LabelProvenance("single_expert", 1, "one GP", "dataset card x")
        store.set_label_provenance("aaa", replaced)
        assert store.label_provenance("aaa") == replaced
