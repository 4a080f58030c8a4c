"""The doctors' time where it counts, end to end: eval -> annotate pick -> doctors label through the
app's HTTP API -> export -> report with corrected estimates (and the budget planner on the way)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.annotate import PASSWORD, serve_in_thread
from helpers.api import API_KEY_ENV
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.data import load_benchmark
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.testing.openai_server import OpenAIServer

pytest.importorskip("sqlalchemy")
runner = CliRunner()


def cli(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.output


def informed_judge(cases: list[Any]) -> Any:
    """A model behind the test server that knows the experts' labels and errs on about a quarter of verdicts."""

    def answer(body: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content")) for m in body["messages"])
        for case in cases:
            first, second = text.find(case.response_1), text.find(case.response_2)
            if first >= 0 and second >= 0 and case.response_1 != case.response_2:
                shown_first = 1 if first < second else 2
                verdicts = {}
                for dim in DIMENSIONS:
                    right = "A" if case.labels.get(dim, 1) == shown_first else "B"
                    wrong = "B" if right == "A" else "A"
                    draw = hashlib.sha256(f"{case.case_id}{dim}{shown_first}".encode()).digest()[0]
                    verdicts[dim] = right if draw > 64 else wrong
                return json.dumps({**verdicts, "reason": "compared"})
        return json.dumps({**{d: "A" for d in DIMENSIONS}, "reason": "unknown case"})

    return answer


def doctor_choices(case: Any, shown: dict[str, Any]) -> dict[str, str]:
    """A doctor who gives the experts' labels, reading the answers in the order the app shows them."""
    a_is_first = shown["answer_a"] == case.response_1
    return {dim: "A" if (case.labels[dim] == 1) == a_is_first else "B" for dim in DIMENSIONS if dim in case.labels}


def test_eval_pick_label_export_and_report_corrected_estimates(openai_server: OpenAIServer, tmp_path: Path) -> None:
    demo = list(load_benchmark("demo").cases)
    by_id = {case.case_id: case for case in demo}
    by_content = {(c.question, frozenset((c.response_1, c.response_2))): c for c in demo}
    openai_server.control.set_responder(informed_judge(demo))
    results = tmp_path / "results"
    code, out = cli(
        "eval", "--data", "demo", "-j", "api:test-model", "-j", "baseline:random", "-j", "baseline:longer",
        "--base-url", openai_server.base_url, "--api-key-env", API_KEY_ENV, "--max-retries", "0",
        "--out", str(results), "--quiet",
    )  # fmt: skip
    assert code == 0, out

    code, out = cli("annotate", "plan", str(results), "-j", "api:test-model", "-k", "6", "--half-width", "0.05")
    assert code == 0 and "labels only: random" in out and "5 points" in out, out

    project = tmp_path / "slice"
    code, out = cli(
        "annotate", "pick", str(results), "-j", "api:test-model", "-k", "6", "-r", "12", "--seed", "3",
        "--new", str(project), "--per-case", "1",
    )  # fmt: skip
    assert code == 0, out
    assert f"Picked 6 least confident + 12 random of {len(demo)} pairs" in out and "18 pair(s) added" in out
    code, out = cli(
        "annotate", "user", "add", "doctor", "--role", "annotator", "-p", str(project), "--password-stdin",
        stdin=PASSWORD + "\n",
    )  # fmt: skip
    assert code == 0 and "with 18 assignments" in out, out
    code, out = cli("annotate", "user", "token", "doctor", "-p", str(project), "--label", "simulated doctor")
    token = out.strip().splitlines()[0]
    assert code == 0 and token.startswith("mrb_"), out

    from medrewardbench.annotate.service import Project

    opened = Project.open(project)
    try:
        with serve_in_thread(opened) as base, httpx.Client(base_url=base, timeout=30) as client:
            auth = {"Authorization": f"Bearer {token}"}
            queue = client.get("/api/v1/queue", headers=auth).json()
            assert queue["total"] == 18
            for row in queue["assignments"]:
                shown = client.get(f"/api/v1/assignments/{row['id']}", headers=auth).json()
                case = by_content[(shown["question"], frozenset((shown["answer_a"], shown["answer_b"])))]
                saved = client.put(
                    f"/api/v1/assignments/{row['id']}/submission",
                    headers=auth,
                    json={"choices": doctor_choices(case, shown), "seconds": 20},
                )
                assert saved.status_code == 200, saved.text
            assert client.get("/api/v1/queue", headers=auth).json()["done"] == 18
    finally:
        opened.close()

    labelled = tmp_path / "export" / "labelled.jsonl"
    code, out = cli("annotate", "export", str(project), "--out", str(labelled))
    assert code == 0 and "Wrote 18 item(s)" in out, out
    exported = list(load_benchmark(str(labelled)).cases)
    strata = [c.metadata["selection"]["stratum"] for c in exported]
    assert strata.count("least_confident") == 6 and strata.count("random") == 12
    assert all(c.labels == by_id[c.case_id].labels for c in exported)  # the doctor's labels came back

    report = tmp_path / "report"
    code, out = cli(
        "report", str(results), "--labels", str(labelled), "--out", str(report), "--format", "md,json",
        "--bootstrap", "200",
    )  # fmt: skip
    assert code == 0, out
    assert "Corrected estimates" in out and "labels only" in out and "estimates.md" in out
    text = (report / "estimates.md").read_text("utf-8")
    assert "## Corrected estimates" in text and "Design " in text
    assert (report / "report.md").read_text("utf-8").endswith(text)  # the report carries the section too
    found = json.loads((report / "estimates.json").read_text("utf-8"))
    assert found["pool_size"] == len(demo) and found["labelled"] == 18
    assert found["design"]["least_confident"] == 6 and found["design"]["random"] == 12
    analysis = json.loads((report / "analysis.json").read_text("utf-8"))
    # the doctor gave the experts' labels, so the report's accuracy on the whole pool is the truth to recover
    exact = {run["judge"]: run["accuracy"]["all"]["point"] for run in analysis["runs"]}
    assert [j["judge"] for j in found["judges"]][0] == "api:test-model"
    for judge in found["judges"]:
        pooled = judge["agreement"]["pooled"]
        strata_sizes = [(s["size"], s["labelled"]) for s in pooled["strata"]]
        assert strata_sizes == [(6, 6), (len(demo) - 6, 12)]
        assert pooled["ppi"]["low"] <= pooled["ppi"]["estimate"] <= pooled["ppi"]["high"]
        assert abs(pooled["ppi"]["estimate"] - exact[judge["judge"]]) <= 3 * pooled["ppi"]["se"] + 1e-9
        assert abs(pooled["labels_only"]["estimate"] - exact[judge["judge"]]) <= 3 * pooled["labels_only"]["se"] + 1e-9
