"""The benchmark scripts run end to end at a tiny size, so that they cannot rot between releases.

Each runs as its users run it (``python benchmarks/NAME.py ...`` in a fresh process) and its
printed figures are read back; the sizes are cut down so that together they take seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_script(name: str, *args: str, timeout: float = 240) -> str:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_api_concurrency_benchmark_prints_ratios_for_judge_eval_and_bare_client_and_fault_accounting() -> None:
    out = run_script(
        "bench_api_concurrency.py",
        "--levels", "1,4",
        "--latency", "0.02",
        "--requests-per-slot", "5",
        "--repeat", "2",
        "--fault-concurrency", "8",
        "--fault-requests", "24",
        "--retry-after", "0.05",
    )  # fmt: skip
    clients = ("judge", "eval", "command", "bare", "process")
    row = r"^\s+(\d+)\s+(judge|eval|command|bare|process)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)%"
    rows = re.findall(row, out, re.MULTILINE)
    assert {(level, client) for level, client, *_ in rows} == {
        (level, client) for level in ("1", "4") for client in clients
    }, out
    # every row against the bare client of the same call, the command and the bare process also against
    # the bare process; the whole command's phases add up to its wall time and to its CPU time
    versus = {
        client: (float(bare), None if process == "-" else float(process))
        for client, bare, process in re.findall(
            r"^\s+4\s+(judge|eval|command|bare|process)\s.*\s([\d.]+)\s+(-|[\d.]+)$", out, re.MULTILINE
        )
    }
    assert set(versus) == set(clients), out
    assert versus["bare"][0] == 1.0 and versus["process"][1] == 1.0, out
    assert all(bare > 0 for bare, _ in versus.values()), out
    assert versus["command"][1] is not None and versus["command"][1] > 0, out
    assert versus["judge"][1] is None and versus["eval"][1] is None, out
    for what in ("", " cpu"):
        breakdown = re.search(rf"command{what} at 4: ([\d.]+) s = (.*) \(store writes", out)
        assert breakdown is not None, out
        phases = dict((name, float(value)) for name, value in re.findall(r"([a-z-]+) ([\d.]+)", breakdown.group(2)))
        assert set(phases) == {
            "start-up",
            "loading",
            "hashing",
            "planning",
            "judging",
            "analysis",
            "outputs",
            "other",
            "exit",
        }
        assert abs(sum(phases.values()) - float(breakdown.group(1))) < 0.1
    cpu = re.search(r"cpu per 1,000 requests at 4: judge ([\d.]+) s vs bare ([\d.]+) s .* command ([\d.]+) s vs", out)
    assert cpu is not None and all(float(value) > 0 for value in cpu.groups()), out
    for level, _client, requests, runs, rate, bound, ratio in rows:
        assert int(runs) == 2
        assert int(requests) == max(int(level) * 5, 20)
        assert int(bound) == int(level) * 50  # concurrency / 0.02 s
        assert 0 < float(ratio) <= 100.0 + 1e-9 and abs(float(rate) / int(bound) * 100 - float(ratio)) < 0.2
    judged, failed, total = map(int, re.search(r"judged (\d+) / failed (\d+) / total (\d+)", out).groups())  # type: ignore[union-attr]
    assert total == 24 and judged + failed == total and "(adds up)" in out
    attempts, requests, retries = map(int, re.search(r"attempts (\d+) = (\d+) \+ (\d+) retries", out).groups())  # type: ignore[union-attr]
    assert attempts == requests + retries and requests == 24


@pytest.mark.slow
def test_build_benchmark_prints_generation_ratios_beside_the_bare_client_and_the_whole_command_by_phase() -> None:
    out = run_script("bench_build.py", "--quick")
    clients = ("build", "generator", "command", "bare", "process")
    row = r"^\s+(\d+)\s+(build|generator|command|bare|process)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)%"
    rows = re.findall(row, out, re.MULTILINE)
    assert {(level, client) for level, client, *_ in rows} == {
        (level, client) for level in ("1", "8") for client in clients
    }, out
    for level, _client, requests, runs, rate, bound, ratio in rows:
        assert int(runs) == 1 and int(requests) == max(int(level) * 5, 20)
        assert int(bound) == int(level) * 20  # concurrency / 0.05 s
        # req/s and the ratio are printed rounded to 0.1: they agree within the rounding of both
        tolerance = 0.05 / int(bound) * 100 + 0.05 + 1e-9
        assert 0 < float(ratio) <= 100.0 + 1e-9 and abs(float(rate) / int(bound) * 100 - float(ratio)) <= tolerance
    # every row against the bare client of the same call; the command and the bare process also against the
    # bare process
    versus = {
        client: (float(bare), None if process == "-" else float(process))
        for client, bare, process in re.findall(
            r"^\s+8\s+(build|generator|command|bare|process)\s.*\s([\d.]+)\s+(-|[\d.]+)$", out, re.MULTILINE
        )
    }
    assert set(versus) == set(clients), out
    assert versus["bare"][0] == 1.0 and versus["process"][1] == 1.0, out
    assert all(bare > 0 for bare, _ in versus.values()), out
    assert versus["command"][1] is not None and versus["command"][1] > 0, out
    assert versus["build"][1] is None and versus["generator"][1] is None, out
    # the whole command's phases add up to its wall time and to its CPU time
    for what in ("", " cpu"):
        breakdown = re.search(rf"command{what} at 8: ([\d.]+) s = (.*) \(question reads ([\d.]+) s, store writes", out)
        assert breakdown is not None, out
        phases = dict((name, float(value)) for name, value in re.findall(r"([a-z-]+) ([\d.]+)", breakdown.group(2)))
        assert set(phases) == {"start-up", "opening", "planning", "generating", "other", "exit"}, out
        assert abs(sum(phases.values()) - float(breakdown.group(1))) < 0.1
        assert phases["generating"] > 0 and float(breakdown.group(3)) <= phases["generating"]
    cpu = re.search(r"cpu per 1,000 requests at 8: build ([\d.]+) s vs bare ([\d.]+) s .* command ([\d.]+) s vs", out)
    assert cpu is not None and all(float(value) > 0 for value in cpu.groups()), out
    assert "requests failed" not in out


@pytest.mark.slow
def test_harness_benchmark_reports_per_request_cost_and_memory_growth(tmp_path: Path) -> None:
    out = run_script("bench_harness.py", "--sizes", "40", "80", "--workdir", str(tmp_path))
    rows = re.findall(r"^\s+(\d+) (instant:\S*)\s+(\d+)\s", out, re.MULTILINE)
    assert sorted(rows) == [
        ("40", "instant:", "80"),
        ("40", "instant:decode", "80"),
        ("80", "instant:", "160"),
        ("80", "instant:decode", "160"),
    ]
    assert re.search(r"peak RSS growth from 40 to 80 cases \(instant:\): -?[\d.]+ MB", out), out


@pytest.mark.slow
def test_analysis_benchmark_times_the_analysis_and_writes_the_html(tmp_path: Path) -> None:
    out = run_script(
        "bench_analysis.py",
        "--judges", "3",
        "--cases", "60",
        "--resamples", "50",
        "--repeat", "1",
        "--per-judge", "4",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert "3 judges x 60 cases" in out
    assert re.search(r"analyze: best [\d.]+ s, median [\d.]+ s over 1 runs", out), out
    html = tmp_path / "report.html"
    assert html.is_file() and html.stat().st_size > 10_000
    assert "<html" in html.read_text(encoding="utf-8")[:2000].lower()


@pytest.mark.slow
def test_analysis_benchmark_times_the_whole_report_from_a_store(tmp_path: Path) -> None:
    out = run_script(
        "bench_analysis.py", "--from-store", str(tmp_path), "--judges", "3", "--cases", "300", "--resamples", "50"
    )
    found = re.search(r"report: ([\d.]+) s wall, peak RSS (\d+) MB \(goal < 60 s and < 2048 MB\); (.*)$", out, re.M)
    assert found is not None, out
    assert float(found.group(1)) > 0 and int(found.group(2)) > 0
    assert "html" in found.group(3) and "csv" in found.group(3)


@pytest.mark.slow
def test_build_memory_benchmark_prints_every_step_and_the_growth(tmp_path: Path) -> None:
    out = run_script("bench_build_memory.py", "--quick", "--workdir", str(tmp_path))
    rows = re.findall(r"^\s+(\d+) (\w+)\s+([\d.]+)\s+([\d.]+)$", out, re.MULTILINE)
    steps = ["import", "filter", "responses", "pairs", "labels", "export", "report"]
    assert [(size, step) for size, step, *_ in rows] == [(size, step) for size in ("1000", "4000") for step in steps]
    assert re.search(r"^\s+4000 pairs\s+4000$", out, re.MULTILINE), out
    assert re.search(r"peak RSS growth from 1000 to 4000 questions: -?[\d.]+ MB", out), out


@pytest.mark.slow
def test_faults_benchmark_kills_and_resumes_with_nothing_lost_or_duplicated(tmp_path: Path) -> None:
    out = run_script("bench_faults.py", "--quick", "--workdir", str(tmp_path))
    assert re.search(r"^lost: 0$", out, re.MULTILINE) and re.search(r"^duplicated: 0$", out, re.MULTILINE), out
    kills = int(re.search(r"^kills: (\d+); requests needed 48, sent (\d+)", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    assert kills >= 1, out
    rows = re.findall(r"^\s+\d+\s+([\d.]+)\s+\d+->\s*\d+\s+\d+\s+(\d+)\s+0\s", out, re.MULTILINE)
    assert len(rows) == kills and all(int(wasted) <= 2 for _, wasted in rows), out  # concurrency 2 in --quick
    assert "result: PASS" in out


@pytest.mark.slow
def test_annotate_benchmark_prints_submit_latency_and_no_lost_labels_after_kill_9() -> None:
    out = run_script("bench_annotate.py", "--quick")
    assert "24 cases x 3 annotators = 72 labels, 6 annotators" in out, out
    submits = re.search(
        r"submits: (\d+) acknowledged in [\d.]+ s \(([\d.]+)/s\), think time [\d.]+ s, errors (\d+)", out
    )
    assert submits is not None, out
    assert int(submits.group(1)) == 72 and float(submits.group(2)) > 0 and int(submits.group(3)) == 0
    latency = re.search(r"p50 ([\d.]+)\s+p95 ([\d.]+)\s+p99 ([\d.]+)\s+max ([\d.]+)", out)
    assert latency is not None, out
    p50, p95, p99, top = map(float, latency.groups())
    assert 0 < p50 <= p95 <= p99 <= top
    kill = re.search(r"kill -9 after (\d+) acknowledged submits: lost (\d+) \(.*?: (\d+) lost of (\d+)\)", out)
    assert kill is not None, out
    assert int(kill.group(1)) >= 36 and kill.group(2) == "0" and kill.group(3) == "0" and kill.group(4) == "72"


@pytest.mark.slow
def test_sweep_benchmark_times_the_local_and_the_ray_path_and_finds_identical_judgments(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = run_script("bench_sweep.py", "--quick", "--workdir", str(tmp_path), timeout=300)
    assert "4 API judges x 12 cases x 2 orders = 96 requests" in out, out
    local = float(re.search(r"^local sweep:\s+([\d.]+) s", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    ray_s = float(re.search(r"^ray sweep:\s+([\d.]+) s", out, re.MULTILINE).group(1))  # type: ignore[union-attr]
    overhead = re.search(r"^ray overhead:\s+([+-][\d.]+) s\s+= ([+-][\d.]+) % of the local sweep", out, re.MULTILINE)
    assert overhead is not None, out
    assert float(overhead.group(1)) == pytest.approx(ray_s - local, abs=0.02)
    assert float(overhead.group(2)) == pytest.approx((ray_s - local) / local * 100, rel=0.02, abs=0.5)
    assert re.search(r"^\s+workers up after:\s+[\d.]+ s\s+\(4 actors started and described\)", out, re.MULTILINE), out
    assert "judgments.jsonl identical: yes" in out
    assert (tmp_path / "local" / "judgments.jsonl").read_bytes() == (tmp_path / "ray" / "judgments.jsonl").read_bytes()


@pytest.mark.slow
def test_validity_benchmark_prints_the_level_power_and_coverage_table() -> None:
    # two worker processes: the replicates are independent and seeded per replicate, so the table is the same
    out = run_script("bench_validity.py", "--quick", "--sizes", "100", "--jobs", "2")
    assert "30 replicates per size, 200 resamples, sizes 100" in out, out
    row = r"^  (.+?) (rejects \(null\)|power|coverage)\s+([\d.]+)\s+([\d.]+)\s+(?:([\d.]+-[\d.]+)\s+(-))?\s*$"
    rows = {(label, kind): (float(figure), float(error), goal, verdict) for label, kind, figure, error, goal, verdict
            in re.findall(row, out, re.MULTILINE)}  # fmt: skip
    for test in (
        "case sign-flip test (p_case)",
        "paired bootstrap (p_bootstrap, tiers)",
        "McNemar per request (removed)",
    ):
        for column in ("pooled", "per dimension"):
            assert (f"{test}, {column}", "rejects (null)") in rows and (f"{test}, {column}", "power") in rows, out
    intervals = [label for label, kind in rows if kind == "coverage"]
    names = ("score (pooled agreement), judge A", "macro over organ systems, judge B", "Cohen's kappa per dimension",
             "Gwet's AC1 per dimension", "vs annotators (pooled)", "gap to human (pooled)", "pairwise agreement",
             "Fleiss kappa", "Krippendorff alpha", "human row", "difference A-B (null)")  # fmt: skip
    for name in names:
        assert any(label.startswith(name) for label in intervals), (name, out)
    for (_, kind), (figure, error, goal, verdict) in rows.items():
        assert 0.0 <= figure <= 100.0 and error >= 0.0
        if kind != "power":  # a goal is printed, but 30 replicates cannot judge it
            assert goal in ("3.5-6.5", "93.5-96.5") and verdict == "-"
    assert "100 cases: not judged (--quick)" in out and "total: not judged" in out
