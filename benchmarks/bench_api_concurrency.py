"""Throughput of the API judge against a local OpenAI-compatible server with fixed latency.

With a server latency L and C requests in flight, no client can exceed C / L requests per second;
this prints how close ApiJudge comes at several concurrency levels (goal: >= 95% of the 640 req/s
bound at C=64, L=100 ms), then a run with 30% injected faults (429 with Retry-After, 500, timeouts)
that reports how every request ended and what the retries cost against a fault-free run.

The server runs in a child process by default, so that its work does not compete with the client
for the interpreter lock (``--in-process`` puts it in a thread of this process instead). Requests go
through ``judge_batch`` one at a time under a semaphore of C, as the runner drives a judge with
``batch_size = 1``.

Each case has its own image (``--images shared`` reuses four), judged in both orders one after the
other, as the runner plans a real set. Each level runs ``--repeat`` times (the median is the
figure; the range shows the machine's noise). Beside the judge alone, two more rows:

* eval: the same requests through the whole ``eval`` job (plan, runner, every judgment stored in
  SQLite), timed over its judging phase.
* command: the whole ``medrewardbench eval`` command in a new process on the same cases written to
  disk (canonical JSONL, an image file each), timed from its launch to its exit: start-up, loading,
  hashing, planning, judging, analysis and outputs. Below the rows, where its time went, phase by
  phase (``--profile-command FILE`` adds a cProfile of it).
* bare: a bare client (aiohttp alone: no openai library, no prompt, no parsing) sending bodies of
  the same size to the same server. Its ratio is the most this machine and server allow, so the
  judge's shortfall splits into the machine's part and the client's part.
* process: the bare client as a whole process, the floor of the command row: a new interpreter
  that imports aiohttp, reads the same data file and images, sends the same requests (the same
  prompt, both orders) and writes the answers to a JSON file, timed from its launch to its exit.

Both processes run with their bytecode compiled, as an installed package has it
(``PYTHONPYCACHEPREFIX`` in the scratch directory, written by an untimed warm-up run of each on a
few cases), so that a machine with ``PYTHONDONTWRITEBYTECODE`` set does not charge the command for
compiling its modules on every run.

Usage::

    python benchmarks/bench_api_concurrency.py
    python benchmarks/bench_api_concurrency.py --levels 1,8,64 --requests-per-slot 40 --backend httpx
    python benchmarks/bench_api_concurrency.py --levels 64 --repeat 5 --skip-faults
    python benchmarks/bench_api_concurrency.py --levels 64 --requests-per-slot 47 --max-requests 3000 --skip-faults

Every row also prints ``vs bare``: its rate over the bare client's in the same call; the command
and process rows also ``vs proc``: their rate over the bare process's. The goals (3,000 requests at
concurrency 64 against 100 ms): the judge and the eval job's judging phase >= 0.97 of bare; the
whole command >= 0.90 of the bare process (``vs proc`` of the command row: start-up, reading the
data and writing results on both sides). On a machine whose cores are busy with other work every
client is short of CPU and the ratios fall with the load; ``cpu ms/req`` (CPU time per request: of
this process for the in-process rows, of the child for the command and process rows, start-up
included) is then the figure to compare between versions, and the breakdown gives each phase's CPU
time beside its wall time.

Why one module of this size: a benchmark is one script its users run by path; the two child
programs (the timed command's hooks, the bare process) are strings in it, run with ``python -c``.
What it shares with ``bench_build.py`` (the bare client, timing a whole command phase by phase,
the printed rows) is in ``command_rows.py`` beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from command_rows import (
    add_command_row_options,
    bare_process_child,
    child_env,
    command_child,
    command_flags,
    percentile,
    print_breakdown,
    print_cpu,
    print_header,
    print_level,
    print_profile,
    run_bare_client,
    run_bare_process,
    run_command,
    write_template_json,
)
from PIL import Image

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.judges.api import build as build_api_judge
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.models.options import ApiSettings, JudgeOptions
from medrewardbench.testing.openai_server import OpenAIServer, ServerProcess, ServerSettings

KEY_ENV = "MRB_BENCH_UNSET_KEY"  # left unset: the judge sends a placeholder key to the local server


@dataclass
class RunFigures:
    concurrency: int
    requests: int
    wall_s: float
    cpu_s: float
    judged: int
    failed: int
    attempts: int
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.requests / self.wall_s


def make_cases(count: int, images: str = "distinct") -> list[Case]:
    """``count`` cases; by default each has its own image (256 px scans, JPEG and PNG in turn).

    With ``images="shared"`` four solid-colour PNGs are shared by all cases, which leaves out the
    per-image work (reading, checking and base64-encoding each file) that a real set costs.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    field = rng.normal(0.0, 12.0, (512, 512)) + 60.0 * np.sin(np.arange(512) / 40.0)[None, :]
    refs: list[ImageRef] = []
    for i in range(count if images == "distinct" else 4):
        if images == "distinct":
            top, left = (i * 37) % 256, (i * 91) % 256
            pixels = np.clip(field[top : top + 256, left : left + 256] + 100.0, 0, 255).astype(np.uint8)
            picture, fmt = Image.fromarray(pixels), ("JPEG" if i % 2 == 0 else "PNG")
        else:
            picture, fmt = Image.new("RGB", (256, 256), (40 * i, 90, 160)), "PNG"
        buffer = io.BytesIO()
        picture.save(buffer, format=fmt)
        refs.append(ImageRef.from_bytes(buffer.getvalue(), f"scan-{i}.{fmt.lower()}"))
    return [
        Case(
            case_id=f"bench-{i}",
            image=refs[i % len(refs)],
            question=f"Case {i}: what abnormality is visible on this chest radiograph?",
            response_1="Right lower lobe consolidation consistent with pneumonia. " * (1 + i % 3),
            response_2="There is a small left pleural effusion; no consolidation. " * (1 + (i + 1) % 3),
            labels={d: 1 for d in DIMENSIONS},
            organ_system="chest",
        )
        for i in range(count)
    ]


