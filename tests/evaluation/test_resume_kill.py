"""Kill a real ``medrewardbench eval`` process mid-run and check that a rerun completes exactly."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from helpers.images import png_bytes

TESTS_DIR = Path(__file__).parents[1]  # tests/, where the helpers package lives
LAUNCH = (
    "import sys; sys.path.insert(0, {tests!r});"
    "from medrewardbench.judges import register; register('slow', 'helpers.slow_judge_plugin:build');"
    "from medrewardbench.cli import main; sys.argv = ['medrewardbench'] + sys.argv[1:]; main()"
)


def write_dataset(tmp_path: Path, n: int) -> Path:
    rows = []
    for i in range(n):
        (tmp_path / f"img{i}.png").write_bytes(png_bytes(seed=i, size=(8, 8)))
        rows.append(
            {
                "id": f"k{i:03d}",
                "image": f"img{i}.png",
                "question": f"Question {i}?",
                "response_1": f"first {i}",
                "response_2": f"second answer {i}",
                "labels": {"overall": 1 + i % 2},
                "organ_system": "chest",
            }
        )
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def stored_keys(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return [(r[0], r[1]) for r in conn.execute("SELECT case_id, order_ FROM judgments")]
    except sqlite3.OperationalError:
        return []


def launch(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    code = LAUNCH.format(tests=str(TESTS_DIR))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def test_kill_mid_run_then_resume_completes_with_no_duplicate_or_missing_row(tmp_path: Path) -> None:
    data = write_dataset(tmp_path, 30)
    out = tmp_path / "out"
    db = out / "medrewardbench.sqlite"
    env = {
        **os.environ,
        "SLOW_JUDGE_LOG": str(tmp_path / "calls1.log"),
        "SLOW_JUDGE_DELAY": "0.05",
        "HF_HUB_OFFLINE": "1",
    }
    args = ["eval", "--data", str(data), "--judge", "slow:", "--out", str(out), "--quiet"]
    proc = launch(args, env)
    deadline = time.monotonic() + 60
    while len(stored_keys(db)) < 12 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = stored_keys(db)
    assert 12 <= len(before) < 60, "the kill should land mid-run"
    assert len(set(before)) == len(before)

    env["SLOW_JUDGE_LOG"] = str(tmp_path / "calls2.log")
    second = launch(args, env)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err.decode()
    after = stored_keys(db)
    expected = {(f"k{i:03d}", o) for i in range(30) for o in ("original", "swapped")}
    assert len(after) == 60 and set(after) == expected
    rerun_calls = {tuple(line.split("\t")) for line in (tmp_path / "calls2.log").read_text().splitlines()}
    assert rerun_calls == expected - set(before), "the rerun judges exactly what was missing"
    lines = (out / "judgments.jsonl").read_text().splitlines()
    assert len(lines) == 60
