"""The "Corrected estimates" section and the planner's table: what they say, and that they fit a terminal."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.metrics.budget import plan_before
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.corrected import corrected_estimates, doctor_labels
from medrewardbench.metrics.selection import pick_design
from medrewardbench.report.estimates import (
    BUDGET_DROP_ORDER,
    ESTIMATES_DROP_ORDER,
    add_to_reports,
    budget_table,
    estimates_markdown,
    estimates_table,
    write_estimates,
)
from medrewardbench.report.terminal import fit_table

D = len(DIMENSIONS)


def run(name: str, rng: np.random.Generator, truth: np.ndarray, accuracy: float) -> RunData:
    n = truth.shape[0]
    right = rng.uniform(size=(n, 2, D)) < accuracy
    verdicts = np.where(right, truth[:, None, :], 3 - truth[:, None, :]).astype(np.int8)
    return RunData(
        run_id=f"run-{name}",
        judge_spec=f"api:{name}",
        data_hash="data1",
        case_ids=tuple(f"c{i:03d}" for i in range(n)),
        verdicts=verdicts,
        labels=np.zeros((n, D), dtype=np.int8),
        lengths=np.ones((n, 2), dtype=np.int64),
        groups={},
        orders=(Order.ORIGINAL, Order.SWAPPED),
    )


def estimates():
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 3, size=(200, D)).astype(np.int8)
    runs = [run("strong-model", rng, truth, 0.85), run("weak-model", rng, truth, 0.6)]
    design = pick_design(case_verdicts(runs[0]), least_confident=20, random=40, seed=1, data_hash="data1")
    cases = [
        Case(
            case_id=cid,
            image=ImageRef.empty(),
            question="q",
            response_1="a",
            response_2="b",
            labels={dim: int(truth[int(cid[1:]), j]) for j, dim in enumerate(DIMENSIONS)},
            metadata={"selection": design.case_metadata(cid)},
        )
        for cid in (*design.least_confident_ids, *design.random_ids)
    ]
    return runs, design, corrected_estimates(runs, doctor_labels(cases, "labelled.jsonl"))


def test_the_section_names_the_design_ranks_the_judges_and_shows_both_intervals(tmp_path: Path) -> None:
    _, design, found = estimates()
    text = estimates_markdown(found)
    assert text.startswith("## Corrected estimates")
    assert f"Design {design.design_id}" in text and "the 20 pairs api:strong-model" in text
    rows = [line for line in text.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert "`api:strong-model`" in rows[0] and "`api:weak-model`" in rows[1]
    assert "### The doctors' preference for response 1" in text and "| pooled |" in text
    files = write_estimates(found, tmp_path)
    saved = json.loads(files["estimates_json"].read_text("utf-8"))
    assert saved["judges"][0]["judge"] == "api:strong-model"
    assert saved["judges"][1]["vs_leader"]["ppi"]["estimate"] > 0
    assert files["estimates"].read_text("utf-8") == text


def test_the_tables_fit_a_narrow_terminal() -> None:
    runs, _, found = estimates()
    plan = plan_before(runs[0], least_confident=20, half_widths=[0.05])
    for table, drop, wanted in (
        (estimates_table(found), ESTIMATES_DROP_ORDER, "api:strong-model"),
        (budget_table(plan), BUDGET_DROP_ORDER, "5 points"),
    ):
        for width in (60, 80, 160):
            console = Console(width=width, record=True)
            console.print(fit_table(table, width, drop))
            text = console.export_text()
            assert max(len(line) for line in text.splitlines()) <= width
            assert wanted in text, text


def test_the_section_goes_into_the_reports_own_files_and_nowhere_else(tmp_path: Path) -> None:
    _, _, found = estimates()
    md, page = tmp_path / "report.md", tmp_path / "report.html"
    md.write_text("# Report\n\nthe leaderboard\n", encoding="utf-8")
    page.write_text('<nav class="toc"><a href="#leaderboard">L</a></nav>\n<section id="leaderboard"></section>\n'
                    '<div id="image-viewer"></div>', encoding="utf-8")  # fmt: skip
    add_to_reports(found, {"md": md, "html": page})
    assert md.read_text("utf-8") == "# Report\n\nthe leaderboard\n\n" + estimates_markdown(found)
    html = page.read_text("utf-8")
    assert html.index('href="#corrected-estimates"') < html.index("</nav>")
    assert html.index('<section id="leaderboard">') < html.index('<section id="corrected-estimates">')
    assert html.index('<section id="corrected-estimates">') < html.index('<div id="image-viewer">')
    foreign = tmp_path / "other.html"
    foreign.write_text("<html><body>someone else's page</body></html>", encoding="utf-8")
    with pytest.raises(ValueError, match="not a medrewardbench report page"):
        add_to_reports(found, {"html": foreign})
