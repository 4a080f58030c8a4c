"""bench_ppi.py runs end to end in seconds (--quick) and prints its coverage and width table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_ppi_benchmark_prints_coverage_widths_and_the_goal() -> None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_ppi.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "N=300, K=30 least confident + R=60 random" in out
    rows = re.findall(
        r"^  (agreement sim:\w+|doctors prefer response 1)\s+([\d.]+) ±[\d.]+\s+([\d.]+) ±[\d.]+\s+"
        r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(PASS|PASS±MC|FAIL)$",
        out,
        flags=re.M,
    )
    assert len(rows) == 5, out
    for _target, cover, cover_labels, width, width_labels, ratio, _status in rows:
        assert 0 <= float(cover) <= 100 and 0 <= float(cover_labels) <= 100
        assert abs(float(ratio) - float(width) / float(width_labels)) < 0.02  # the ratio of the widths shown
