"""A sweep of many API judges against the local test server, on this machine and on a one-machine Ray cluster.

Both sweeps run in this process through :func:`medrewardbench.sweep.run_sweep` on the same cases
(generated PNG scans), the same judges (``--judges`` API judges, each its own model name, each with
``--concurrency`` requests in flight) and a test server in a child process that answers after
``--latency`` seconds. The report is left out (it is the same code on both paths). Printed:

* the local sweep's wall time;
* the Ray cluster's start (``ray.init``, not part of a sweep on an existing cluster);
* the Ray sweep's wall time, its overhead against the local sweep (goal: within 10 %), and how
  much of it is the workers' start (every judge's actor up and described) and the rest;
* whether both sweeps stored byte-identical ``judgments.jsonl``.

    python benchmarks/bench_sweep.py                    # 16 judges, 1,026 cases x 2 orders, 1 s latency
    python benchmarks/bench_sweep.py --quick            # a few seconds' worth, for the smoke test

The fixed cost of the Ray path is starting one worker process per judge; what it costs against
the whole sweep depends on the sweep's length, so the script also prints the sweep length at which
that start stays under 10 %.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.sweep import SweepOptions, SweepProgress, load_sweep, run_sweep
from medrewardbench.testing.openai_server import ServerProcess, ServerSettings

KEY_ENV = "BENCH_SWEEP_KEY"


def write_cases(directory: Path, n: int) -> Path:
    """``n`` labelled cases, each with its own small PNG."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        buffer = io.BytesIO()
        Image.new("RGB", (64, 64), (i * 37 % 256, i * 91 % 256, 120)).save(buffer, format="PNG")
        (directory / f"scan{i}.png").write_bytes(buffer.getvalue())
        rows.append(
            {
                "id": f"case-{i:05d}",
                "image": f"scan{i}.png",
                "question": f"Question {i}: what is the most likely finding on this scan?",
                "response_1": f"A short answer to question {i}.",
                "response_2": f"A longer, more detailed answer to question {i}, with a differential diagnosis.",
                "labels": {d: 1 + (i + j) % 2 for j, d in enumerate(DIMENSIONS)},
                "organ_system": ("chest", "brain", "abdomen")[i % 3],
            }
        )
    path = directory / "cases.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def write_sweep(path: Path, cases: Path, base_url: str, judges: int, concurrency: int) -> Path:
    lines = [f"data: {cases}", "judges:"]
    for index in range(judges):
        lines.append(
            f"  - {{judge: 'api:judge-{index:02d}', base_url: '{base_url}', api_key_env: {KEY_ENV}, "
            f"concurrency: {concurrency}, max_retries: 2}}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class WorkerClock(SweepProgress):
    """Notes when the last judge's worker described itself (the Ray path's start-up)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.last_worker = self.started

    def worker_started(self, name: str, node: str, pid: int) -> None:
        self.last_worker = time.perf_counter()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--judges", type=int, default=16)
    parser.add_argument("--cases", type=int, default=1026, help="default: the size of Med-RewardBench")
    parser.add_argument("--latency", type=float, default=1.0, help="server latency per request, seconds")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight per judge")
    parser.add_argument("--cpus", type=int, default=None, help="CPUs of the Ray cluster (default: the machine's)")
    parser.add_argument("--quick", action="store_true", help="4 judges, 12 cases, 50 ms: a smoke run")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.judges, args.cases, args.latency, args.concurrency = 4, 12, 0.05, 4
    import os

    os.environ[KEY_ENV] = "sk-bench-not-a-key"
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        import ray
    except ImportError:
        print("bench_sweep needs Ray: pip install 'medrewardbench[ray]'", file=sys.stderr)
        return 2
    cases = write_cases(workdir / "data", args.cases)
    requests = args.judges * args.cases * 2
    bound = args.cases * 2 * args.latency / args.concurrency
    print(
        f"{args.judges} API judges x {args.cases} cases x 2 orders = {requests} requests; "
        f"{args.concurrency} in flight per judge; server latency {args.latency * 1000:.0f} ms "
        f"(a judge alone needs at least {bound:.1f} s)"
    )
    with ServerProcess(ServerSettings(latency_s=args.latency)) as server:
        config = load_sweep(write_sweep(workdir / "sweep.yaml", cases, server.base_url, args.judges, args.concurrency))
        started = time.perf_counter()
        local = run_sweep(config, SweepOptions(out_dir=workdir / "local", report=False))
        local_s = time.perf_counter() - started
        assert all(o.stored == args.cases * 2 for o in local.outcomes), "the local sweep did not finish"
        print(f"local sweep:               {local_s:8.2f} s  ({requests / local_s:,.0f} req/s)")

        started = time.perf_counter()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        cluster_s = time.perf_counter() - started
        print(f"ray cluster start:         {cluster_s:8.2f} s  (not part of a sweep on an existing cluster)")
        try:
            clock = WorkerClock()
            started = time.perf_counter()
            options = SweepOptions(out_dir=workdir / "ray", ray="auto", report=False)
            clustered = run_sweep(config, options, progress=clock)
            ray_s = time.perf_counter() - started
        finally:
            ray.shutdown()
        assert all(o.stored == args.cases * 2 for o in clustered.outcomes), "the Ray sweep did not finish"
        workers_s = clock.last_worker - clock.started
        overhead = ray_s - local_s
        print(f"ray sweep:                 {ray_s:8.2f} s  ({requests / ray_s:,.0f} req/s)")
        print(f"  workers up after:        {workers_s:8.2f} s  ({args.judges} actors started and described)")
        print(f"ray overhead:              {overhead:+8.2f} s  = {overhead / local_s * 100:+.1f} % of the local sweep")
        print(
            f"  of which worker start:   {workers_s:8.2f} s; the rest: {overhead - workers_s:+.2f} s "
            f"({(overhead - workers_s) / requests * 1000:+.2f} ms per request)"
        )
        print(f"the worker start stays under 10 % for local sweeps longer than {workers_s * 10:.0f} s")
        identical = (workdir / "local" / "judgments.jsonl").read_bytes() == (
            workdir / "ray" / "judgments.jsonl"
        ).read_bytes()
        print(f"judgments.jsonl identical: {'yes' if identical else 'NO'}")
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
