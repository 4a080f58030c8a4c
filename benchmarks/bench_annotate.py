"""Annotation app under load: N simulated doctors submit labels over HTTP against SQLite, and the
server is killed with SIGKILL mid-run.

Each simulated annotator does what a browser does: logs in through the form, opens each case page
of its queue, and posts the form (six A/B choices, the CSRF token, the signed page time). The
submit latency is the time from sending the POST to its ``303`` (the label is committed by then).
At ``--kill-at`` of the planned submits the server process gets SIGKILL; every submit that was
acknowledged before is then looked up in the database, and any that is missing or different counts
as lost. The server is started again on the same project and the annotators carry on with their
sessions (which live in the database) until every queue is done.

    python benchmarks/bench_annotate.py                # 30 annotators, 300 cases x 3, ~1 s per case
    python benchmarks/bench_annotate.py --think 0      # no pause at all: the server's saturation
    python benchmarks/bench_annotate.py --quick        # a few seconds, for the smoke test

The default pause of about a second between opening a case and submitting it makes each simulated
doctor some 30 times faster than a real one (who reads an image and two answers), so 30 of them
are a heavy load; ``--think 0`` shows what the server does when nobody pauses at all.

Prints the project size, p50/p95/p99/max submit latency in ms, submits per second, and the lost
labels after the kill (goal: p95 < 100 ms, 0 lost).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

DIMENSIONS = ("accuracy", "relevance", "comprehensiveness", "creativity", "responsiveness", "overall")
PASSWORD = "benchmark-password"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
OPENED = re.compile(r'name="opened" value="([^"]+)"')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_project(workdir: Path, cases: int, annotators: int, per_case: int) -> Path:
    """A project with ``cases`` pairs (CT images shipped by pydicom) and ``annotators`` users."""
    from medrewardbench.annotate.service import Identity, create_project

    rows = []
    images = ("pydicom:CT_small.dcm", "pydicom:MR_small.dcm", "skimage:retina")
    for index in range(cases):
        rows.append(
            {
                "id": f"bench-{index:05d}",
                "image": {"builtin": images[index % len(images)]},
                "question": f"Question {index}: what is the most likely finding?",
                "response_1": f"A short answer to question {index}.",
                "response_2": f"A longer, more detailed answer to question {index}, with a differential.",
                "organ_system": "chest",
            }
        )
    source = workdir / "pairs.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    directory = workdir / "project"
    project = create_project(directory, cases=str(source), per_case=per_case, seed=1)
    cli = Identity.command_line()
    names = [f"doctor{index:02d}" for index in range(annotators)]
    # password hashing (argon2) is deliberately slow; the users are added one by one, as in real use
    for name in names:
        project.add_user(cli, name, "annotator", PASSWORD)
    project.close()
    return directory


def start_server(directory: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "medrewardbench.cli", "annotate", "serve", str(directory)]
    command += ["--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited early; see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/login", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the server did not start within 60 s")


class Run:
    """Shared state of one benchmark run."""

    def __init__(self, base: str, think: float, kill_after: int, seed: int):
        self.base = base
        self.think = think
        self.kill_after = kill_after
        self.rng = random.Random(seed)
        self.latencies: list[float] = []
        self.acknowledged: dict[str, dict[str, str]] = {}
        self.acknowledged_before_kill = 0
        self.killed = asyncio.Event()
        self.server_back = asyncio.Event()
        self.errors = 0


async def annotator(run: Run, name: str) -> None:
    async with httpx.AsyncClient(base_url=run.base, timeout=60, follow_redirects=False) as client:
        page = await client.get("/login")
        token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
        response = await client.post("/login", data={"username": name, "password": PASSWORD, "csrf_token": token})
        assert response.status_code == 303, response.text[:300]
        queue = await client.get("/queue")
        todo = re.findall(r'href="/a/([\w-]+)">Label<', queue.text)
        for pid in todo:
            while True:
                try:
                    page = await client.get(f"/a/{pid}")
                    if page.status_code != 200:
                        raise SystemExit(f"{name}: GET /a/{pid} answered {page.status_code}: {page.text[:300]}")
                    fields = {
                        "csrf_token": CSRF.search(page.text).group(1),  # type: ignore[union-attr]
                        "opened": OPENED.search(page.text).group(1),  # type: ignore[union-attr]
                    }
                    choices = {f"dim_{dim}": run.rng.choice("AB") for dim in DIMENSIONS}
                    if run.think:
                        await asyncio.sleep(run.rng.uniform(0.5, 1.5) * run.think)
                    started = time.perf_counter()
                    response = await client.post(f"/a/{pid}", data={**fields, **choices, "seconds": "20"})
                    elapsed = time.perf_counter() - started
                except httpx.HTTPError:
                    # the server was killed: wait for it to come back, then try this case again
                    await run.server_back.wait()
                    continue
                if response.status_code != 303:
                    run.errors += 1
                    break
                run.latencies.append(elapsed)
                run.acknowledged[pid] = {dim: choices[f"dim_{dim}"] for dim in DIMENSIONS}
                if len(run.acknowledged) >= run.kill_after and not run.killed.is_set():
                    run.killed.set()
                break


def count_lost(directory: Path, acknowledged: dict[str, dict[str, str]]) -> int:
    """Acknowledged submits whose labels are not in the database as acknowledged (as shown: A/B)."""
    import sqlite3

    connection = sqlite3.connect(directory / "project" / "annotate.db")
    try:
        rows = connection.execute(
            "SELECT a.public_id, s.shown_choices FROM assignments a JOIN submissions s ON s.assignment_id = a.id"
        ).fetchall()
    finally:
        connection.close()
    stored = {pid: json.loads(shown) for pid, shown in rows}
    return sum(1 for pid, choices in acknowledged.items() if stored.get(pid) != choices)


async def drive(directory: Path, annotators: int, think: float, kill_at: float, total: int, workdir: Path) -> dict:
    port = free_port()
    log = workdir / "server.log"
    server = start_server(directory / "project", port, log)
    run = Run(f"http://127.0.0.1:{port}", think, max(1, int(total * kill_at)), seed=7)
    names = [f"doctor{index:02d}" for index in range(annotators)]
    started = time.perf_counter()
    tasks = [asyncio.create_task(annotator(run, name)) for name in names]

    async def killer() -> None:
        nonlocal server
        await run.killed.wait()
        os.kill(server.pid, signal.SIGKILL)
        await asyncio.to_thread(server.wait)
        run.acknowledged_before_kill = len(run.acknowledged)
        snapshot = dict(run.acknowledged)
        run.lost = count_lost(directory, snapshot)  # type: ignore[attr-defined]
        server = await asyncio.to_thread(start_server, directory / "project", port, log)
        run.server_back.set()

    kill_task = asyncio.create_task(killer())
    try:
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - started
        if not run.killed.is_set():
            kill_task.cancel()
            run.lost = 0  # type: ignore[attr-defined]
        else:
            await kill_task
    finally:
        kill_task.cancel()
        for task in tasks:
            task.cancel()
        # whichever server process is current (the first, or the one started after the kill)
        server.terminate()
        server.wait(timeout=30)
    lost_at_end = count_lost(directory, run.acknowledged)
    return {
        "latencies": run.latencies,
        "wall": wall,
        "acknowledged": len(run.acknowledged),
        "before_kill": run.acknowledged_before_kill,
        "lost": run.lost,  # type: ignore[attr-defined]
        "lost_at_end": lost_at_end,
        "errors": run.errors,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q / 100 * (len(ordered) - 1)))))
    return ordered[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--annotators", type=int, default=30)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--per-case", type=int, default=3)
    parser.add_argument("--think", type=float, default=1.0, help="mean seconds between opening and submitting a case")
    parser.add_argument("--kill-at", type=float, default=0.5, help="share of the submits after which to SIGKILL")
    parser.add_argument("--quick", action="store_true", help="6 annotators, 24 cases, 0.1 s think time: seconds")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the project here (default: a temp dir)")
    args = parser.parse_args()
    if args.quick:
        args.annotators, args.cases, args.think = 6, 24, 0.1
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-annotate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        directory = workdir
        make_project(directory, args.cases, args.annotators, args.per_case)
        total = args.cases * min(args.per_case, args.annotators)
        print(
            f"project: {args.cases} cases x {min(args.per_case, args.annotators)} annotators = {total} labels, "
            f"{args.annotators} annotators, SQLite (WAL, synchronous=FULL); set up in {time.perf_counter() - t0:.1f} s"
        )
        result = asyncio.run(drive(directory, args.annotators, args.think, args.kill_at, total, workdir))
        latencies_ms = [1000 * value for value in result["latencies"]]
        print(
            f"submits: {len(latencies_ms)} acknowledged in {result['wall']:.1f} s "
            f"({len(latencies_ms) / result['wall']:.1f}/s), think time {args.think:g} s, errors {result['errors']}"
        )
        print(
            f"submit latency ms: p50 {statistics.median(latencies_ms):.1f}  p95 {percentile(latencies_ms, 95):.1f}  "
            f"p99 {percentile(latencies_ms, 99):.1f}  max {max(latencies_ms):.1f}"
        )
        print(
            f"kill -9 after {result['before_kill']} acknowledged submits: lost {result['lost']} "
            f"(after the restart and the rest of the run: {result['lost_at_end']} lost of {result['acknowledged']})"
        )
        goal = percentile(latencies_ms, 95) < 100 and result["lost"] == 0 and result["lost_at_end"] == 0
        print(f"goal p95 < 100 ms and 0 lost: {'met' if goal else 'NOT met'}")
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
