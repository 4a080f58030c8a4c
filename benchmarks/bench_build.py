"""Throughput of free-text generation (``build responses``) against a local OpenAI-compatible server.

With a server latency L and C requests in flight, no client can exceed C / L requests per second;
this prints how close the builder's generation comes at several concurrency levels, beside a bare
client and a bare-client process, as ``bench_api_concurrency.py`` does for judges. Rows per level:

* build: the generation phase of the ``build responses`` step
  (:func:`medrewardbench.curation.pool.run_responses`): questions streamed from the project store
  chunk by chunk, each with its own image, the answer prompt, the API request machinery shared with
  the judge, every answer stored in SQLite as its batch finishes. Timed from the generator's start
  to its end.
* generator: the same generator (:class:`~medrewardbench.curation.generators.ApiTextGenerator`)
  driven directly with C requests in flight, nothing stored.
* command: the whole ``medrewardbench build responses`` command in a new process on the same
  project, a new generator each run (nothing reused), timed from its launch to its exit. Below the
  rows, where its time went, phase by phase in wall and CPU time: start-up (interpreter and
  imports), opening (the project's lock and store), planning (the generator, its registration and
  the store's counts before and after the requests), generating (the requests, with the question
  reads and the store writes they include, printed beside it), other (options, template, printing)
  and exit (``--profile-command FILE`` adds a cProfile of it). The question reads run in the
  read-ahead thread (:class:`~medrewardbench.curation.generation.ReadAhead`): their wall time is
  that thread's, beside the requests rather than in their way, and their CPU time the thread's own.
* bare: a bare client (aiohttp alone: no openai library, no prompt, no store) sending bodies of the
  same size to the same server. Its ratio is the most this machine and server allow.
* process: the bare client as a whole process, the floor of the command row: a new interpreter
  that imports aiohttp, reads the same questions and images from the project's SQLite file, sends
  the same prompt and writes the answers to a JSON file, timed from its launch to its exit.

Every row prints ``vs bare`` (its rate over the bare client's in the same call); the command and
process rows also ``vs proc`` (over the bare process's). The goals at concurrency 64, 100 ms and
about 3,000 requests (issue 20): the generation phase (``build``) >= 0.97 of the bare client; the
whole command >= 0.90 of the bare process (``vs proc`` of the command row). Both children run with
their bytecode compiled (``PYTHONPYCACHEPREFIX`` in the scratch directory, written by an untimed
warm-up run of each), as an installed package has it.

The server runs in a child process (``--answer-mode free-text``), so that its work does not compete
with the client for the interpreter lock. Each level runs ``--repeat`` times, the rows interleaved;
the median is the figure and the range shows the machine's noise.

Usage::

    python benchmarks/bench_build.py
    python benchmarks/bench_build.py --quick
    python benchmarks/bench_build.py --levels 8,64 --latency 0.1 --requests-per-slot 40 --repeat 3
    python benchmarks/bench_build.py --levels 64 --requests-per-slot 47 --max-requests 3000 --repeat 3
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
from dataclasses import dataclass, field
from pathlib import Path

from command_rows import (
    Phases,
    add_command_row_options,
    bare_process_child,
    child_env,
    command_child,
    command_flags,
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

from medrewardbench.curation.generation import GenerationProgress, GenerationSummary, answer_request
from medrewardbench.curation.generators import ANSWER_FORMATS, ApiTextGenerator, load_answer_template
from medrewardbench.curation.importer import import_questions
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project, store_path
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


def make_project(scratch: Path, name: str, count: int) -> Path:
    """A project with ``count`` imported questions."""
    project = scratch / name
    with open_project(project, create=True) as store:
        import_questions(store, str(write_questions(scratch / f"questions-{name}", count)))
    return project


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
    """The generation phase of ``build responses`` for one new generator configuration (nothing reused)."""
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


def run_bare(base_url: str, concurrency: int, bodies: list[bytes]) -> Figures:
    """The floor: aiohttp alone keeps ``concurrency`` POSTs in flight (after a warm-up wave)."""
    latencies, wall, cpu = run_bare_client(base_url, concurrency, bodies)
    return Figures(len(bodies), wall, cpu, 0, latencies)


COMMAND_CHILD = command_child(
    imports="""
