"""The grounding controls reach a local transformers judge: "no image" is a prompt without an image part.

A tiny random-weight LLaVA (built offline, constrained to the verdict JSON) judges two demo cases
under every image control; every request of every control gives parsed verdicts, none fails for
want of an image, and the probe's document has figures for the judge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from medrewardbench.data import load_benchmark
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics.core import load_run_data
from medrewardbench.models.options import JudgeOptions, LocalSettings
from medrewardbench.probes.derive import run_probe
from medrewardbench.probes.grounding import control_benchmarks, grounding_document

pytestmark = pytest.mark.slow


def test_a_local_model_is_judged_without_an_image_blank_and_windowed(tiny_llava: Path, tmp_path: Path) -> None:
    parent = load_benchmark("demo", limit=2)
    variants, sets = control_benchmarks(parent, ["no-image", "blank", "dicom-window"])
    spec = f"hf:{tiny_llava}#constrained"
    options = JudgeOptions(batch_size=2, local=LocalSettings(device="cpu"))
    runs = run_probe(parent, variants, [spec], tmp_path, options=options)
    with Store.in_dir(tmp_path) as store:
        for control, by_spec in runs.variants.items():
            data = load_run_data(store, by_spec[spec])
            assert data.n_cases == 2, control
            assert not data.failures, (control, dict(data.failures))
            assert (data.verdicts > 0).all(), control
        document = grounding_document(store, runs, sets, n_resamples=100)
    (judge,) = document["judges"]
    assert set(judge["controls"]) == {"no-image", "blank", "dicom-window"}
    assert all(c["flip_rate"]["n"] == 2 * 2 * 6 for c in judge["controls"].values())
