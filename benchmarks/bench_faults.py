"""Crash and resume: SIGKILL a real ``eval`` with many API judges at random points, then finish it.

The command judges a generated data set with ``--judges`` API judges (``api:m0``, ``api:m1``, ...)
against the local OpenAI-compatible test server (in a thread of this process, with a random latency
per answer; it records every request it receives). Each attempt starts the same command again,
which resumes from the store, and is killed with SIGKILL after a random delay; after ``--kills``
kills a last attempt runs to completion. Then, from the server's record and the store:

* lost: requests of the command that the final store does not hold (goal: 0);
* duplicated: requests sent although the store already held their judgment, or sent twice within
  one attempt (goal: 0);
* wasted: requests sent whose answer was not stored because the kill came first. They are sent again
  by the next attempt; the goal is that no more were wasted at a kill than were in flight then
  (at most ``--concurrency``, the requests one judge keeps in flight).

At each kill the server's view is printed too: requests it had received and not yet answered
(in flight), and those it had answered whose judgment the store does not hold (answers on the wire).

Usage::

    python benchmarks/bench_faults.py                 # 16 judges, 20 kills
    python benchmarks/bench_faults.py --quick         # 3 judges, 8 cases, 3 kills: a smoke run
    python benchmarks/bench_faults.py --judges 8 --cases 40 --kills 10 --seed 3
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import medrewardbench
from medrewardbench.testing.openai_server import OpenAIServer, RecordedRequest

KEY_ENV = "MRB_BENCH_UNSET_KEY"  # left unset: the judge sends a placeholder key to the local server
Key = tuple[str, str, str]
"""(judge spec, case id, order)."""


@dataclass
class Attempt:
    number: int
    killed_at_s: float | None
    stored_before: int
    stored_after: int
    sent: int
    wasted: int
    duplicated: int
    in_flight: int
    answered_not_stored: int


def make_dataset(directory: Path, n: int) -> Path:
    """``n`` labelled cases in canonical JSONL, each with its own small PNG beside the file."""
    from PIL import Image

    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        buffer = io.BytesIO()
        Image.new("RGB", (32, 32), (i % 256, (i * 7) % 256, 90)).save(buffer, format="PNG")
        (directory / f"img{i}.png").write_bytes(buffer.getvalue())
        rows.append(
            {
                "id": f"c{i:04d}",
                "image": f"img{i}.png",
                "question": f"Question {i}: what does the scan show?",
                "response_1": f"first answer {i}",
                "response_2": f"second, longer answer {i}",
                "labels": {"overall": 1 + i % 2},
                "organ_system": "chest",
            }
        )
    path = directory / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def request_key(record: RecordedRequest) -> Key:
    """The (judge, case, order) a request was about, read from its body."""
    body = record.body or {}
    text = record.user_text()
    match = re.search(r"Question (\d+):", text)
    if match is None:
        raise RuntimeError(f"unrecognised request: {text[:200]!r}")
    shown_first = text.split("[Answer A]", 1)[1].strip()
    order = "original" if shown_first.startswith("first") else "swapped"
    return f"api:{body.get('model')}", f"c{int(match.group(1)):04d}", order


def stored(out: Path) -> set[Key]:
    """Every judgment in the store, by judge spec."""
    db = out / "medrewardbench.sqlite"
    if not db.exists():
        return set()
    for _ in range(50):
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
                rows = conn.execute(
                    """SELECT DISTINCT r.judge_spec, j.case_id, j.order_ FROM judgments j
                       JOIN runs r ON r.judge_fingerprint = j.judge_fingerprint"""
                ).fetchall()
            return {(r[0], r[1], r[2]) for r in rows}
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return set()  # killed while the store was being created
            time.sleep(0.05)
    raise RuntimeError(f"cannot read {db}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=16)
    parser.add_argument("--cases", type=int, default=64)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, nargs=2, default=(0.05, 0.15), metavar=("MIN", "MAX"))
    parser.add_argument("--max-delay", type=float, default=3.0, help="longest wait before a kill, seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="3 judges, 8 cases, 3 kills, concurrency 2")
    args = parser.parse_args()
    if args.quick:
        args.judges, args.cases, args.kills, args.concurrency, args.max_delay = 3, 8, 3, 2, 2.5
    rng = random.Random(args.seed)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mrb-faults-"))
    data = make_dataset(work / "data", args.cases)
    out = work / "out"
    specs = [f"api:m{i}" for i in range(args.judges)]
    needed = {
        (spec, f"c{i:04d}", order) for spec in specs for i in range(args.cases) for order in ("original", "swapped")
    }
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop(KEY_ENV, None)
    src = str(Path(medrewardbench.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])

    print(
        f"{args.judges} API judges x {args.cases} cases x 2 orders = {len(needed)} requests; concurrency "
        f"{args.concurrency}; server latency {args.latency[0] * 1000:.0f}-{args.latency[1] * 1000:.0f} ms; "
        f"{args.kills} kills after a random 0-{args.max_delay:g} s, then a run to completion; seed {args.seed}"
    )
    print(f"work dir: {work}")
    print(f"{'attempt':>7} {'killed at s':>11} {'stored':>13} {'sent':>5} {'wasted':>6} {'dup':>4} "
          f"{'in flight':>9} {'answered, not stored':>20}")  # fmt: skip
    attempts: list[Attempt] = []
    with OpenAIServer() as server:
        control = server.control
        control.set_latency(args.latency[0], args.latency[1], seed=args.seed)
        command = [sys.executable, "-m", "medrewardbench.cli", "eval", "--data", str(data), "--out", str(out),
                   "--base-url", server.base_url, "--api-key-env", KEY_ENV, "--concurrency", str(args.concurrency),
                   "--quiet", *[flag for spec in specs for flag in ("--judge", spec)]]  # fmt: skip
        for number in range(1, args.kills + 2):
            final = number == args.kills + 1
            before = stored(out)
            control.clear_requests()
            proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            killed_at: float | None = None
            in_flight = answered = 0
            if not final:
                delay = rng.uniform(0.0, args.max_delay)
                try:
                    proc.wait(timeout=delay)
                except subprocess.TimeoutExpired:
                    received = len(control.chat_requests())
                    answered = control.counters.get("ok", 0)
                    proc.send_signal(signal.SIGKILL)
                    killed_at = delay
                    in_flight = received - answered
            _, err = proc.communicate(timeout=600)
            # the server still answers what the killed process had sent: let it, so that those answers
            # are not counted as the next attempt's
            deadline = time.monotonic() + 10 * args.latency[1] + 5
            while sum(control.counters.values()) < len(control.chat_requests()) and time.monotonic() < deadline:
                time.sleep(0.01)
            if killed_at is None and proc.returncode != 0:
                raise SystemExit(f"attempt {number} failed (exit {proc.returncode}):\n{err[-3000:]}")
            after = stored(out)
            sent = [request_key(r) for r in control.chat_requests()]
            counts = Counter(sent)
            duplicated = sum(1 for key in sent if key in before) + sum(n - 1 for n in counts.values() if n > 1)
            newly = after - before
            wasted = sum(1 for key in counts if key not in after)
            answered_not_stored = max(0, answered - len(newly)) if killed_at is not None else 0
            attempt = Attempt(number, killed_at, len(before), len(after), len(sent), wasted, duplicated,
                              in_flight, answered_not_stored)  # fmt: skip
            attempts.append(attempt)
            shown_at = "completed" if killed_at is None else f"{killed_at:.2f}"
            print(f"{number:>7} {shown_at:>11} {len(before):>6}->{len(after):>5} {len(sent):>5} {wasted:>6} "
                  f"{duplicated:>4} {in_flight:>9} {answered_not_stored:>20}")  # fmt: skip
            if killed_at is None and not final:
                print(f"        (attempt {number} finished before its kill; nothing left to kill)")
                break

    final_store = stored(out)
    lost = len(needed - final_store)
    duplicated = sum(a.duplicated for a in attempts)
    wasted = sum(a.wasted for a in attempts)
    sent = sum(a.sent for a in attempts)
    kills = [a for a in attempts if a.killed_at_s is not None]
    worst = max((a.wasted for a in kills), default=0)
    within = all(a.wasted <= args.concurrency for a in kills)
    print()
    print(f"kills: {len(kills)}; requests needed {len(needed)}, sent {sent} = {sent - wasted} stored + {wasted} wasted")
    print(f"lost: {lost}")
    print(f"duplicated: {duplicated}")
    print(
        f"wasted: {wasted} over {len(kills)} kills; at most {worst} at one kill "
        f"({'<=' if within else '>'} concurrency {args.concurrency}, the requests one judge keeps in flight)"
    )
    print(
        f"server view at the kills: {sum(a.in_flight for a in kills)} in flight, "
        f"{sum(a.answered_not_stored for a in kills)} answered but not stored"
    )
    verdict = "PASS" if lost == 0 and duplicated == 0 and within else "FAIL"
    print(f"result: {verdict} (goal: 0 lost, 0 duplicated, wasted <= in flight at each kill)")
    if verdict != "PASS":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