from medrewardbench.cli.main import main
import medrewardbench.curation.generation as generation
from medrewardbench.curation.generators import ApiTextGenerator
from medrewardbench.curation.store import BuildStore
from medrewardbench.utils.outdir import OutputLock
""",
    hooks="""
timed(OutputLock, "acquire", "opening")
timed(BuildStore, "__init__", "opening")
timed(BuildStore, "close", "opening")
timed(ApiTextGenerator, "__init__", "planning")
for name in ("active_filter", "count_questions", "add_to_pool", "register_generator", "delete_generations",
             "distinct_hashes", "generation_counts", "failure_reasons", "pool", "count_decisions"):
    timed(BuildStore, name, "planning")
timed(generation, "run_requests", "generating")
for name in ("iter_questions", "generations", "images"):
    timed(BuildStore, name, "question reads (in generating)")
timed(BuildStore, "write_generations", "store writes (in generating)")
""",
)
"""Runs ``medrewardbench build responses`` in a fresh interpreter and times its phases from inside."""

COMMAND_PHASES = ("start-up", "opening", "planning", "generating", "other", "exit")
INNER_PHASES = (("question reads (in generating)", "question reads"), ("store writes (in generating)", "store writes"))


def run_command_level(
    project: Path, base_url: str, concurrency: int, count: int, model: str, env: dict[str, str], profile: str | None
) -> tuple[Figures, Phases]:
    """The whole ``medrewardbench build responses`` command for a new generator, from its launch to its exit."""
    args = [
        "build",
        "responses",
        str(project),
        "--generator",
        f"api:{model}",
        *command_flags(base_url, KEY_ENV, concurrency),
    ]
    wall, cpu, phases = run_command(
        COMMAND_CHILD,
        args,
        env,
        summed=COMMAND_PHASES[1:-2],
        inner=[name for name, _ in INNER_PHASES],
        profile=profile,
    )
    with open_project(project, lock=False) as store:
        fingerprint = next(fp for fp, spec in store.pool() if spec == f"api:{model}")
        answered, failed = store.generation_counts(fingerprint, kept_only=False, with_reference=False)
    if answered != count:
        raise RuntimeError(f"build responses stored {answered} answers, expected {count}")
    return Figures(count, wall, cpu, failed), phases


BARE_PROCESS_CHILD = bare_process_child(
    r"""
import sqlite3


def bodies():
    db = sqlite3.connect(source)
    rows = db.execute(
        "SELECT q.qid, q.question, q.answer_type, i.data FROM questions q "
        "LEFT JOIN images i ON i.sha256 = q.image_ref ORDER BY q.seq"
    )
    for qid, question, answer_type, data in rows:
        mime = "image/png" if data[:4] == b"\x89PNG" else "image/jpeg"
        image_url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
        text = template["user"].replace("{{question}}", question)
        text = text.replace("{{answer_format}}", template["formats"][answer_type])
        user = [{"type": "image_url", "image_url": {"url": image_url}}, {"type": "text", "text": text}]
        messages = [{"role": "system", "content": template["system"]}, {"role": "user", "content": user}]
        yield qid, json.dumps({"model": "bench-bare", "messages": messages, "seed": 0}).encode()
    db.close()
