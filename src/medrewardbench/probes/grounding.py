"""Grounding probe: does a judge's verdict depend on the image?

Each case is judged again under controls that take the image away or replace it:

* ``no-image``: the case without an image (:meth:`ImageRef.empty`): API judges send no image part,
  local models and reward models see the text alone, baselines never looked;
* ``blank``: an all-black image of the same width and height (PNG);
* ``wrong-patient``: another case's image of the same organ system and modality, chosen with a
  seeded draw per case and never the same image (same bytes); where no other image of that organ
  system and modality exists, one of the same modality (recorded as ``match: modality``), else
  the case is left out of this control;
* ``dicom-window``: for DICOM images only, the same image rendered with a window that hides what
  the default one shows: for CT the preset (lung, bone, brain, soft tissue) farthest from the
  file's own window (a lung window on a bone or soft-tissue image, a bone window on a lung
  image); for other monochrome modalities a narrow window over the top 5 % of the value range.
  Colour DICOM has no window and is left out.

Figures, per judge, control, dimension and organ system (:func:`grounding_document`):

* **flip rate**: the share of requests (case x order x dimension, answered under both the true
  image and the control) whose verdict changed;
* **agreement drop**: accuracy with the true image minus accuracy under the control, on the same
  cases (failures count wrong, as in the headline accuracy);

each with a paired case-bootstrap percentile interval (one weight matrix for every judge and
control, stratified by organ system).

**The flag** (:func:`grounding_flag`): a judge is flagged ``does not use the image`` when, for
every control that was run, the upper bound of its pooled flip rate interval (all dimensions and
orders) is below the threshold (default 5 %): even the most favourable reading of the data says
that fewer than 1 in 20 verdicts move when the image is taken away or replaced. The intervals
never have width 0 (:mod:`medrewardbench.metrics.stats.floor`): a judge that flips on none of
``n`` cases has the upper bound ``1 - 0.025 ** (1 / n)``, so that flag needs at least 72 cases
without a flip (12 cases give ``[0, 0.265]``: too few to tell). It is flagged ``uses the image``
when some control's flip rate is at least the threshold, and ``unknown`` otherwise: no control
has an answered pair, or the flip rates are below the threshold but the cases too few to bound
them below it. A judge whose verdicts are noise (sampling at a temperature) moves
without using the image: read the flag beside the agreement drop.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.evaluation.store import Store
from medrewardbench.images import dicom_display, encode_png, image_size, is_dicom, render_dicom_window
from medrewardbench.images.dicom import DicomDisplay
from medrewardbench.metrics.stats import FAILED, NOT_RUN, bootstrap_weights, ratio_ci
from medrewardbench.probes.derive import (
    PairedRuns,
    ProbeRuns,
    agreement_counts,
    derive_case,
    derived_benchmark,
    estimate_dict,
    flip_counts,
    paired_difference_ci,
    paired_runs,
)

__all__ = [
    "CONTROLS",
    "CT_WINDOWS",
    "DEFAULT_THRESHOLD",
    "FLAG_UNKNOWN",
    "FLAG_UNUSED",
    "FLAG_USES",
    "PROBE",
    "ControlSet",
    "blank_image",
    "control_benchmarks",
    "dicom_window",
    "grounding_document",
    "grounding_flag",
    "make_controls",
    "no_image",
    "wrong_patient",
    "wrong_window",
]

PROBE = "grounding"
CONTROLS: tuple[str, ...] = ("no-image", "blank", "wrong-patient", "dicom-window")
"""The controls, in the order they are run and shown."""
DEFAULT_THRESHOLD = 0.05
"""A judge whose pooled flip-rate interval stays below this under every control does not use the image."""
FLAG_UNUSED = "does not use the image"
FLAG_USES = "uses the image"
FLAG_UNKNOWN = "unknown"

CT_WINDOWS: dict[str, tuple[float, float]] = {
    "lung": (-600.0, 1500.0),
    "bone": (400.0, 1800.0),
    "brain": (40.0, 80.0),
    "soft tissue": (40.0, 400.0),
}
"""Common CT windows (center, width) in Hounsfield units."""


@dataclass(frozen=True)
class ControlSet:
    """One control's derived cases, and the parent cases it had to leave out with why.

    Attributes:
        control: the control's name.
        cases: the derived cases, in the parent's order.
        skipped: parent case id -> why no derived case was made.
    """

    control: str
    cases: tuple[Case, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)


def no_image(case: Case) -> Case:
    """The case without its image.

    Args:
        case: the parent case.

    Returns:
        The derived case ``<id>~grounding~no-image`` with ``ImageRef.empty()``.
    """
    return derive_case(case, PROBE, "no-image", image=ImageRef.empty())


def blank_image(case: Case) -> Case:
    """The case with an all-black RGB image of its image's width and height.

    Args:
        case: the parent case (it must have an image).

    Returns:
        The derived case ``<id>~grounding~blank``.

    Raises:
        ImageError: the case has no image or its size cannot be read.
    """
    width, height = image_size(case.image)
    png = encode_png(Image.new("RGB", (width, height), (0, 0, 0)))
    return derive_case(case, PROBE, "blank", image=ImageRef.from_bytes(png, "blank.png"))


def wrong_patient(cases: Sequence[Case], seed: int = 0) -> ControlSet:
    """Each case with another case's image of the same organ system and modality.

    The image is drawn per case from a generator seeded with ``(seed, case id)`` among the distinct
    images sorted by content hash, so a case gets the same image in any order of the data; images
    identical to the case's own (the same bytes) are never drawn. Without a candidate of the same
    organ system and modality, one of the same modality is drawn (``metadata["match"] ==
    "modality"``); without either, the case is left out.

    Args:
        cases: the parent cases.
        seed: the seed.

    Returns:
        The control's cases and the cases left out.
    """
    hashes: dict[str, str] = {}
    for case in cases:
        if case.image.kind != "none":
            hashes[case.case_id] = case.image.content_hash()
    by_both: dict[tuple[str, str], list[Case]] = {}
    by_modality: dict[str, list[Case]] = {}
    for case in cases:
        if case.case_id in hashes:
            modality = (case.modality or "unknown").lower()
            by_both.setdefault((case.organ_system, modality), []).append(case)
            by_modality.setdefault(modality, []).append(case)
    out: list[Case] = []
    skipped: dict[str, str] = {}
    for case in cases:
        own = hashes.get(case.case_id)
        if own is None:
            skipped[case.case_id] = "the case has no image"
            continue
        modality = (case.modality or "unknown").lower()
        for match, pool in (
            ("organ system and modality", by_both[(case.organ_system, modality)]),
            ("modality", by_modality[modality]),
        ):
            # one representative per distinct image (the smallest case id), sorted by image hash: the
            # draw is over images, not cases, and does not depend on the data's order
            distinct: dict[str, Case] = {}
            for other in pool:
                held = distinct.get(hashes[other.case_id])
                if held is None or other.case_id < held.case_id:
                    distinct[hashes[other.case_id]] = other
            distinct.pop(own, None)
            if distinct:
                donors = [distinct[h] for h in sorted(distinct)]
                donor = donors[random.Random(f"{seed}\x1f{case.case_id}").randrange(len(donors))]
                meta = {"match": match, "image_from": donor.case_id}
                out.append(derive_case(case, PROBE, "wrong-patient", image=donor.image, metadata=meta))
                break
        else:
            skipped[case.case_id] = f"no other image of modality {modality!r}"
    return ControlSet("wrong-patient", tuple(out), skipped)


def wrong_window(display: DicomDisplay) -> tuple[str, float, float]:
    """The window that hides most of what an image's own window shows.

    CT (values in Hounsfield units): the preset of :data:`CT_WINDOWS` whose center lies farthest
    from the file's window center, in units of the file's window width. Other modalities: a window
    over the top 5 % of the value range (most of the image goes black).

    Args:
        display: the image's display facts (:func:`~medrewardbench.images.dicom_display`).

    Returns:
        ``(name, center, width)``.
    """
    if display.units == "HU" or (display.modality or "").upper() == "CT":
        name = max(CT_WINDOWS, key=lambda n: abs(CT_WINDOWS[n][0] - display.center) / max(display.width, 1.0))
        return name, *CT_WINDOWS[name]
    span = max(display.maximum - display.minimum, 1.0)
    width = max(0.05 * span, 1.0)
    return "top 5 % of the range", display.maximum - width / 2.0, width


def dicom_window(case: Case) -> Case | str:
    """The case with its DICOM image rendered under a wrong window, or why it has none.

    Args:
        case: the parent case.

    Returns:
        The derived case ``<id>~grounding~dicom-window`` (an embedded PNG, the window in
        ``metadata["window"]``), or the reason it was left out (not DICOM, a colour image).

    Raises:
        ImageError: the DICOM file cannot be read or rendered.
    """
    if case.image.kind == "none" or not is_dicom(case.image):
        return "not a DICOM image"
    display = dicom_display(case.image)
    if not display.monochrome:
        return "a colour DICOM image has no window"
    name, center, width = wrong_window(display)
    png = encode_png(render_dicom_window(case.image, center, width))
    meta = {"window": name, "window_center": center, "window_width": width}
    return derive_case(case, PROBE, "dicom-window", image=ImageRef.from_bytes(png, "window.png"), metadata=meta)


def make_controls(cases: Sequence[Case], controls: Sequence[str] = CONTROLS, seed: int = 0) -> dict[str, ControlSet]:
    """The derived cases of each control.

    Args:
        cases: the parent cases.
        controls: names from :data:`CONTROLS`.
        seed: the seed of the wrong-patient draw.

    Returns:
        control -> its cases and skipped cases, in the order of :data:`CONTROLS`.

    Raises:
        ValueError: an unknown control.
        ImageError: an image that cannot be read (the message names it).
    """
    unknown = [c for c in controls if c not in CONTROLS]
    if unknown:
        raise ValueError(f"unknown control(s) {', '.join(unknown)}; choose from {', '.join(CONTROLS)}")
    out: dict[str, ControlSet] = {}
    for control in [c for c in CONTROLS if c in controls]:
        if control == "wrong-patient":
            out[control] = wrong_patient(cases, seed)
            continue
        made: list[Case] = []
        skipped: dict[str, str] = {}
        for case in cases:
            if case.image.kind == "none" and control != "no-image":
                skipped[case.case_id] = "the case has no image"
                continue
            if control == "no-image":
                made.append(no_image(case))
            elif control == "blank":
                made.append(blank_image(case))
            else:
                result = dicom_window(case)
                if isinstance(result, str):
                    skipped[case.case_id] = result
                else:
                    made.append(result)
        out[control] = ControlSet(control, tuple(made), skipped)
    return out


def control_benchmarks(
    parent: Benchmark, controls: Sequence[str] = CONTROLS, seed: int = 0
) -> tuple[dict[str, Benchmark], dict[str, ControlSet]]:
    """Each control as a derived benchmark of the parent data.

    Args:
        parent: the parent data.
        controls: names from :data:`CONTROLS`.
        seed: the seed of the wrong-patient draw.

    Returns:
        ``(control -> benchmark, control -> its ControlSet)``.
    """
    sets = make_controls(parent.cases, controls, seed)
    return {name: derived_benchmark(parent, PROBE, name, s.cases) for name, s in sets.items()}, sets


# ------------------------------------------------------------------------------------------- figures


def _control_figures(paired: PairedRuns, weights: np.ndarray, confidence: float) -> dict[str, Any]:
    """Flip rate and agreement drop of one judge under one control: pooled, per dimension, per organ system."""
    flipped, answered = flip_counts(paired.base, paired.probe)
    correct_base, counted_base = agreement_counts(paired.base, paired.labels)
    correct_probe, counted_probe = agreement_counts(paired.probe, paired.labels)
    ran = paired.probe != NOT_RUN
    failed = int(((paired.probe == FAILED) & ran).sum())

    def figures(mask: np.ndarray | None) -> dict[str, Any]:
        pooled_flip = ratio_ci(
            flipped.sum(1), answered.sum(1), weights=weights, cases=mask, confidence=confidence, small_sample=True
        )
        dim_flip = ratio_ci(flipped, answered, weights=weights, cases=mask, confidence=confidence, small_sample=True)
        pooled_drop = paired_difference_ci(
            (correct_base.sum(1), counted_base.sum(1)),
            (correct_probe.sum(1), counted_probe.sum(1)),
            weights,
            cases=mask,
            confidence=confidence,
        )
        dim_drop = paired_difference_ci(
            (correct_base, counted_base), (correct_probe, counted_probe), weights, cases=mask, confidence=confidence
        )
        return {
            "flip_rate": estimate_dict(pooled_flip),
            "agreement_drop": estimate_dict(pooled_drop),
            "dimensions": {
                dim: {"flip_rate": estimate_dict(dim_flip, d), "agreement_drop": estimate_dict(dim_drop, d)}
                for d, dim in enumerate(DIMENSIONS)
            },
        }

    organs = np.asarray(paired.groups.get("organ_system", ("unknown",) * paired.n_cases))
    base_acc = correct_base.sum() / counted_base.sum() if counted_base.sum() else None
    probe_acc = correct_probe.sum() / counted_probe.sum() if counted_probe.sum() else None
    return {
        "n_cases": paired.n_cases,
        "verdicts": int(ran.sum()),
        "failed": failed,
        "accuracy_true_image": None if base_acc is None else round(float(base_acc), 6),
        "accuracy_control": None if probe_acc is None else round(float(probe_acc), 6),
        **figures(None),
        "organ_systems": {str(organ): figures(organs == organ) for organ in sorted(set(organs.tolist()))},
    }


def grounding_flag(controls: Mapping[str, Mapping[str, Any]], threshold: float = DEFAULT_THRESHOLD) -> str:
    """The flag of one judge from its per-control figures (the rule of the module docstring).

    Args:
        controls: control -> figures with a pooled ``flip_rate`` (``{"point": ..., "high": ...}``).
        threshold: the flip-rate bound.

    Returns:
        :data:`FLAG_UNUSED`, :data:`FLAG_USES` or :data:`FLAG_UNKNOWN`.
    """
    rates = [c["flip_rate"] for c in controls.values() if c["flip_rate"]["high"] is not None]
    if rates and max(r["high"] for r in rates) < threshold:
        return FLAG_UNUSED
    if any(r["point"] is not None and r["point"] >= threshold for r in rates):
        return FLAG_USES
    return FLAG_UNKNOWN


def grounding_document(
    store: Store,
    runs: ProbeRuns,
    sets: Mapping[str, ControlSet],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """The probe's figures for every judge and control, as the ``probe-grounding.json`` document.

    One bootstrap weight matrix is drawn over the parent cases (stratified by organ system) and
    its columns are used for every judge and control, so their intervals are paired.

    Args:
        store: the store holding the runs.
        runs: the parent and control runs (:func:`~medrewardbench.probes.derive.run_probe`).
        sets: the control sets (for the cases each left out).
        n_resamples: bootstrap resamples.
        seed: the bootstrap seed.
        confidence: interval coverage.
        threshold: the flag's flip-rate bound.

    Returns:
        A JSON-ready dictionary.
    """
    parent = runs.data[""]
    judges: list[dict[str, Any]] = []
    parent_cases = parent.cases
    position = {case.case_id: i for i, case in enumerate(parent_cases)}
    strata = np.asarray([case.organ_system for case in parent_cases])
    # one matrix over the parent's cases: every judge and control resamples the same cases
    weights = bootstrap_weights(len(parent_cases), n_resamples, seed, strata=strata)
    for spec, parent_run in runs.parent.items():
        per_control: dict[str, Any] = {}
        for control, by_spec in runs.variants.items():
            derived_run = by_spec.get(spec)
            if derived_run is None:
                continue
            paired = paired_runs(store, parent_run, derived_run)
            columns = [position[case_id] for case_id in paired.case_ids]
            figures = _control_figures(paired, weights[:, columns], confidence)
            per_control[control] = {"run_id": derived_run.run_id, **figures}
        judges.append(
            {
                "judge": spec,
                "run_id": parent_run.run_id,
                "flag": grounding_flag(per_control, threshold),
                "controls": per_control,
            }
        )
    return {
        "probe": PROBE,
        "data": {"name": parent.name, "source": parent.source, "data_hash": parent.data_hash(), "n_cases": len(parent)},
        "settings": {
            "controls": list(runs.variants),
            "n_resamples": n_resamples,
            "seed": seed,
            "confidence": confidence,
            "threshold": threshold,
            "flag_rule": (
                f"'{FLAG_UNUSED}' when, under every control run, the upper bound of the pooled flip-rate interval "
                f"(all dimensions and orders) is below {threshold:g}; '{FLAG_USES}' when some control's flip rate is "
                f"at least {threshold:g}; '{FLAG_UNKNOWN}' otherwise (no answered pair, or too few cases to tell)"
            ),
        },
        "controls": [
            {
                "control": name,
                "data_name": runs.data[name].name,
                "data_hash": runs.data[name].data_hash() if len(runs.data[name]) else None,
                "n_cases": len(sets[name].cases),
                "skipped": dict(sets[name].skipped),
            }
            for name in sets
        ],
        "judges": judges,
    }
