"""Harness overhead and memory of an eval run with an instant judge.

Generates a canonical data set of N cases (each with its own small PNG file), then in a fresh
subprocess per measurement runs the library's eval job (load, plan, judge, store, metrics, files)
with ``instant:`` (no image decoding) and ``instant:decode`` (decodes every image), both orders.

Prints, per size: wall time of the whole job, time of the judging phase (plan + execute + store),
milliseconds per request for each, and peak RSS. The issue's goals: at most 1 ms per request with
decoding excluded at 10,000 cases, and peak RSS growing by less than 100 MB from 1,000 to 10,000;
at scale (issue 15), peak RSS growing by less than 150 MB from 10,000 to 100,000 cases with at
most 0.05 ms per request in the judge phase.

Usage: python benchmarks/bench_harness.py [--sizes 1000 10000] [--workdir DIR] [--judges instant:]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from medrewardbench.data import load_benchmark
from medrewardbench.evaluation.job import evaluate, ProgressSink
from medrewardbench.evaluation.runner import RunSummary

data, out, spec = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
bench = load_benchmark(data)
t_load = time.perf_counter() - t0
phase = {}

class Sink(ProgressSink):
    def start(self, judge_spec, total, already_done):
        phase["start"] = time.perf_counter()
    def finish(self, summary):
        phase["end"] = time.perf_counter()
        phase["judged"] = summary.judged

t1 = time.perf_counter()
evaluate(bench, [spec], out, progress=Sink(), fresh=True)
t_eval = time.perf_counter() - t1
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"load_s": t_load, "eval_s": t_eval, "judge_phase_s": phase["end"] - phase["start"],
                  "requests": phase["judged"], "peak_rss_mb": peak_kb / 1024}))
"""


def make_dataset(directory: Path, n: int) -> Path:
    from PIL import Image

    images = directory / "images"
    images.mkdir(parents=True, exist_ok=True)
    path = directory / f"cases-{n}.jsonl"
    organs = ["abdomen", "brain", "breast", "chest", "eye", "foot", "heart", "lung"]
    dims = ["accuracy", "relevance", "comprehensiveness", "creativity", "responsiveness", "overall"]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            img = images / f"{i:05d}.png"
            if not img.exists():
                buf = io.BytesIO()
                Image.new("RGB", (64, 64), (i % 256, (i // 256) % 256, 128)).save(buf, format="PNG")
                img.write_bytes(buf.getvalue())
            row = {
                "id": f"gen-{i:05d}",
                "image": f"images/{i:05d}.png",
                "question": f"Generated question {i}: what is the main finding?",
                "response_1": "The image shows a normal study. " * (1 + i % 5),
                "response_2": "There is a focal abnormality that needs follow-up. " * (1 + (i * 7) % 5),
                "labels": {d: 1 + (i + k) % 2 for k, d in enumerate(dims)},
                "organ_system": organs[i % len(organs)],
                "department": "radiology",
            }
            fh.write(json.dumps(row) + "\n")
    return path


def measure(data: Path, out: Path, spec: str) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(data), str(out), spec], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--judges", nargs="+", default=["instant:", "instant:decode"], help="judge specs to time")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mrb-bench-"))
    print(f"work dir: {work}")
    print(
        f"{'cases':>6} {'judge':<15} {'requests':>8} {'load s':>7} {'judge s':>8} {'ms/req judge':>12} "
        f"{'eval s':>7} {'ms/req eval':>11} {'peak RSS MB':>11}"
    )
    peaks: dict[int, float] = {}
    for n in args.sizes:
        data = make_dataset(work, n)
        for spec in args.judges:
            r = measure(data, work / f"out-{n}-{spec.strip(':').replace(':', '-') or 'plain'}", spec)
            per_req_judge = 1000 * r["judge_phase_s"] / r["requests"]
            per_req_eval = 1000 * (r["eval_s"] + r["load_s"]) / r["requests"]
            print(
                f"{n:>6} {spec:<15} {int(r['requests']):>8} {r['load_s']:>7.2f} {r['judge_phase_s']:>8.2f} "
                f"{per_req_judge:>12.3f} {r['eval_s']:>7.2f} {per_req_eval:>11.3f} {r['peak_rss_mb']:>11.1f}"
            )
            if spec == "instant:":
                peaks[n] = r["peak_rss_mb"]
    if len(peaks) >= 2:
        small, large = min(peaks), max(peaks)
        print(
            f"peak RSS growth from {small} to {large} cases (instant:): {peaks[large] - peaks[small]:.1f} MB "
            f"(goals: < 100 MB from 1,000 to 10,000; < 150 MB from 10,000 to 100,000)"
        )


if __name__ == "__main__":
    main()
