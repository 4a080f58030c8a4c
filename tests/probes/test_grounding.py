"""The grounding probe: each control on fixed inputs, figures on stored runs, the flag.

The controls are checked on cases built here and on the real DICOM files pydicom ships; the
figures on runs stored by the eval job in a real SQLite store: the baselines (which never look at
the image) and an API judge on the local OpenAI-compatible server whose answer depends on whether
the request carries an image.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.api import api_options, verdict_json
from helpers.cases import make_case
from helpers.images import png_bytes
from PIL import Image

from medrewardbench.cases import ImageRef
from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.evaluation.store import Store
from medrewardbench.images import dicom_display, load_image
from medrewardbench.images.dicom import DicomDisplay
from medrewardbench.judges.registry import BASELINE_SPECS
from medrewardbench.probes.derive import PARENT_KEY, PROBE_KEY, VARIANT_KEY, run_probe
from medrewardbench.probes.grounding import (
    CT_WINDOWS,
    FLAG_UNKNOWN,
    FLAG_UNUSED,
    FLAG_USES,
    blank_image,
    control_benchmarks,
    dicom_window,
    grounding_document,
    grounding_flag,
    make_controls,
    no_image,
    wrong_patient,
    wrong_window,
)
from medrewardbench.testing.openai_server import OpenAIServer


def test_no_image_takes_the_image_away_and_says_where_the_case_came_from() -> None:
    case = make_case(3, metadata={"site": "a"})
    derived = no_image(case)
    assert derived.case_id == "case-0003~grounding~no-image"
    assert derived.image.kind == "none"
    assert derived.metadata == {"site": "a", PROBE_KEY: "grounding", VARIANT_KEY: "no-image", PARENT_KEY: "case-0003"}
    assert (derived.question, derived.response_1, derived.labels) == (case.question, case.response_1, case.labels)
    assert derived.content_hash() != case.content_hash()


def test_blank_is_an_all_black_image_of_the_same_size() -> None:
    case = make_case(1, image=ImageRef.from_bytes(png_bytes(seed=4, size=(13, 7)), "x.png"))
    derived = blank_image(case)
    assert derived.case_id.endswith("~grounding~blank")
    image = load_image(derived.image)
    assert image.size == (13, 7)
    assert not np.asarray(image).any()


def test_the_wrong_patient_is_another_image_of_the_same_organ_and_modality_drawn_by_seed() -> None:
    same = ImageRef.from_bytes(png_bytes(seed=1), "a.png")
    cases = [
        make_case(1, organ="chest", modality="CT", image=same),
        make_case(2, organ="chest", modality="CT", image=ImageRef.from_bytes(png_bytes(seed=1), "copy.png")),
        make_case(3, organ="chest", modality="CT"),
        make_case(4, organ="chest", modality="CT"),
        make_case(5, organ="brain", modality="CT"),  # no other brain CT: falls back to another CT
        make_case(6, organ="eye", modality="fundus"),  # no other fundus image at all: left out
        make_case(7, organ="chest", modality="MRI", image=ImageRef.empty()),
    ]
    made = wrong_patient(cases, seed=0)
    by_parent = {c.metadata[PARENT_KEY]: c for c in made.cases}
    assert set(made.skipped) == {"case-0006", "case-0007"}
    for parent in cases:
        derived = by_parent.get(parent.case_id)
        if derived is None:
            continue
        donor = next(c for c in cases if c.case_id == derived.metadata["image_from"])
        assert derived.image.content_hash() != parent.image.content_hash()  # never the same image
        assert donor.modality == parent.modality
        expected = "organ system and modality" if parent.organ_system != "brain" else "modality"
        assert derived.metadata["match"] == expected
        if expected != "modality":
            assert donor.organ_system == parent.organ_system
    # case 1 and 2 share their bytes: neither may get the other's image
    assert by_parent["case-0001"].metadata["image_from"] in {"case-0003", "case-0004"}
    # the draw is per case: the same case gets the same image in another order, another seed may differ
    again = {c.metadata[PARENT_KEY]: c.metadata["image_from"] for c in wrong_patient(cases[::-1], seed=0).cases}
    assert again == {k: v.metadata["image_from"] for k, v in by_parent.items()}
    draws = {tuple(c.metadata["image_from"] for c in wrong_patient(cases, seed).cases) for seed in range(8)}
    assert len(draws) > 1


def _display(modality: str, center: float, width: float, units: str | None = "HU") -> DicomDisplay:
    return DicomDisplay(True, modality, units, center, width, -1024.0, 3000.0, 64, 64)


def test_the_wrong_window_is_far_from_the_files_own() -> None:
    assert wrong_window(_display("CT", 40, 400))[0] == "lung"  # soft tissue -> lung
    assert wrong_window(_display("CT", -600, 1500))[0] == "bone"  # lung -> bone
    assert wrong_window(_display("CT", 400, 1800))[0] == "lung"  # bone -> lung
    name, center, width = wrong_window(_display("MR", 500, 1000, units=None))
    assert name == "top 5 % of the range"
    assert center - width / 2 == pytest.approx(3000 - 0.05 * 4024)


def test_the_dicom_window_renders_real_ct_under_another_window() -> None:
    ct = make_case(1, modality="CT", image=ImageRef.builtin("pydicom:CT_small.dcm"))
    derived = dicom_window(ct)
    assert not isinstance(derived, str)
    assert derived.metadata["window"] in CT_WINDOWS
    shown = np.asarray(load_image(ct.image), dtype=np.int16)
    wrong = np.asarray(load_image(derived.image), dtype=np.int16)
    assert shown.shape == wrong.shape
    assert np.abs(shown - wrong).mean() > 20  # the picture really changed
    default = dicom_display(ct.image)
    preset_center = CT_WINDOWS[derived.metadata["window"]][0]
    assert abs(preset_center - default.center) == max(abs(c - default.center) for c, _ in CT_WINDOWS.values())
    assert dicom_window(make_case(2)) == "not a DICOM image"
    colour = make_case(3, image=ImageRef.builtin("pydicom:examples_rgb_color.dcm"))
    assert dicom_window(colour) == "a colour DICOM image has no window"


def test_make_controls_refuses_an_unknown_control() -> None:
    with pytest.raises(ValueError, match="unknown control"):
        make_controls([make_case(1)], ["no-image", "upside-down"])


def test_the_flag_follows_the_upper_bound_of_every_control_and_the_flip_rates() -> None:
    def c(high: float | None, point: float | None = 0.0) -> dict[str, Any]:
        return {"flip_rate": {"point": point, "low": 0.0, "high": high, "n": 10}}

    assert grounding_flag({"no-image": c(0.01), "blank": c(0.049)}) == FLAG_UNUSED
    assert grounding_flag({"no-image": c(0.01), "blank": c(0.2, point=0.05)}) == FLAG_USES
    # an upper bound at the threshold with flip rates below it: the cases are too few to tell
    assert grounding_flag({"no-image": c(0.01), "blank": c(0.05, point=0.01)}) == FLAG_UNKNOWN
    assert grounding_flag({"no-image": c(None, point=None)}) == FLAG_UNKNOWN
    assert grounding_flag({}) == FLAG_UNKNOWN


def test_no_baseline_moves_on_the_demo_but_34_cases_are_too_few_to_clear_it(tmp_path: Path) -> None:
    parent = load_benchmark("demo")
    variants, sets = control_benchmarks(parent)
    runs = run_probe(parent, variants, list(BASELINE_SPECS), tmp_path)
    with Store.in_dir(tmp_path) as store:
        document = grounding_document(store, runs, sets, n_resamples=200)
        n_runs = len(store.runs())
    assert {j["judge"] for j in document["judges"]} == set(BASELINE_SPECS)
    for judge in document["judges"]:
        # nothing flips, so the interval is [0, 1 - 0.025^(1/n)], never [0, 0]: at 34 cases 10.3 %
        assert judge["flag"] == FLAG_UNKNOWN, judge["judge"]
        for control, figures in judge["controls"].items():
            assert figures["flip_rate"]["point"] == 0.0, (judge["judge"], control)
            n = figures["n_cases"]
            assert figures["flip_rate"]["high"] == round(1 - 0.025 ** (1 / n), 6), (judge["judge"], control)
            assert figures["agreement_drop"]["point"] == 0.0
    names = {c["control"]: c for c in document["controls"]}
    assert names["dicom-window"]["n_cases"] == 16 and names["no-image"]["n_cases"] == 34
    assert all(c["data_hash"] != document["data"]["data_hash"] for c in document["controls"])
    # one store: the parent's and every control's runs, and a second call reuses every judgment
    assert n_runs == len(BASELINE_SPECS) * 5
    again = run_probe(parent, control_benchmarks(parent)[0], list(BASELINE_SPECS), tmp_path)
    assert {s: r.run_id for s, r in again.parent.items()} == {s: r.run_id for s, r in runs.parent.items()}
    with Store.in_dir(tmp_path) as store:
        assert len(store.runs()) == n_runs


def _has_image(body: dict[str, Any]) -> bool:
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in body["messages"]
        for part in (message["content"] if isinstance(message["content"], list) else [])
    )


def _labelled(n: int) -> Benchmark:
    """n cases, labels alternating 1 / 2 on every dimension, two organ systems, all CT."""
    cases = [
        make_case(i, organ=("chest", "brain")[i % 2], modality="CT", labels=dict.fromkeys(DIMENSIONS, 1 + i % 2))
        for i in range(n)
    ]
    return Benchmark("fixed", "memory:fixed", cases)


def test_an_api_judge_that_reads_the_image_moves_and_one_that_does_not_is_flagged(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    parent = _labelled(12)
    variants, sets = control_benchmarks(parent, ["no-image", "blank"])
    seen: list[bool] = []

    def looks(body: dict[str, Any]) -> str:  # "A" with an image, "B" without
        seen.append(_has_image(body))
        return verdict_json("A" if _has_image(body) else "B")

    openai_server.control.set_responder(looks)
    options = api_options(openai_server)
    runs = run_probe(parent, variants, ["api:looker"], tmp_path / "looker", options=options)
    assert seen.count(False) == 24 and seen.count(True) == 48  # the no-image requests carried no image part
    with Store.in_dir(tmp_path / "looker") as store:
        document = grounding_document(store, runs, sets, n_resamples=300)
    (judge,) = document["judges"]
    assert judge["flag"] == FLAG_USES
    no_img, blank = judge["controls"]["no-image"], judge["controls"]["blank"]
    # with an image every verdict is A (response_1 in the original order, response_2 swapped); without it B:
    # every answered verdict flips; the blank image still is an image: nothing flips
    # every case flips: the interval is the exact one of 12 of 12 cases, not [1, 1]
    assert no_img["flip_rate"] == {"point": 1.0, "low": round(0.025 ** (1 / 12), 6), "high": 1.0, "n": 12 * 2 * 6}
    assert blank["flip_rate"]["point"] == 0.0 and blank["flip_rate"]["high"] == round(1 - 0.025 ** (1 / 12), 6)
    # the position-only judge is right on half the requests either way: its agreement does not drop
    assert no_img["accuracy_true_image"] == 0.5 and no_img["accuracy_control"] == 0.5
    assert no_img["agreement_drop"]["point"] == 0.0
    assert set(no_img["organ_systems"]) == {"chest", "brain"}
    assert no_img["organ_systems"]["chest"]["flip_rate"]["n"] == 6 * 2 * 6

    openai_server.control.set_responder(lambda body: verdict_json("A"))
    blind = run_probe(parent, variants, ["api:blind"], tmp_path / "blind", options=options)
    with Store.in_dir(tmp_path / "blind") as store:
        (blind_judge,) = grounding_document(store, blind, sets, n_resamples=300)["judges"]
    # it never moves, but 12 cases bound its flip rate only below 26.5 %: not "does not use the image"
    assert blind_judge["flag"] == FLAG_UNKNOWN


def test_the_agreement_drop_is_the_accuracy_lost_on_the_same_cases(openai_server: OpenAIServer, tmp_path: Path) -> None:
    parent = _labelled(8)
    variants, sets = control_benchmarks(parent, ["no-image"])

    def right_with_image(body: dict[str, Any]) -> str:
        # with the image: the label's letter (the answer the experts chose, shown first or second);
        # without it: always the first shown
        text = json.dumps(body)
        if not _has_image(body):
            return verdict_json("A")
        better_is_long = "considerably longer" in text.split("[Answer A]")[1].split("[End of Answer A]")[0]
        return verdict_json("A" if better_is_long else "B")

    openai_server.control.set_responder(right_with_image)
    runs = run_probe(parent, variants, ["api:right"], tmp_path, options=api_options(openai_server))
    with Store.in_dir(tmp_path) as store:
        (judge,) = grounding_document(store, runs, sets, n_resamples=300)["judges"]
    figures = judge["controls"]["no-image"]
    # make_case labels: index i -> answer 1 + i % 2; the "longer" answer is response_2: right only where the label is 2
    truth = np.array([1 + i % 2 for i in range(8)])
    with_image = np.mean(truth == 2)
    assert figures["accuracy_true_image"] == pytest.approx(with_image)
    assert figures["accuracy_control"] == pytest.approx(0.5)
    assert figures["agreement_drop"]["point"] == pytest.approx(with_image - 0.5)
    low, high = figures["agreement_drop"]["low"], figures["agreement_drop"]["high"]
    assert low <= figures["agreement_drop"]["point"] <= high


def test_a_png_blank_decodes_like_any_image(tmp_path: Path) -> None:
    derived = blank_image(make_case(2))
    data = derived.image.raw_bytes()
    assert Image.open(io.BytesIO(data)).format == "PNG"
