"""What the throughput benchmarks share: the bare client, a whole command timed phase by phase, the rows.

Not a benchmark itself: ``bench_api_concurrency.py`` (the ``eval`` command) and ``bench_build.py``
(``build responses``) import it (a script run by path has its own folder on ``sys.path``).

* :func:`run_bare_client`: the floor of a client inside a process, aiohttp alone keeping C POSTs in
  flight with bodies the benchmark made.
* :func:`command_child` and :func:`run_command`: a ``medrewardbench`` command in a fresh interpreter,
  timed from its launch to its exit, with the time spent inside named functions (wrapped by the
  child before the command starts) collected per phase, in wall and in CPU time. The phases are
  start-up (interpreter and imports), the benchmark's own phases, ``other`` (what no phase covers)
  and ``exit`` (after the command until the process ended); they add up to the command's wall
  and CPU time. Phases reported "in" another (store writes during the requests) are not summed.
  A function called on another thread than the main one counts that thread's own CPU time.
* :func:`add_command_row_options`: the benchmark's own options for those rows (skip them, profile).
* :func:`command_flags`: the flags that point a command at the local server, C requests in flight.
* :func:`run_child`: any child process timed from its launch to its exit (its CPU included), for
  the bare-client process that is the floor of the command row.
* :func:`bare_process_child`, :func:`write_template_json`, :func:`run_bare_process`: that bare-client
  process: each benchmark gives it the reading of its own data; the requests, the answers file and
  the count are the same.
* :func:`print_header`, :func:`print_level`, :func:`print_breakdown`, :func:`print_cpu`,
  :func:`print_profile`: the printed rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "add_command_row_options",
    "bare_process_child",
    "child_env",
    "command_child",
    "command_flags",
    "median_run",
    "ms",
    "percentile",
    "print_breakdown",
    "print_cpu",
    "print_header",
    "print_level",
    "print_profile",
    "run_bare_client",
    "run_bare_process",
    "run_child",
    "run_command",
    "write_template_json",
]

Phases = dict[str, tuple[float, float]]
"""Phase -> (wall s, cpu s)."""


class Figures(Protocol):
    """A run's figures as the printed rows read them."""

    requests: int
    wall_s: float
    cpu_s: float
    latencies: list[float]

    @property
    def rate(self) -> float: ...


_CHILD_PRELUDE = r"""
import inspect, json, os, sys, threading, time

started = float(os.environ["MRB_BENCH_T0"])
phases = {}  # phase -> [wall s, cpu s]
marks = {"entered": time.time()}


def cpu_clock():
    # the process's CPU on the main thread; a thread's own CPU in another (a read-ahead thread, say),
    # so that the main thread's work meanwhile is not counted twice
    return time.process_time if threading.current_thread() is threading.main_thread() else time.thread_time


def timed(owner, name, phase, first_only=False):
    original = getattr(owner, name)

    def add(t, c):
        spent = phases.setdefault(phase, [0.0, 0.0])
        spent[0] += time.perf_counter() - t
        spent[1] += cpu_clock()() - c

    async def awaited(coroutine, t, c):
        try:
            return await coroutine
        finally:
            add(t, c)

    def stepped(generator):
        # a generator function's work happens as it is iterated: each step counts
        while True:
            t, c = time.perf_counter(), cpu_clock()()
            try:
                item = next(generator)
            except StopIteration:
                add(t, c)
                return
            add(t, c)
            yield item

    def wrapper(*args, **kwargs):
        if first_only and phase in phases:
            return original(*args, **kwargs)
        t, c = time.perf_counter(), cpu_clock()()
        result = original(*args, **kwargs)
        if inspect.iscoroutine(result):
            return awaited(result, t, c)
        add(t, c)
        if inspect.isgenerator(result):
            return stepped(result)
        return result

    setattr(owner, name, wrapper)


def mark_imported():
    marks["imported"], marks["imported_cpu"] = time.time(), time.process_time()

"""

_CHILD_RUN = r"""
profile = os.environ.get("MRB_BENCH_PROFILE")
if profile:
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
sys.argv = ["medrewardbench", *sys.argv[1:]]
try:
    main()  # the console entry point, as the installed command runs it
except SystemExit as exit_:
    if exit_.code not in (None, 0):
        raise
finally:
    marks["left"], marks["left_cpu"] = time.time(), time.process_time()
    if profile:
        profiler.disable()
        profiler.dump_stats(profile)
    found = {
        "phases": phases,
        "startup": marks["imported"] - started,
        "startup_cpu": marks["imported_cpu"],
        "left": marks["left"],
        "left_cpu": marks["left_cpu"],
    }
    with open(os.environ["MRB_BENCH_PHASES"], "w") as handle:
        json.dump(found, handle)
"""


