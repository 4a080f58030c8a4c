"""Checks on the bundled demo set (``medrewardbench/data/demo_cases.json``).

The demo set is hand-written data; these tests guard its shape and the properties that keep it
honest as a demo: balanced label positions, labels that differ across dimensions, no easy win
for a "prefer the longer answer" judge, images that load offline, and a plain notice that the
labels are illustrative.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from importlib import resources
from typing import Any

import pytest

from medrewardbench.dimensions import DIMENSIONS, ORGAN_SYSTEMS


@cache
def _document() -> dict[str, Any]:
    text = resources.files("medrewardbench").joinpath("data/demo_cases.json").read_text(encoding="utf-8")
    document = json.loads(text)
    assert isinstance(document, dict)
    return document


def _cases() -> list[dict[str, Any]]:
    return _document()["cases"]


def _load_builtin(name: str) -> Any:
    """Load a builtin image straight from the installed package, never from the network."""
    package, _, item = name.partition(":")
    if package == "pydicom":
        import pydicom
        from pydicom.data import get_testdata_file

        path = get_testdata_file(item, download=False)
        assert path is not None, f"{item} is not shipped with the installed pydicom"
        return pydicom.dcmread(path).pixel_array
    if package == "skimage":
        from skimage import data

        return getattr(data, item)()
    raise AssertionError(f"unknown builtin package in {name!r}")


def test_header() -> None:
    document = _document()
    assert document["name"] == "medrewardbench-demo"
    assert document["version"] == 1
    assert isinstance(document["cases"], list)


def test_notice_says_labels_are_illustrative() -> None:
    notice = _document()["notice"].lower()
    assert "illustrative" in notice
    assert "not expert annotations" in notice


def test_case_count_and_unique_ids() -> None:
    cases = _cases()
    assert len(cases) >= 24
    ids = [case["id"] for case in cases]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]


def test_every_case_is_complete() -> None:
    for case in _cases():
        for key in ("question", "response_1", "response_2", "department", "modality", "question_type", "body_part"):
            assert isinstance(case[key], str) and case[key].strip(), (case["id"], key)
        assert case["response_1"] != case["response_2"], case["id"]
        assert case["source_dataset"] in {"pydicom-testdata", "scikit-image-data"}, case["id"]
        assert case["metadata"]["image_note"].strip(), case["id"]


def test_all_six_labels_in_source_order() -> None:
    for case in _cases():
        labels = case["labels"]
        assert set(labels) == set(DIMENSIONS), case["id"]
        assert all(labels[dim] in (1, 2) for dim in DIMENSIONS), case["id"]


def test_organ_systems_and_modalities_are_varied() -> None:
    organs = {case["organ_system"] for case in _cases()}
    assert organs <= set(ORGAN_SYSTEMS), organs - set(ORGAN_SYSTEMS)
    assert len(organs) >= 6
    assert len({case["modality"] for case in _cases()}) >= 4


def test_builtin_images_load_offline() -> None:
    names = {case["image"]["builtin"] for case in _cases()}
    for name in sorted(names):
        array = _load_builtin(name)
        assert array.size > 0, name


def test_positions_are_balanced() -> None:
    cases = _cases()
    overall = sum(case["labels"]["overall"] == 2 for case in cases) / len(cases)
    assert 0.4 <= overall <= 0.6, overall
    for dim in DIMENSIONS:
        share = sum(case["labels"][dim] == 2 for case in cases) / len(cases)
        assert 0.35 <= share <= 0.65, (dim, share)


def test_labels_differ_across_dimensions_in_several_cases() -> None:
    mixed = [case["id"] for case in _cases() if len(set(case["labels"].values())) > 1]
    assert len(mixed) >= 5, mixed


def test_prefer_longer_answer_is_not_near_perfect() -> None:
    cases = _cases()
    agree = 0
    for case in cases:
        longer = 1 if len(case["response_1"]) >= len(case["response_2"]) else 2
        agree += longer == case["labels"]["overall"]
    assert agree / len(cases) < 0.8, agree / len(cases)


def test_load_benchmark_sees_every_case() -> None:
    try:
        from medrewardbench.data import load_benchmark
    except ImportError:
        pytest.skip("medrewardbench.data.load_benchmark is not available")
    benchmark = load_benchmark("demo")
    assert len(benchmark.cases) == len(_cases())


RATERS = ("illustrative-rater-1", "illustrative-rater-2", "illustrative-rater-3")


def test_three_illustrative_raters_whose_majority_is_the_label_on_every_dimension() -> None:
    from medrewardbench.data.annotations import strict_majority

    dissents: Counter[str] = Counter()
    for case in _cases():
        annotations = case["annotations"]
        assert tuple(a["annotator"] for a in annotations) == RATERS, case["id"]
        for dim in DIMENSIONS:
            votes = [a["labels"][dim] for a in annotations]
            assert strict_majority(votes) == case["labels"][dim], (case["id"], dim, votes)
            dissents[dim] += sum(vote != case["labels"][dim] for vote in votes)
    # some realistic disagreement: on every dimension, more on the softer ones than on accuracy
    assert all(dissents[dim] >= 1 for dim in DIMENSIONS), dissents
    assert dissents["creativity"] > dissents["accuracy"]
    assert 0.05 <= sum(dissents.values()) / (len(_cases()) * len(DIMENSIONS)) <= 0.35


def test_the_notice_says_the_raters_are_illustrative_too() -> None:
    notice = _document()["notice"]
    assert "per-annotator labels are illustrative" in notice and "made-up raters" in notice
    assert "illustrative-rater-1" in notice


def test_the_loaded_demo_carries_the_raters_and_keeps_its_labels() -> None:
    from medrewardbench.data import load_benchmark

    benchmark = load_benchmark("demo")
    assert not [w for w in benchmark.warnings if "majority" in str(w)]
    by_id = {case["id"]: case for case in _cases()}
    for case in benchmark.cases:
        assert tuple(a.annotator for a in case.annotations) == RATERS
        assert dict(case.labels) == by_id[case.case_id]["labels"]
