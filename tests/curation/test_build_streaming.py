"""Every step works chunk by chunk: four times the questions, the same peak of Python memory."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from medrewardbench.cases import ImageRef
from medrewardbench.curation.export import export_dataset
from medrewardbench.curation.filtering import run_filter
from medrewardbench.curation.generators import GenerationRequest, GenerationResult, TextGenerator, load_answer_template
from medrewardbench.curation.importer import import_questions
from medrewardbench.curation.labels import attach_labels
from medrewardbench.curation.pairs import sample_pairs
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.curation.report import build_report, write_report
from medrewardbench.prompts import TextTemplate


class InstantGenerator(TextGenerator):
    """Answers at once, without ever waiting: the hardest case for a dispatcher that must not pile up."""

    batch_size = 16
    concurrency = 2

    def __init__(self, spec: str, _options: Any, template: TextTemplate) -> None:
        self.spec = spec
        self.template = template

    def config(self) -> dict[str, Any]:
        return {"spec": self.spec, "template_sha256": self.template.sha256}

    async def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        return [
            GenerationResult(text=f"{'Yes' if r.key[-1] in '01234567' else 'No'}. {self.spec} on {r.key[:16]}." * 2)
            for r in requests
        ]


def peaks(root: Path, count: int) -> dict[str, int]:
    source = root / "questions.jsonl"
    root.mkdir(parents=True)
    with source.open("w") as handle:
        for i in range(count):
            row = {
                "id": f"q{i}",
                "question": f"Is finding {i} present?",
                "reference_answer": "yes" if i % 2 else "no",
                "image": {"builtin": "pydicom:CT_small.dcm"},
                "organ_system": ("chest", "brain", "eye")[i % 3],
            }
            handle.write(json.dumps(row) + "\n")
    labels = root / "labels.jsonl"
    with labels.open("w") as handle:
        for i in range(count):
            for annotator in ("dr_a", "dr_b", "dr_c"):
                handle.write(
                    json.dumps({"id": f"q{i}", "annotator": annotator, "labels": {"overall": 1 + i % 2}}) + "\n"
                )
    template = load_answer_template()
    found: dict[str, int] = {}
    with open_project(root / "project", create=True) as store:

        def measure(name: str, step: Callable[[], object]) -> None:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            step()
            found[name] = tracemalloc.get_traced_memory()[1] - base

        tracemalloc.start()
        try:
            measure("import", lambda: import_questions(store, str(source)))
            measure(
                "filter",
                lambda: run_filter(
                    store, ["api:a", "api:b"], 2, template=template, generator_factory=InstantGenerator, force=True
                ),
            )
            measure(
                "responses",
                lambda: run_responses(
                    store, ["api:c", "api:d", "api:e"], template=template, generator_factory=InstantGenerator
                ),
            )
            measure("pairs", lambda: sample_pairs(store, root / "pairs.jsonl", seed=1, length_balance=True))
            measure("labels", lambda: attach_labels(store, labels))
            measure("export", lambda: export_dataset(store, "canonical", root / "out" / "set.jsonl"))
            measure("report", lambda: write_report(build_report(store), store, root / "report"))
        finally:
            tracemalloc.stop()
        assert store.count_pairs() == count and store.count_labels() == 3 * count
    return found


@pytest.mark.slow  # measures peak memory over several sizes: a benchmark smoke run
def test_four_times_the_questions_take_no_more_memory_in_any_step(tmp_path: Path) -> None:
    ImageRef.builtin("pydicom:CT_small.dcm").content_hash()  # package imports and caches, before measuring
    small = peaks(tmp_path / "small", 600)
    large = peaks(tmp_path / "large", 2400)
    growth = {step: large[step] - small[step] for step in small}
    # 1,800 more questions (both sizes span several chunks of 256): anything held per question, a
    # few hundred bytes at the least, would add half a megabyte or more here
    assert all(extra < 250_000 for extra in growth.values()), growth