"""
)
"""The floor of the whole command: a bare aiohttp client as a process, doing the same job without the package."""


def write_template(directory: str) -> str:
    """The answer prompt as JSON (system and user text, answer formats), for the bare process to fill in."""
    template = load_answer_template()
    return write_template_json(directory, {"system": template.system, "user": template.user, "formats": ANSWER_FORMATS})


def run_process_level(
    project: Path, base_url: str, concurrency: int, count: int, template_path: str, env: dict[str, str]
) -> Figures:
    """The bare client as a whole process on the same project file, from its launch to its exit."""
    source = str(store_path(project))
    wall, cpu = run_bare_process(BARE_PROCESS_CHILD, source, template_path, base_url, concurrency, count, env)
    return Figures(count, wall, cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,8,64", help="comma-separated concurrency levels")
    parser.add_argument("--latency", type=float, default=0.1, help="server latency in seconds")
    parser.add_argument("--requests-per-slot", type=int, default=30, help="requests per unit of concurrency")
    parser.add_argument("--min-requests", type=int, default=20)
    parser.add_argument("--max-requests", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per level; the median is reported")
    parser.add_argument("--quick", action="store_true", help="levels 1,8, latency 50 ms, one run each (seconds)")
    add_command_row_options(parser, "build responses")
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
    print_header(width=9)
    with (
        tempfile.TemporaryDirectory(prefix="mrb-bench-build-") as scratch,
        ServerProcess(ServerSettings(latency_s=args.latency, answer_mode="free_text")) as server,
    ):
        base_url = server.base_url
        env = child_env(scratch)
        template_path = write_template(scratch)
        projects = {
            count: make_project(Path(scratch), f"project-{count}", count) for count in sorted(set(counts.values()))
        }
        # untimed: this process's lazy imports (the HTTP client's among them) happen once, before the rows;
        # the command row pays its own in every run
        warm = make_project(Path(scratch), "warm", 8)
        run_build(warm, base_url, 4, "bench-warm")
        if not (args.no_command and args.no_process):
            # untimed: compiles both children's bytecode into the cache and warms the page cache
            if not args.no_command:
                run_command_level(warm, base_url, 4, 8, "bench-warm-command", env, None)
            if not args.no_process:
                run_process_level(warm, base_url, 4, 8, template_path, env)
        failed = 0
        for level in levels:
            count = counts[level]
            project = projects[count]
            build_runs: list[Figures] = []
            generator_runs: list[Figures] = []
            bare_runs: list[Figures] = []
            process_runs: list[Figures] = []
            command_runs: list[tuple[Figures, Phases]] = []
            for repeat in range(max(1, args.repeat)):  # interleaved, so that drift in the machine hits all
                build_runs.append(run_build(project, base_url, level, f"bench-c{level}-r{repeat}"))
                direct, bodies = run_generator(project, base_url, level, count)
                generator_runs.append(direct)
                bare_runs.append(run_bare(base_url, level, bodies))
                if not args.no_command:
                    last = repeat == max(1, args.repeat) - 1
                    profile = args.profile_command if last else None
                    model = f"bench-command-c{level}-r{repeat}"
                    command_runs.append(run_command_level(project, base_url, level, count, model, env, profile))
                if not args.no_process:
                    process_runs.append(run_process_level(project, base_url, level, count, template_path, env))
            commands = [figures for figures, _ in command_runs]
            failed += sum(f.failed for f in build_runs + generator_runs + commands)
            print_level("build", level, count, build_runs, args.latency, bare_runs, width=9)
            print_level("generator", level, count, generator_runs, args.latency, bare_runs, width=9)
            if command_runs:
                print_level("command", level, count, commands, args.latency, bare_runs, process_runs, width=9)
            print_level("bare", level, count, bare_runs, args.latency, bare_runs, width=9)
            if process_runs:
                print_level("process", level, count, process_runs, args.latency, bare_runs, process_runs, width=9)
            if command_runs:
                print_breakdown(level, command_runs, COMMAND_PHASES, INNER_PHASES, "generating")
            print_cpu(
                level,
                {"build": build_runs, "generator": generator_runs, "bare": bare_runs, "command": commands,
                 "process": process_runs},
                (("build", "bare"), ("generator", "bare"), ("command", "process")),
            )  # fmt: skip
    if failed:
        print(f"! {failed} requests failed")
    print(
        "bound = concurrency / latency; ratio = the median run's req/s over the bound; build = the generation phase "
        "of the 'build responses' step (questions streamed from the project store, the answer prompt, the shared "
        "API request machinery, every answer stored in SQLite); generator = ApiTextGenerator alone; command = the "
        "whole 'medrewardbench build responses' command in a new process, from its launch to its exit; bare = "
        "aiohttp alone with bodies of the same size, the most this machine and server allow; process = the bare "
        "client as a whole process on the same project file (start-up, reading, requests, writing the answers), "
        "the floor of the command row; vs bare = the median run's req/s over the bare client's in the same call "
        "(goal for build: >= 0.97); vs proc = the same over the bare process's (goal for command: >= 0.90)"
    )
    if args.profile_command and not args.no_command:
        print_profile(args.profile_command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