def both_orders(cases: Sequence[Case], count: int) -> list[JudgeRequest]:
    """``count`` requests, case by case with both orders next to each other, as the runner plans them."""
    return [JudgeRequest(cases[i // 2], (Order.ORIGINAL, Order.SWAPPED)[i % 2]) for i in range(count)]


async def drive(judge: Judge, requests: Sequence[JudgeRequest], concurrency: int) -> list[JudgeResult]:
    """Keep ``concurrency`` one-request batches in flight until all are judged."""
    slots = asyncio.Semaphore(concurrency)

    async def one(request: JudgeRequest) -> JudgeResult:
        async with slots:
            [result] = await judge.judge_batch([request])
            return result

    return list(await asyncio.gather(*(one(r) for r in requests)))


def run_level(base_url: str, concurrency: int, count: int, cases: list[Case], options: dict[str, Any]) -> RunFigures:
    """Judge ``count`` requests at ``concurrency`` (after a warm-up of one wave) and time them."""
    judge = build_api_judge(
        "bench-model",
        JudgeOptions(concurrency=concurrency, api=ApiSettings(base_url=base_url, api_key_env=KEY_ENV, **options)),
    )
    requests = both_orders(cases, count)
    # the warm-up wave uses the cases after the measured ones, so that it leaves nothing cached
    warmup = [JudgeRequest(case, Order.ORIGINAL) for case in cases[(count + 1) // 2 :][:concurrency]]

    async def main() -> tuple[list[JudgeResult], float, float]:
        try:
            await drive(judge, warmup, concurrency)
            cpu = time.process_time()
            started = time.perf_counter()
            results = await drive(judge, requests, concurrency)
            return results, time.perf_counter() - started, time.process_time() - cpu
        finally:
            await judge.aclose()

    results, wall, cpu = asyncio.run(main())
    return RunFigures(
        concurrency=concurrency,
        requests=count,
        wall_s=wall,
        cpu_s=cpu,
        judged=sum(r.failure is None for r in results),
        failed=sum(r.failure is not None for r in results),
        attempts=sum(int(r.extra.get("attempts", 1)) for r in results),
        latencies=[r.latency_s or 0.0 for r in results],
    )


def run_eval_level(base_url: str, concurrency: int, count: int, cases: list[Case]) -> RunFigures:
    """The whole ``eval`` path: plan, runner, the API judge and every judgment stored in SQLite."""
    import tempfile

    from medrewardbench.data.benchmark import Benchmark
    from medrewardbench.evaluation.job import ProgressSink, evaluate
    from medrewardbench.evaluation.runner import RunSummary

    phase: dict[str, float] = {}

    class Timer(ProgressSink):
        def start(self, judge_spec: str, total: int, already_done: int) -> None:
            phase["wall"], phase["cpu"] = time.perf_counter(), time.process_time()

        def finish(self, summary: RunSummary) -> None:
            phase["wall"] = time.perf_counter() - phase["wall"]
            phase["cpu"] = time.process_time() - phase["cpu"]
            phase["judged"], phase["failed"] = summary.judged, summary.failed

    # hashed before: this row times the judging phase alone (the runner, the judge, the store), as
    # a run that may reuse stored judgments does it; the command row has a first run, which hashes
    # and records the cases inside its judging phase
    benchmark = Benchmark(name="bench", source="bench", cases=tuple(cases[: (count + 1) // 2])).fingerprinted()
    options = JudgeOptions(concurrency=concurrency, api=ApiSettings(base_url=base_url, api_key_env=KEY_ENV))
    with tempfile.TemporaryDirectory(prefix="mrb-bench-eval-") as out:
        evaluate(benchmark, ["api:bench-model"], out, options=options, progress=Timer(), fresh=True)
    judged = int(phase["judged"])
    return RunFigures(
        concurrency,
        judged,
        phase["wall"],
        phase["cpu"],
        judged - int(phase["failed"]),
        int(phase["failed"]),
        judged,
        [],
    )


COMMAND_CHILD = command_child(
    imports="""
from medrewardbench.cli.main import main
import medrewardbench.data as data
import medrewardbench.evaluation.job as evaluation
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.evaluation.store import Store
""",
    hooks="""
timed(data, "load_benchmark", "loading")
if hasattr(Benchmark, "fingerprinted"):  # hashing, and holding a small data set in memory, in one reading
    timed(Benchmark, "fingerprinted", "hashing", first_only=True)
else:
    timed(Benchmark, "data_hash", "hashing", first_only=True)
timed(evaluation, "plan_run", "planning")
timed(evaluation, "execute_plan", "judging")
if hasattr(evaluation, "execute_while_hashing"):
    # a first run: the cases are read, hashed and recorded by a task of the event loop while the
    # answers are awaited, so hashing and recording happen inside the judging phase
    from medrewardbench.data.benchmark import DataHasher
    from medrewardbench.evaluation import runner

    timed(evaluation, "execute_while_hashing", "judging")
    timed(DataHasher, "add", "hashing (in judging)")
    timed(runner, "register_run", "recording the cases (in judging)")
timed(Store, "write_judgments", "store writes (in judging)")
if hasattr(evaluation, "_output_import_steps"):  # imported a module per loop turn while answers are awaited
    timed(evaluation, "_output_import_steps", "importing the analysis (in judging)")
elif hasattr(evaluation, "_import_output_modules"):  # imported at once while the last answers are awaited
    timed(evaluation, "_import_output_modules", "importing the analysis (in judging)")
ANALYSIS = ("medrewardbench.metrics.core", ("load_run_data", "run_metrics")), (
    "medrewardbench.metrics.analysis",
    ("analyze",),
)
OUTPUTS = "medrewardbench.report.files", ("write_judgments_jsonl", "write_metrics_json", "write_metrics_csv")


def hook_results(owners):
    for (module, names), phase in zip((*ANALYSIS, OUTPUTS), ("analysis", "analysis", "outputs")):
        for name in names:
            timed(owners(module), name, phase)


if hasattr(evaluation, "analyze"):  # a version that imports the analysis at start-up
    hook_results(lambda module: evaluation)
else:  # imported where used (while answers are awaited, or when the outputs begin): hooked
    # when the outputs begin, so that the start-up phase imports nothing the command itself does not
    import importlib

    write_outputs, hooked = evaluation._write_outputs, []

    def hooked_outputs(*args, **kwargs):
        if not hooked:
            hook_results(importlib.import_module)
            hooked.append(True)
        return write_outputs(*args, **kwargs)

    evaluation._write_outputs = hooked_outputs
""",
)
"""Runs the ``medrewardbench eval`` command in a fresh interpreter and times its phases from inside."""

COMMAND_PHASES = ("start-up", "loading", "hashing", "planning", "judging", "analysis", "outputs", "other", "exit")
INNER_PHASES = (
    "store writes (in judging)",
    "hashing (in judging)",
    "recording the cases (in judging)",
    "importing the analysis (in judging)",
)
"""Phases timed inside the judging phase (a first run hashes and records the cases while it judges; the
analysis is imported a module per event-loop turn while answers are awaited)."""
INNER_SHOWN = [(phase, phase.removesuffix(" (in judging)")) for phase in INNER_PHASES]


def write_eval_data(directory: str, cases: Sequence[Case]) -> str:
    """The cases as canonical JSONL with an image file each, as a real data set on disk."""
    from pathlib import Path

    root = Path(directory)
    (root / "images").mkdir(parents=True, exist_ok=True)
    path = root / "cases.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for case in cases:
            assert case.image is not None
            name = f"images/{case.case_id}-{case.image.location}"
            (root / name).write_bytes(case.image.raw_bytes())
            row = {
                "id": case.case_id,
                "image": name,
                "question": case.question,
                "response_1": case.response_1,
                "response_2": case.response_2,
                "labels": {d: 1 for d in DIMENSIONS},
                "organ_system": case.organ_system,
            }
            handle.write(json.dumps(row) + "\n")
    return str(path)


def run_command_level(
    base_url: str,
    concurrency: int,
    count: int,
    data_path: str,
    env: dict[str, str],
    profile: str | None = None,
) -> tuple[RunFigures, dict[str, tuple[float, float]]]:
    """The whole ``medrewardbench eval`` command in a fresh process, from its launch to its exit.

    Returns its figures (``count`` requests over the command's whole wall time, the child's CPU
    time) and its phases as (wall, cpu) seconds: start-up (interpreter and imports), loading
    (reading and checking the data), hashing (the data fingerprint; the same reading keeps a small
    data set in memory), planning (recording the cases, asking the store), judging (the requests,
    store writes included; in a first run, which this is, also hashing and recording the cases,
    and the import of the analysis while answers are awaited, shown beside it), analysis
    (metrics and the leaderboard), outputs (judgments.jsonl, metrics.json, metrics.csv), other (the
    rest of the command) and exit (after the command until the process ended).
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mrb-bench-cmd-") as out:
        args = [
            "eval",
            "--data",
            data_path,
            "--judge",
            "api:bench-model",
            "--out",
            os.path.join(out, "results"),
            *command_flags(base_url, KEY_ENV, concurrency),
        ]
        wall, cpu, phases = run_command(
            COMMAND_CHILD,
            args,
            env,
            summed=("loading", "hashing", "planning", "judging", "analysis", "outputs"),
            inner=INNER_PHASES,
            profile=profile,
        )
    return RunFigures(concurrency, count, wall, cpu, count, 0, count, []), phases


BARE_PROCESS_CHILD = bare_process_child(
    r"""
import os

MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp"}
base = os.path.dirname(source)


def bodies():
    with open(source, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            image_path = os.path.join(base, row["image"])
            with open(image_path, "rb") as image:
                encoded = base64.b64encode(image.read()).decode("ascii")
            image_url = f"data:{MIME[os.path.splitext(image_path)[1].lower()]};base64,{encoded}"
            for first, second in ((row["response_1"], row["response_2"]), (row["response_2"], row["response_1"])):
                text = template["user"].replace("{{question}}", row["question"])
                text = text.replace("{{response_a}}", first).replace("{{response_b}}", second)
                user = [{"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": text}]
                messages = [{"role": "system", "content": template["system"]}, {"role": "user", "content": user}]
                yield row["id"], json.dumps({"model": "bench-model", "messages": messages}).encode()
"""
)
"""The floor of the whole command: a bare aiohttp client as a process, doing the same job without the package."""


def write_template(directory: str) -> str:
    """The judge's prompt template as JSON (system and user text), for the bare process to fill in."""
    from medrewardbench.prompts import load_template

    template = load_template("pairwise")
    return write_template_json(directory, {"system": template.system, "user": template.user})


def run_process_level(
    base_url: str, concurrency: int, count: int, data_path: str, template_path: str, env: dict[str, str]
) -> RunFigures:
    """The bare client as a whole process on the same data, from its launch to its exit."""
    wall, cpu = run_bare_process(BARE_PROCESS_CHILD, data_path, template_path, base_url, concurrency, count, env)
    return RunFigures(concurrency, count, wall, cpu, count, 0, count, [])


def bare_bodies(cases: list[Case], count: int) -> list[bytes]:
    """Chat-completions bodies the size of the judge's: each case's text and image as the judge sends it."""
    from medrewardbench.models.api.images import passthrough_data_url, to_data_url
    from medrewardbench.prompts import load_template

    template = load_template("pairwise")
    bodies = []
    for case in cases[: (count + 1) // 2]:
        rendered = template.render_messages(case.question, case.response_1, case.response_2, case.image)
        text = "\n".join(p["text"] for m in rendered for p in m["content"] if p["type"] == "text")
        url = passthrough_data_url(case.image) or to_data_url(case.image, compress_level=1)
        content = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}]
        body = json.dumps({"model": "bench-model", "messages": [{"role": "user", "content": content}]}).encode()
        bodies += [body, body]  # both orders
    return bodies[:count]


def run_bare_level(base_url: str, concurrency: int, bodies: list[bytes]) -> RunFigures:
    """The floor: aiohttp alone keeps ``concurrency`` POSTs in flight (after a warm-up wave)."""
    latencies, wall, cpu = run_bare_client(base_url, concurrency, bodies)
    count = len(bodies)
    return RunFigures(concurrency, count, wall, cpu, count, 0, count, latencies)


@contextmanager
def serve(settings: ServerSettings, in_process: bool) -> Iterator[tuple[str, Any]]:
    """A server with ``settings``; yields its base URL and a callable returning its counters."""
    if in_process:
        with OpenAIServer() as server:
            settings.apply(server.control)
            yield server.base_url, lambda: server.control.counters
    else:
        with ServerProcess(settings) as process:
            yield process.base_url, process.counters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,8,64,256", help="comma-separated concurrency levels")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency in seconds")
    parser.add_argument("--requests-per-slot", type=int, default=40, help="requests per unit of concurrency")
    parser.add_argument("--max-requests", type=int, default=4000)
    parser.add_argument("--backend", default="auto", choices=["auto", "httpx", "aiohttp"])
    parser.add_argument("--in-process", action="store_true", help="run the server in a thread of this process")
    parser.add_argument("--fault-concurrency", type=int, default=64)
    parser.add_argument("--fault-requests", type=int, default=2000)
    parser.add_argument("--retry-after", default="0.2", help="Retry-After of injected 429s (seconds)")
    parser.add_argument("--skip-faults", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="runs per level; the median is reported")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare-client floor")
    parser.add_argument("--no-eval", action="store_true", help="skip the whole-eval rows (runner and SQLite store)")
    add_command_row_options(parser, "medrewardbench eval")
    parser.add_argument(
        "--images",
        default="distinct",
        choices=["distinct", "shared"],
        help="a different image per case (default), or four images shared by all cases",
    )
    parser.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="spread requests over N client processes (cpu ms/req then counts this process only)",
    )
    args = parser.parse_args(argv)
    os.environ.pop(KEY_ENV, None)

    levels = [int(x) for x in args.levels.split(",") if x.strip()]
    counts = {level: min(max(level * args.requests_per_slot, 20), args.max_requests) for level in levels}
    needed = [(counts[level] + 1) // 2 + level for level in levels]
    if not args.skip_faults:
        needed.append((args.fault_requests + 1) // 2 + args.fault_concurrency)
    cases = make_cases(max(needed), args.images)
    print(
        f"server latency {args.latency * 1000:.0f} ms, server {'in-process' if args.in_process else 'child process'}, "
        f"http backend {args.backend}, client processes {args.client_processes}, {args.images} images, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print_header()
    import tempfile

    scratch = tempfile.TemporaryDirectory(prefix="mrb-bench-data-")
    with scratch, serve(ServerSettings(latency_s=args.latency), args.in_process) as (base_url, _):
        env = child_env(scratch.name)
        template_path = write_template(scratch.name)
        if not (args.no_command and args.no_process):
            # untimed: compiles both children's bytecode into the cache and warms the page cache
            warm = write_eval_data(f"{scratch.name}/warm", cases[:4])
            if not args.no_command:
                run_command_level(base_url, 4, 8, warm, env)
            if not args.no_process:
                run_process_level(base_url, 4, 8, warm, template_path, env)
        for level in levels:
            count = counts[level]
            judge_runs: list[RunFigures] = []
            eval_runs: list[RunFigures] = []
            bare_runs: list[RunFigures] = []
            process_runs: list[RunFigures] = []
            command_runs: list[tuple[RunFigures, dict[str, tuple[float, float]]]] = []
            bodies = [] if args.no_bare else bare_bodies(cases, count)
            data_path = (
                ""
                if args.no_command and args.no_process
                else write_eval_data(f"{scratch.name}/c{level}", cases[: (count + 1) // 2])
            )
            for repeat in range(max(1, args.repeat)):  # interleaved, so that drift in the machine hits all
                judge_runs.append(
                    run_level(
                        base_url,
                        level,
                        count,
                        cases,
                        {"http_backend": args.backend, "client_processes": args.client_processes},
                    )
                )
                if not args.no_eval:
                    eval_runs.append(run_eval_level(base_url, level, count, cases))
                if not args.no_bare:
                    bare_runs.append(run_bare_level(base_url, level, bodies))
                if not args.no_command:
                    last = repeat == max(1, args.repeat) - 1
                    profile = args.profile_command if last else None
                    command_runs.append(run_command_level(base_url, level, count, data_path, env, profile))
                if not args.no_process:
                    process_runs.append(run_process_level(base_url, level, count, data_path, template_path, env))
            print_level("judge", level, count, judge_runs, args.latency, bare_runs)
            if eval_runs:
                print_level("eval", level, eval_runs[0].requests, eval_runs, args.latency, bare_runs)
            commands = [r for r, _ in command_runs]
            if command_runs:
                print_level("command", level, count, commands, args.latency, bare_runs, process_runs)
            if bare_runs:
                print_level("bare", level, count, bare_runs, args.latency, bare_runs)
            if process_runs:
                print_level("process", level, count, process_runs, args.latency, bare_runs, process_runs)
            if command_runs:
                print_breakdown(level, command_runs, COMMAND_PHASES, INNER_SHOWN, "judging")
            print_cpu(
                level,
                {
                    "judge": judge_runs,
                    "eval": eval_runs,
                    "bare": bare_runs,
                    "command": commands,
                    "process": process_runs,
                },
                (("judge", "bare"), ("eval", "bare"), ("command", "process")),
            )
            failed = sum(f.failed for f in judge_runs + eval_runs)
            if failed:
                print(f"      ! {failed} requests failed in fault-free runs")
    print(
        "bound = concurrency / latency; ratio = the median run's req/s over the bound; vs bare = the median run's "
        "req/s over the bare client's in the same call; judge = ApiJudge (its HTTP backend, prompt, image, "
        "parser); eval = the whole eval job's judging phase (runner, judge, every judgment stored in SQLite); "
        "command = the whole 'medrewardbench eval' command in a new process, from its launch to its exit (start-up, "
        "loading, hashing, judging, analysis and outputs); bare = aiohttp alone with bodies of the same size, the "
        "most this machine and server allow; process = the bare client as a whole process on the same data file "
        "(start-up, reading, requests, writing the answers), the floor of the command row; vs proc = the median "
        "run's req/s over the bare process's (the goal figure of the command row)"
    )
    if args.profile_command and not args.no_command:
        print_profile(args.profile_command)

    if args.skip_faults:
        return 0
    conc, count = args.fault_concurrency, args.fault_requests
    retry = {
        "http_backend": args.backend,
        "timeout_s": 1.0,
        "max_retries": 6,
        "backoff_base_s": 0.05,
        "backoff_max_s": 1.0,
        "client_processes": args.client_processes,
    }
    with serve(ServerSettings(latency_s=args.latency), args.in_process) as (base_url, _):
        clean = run_level(base_url, conc, count, cases, dict(retry))
    faults = ServerSettings(
        latency_s=args.latency,
        seed=1,
        fault_rates={"429": 0.1, "500": 0.1, "timeout": 0.1},
        retry_after=args.retry_after,
        timeout_sleep_s=30.0,
    )
    with serve(faults, args.in_process) as (base_url, counters):
        faulty = run_level(base_url, conc, count, cases, dict(retry))
        served = counters()
    extra_attempts = faulty.attempts - faulty.requests
    print()
    print(
        f"30% faults (10% 429 Retry-After {args.retry_after} s, 10% 500, 10% timeout at 1.0 s), "
        f"concurrency {conc}, max_retries 6, backoff 0.05..1.0 s full jitter"
    )
    print(
        f"  judged {faulty.judged} / failed {faulty.failed} / total {faulty.requests}"
        f"  ({'adds up' if faulty.judged + faulty.failed == faulty.requests else 'DOES NOT ADD UP'})"
    )
    print(
        f"  attempts {faulty.attempts} = {faulty.requests} + {extra_attempts} retries "
        f"({extra_attempts / faulty.requests:.1%} extra); server saw (warm-up wave included) "
        + ", ".join(f"{k} {v}" for k, v in sorted(served.items()))
    )
    print(
        f"  wall {faulty.wall_s:.2f} s vs {clean.wall_s:.2f} s fault-free "
        f"(+{faulty.wall_s - clean.wall_s:.2f} s, x{faulty.wall_s / clean.wall_s:.2f}); "
        f"p95 latency {percentile(faulty.latencies, 0.95) * 1000:.0f} ms vs "
        f"{percentile(clean.latencies, 0.95) * 1000:.0f} ms; mean {statistics.mean(faulty.latencies) * 1000:.0f} ms "
        f"vs {statistics.mean(clean.latencies) * 1000:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
