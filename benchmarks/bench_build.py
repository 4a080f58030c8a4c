"""Throughput of free-text generation (``build responses``) against a local OpenAI-compatible server.

With a server latency L and C requests in flight, no client can exceed C / L requests per second;
this prints how close the builder's generation comes at several concurrency levels, beside a bare
client, as ``bench_api_concurrency.py`` does for judges. Rows per level:

* build: the whole ``build responses`` step (:func:`medrewardbench.curation.pool.run_responses`):
  questions streamed from the project store chunk by chunk, each with its own image, the answer
  prompt, the API request machinery shared with the judge, every answer stored in SQLite as its
  batch finishes. Timed from the generator's start to its end.
* generator: the same generator (:class:`~medrewardbench.curation.generators.ApiTextGenerator`)
  driven directly with C requests in flight, nothing stored.
* bare: a bare client (aiohttp alone: no openai library, no prompt, no store) sending bodies of the
  same size to the same server. Its ratio is the most this machine and server allow.

The server runs in a child process (``--answer-mode free-text``), so that its work does not compete
with the client for the interpreter lock. Each level runs ``--repeat`` times; the median is the
figure and the range shows the machine's noise.

Usage::

    python benchmarks/bench_build.py
    python benchmarks/bench_build.py --quick
    python benchmarks/bench_build.py --levels 8,64 --latency 0.1 --requests-per-slot 40 --repeat 3
    python benchmarks/bench_build.py --levels 64 --requests-per-slot 47 --max-requests 3000 --repeat 1
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from medrewardbench.curation.generation import GenerationProgress, GenerationSummary, answer_request
from medrewardbench.curation.generators import ApiTextGenerator, load_answer_template
from medrewardbench.curation.importer import import_questions
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.models.options import ApiSettings, JudgeOptions
from medrewardbench.testing.openai_server import ServerProcess, ServerSettings

KEY_ENV = "MRB_BENCH_UNSET_KEY"  # left unset: the generator sends a placeholder key to the local server


@dataclass
class Figures:
    requests: int
    wall_s: float
    cpu_s: float
    failed: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.requests / self.wall_s


def write_questions(directory: Path, count: int) -> Path:
    """``count`` questions in the questions format, each with its own 256 px scan (JPEG and PNG in turn)."""
    import numpy as np

    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 12.0, (512, 512)) + 60.0 * np.sin(np.arange(512) / 40.0)[None, :]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "questions.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            top, left = (i * 37) % 256, (i * 91) % 256
            pixels = np.clip(noise[top : top + 256, left : left + 256] + 100.0, 0, 255).astype(np.uint8)
            fmt = "JPEG" if i % 2 == 0 else "PNG"
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, format=fmt)
            row = {
                "id": f"q{i}",
                "image": {"bytes": base64.b64encode(buffer.getvalue()).decode("ascii"), "path": f"scan-{i}.{fmt}"},
                "question": f"Question {i}: is there a pleural effusion on this chest radiograph?",
                "reference_answer": "yes" if i % 2 else "no",
                "organ_system": "chest",
            }
            handle.write(json.dumps(row) + "\n")
    return path


def options(base_url: str, concurrency: int) -> JudgeOptions:
    return JudgeOptions(concurrency=concurrency, api=ApiSettings(base_url=base_url, api_key_env=KEY_ENV))


class Timer(GenerationProgress):
    """The generation phase of one generator: wall and CPU time from its start to its end."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.summary: GenerationSummary | None = None

    def start(self, judge_spec: str, total: int, already_done: int) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def finish_generation(self, summary: GenerationSummary) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        self.summary = summary


def run_build(project: Path, base_url: str, concurrency: int, model: str) -> Figures:
    """The whole ``build responses`` step for one new generator configuration (nothing reused)."""
    timer = Timer()
    with open_project(project) as store:
        run_responses(
            store,
            [f"api:{model}"],
            options=options(base_url, concurrency),
            template=load_answer_template(),
            progress=timer,
        )
    assert timer.summary is not None and timer.summary.reused == 0
    return Figures(timer.summary.generated, timer.wall, timer.cpu, timer.summary.failed)


def run_generator(project: Path, base_url: str, concurrency: int, count: int) -> tuple[Figures, list[bytes]]:
    """The generator alone, C requests in flight; also returns the bodies it would send (for the bare client)."""
    with open_project(project, lock=False) as store:
        requests = []
        for chunk in store.iter_questions():
            images = store.images(chunk)
            requests.extend(answer_request(q, images[q.qid]) for q in chunk)
    requests = requests[:count]
    generator = ApiTextGenerator("bench-direct", options(base_url, concurrency), load_answer_template())

    async def main() -> tuple[Figures, list[bytes]]:
        bodies = []
        for request in requests:
            messages = await generator.chat.api_messages(
                generator.template.render_messages(request.values, request.image)
            )
            bodies.append(json.dumps(generator.chat.request_body(messages)).encode())
        slots = asyncio.Semaphore(concurrency)

        async def one(request):  # type: ignore[no-untyped-def]
            async with slots:
                [result] = await generator.generate_batch([request])
                return result

        try:
            await asyncio.gather(*(one(r) for r in requests[:concurrency]))  # warm-up wave
            cpu, started = time.process_time(), time.perf_counter()
            results = await asyncio.gather(*(one(r) for r in requests))
            wall, used = time.perf_counter() - started, time.process_time() - cpu
        finally:
            await generator.aclose()
        failed = sum(r.failure is not None for r in results)
        return Figures(len(results), wall, used, failed, [r.latency_s or 0.0 for r in results]), bodies

    return asyncio.run(main())