def command_child(imports: str, hooks: str) -> str:
    """The program of a timed command child, run with ``python -c PROGRAM ARGS...``.

    Args:
        imports: imports the start-up phase includes; must bind ``main`` (the console entry point)
            and whatever ``hooks`` wraps.
        hooks: ``timed(owner, "function", "phase")`` calls (``first_only=True`` counts the first
            call only), run after start-up is marked.

    Returns:
        The program: it runs ``medrewardbench ARGS...`` and writes its phases to the file named
        by ``MRB_BENCH_PHASES``; ``MRB_BENCH_PROFILE`` names a cProfile output to write.
    """
    return _CHILD_PRELUDE + imports.strip() + "\n\nmark_imported()\n" + hooks.strip() + "\n" + _CHILD_RUN


def add_command_row_options(parser: argparse.ArgumentParser, command: str) -> None:
    """``--no-command``, ``--no-process`` and ``--profile-command FILE`` of a benchmark with command rows.

    Args:
        parser: the benchmark's parser.
        command: the command the command rows run, as the help names it (``medrewardbench eval``).
    """
    parser.add_argument(
        "--no-command", action="store_true", help=f"skip the whole-command rows ({command} in a new process)"
    )
    parser.add_argument(
        "--no-process", action="store_true", help="skip the bare-process rows (the floor of the command rows)"
    )
    parser.add_argument(
        "--profile-command",
        metavar="FILE",
        help="write a cProfile of the last whole-command run to FILE (pstats format) and print its top functions",
    )


def command_flags(base_url: str, key_env: str, concurrency: int) -> list[str]:
    """The flags that send a command's requests to the local server, ``concurrency`` in flight, without progress.

    Args:
        base_url: the server's OpenAI-compatible endpoint.
        key_env: an environment variable left unset (the client then sends a placeholder key).
        concurrency: requests in flight.
    """
    return ["--base-url", base_url, "--api-key-env", key_env, "--concurrency", str(concurrency), "--quiet"]


