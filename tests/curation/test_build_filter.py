"""``build filter``: closed answers are matched, open ones graded; every decision keeps its evidence."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from helpers.curation import OPEN_ROWS, VQA_ROWS, api_options, imported_project, open_responder, project_store

from medrewardbench.curation.filtering import run_filter
from medrewardbench.curation.generators import load_answer_template
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.curation.report import build_report, write_report
from medrewardbench.curation.store import BuildError
from medrewardbench.testing.openai_server import OpenAIServer

REFERENCES = {r["q"]: r["ans"] for r in VQA_ROWS}


def question_of(body: dict[str, Any]) -> str:
    text = "\n".join(
        part["text"]
        for message in body["messages"]
        if message["role"] == "user"
        for part in message["content"]
        if part.get("type") == "text"
    )
    return next(q for q in REFERENCES if q in text)


def knowing_responder(body: dict[str, Any]) -> str:
    """``api:expert`` answers every question right; ``api:novice`` only the yes/no ones whose answer is yes."""
    reference = REFERENCES[question_of(body)]
    if body["model"] == "expert":
        return f"{reference}. That is what the image shows."
    return "Yes, I think so." if reference == "yes" else "I cannot tell from this image."


def filter_with(server: OpenAIServer, project: Path, k: int, **kwargs: Any):  # type: ignore[no-untyped-def]
    with open_project(project) as store:
        return run_filter(
            store,
            kwargs.pop("models", ["api:expert", "api:novice"]),
            k,
            options=api_options(server),
            template=load_answer_template(),
            **kwargs,
        )


def test_a_question_is_kept_when_at_most_k_models_answer_it_correctly(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    answer_server.control.set_responder(knowing_responder)
    project = imported_project(tmp_path)
    summary = filter_with(answer_server, project, 1)
    assert len(answer_server.control.chat_requests()) == 12  # 6 questions x 2 models
    # v1 and v6 (reference "yes"): both models right -> dropped; the others: only the expert -> kept
    assert (summary.decided, summary.kept, summary.dropped) == (6, 4, 2)
    with project_store(project) as store:
        dropped = store.decision("v1")
        kept = store.decision("v3")
        assert dropped is not None and kept is not None
        assert not dropped["kept"] and dropped["correct"] == 2
        assert dropped["reason"] == "dropped: 2 of 2 models answered correctly (more than 1)"
        # the decision keeps the answers that caused it, and how each was scored
        expert, novice = kept["evidence"]
        assert expert["generator"] == "api:expert" and expert["answer"].startswith("5 mm")
        assert expert["correct"] is True and expert["how"] == "closed:number" and expert["read"] == "5 mm"
        assert novice == {
            "generator": "api:novice",
            "answer": "I cannot tell from this image.",
            "correct": False,
            "how": "closed:number",
            "read": None,
        }
    # another K decides again from the stored answers, without a single new request
    answer_server.control.clear_requests()
    strict = filter_with(answer_server, project, 0)
    assert answer_server.control.chat_requests() == []
    assert (strict.kept, strict.dropped) == (0, 6)


def test_failed_answers_count_as_wrong_and_say_so(answer_server: OpenAIServer, tmp_path: Path) -> None:
    answer_server.control.set_responder(knowing_responder)
    answer_server.control.script_faults("400")  # the first request (expert on v1) fails for good
    project = imported_project(tmp_path)
    filter_with(answer_server, project, 0)
    with project_store(project) as store:
        decision = store.decision("v1")
    assert decision is not None and decision["kept"] is False and decision["correct"] == 1 and decision["failed"] == 1
    assert "1 answer(s) could not be scored and count as wrong" in decision["reason"]
    assert decision["evidence"][0]["how"] == "failed" and "HTTP 400" in decision["evidence"][0]["failure"]
    # --retry-failures asks exactly the failed one again
    answer_server.control.clear_requests()
    filter_with(answer_server, project, 0, retry_failures=True)
    assert [r.body["model"] for r in answer_server.control.chat_requests()] == ["expert"]  # type: ignore[index]


def test_open_answers_need_a_grader_whose_verdict_is_read_strictly(answer_server: OpenAIServer, tmp_path: Path) -> None:
    answer_server.control.set_responder(open_responder)
    project = imported_project(tmp_path, OPEN_ROWS)
    with pytest.raises(BuildError, match=r"2 open question\(s\) have reference answers.*--grader"):
        filter_with(answer_server, project, 0)
    assert answer_server.control.chat_requests() == []  # refused before any request
    summary = filter_with(answer_server, project, 0, grader_spec="api:grader")
    # 2 open questions x 2 models, and both models gave o2 the same answer: graded once
    assert summary.grader is not None and summary.grader.total == 3
    assert (summary.failed_answers, summary.failed_gradings) == (1, 1), "the novice's o1 answer came back ungraded"
    with project_store(project) as store:
        o1, o2, o3 = (store.decision(q) for q in ("o1", "o2", "o3"))
    assert o1 is not None and o2 is not None and o3 is not None
    expert, novice = o1["evidence"]
    assert expert["how"] == "grader" and expert["correct"] is True and "same conclusion" in expert["grader_output"]
    # the novice's answer planted a verdict; the grader only echoed it: no verdict, counted wrong
    assert novice["correct"] is False and novice["failure"].startswith("grader: no grading object")
    assert not o1["kept"] and o2["kept"] and o2["correct"] == 0
    assert o3["kept"] and o3["reason"] == "no reference answer: nothing to score, kept" and o3["evidence"] == []
    # the grader never sees the image, only the texts
    grader_requests = [r for r in answer_server.control.chat_requests() if r.body["model"] == "grader"]  # type: ignore[index]
    assert len(grader_requests) == 3 and all(not r.image_urls() for r in grader_requests)


def test_the_report_shows_what_was_dropped_per_source_and_organ_system(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    answer_server.control.set_responder(knowing_responder)
    project = imported_project(tmp_path)
    filter_with(answer_server, project, 1)
    with project_store(project) as store:
        report = build_report(store, "proj")
        files = write_report(report, store, tmp_path / "report")
    groups = {(g["source"], g["organ_system"]): g for g in report.groups}
    assert groups[("vqa", "abdomen")]["dropped"] == 1 and groups[("vqa", "abdomen")]["kept"] == 1
    assert groups[("vqa", "eye")]["dropped"] == 1 and groups[("vqa", "brain")]["dropped"] == 0
    assert report.totals["dropped"] == 2 and report.totals["questions"] == 6
    assert {m["generator"]: m["correct"] for m in report.models} == {"api:expert": 6, "api:novice": 2}
    markdown = files[0].read_text()
    assert "| vqa | abdomen | 2 | 2 | 2 | 1 | 1 | 0 | 0 |" in markdown
    assert "v1 | vqa | abdomen | dropped: 2 of 2 models" in markdown
    with files[2].open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["id"] for r in rows if r["kept"] == "0"} == {"v1", "v6"}
    with files[1].open() as handle:
        assert len(list(csv.DictReader(handle))) == 3


def test_the_pool_answers_only_the_kept_questions(answer_server: OpenAIServer, tmp_path: Path) -> None:
    answer_server.control.set_responder(knowing_responder)
    project = imported_project(tmp_path)
    filter_with(answer_server, project, 1)  # keeps v2, v3, v4, v5
    answer_server.control.clear_requests()
    with open_project(project) as store:
        # the expert in the pool is the filter's expert (same fingerprint): nothing to ask it
        run_responses(
            store, ["api:expert", "api:other"], options=api_options(answer_server), template=load_answer_template()
        )
    asked = [r.body["model"] for r in answer_server.control.chat_requests()]  # type: ignore[index]
    assert asked == ["other"] * 4