def run_bare(base_url: str, concurrency: int, bodies: Sequence[bytes]) -> Figures:
    """The floor: aiohttp alone keeps ``concurrency`` POSTs in flight (after a warm-up wave)."""
    import aiohttp

    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer placeholder"}

    async def main() -> Figures:
        connector = aiohttp.TCPConnector(limit=concurrency + 16)
        async with aiohttp.ClientSession(connector=connector) as session:
            slots = asyncio.Semaphore(concurrency)
            latencies: list[float] = []

            async def one(body: bytes) -> None:
                async with slots:
                    started = time.perf_counter()
                    async with session.post(url, data=body, headers=headers) as response:
                        payload = await response.json()
                    if response.status != 200 or "choices" not in payload:
                        raise RuntimeError(f"bare client got HTTP {response.status}")
                    latencies.append(time.perf_counter() - started)

            await asyncio.gather(*(one(body) for body in bodies[:concurrency]))
            latencies.clear()
            cpu, started = time.process_time(), time.perf_counter()
            await asyncio.gather(*(one(body) for body in bodies))
            return Figures(len(bodies), time.perf_counter() - started, time.process_time() - cpu, 0, latencies)

    return asyncio.run(main())


def ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.1f}"


def median_run(runs: list[Figures]) -> Figures:
    """The median run by rate."""
    return sorted(runs, key=lambda f: f.rate)[len(runs) // 2]


def print_row(label: str, level: int, runs: list[Figures], latency_s: float, bare: list[Figures]) -> None:
    """One row: the median run, the range of ratios, and its rate over the median bare run's ("vs bare")."""
    bound = level / latency_s
    ordered = sorted(runs, key=lambda f: f.rate)
    median = median_run(runs)
    spread = f"{ordered[0].rate / bound:.1%}..{ordered[-1].rate / bound:.1%}" if len(runs) > 1 else "-"
    print(
        f"{level:>5} {label:>9} {median.requests:>8} {len(runs):>4} {median.rate:>8.1f} {bound:>7.0f} "
        f"{median.rate / bound:>6.1%} {spread:>13} {ms(median.latencies, 0.5):>7} {ms(median.latencies, 0.95):>7} "
        f"{median.cpu_s / median.requests * 1000:>10.2f} {median.rate / median_run(bare).rate:>7.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,8,64", help="comma-separated concurrency levels")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency in seconds")
    parser.add_argument("--requests-per-slot", type=int, default=30, help="requests per unit of concurrency")
    parser.add_argument("--min-requests", type=int, default=20)
    parser.add_argument("--max-requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per level; the median is reported")
    parser.add_argument("--quick", action="store_true", help="levels 1,8, latency 50 ms, one run each (seconds)")
    args = parser.parse_args(argv)
    if args.quick:
        args.levels, args.latency, args.requests_per_slot, args.repeat = "1,8", 0.05, 5, 1
    os.environ.pop(KEY_ENV, None)
    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    counts = {level: min(max(level * args.requests_per_slot, args.min_requests), args.max_requests) for level in levels}
    print(
        f"server latency {args.latency * 1000:.0f} ms, server child process (free-text answers), a distinct image "
        f"per question, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print(
        f"{'conc':>5} {'client':>9} {'requests':>8} {'runs':>4} {'req/s':>8} {'bound':>7} {'ratio':>6} "
        f"{'ratio range':>13} {'p50 ms':>7} {'p95 ms':>7} {'cpu ms/req':>10} {'vs bare':>7}"
    )
    with (
        tempfile.TemporaryDirectory(prefix="mrb-bench-build-") as scratch,
        ServerProcess(ServerSettings(latency_s=args.latency, answer_mode="free_text")) as server,
    ):
        base_url = server.base_url
        projects: dict[int, Path] = {}
        for count in sorted(set(counts.values())):
            project = Path(scratch) / f"project-{count}"
            with open_project(project, create=True) as store:
                import_questions(store, str(write_questions(Path(scratch) / f"questions-{count}", count)))
            projects[count] = project
        failed = 0
        for level in levels:
            count = counts[level]
            build_runs, generator_runs, bare_runs = [], [], []
            for repeat in range(max(1, args.repeat)):  # interleaved, so that drift in the machine hits all three
                build_runs.append(run_build(projects[count], base_url, level, f"bench-c{level}-r{repeat}"))
                direct, bodies = run_generator(projects[count], base_url, level, count)
                generator_runs.append(direct)
                bare_runs.append(run_bare(base_url, level, bodies))
            failed += sum(f.failed for f in build_runs + generator_runs)
            print_row("build", level, build_runs, args.latency, bare_runs)
            print_row("generator", level, generator_runs, args.latency, bare_runs)
            print_row("bare", level, bare_runs, args.latency, bare_runs)
    if failed:
        print(f"! {failed} requests failed")
    print(
        "bound = concurrency / latency; ratio = the median run's req/s over the bound; build = the whole 'build "
        "responses' step (questions streamed from the project store, the answer prompt, the shared API request "
        "machinery, every answer stored in SQLite); generator = ApiTextGenerator alone; bare = aiohttp alone with "
        "bodies of the same size, the most this machine and server allow; vs bare = the median run's req/s over the "
        "bare client's in the same call (goal for build: >= 0.97)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
