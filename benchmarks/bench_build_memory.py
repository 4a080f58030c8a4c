"""Peak memory of the ``build`` steps over N questions, with generators that answer at once.

For each size, a fresh process writes N questions (all pointing at one builtin DICOM image) and
three labels per question, then runs every step of the build pipeline on a new project, as
``medrewardbench build`` does: import, filter (2 generators), responses (3 generators), pairs,
labels, export (canonical JSONL) and the build report. It prints each step's wall time and the
process's peak RSS after it. The scale issue's goal: over 200,000 questions, peak RSS within
150 MB of the 10,000-question figure.

Usage: python benchmarks/bench_build_memory.py [--sizes 10000 200000] [--workdir DIR]
       python benchmarks/bench_build_memory.py --quick      (1,000 and 4,000 questions)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from collections.abc import Sequence
from pathlib import Path

from medrewardbench.curation.export import export_dataset
from medrewardbench.curation.filtering import run_filter
from medrewardbench.curation.generators import GenerationRequest, GenerationResult, TextGenerator, load_answer_template
from medrewardbench.curation.importer import import_questions
from medrewardbench.curation.labels import attach_labels
from medrewardbench.curation.pairs import sample_pairs
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.curation.report import build_report, write_report


class InstantGenerator(TextGenerator):
    batch_size = 16
    concurrency = 2

    def __init__(self, spec, _options, template):
        self.spec = spec
        self.template = template

    def config(self):
        return {"spec": self.spec, "template_sha256": self.template.sha256}

    async def generate_batch(self, requests):
        return [
            GenerationResult(text=f"{'Yes' if r.key[-1] in '01234567' else 'No'}. {self.spec} on {r.key[:16]}.")
            for r in requests
        ]


root, count = Path(sys.argv[1]), int(sys.argv[2])
root.mkdir(parents=True, exist_ok=True)
source = root / "questions.jsonl"
with source.open("w") as handle:
    for i in range(count):
        row = {
            "id": f"q{i}",
            "question": f"Is finding {i} present on this scan?",
            "reference_answer": "yes" if i % 2 else "no",
            "image": {"builtin": "pydicom:CT_small.dcm"},
            "organ_system": ("chest", "brain", "eye")[i % 3],
        }
        handle.write(json.dumps(row) + "\n")
labels = root / "labels.jsonl"
with labels.open("w") as handle:
    for i in range(count):
        for annotator in ("dr_a", "dr_b", "dr_c"):
            handle.write(json.dumps({"id": f"q{i}", "annotator": annotator, "labels": {"overall": 1 + i % 2}}) + "\n")
template = load_answer_template()
figures = []


def step(name, run):
    start = time.perf_counter()
    run()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures.append({"step": name, "seconds": time.perf_counter() - start, "peak_rss_mb": peak})


with open_project(root / "project", create=True) as store:
    step("import", lambda: import_questions(store, str(source)))
    instant = {"template": template, "generator_factory": InstantGenerator}
    step("filter", lambda: run_filter(store, ["api:a", "api:b"], 2, force=True, **instant))  # keep every question
    step("responses", lambda: run_responses(store, ["api:c", "api:d", "api:e"], **instant))
    step("pairs", lambda: sample_pairs(store, root / "pairs.jsonl", seed=1, length_balance=True))
    step("labels", lambda: attach_labels(store, labels))
    step("export", lambda: export_dataset(store, "canonical", root / "out" / "set.jsonl"))
    step("report", lambda: write_report(build_report(store), store, root / "report"))
    pairs = store.count_pairs()
print(json.dumps({"figures": figures, "pairs": pairs}))
"""


def measure(root: Path, count: int) -> dict[str, object]:
    """Run the build steps over ``count`` questions in a fresh process; its figures."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(count)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"build over {count} questions failed: {done.stderr.strip()[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 200_000])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="1,000 and 4,000 questions (seconds)")
    args = parser.parse_args(argv)
    sizes = [1_000, 4_000] if args.quick else args.sizes
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mrb-build-memory-"))
    print(f"work dir: {work}")
    print(f"{'questions':>9} {'step':<10} {'seconds':>8} {'peak RSS MB':>11}")
    peaks: dict[int, float] = {}
    for count in sizes:
        result = measure(work / f"build-{count}", count)
        figures = result["figures"]
        assert isinstance(figures, list)
        for figure in figures:
            print(f"{count:>9} {figure['step']:<10} {figure['seconds']:>8.1f} {figure['peak_rss_mb']:>11.1f}")
        peaks[count] = max(figure["peak_rss_mb"] for figure in figures)
        print(f"{count:>9} {'pairs':<10} {result['pairs']:>8}")
    if len(peaks) >= 2:
        small, large = min(peaks), max(peaks)
        print(
            f"peak RSS growth from {small} to {large} questions: {peaks[large] - peaks[small]:.1f} MB "
            "(goal < 150 MB from 10,000 to 200,000)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