def child_env(scratch: str) -> dict[str, str]:
    """The environment of the command and bare-process children: offline, bytecode cached in ``scratch``.

    An installed package has its bytecode compiled; with ``PYTHONDONTWRITEBYTECODE`` set (as some
    machines set it) a child would compile every module it imports on every run instead. Both
    children keep their bytecode under ``scratch/pycache`` (an untimed warm-up run writes it).
    """
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPYCACHEPREFIX=os.path.join(scratch, "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(argv: Sequence[str], env: dict[str, str], what: str) -> tuple[float, float, float]:
    """Run a child process to its end; ``(wall s, cpu s of the child, time.time() at its end)``.

    Raises:
        RuntimeError: the child failed (its output's end is in the message).
    """
    cpu_before = os.times()
    started = time.perf_counter()
    done = subprocess.run(list(argv), env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    ended = time.time()
    cpu_after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    cpu = (cpu_after.children_user - cpu_before.children_user) + (
        cpu_after.children_system - cpu_before.children_system
    )
    return wall, cpu, ended


_BARE_PROCESS_PRELUDE = r"""
import asyncio, base64, json, sys

import aiohttp

source, template_path, url, concurrency, out_path = sys.argv[1:6]
concurrency = int(concurrency)
with open(template_path, encoding="utf-8") as handle:
    template = json.load(handle)
"""

_BARE_PROCESS_RUN = r"""
async def main():
    answers = []
    headers = {"Content-Type": "application/json", "Authorization": "Bearer placeholder"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency + 16)) as session:
        work = bodies()

        async def worker():
            for key, body in work:
                async with session.post(url, data=body, headers=headers) as response:
                    payload = await response.json()
                if response.status != 200:
                    raise RuntimeError(f"bare process got HTTP {response.status}")
                answers.append({"id": key, "text": payload["choices"][0]["message"]["content"]})

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(answers, handle)


asyncio.run(main())
"""


def bare_process_child(reader: str) -> str:
    """The program of a bare-client process, the floor of a command row, run by :func:`run_bare_process`.

    A new interpreter that imports aiohttp, reads the data, sends the requests with C workers in
    flight and writes the answers to a JSON file: the same job as the command without the package.

    Args:
        reader: defines ``bodies()``, a generator of ``(id, request body bytes)`` read from ``source``
            (the data's path) and filled from ``template`` (the JSON of :func:`write_template_json`);
            it imports what it needs beyond ``asyncio``, ``base64``, ``json`` and ``sys``.

    Returns:
        The program, run with ``python -c PROGRAM SOURCE TEMPLATE URL CONCURRENCY ANSWERS``.
    """
    return _BARE_PROCESS_PRELUDE + "\n" + reader.strip() + "\n\n" + _BARE_PROCESS_RUN


def write_template_json(directory: str, template: dict[str, object]) -> str:
    """A prompt template as ``directory/template.json``, for the bare process to fill in; its path."""
    path = os.path.join(directory, "template.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(template, handle)
    return path


def run_bare_process(
    program: str, source: str, template_path: str, base_url: str, concurrency: int, count: int, env: dict[str, str]
) -> tuple[float, float]:
    """The bare-client process (:func:`bare_process_child`) from its launch to its exit: ``(wall s, cpu s)``.

    Raises:
        RuntimeError: it failed, or it answered other than ``count`` requests.
    """
    with tempfile.TemporaryDirectory(prefix="mrb-bench-bare-") as out:
        answers = os.path.join(out, "answers.json")
        url = base_url.rstrip("/") + "/chat/completions"
        argv = [sys.executable, "-c", program, source, template_path, url, str(concurrency), answers]
        wall, cpu, _ = run_child(argv, env, "bare process")
        with open(answers, encoding="utf-8") as handle:
            sent = len(json.load(handle))
    if sent != count:
        raise RuntimeError(f"bare process answered {sent} requests, expected {count}")
    return wall, cpu


def run_command(
    program: str,
    args: Sequence[str],
    env: dict[str, str],
    *,
    summed: Sequence[str],
    inner: Sequence[str] = (),
    profile: str | None = None,
) -> tuple[float, float, Phases]:
    """A ``medrewardbench`` command in a fresh process (:func:`command_child`), from its launch to its exit.

    Args:
        program: the child's program.
        args: the command's arguments (``eval --data ...``).
        env: the child's environment (:func:`child_env`).
        summed: the phases the hooks time that add up with start-up, other and exit.
        inner: phases timed inside others, reported beside them.
        profile: a file for a cProfile of the command.

    Returns:
        ``(wall s, cpu s, phases)``: phases are start-up, ``summed``, exit and other (the rest of
        the wall and CPU time), then ``inner``.
    """
    with tempfile.TemporaryDirectory(prefix="mrb-bench-cmd-") as out:
        phases_file = os.path.join(out, "phases.json")
        env = dict(env, MRB_BENCH_PHASES=phases_file)
        if profile:
            env["MRB_BENCH_PROFILE"] = profile
        env["MRB_BENCH_T0"] = repr(time.time())
        wall, cpu, ended = run_child([sys.executable, "-c", program, *args], env, f"command {args[0]}")
        with open(phases_file, encoding="utf-8") as handle:
            found = json.load(handle)
    timed = found["phases"]
    phases: Phases = {"start-up": (found["startup"], found["startup_cpu"])}
    for name in summed:
        wall_s, cpu_s = timed.get(name, (0.0, 0.0))
        phases[name] = (wall_s, cpu_s)
    phases["exit"] = (ended - found["left"], max(0.0, cpu - found["left_cpu"]))
    phases["other"] = (
        max(0.0, wall - sum(w for w, _ in phases.values())),
        max(0.0, cpu - sum(c for _, c in phases.values())),
    )
    for name in inner:
        wall_s, cpu_s = timed.get(name, (0.0, 0.0))
        phases[name] = (wall_s, cpu_s)
    return wall, cpu, phases


def run_bare_client(base_url: str, concurrency: int, bodies: Sequence[bytes]) -> tuple[list[float], float, float]:
    """The floor: aiohttp alone keeps ``concurrency`` POSTs in flight (after a warm-up wave).

    Returns:
        ``(latencies, wall s, cpu s)`` of the timed requests (all of ``bodies``).
    """
    import aiohttp

    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer placeholder"}

    async def main() -> tuple[list[float], float, float]:
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
            cpu = time.process_time()
            started = time.perf_counter()
            await asyncio.gather(*(one(body) for body in bodies))
            return latencies, time.perf_counter() - started, time.process_time() - cpu

    return asyncio.run(main())


def median_run(runs: Sequence[Figures]) -> Figures:
    """The median run by rate."""
    return sorted(runs, key=lambda f: f.rate)[len(runs) // 2]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(values: list[float], q: float) -> str:
    return f"{percentile(values, q) * 1000:.1f}" if values else "-"


def print_header(width: int = 7) -> None:
    """The column heads of :func:`print_level`'s rows (``width``: that of the client column, as there)."""
    print(
        f"{'conc':>5} {'client':>{width}} {'requests':>8} {'runs':>4} {'req/s':>8} {'bound':>7} {'ratio':>6} "
        f"{'ratio range':>13} {'p50 ms':>7} {'p95 ms':>7} {'cpu ms/req':>10} {'vs bare':>7} {'vs proc':>7}"
    )


def print_level(
    label: str,
    level: int,
    count: int,
    runs: Sequence[Figures],
    latency_s: float,
    bare: Sequence[Figures],
    process: Sequence[Figures] | None = None,
    *,
    width: int = 7,
) -> None:
    """One row: the median run of ``runs`` by rate, with the range of ratios over all of them.

    ``vs bare`` is the median run's rate over the median bare run's in the same call ("-" without one);
    ``vs proc`` the same over the median bare process's, for the rows given ``process``.
    """
    bound = level / latency_s
    ordered = sorted(runs, key=lambda f: f.rate)
    median = median_run(runs)
    spread = f"{ordered[0].rate / bound:.1%}..{ordered[-1].rate / bound:.1%}" if len(runs) > 1 else "-"
    versus = f"{median.rate / median_run(bare).rate:.3f}" if bare else "-"
    versus_process = f"{median.rate / median_run(process).rate:.3f}" if process else "-"
    print(
        f"{level:>5} {label:>{width}} {count:>8} {len(runs):>4} {median.rate:>8.1f} {bound:>7.0f} "
        f"{median.rate / bound:>6.1%} {spread:>13} {ms(median.latencies, 0.5):>7} {ms(median.latencies, 0.95):>7} "
        f"{median.cpu_s / count * 1000:>10.2f} {versus:>7} {versus_process:>7}"
    )


def print_breakdown(
    level: int,
    runs: Sequence[tuple[Figures, Phases]],
    order: Sequence[str],
    inner: Sequence[tuple[str, str]],
    within: str,
) -> None:
    """Where the median whole-command run's time went, phase by phase: wall time, then CPU time.

    Args:
        level: the concurrency.
        runs: each run's figures and phases (:func:`run_command`).
        order: the summed phases in the order to print them.
        inner: (phase, printed name) of the phases timed inside ``within``.
        within: the phase they are part of.
    """
    figures, phases = sorted(runs, key=lambda r: r[0].rate)[len(runs) // 2]
    for index, what, total in ((0, "", figures.wall_s), (1, " cpu", figures.cpu_s)):
        parts = ", ".join(f"{name} {phases[name][index]:.2f}" for name in order if name in phases)
        notes = ", ".join(f"{shown} {phases[name][index]:.2f} s" for name, shown in inner)
        print(f"      command{what} at {level}: {total:.2f} s = {parts} ({notes} of {within})")


def print_cpu(level: int, rows: dict[str, Sequence[Figures]], pairs: Sequence[tuple[str, str]]) -> None:
    """CPU time per 1,000 requests of each row's median run, beside its floor (the bare client or process)."""

    def per_thousand(runs: Sequence[Figures]) -> float:
        median = median_run(runs)
        return median.cpu_s / median.requests * 1000

    parts = []
    for label, floor in pairs:
        if rows.get(label) and rows.get(floor):
            mine, least = per_thousand(rows[label]), per_thousand(rows[floor])
            parts.append(f"{label} {mine:.2f} s vs {floor} {least:.2f} s (x{mine / least:.2f})")
    if parts:
        print(f"      cpu per 1,000 requests at {level}: " + "; ".join(parts))


def print_profile(path: str) -> None:
    """The top functions by cumulative time of the cProfile at ``path`` (the whole command's)."""
    import pstats

    print(f"\nwhole command, top functions by cumulative time ({path}):")
    pstats.Stats(path, stream=sys.stdout).sort_stats("cumulative").print_stats(30)
