"""What a project does: blind A/B mapping, saving and changing labels, quality control, export, screening."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.annotate import PASSWORD, SECRET_MODEL, as_user, case_rows, gold_rows, write_cases

from medrewardbench.annotate.config import InvalidInput, NotFound
from medrewardbench.annotate.export import export_project
from medrewardbench.annotate.questions import read_questions
from medrewardbench.annotate.service import (
    Identity,
    PairAnswer,
    Project,
    ScreeningAnswer,
    StaleSubmission,
    create_project,
)
from medrewardbench.annotate.stats import dashboard, item_review
from medrewardbench.data import load_benchmark
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError

ALL_A = {dim: "A" for dim in DIMENSIONS}
ALL_B = {dim: "B" for dim in DIMENSIONS}


@pytest.fixture
def project(tmp_path: Path, project_factory: Any) -> Any:
    opened = project_factory(tmp_path / "proj", gold=True, repeat_share=0.5, per_case=3, seed=4)
    yield opened
    opened.close()


def who(project: Project, name: str) -> Identity:
    return as_user(project, name)


def source_choice(view_answer_a: str, row: dict[str, Any]) -> int:
    """Which source response is shown as A."""
    return 1 if view_answer_a == row["response_1"] else 2


def test_each_annotator_sees_their_own_order_and_labels_are_stored_in_source_order(
    project: Project, tmp_path: Path
) -> None:
    rows = {r["question"]: r for r in case_rows(6)}
    orders: dict[str, set[int]] = {}
    for name in ("alice", "bob", "carol"):
        me = who(project, name)
        for row in project.queue(me).rows:
            view = project.case_view(me, row.public_id)
            source = rows.get(view.question)
            if source is None:  # a gold case
                project.submit_pair(me, row.public_id, PairAnswer(ALL_A, seconds=2))
                continue
            first = source_choice(view.answer_a, source)
            assert {view.answer_a, view.answer_b} == {source["response_1"], source["response_2"]}
            orders.setdefault(view.question, set()).add(first)
            project.submit_pair(me, row.public_id, PairAnswer(ALL_A, seconds=2))
    assert any(len(seen) == 2 for seen in orders.values()), "annotators should see pairs in different orders"
    cases, _ = export_project_cases(project, tmp_path)
    for case in cases:
        for annotation in case.annotations:
            # everyone clicked A: in source order that is response_1 when shown original, else response_2
            expected = 1 if annotation.order_shown == "original" else 2
            assert set(annotation.labels.values()) == {expected}


def export_project_cases(project: Project, tmp_path: Path) -> tuple[list[Any], Any]:
    out = tmp_path / "export.jsonl"
    summary = export_project(project, "canonical", out, force=True)
    return list(load_benchmark(str(out)).cases), summary


def test_labels_can_be_changed_and_every_version_is_in_the_audit_log(project: Project) -> None:
    me = who(project, "alice")
    pid = project.queue(me).rows[0].public_id
    first = project.submit_pair(me, pid, PairAnswer(ALL_A, comment="first look", seconds=10), "10.0.0.1")
    second = project.submit_pair(me, pid, PairAnswer(ALL_B, comment="changed my mind", seconds=5.5), "10.0.0.1")
    assert first.revision == 1 and second.revision == 2
    assert dict(second.choices) == ALL_B and second.comment == "changed my mind"
    assert second.seconds == pytest.approx(15.5)
    assert project.case_view(me, pid).submission == second
    entries = [e for e in project.audit_entries(Identity.command_line()) if e.target == f"assignment:{pid}"]
    assert [e.action for e in entries] == ["submit", "submit"]
    latest, earliest = entries
    assert earliest.old is None and earliest.actor == "alice" and earliest.client == "10.0.0.1"
    assert latest.old["shown_choices"] == ALL_A and latest.new["shown_choices"] == ALL_B
    assert latest.old["comment"] == "first look" and latest.new["seconds_added"] == 5.5


def test_a_retried_submission_changes_nothing(project: Project) -> None:
    me = who(project, "alice")
    pid = project.queue(me).rows[0].public_id
    answer = PairAnswer(ALL_A, comment="clear case", seconds=20)
    first = project.submit_pair(me, pid, answer)
    for _ in range(4):  # a flaky network: the same request again and again
        again = project.submit_pair(me, pid, answer)
        assert again == first
    assert first.seconds == 20 and first.revision == 1
    # a page saved again with the same answer after more time on it: the answer did not change, nor does anything
    assert project.submit_pair(me, pid, PairAnswer(ALL_A, comment="clear case", seconds=35)) == first
    entries = [e for e in project.audit_entries(Identity.command_line()) if e.target == f"assignment:{pid}"]
    assert len(entries) == 1
    # a real change is saved, and its time added
    changed = project.submit_pair(me, pid, PairAnswer(ALL_A, comment="clear case, on reflection", seconds=5))
    assert changed.revision == 2 and changed.seconds == 25


def test_a_save_made_on_an_older_revision_is_refused(project: Project) -> None:
    me = who(project, "alice")
    pid = project.queue(me).rows[1].public_id
    # two tabs opened before anything was saved: both made their answer on revision 0
    first_tab = project.submit_pair(me, pid, PairAnswer(ALL_A, seconds=3, expected_revision=0))
    assert first_tab.revision == 1
    with pytest.raises(StaleSubmission, match="revision 1") as refused:
        project.submit_pair(me, pid, PairAnswer(ALL_B, seconds=4, expected_revision=0))
    assert refused.value.revision == 1
    assert project.case_view(me, pid).submission == first_tab
    # on the current revision it is saved; and the same answer as stored is no conflict at all
    second = project.submit_pair(me, pid, PairAnswer(ALL_B, seconds=4, expected_revision=1))
    assert second.revision == 2 and dict(second.choices) == ALL_B
    assert project.submit_pair(me, pid, PairAnswer(ALL_B, seconds=4, expected_revision=1)) == second
    # a client that sends no revision saves over whatever is stored (the API's default)
    assert project.submit_pair(me, pid, PairAnswer(ALL_A, seconds=1)).revision == 3


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (PairAnswer({"accuracy": "A"}), "missing: relevance"),
        (PairAnswer({**ALL_A, "overall": "C"}), "choose A or B"),
        (PairAnswer({**ALL_A, "beauty": "A"}), "unknown criterion"),
        (PairAnswer({}, cannot_judge=True), "say why"),
        (PairAnswer(ALL_A, comment="x" * 5001), "comment: limited to 5,000"),
        (PairAnswer(ALL_A, comment="fine\x00then"), "comment: it contains a NUL"),
    ],
)
def test_incomplete_or_invalid_answers_are_refused(project: Project, answer: PairAnswer, message: str) -> None:
    me = who(project, "alice")
    pid = project.queue(me).rows[0].public_id
    with pytest.raises(InvalidInput, match=message):
        project.submit_pair(me, pid, answer)
    assert project.case_view(me, pid).submission is None


def test_cannot_judge_stores_no_labels_but_keeps_the_reason(project: Project, tmp_path: Path) -> None:
    me = who(project, "alice")
    pid = project.queue(me).rows[0].public_id
    saved = project.submit_pair(me, pid, PairAnswer(ALL_A, cannot_judge=True, cannot_judge_reason="image cropped"))
    assert saved.cannot_judge and dict(saved.choices) == {} and saved.cannot_judge_reason == "image cropped"


def test_someone_elses_assignment_is_not_found(project: Project) -> None:
    alice, bob = who(project, "alice"), who(project, "bob")
    theirs = project.queue(bob).rows[0].public_id
    for call in (
        lambda: project.case_view(alice, theirs),
        lambda: project.submit_pair(alice, theirs, PairAnswer(ALL_A)),
        lambda: project.assignment_image(alice, theirs),
    ):
        with pytest.raises(NotFound):
            call()


def test_gold_accuracy_repeat_consistency_and_position_bias_on_the_dashboard(project: Project) -> None:
    gold = {r["question"]: r for r in gold_rows(2)}
    # alice answers every gold pair right and repeats consistently (in source order);
    # bob always clicks A, whatever he is shown: a pure position bias
    alice, bob = who(project, "alice"), who(project, "bob")
    for row in project.queue(alice).rows:
        view = project.case_view(alice, row.public_id)
        source = gold.get(view.question)
        a_is_1 = view.answer_a.startswith(("First answer", "First"))
        # gold: the known answer; otherwise alice always prefers response_1
        want_1 = source["labels"]["overall"] == 1 if source is not None else True
        letter = "A" if want_1 == a_is_1 else "B"
        project.submit_pair(alice, row.public_id, PairAnswer({dim: letter for dim in DIMENSIONS}, seconds=20))
    for row in project.queue(bob).rows:
        project.submit_pair(bob, row.public_id, PairAnswer(ALL_A, seconds=40))
    board = dashboard(project)
    stats = {a.name: a for a in board.annotators}
    assert stats["alice"].gold_accuracy == 1.0 and stats["alice"].gold_compared == 2 * len(DIMENSIONS)
    assert stats["alice"].repeat_consistency == 1.0 and stats["alice"].repeat_compared > 0
    assert stats["bob"].first_share == 1.0
    assert stats["bob"].repeat_consistency == 0.0, "a position-biased annotator flips on every swapped repeat"
    assert stats["bob"].gold_accuracy == 0.5
    assert stats["alice"].median_seconds == 20.0 and stats["bob"].median_seconds == 40.0
    assert board.median_seconds == pytest.approx(30.0)
    assert board.gold_items == 2 and board.items == 6
    assert stats["carol"].done == 0


def test_majority_export_with_adjudication_and_without_gold_or_repeats(project: Project, tmp_path: Path) -> None:
    alice, bob, carol = (who(project, n) for n in ("alice", "bob", "carol"))
    for me, pick_1 in ((alice, True), (bob, False)):
        for row in project.queue(me).rows:
            view = project.case_view(me, row.public_id)
            a_is_1 = view.answer_a.startswith("First")
            letter = "A" if pick_1 == a_is_1 else "B"
            project.submit_pair(
                me, row.public_id, PairAnswer({d: letter for d in DIMENSIONS}, comment="note " + me.name)
            )
    for row in project.queue(carol).rows:  # carol cannot judge anything: every item stays 1:1
        project.submit_pair(carol, row.public_id, PairAnswer({}, cannot_judge=True, cannot_judge_reason="too blurry"))
    board = dashboard(project)
    assert board.items_complete == 6 and len(board.pending) == 6
    pending = board.pending[0]
    assert set(pending.unresolved) == set(DIMENSIONS)
    review = item_review(project, pending.public_id)
    assert review.votes["overall"] == {"1": 1, "2": 1} and review.majority == {}
    project.adjudicate(
        Identity.command_line(), pending.public_id, {"overall": "2", "accuracy": "1"}, "radiologist call"
    )
    assert len(dashboard(project).pending) == 6  # other dimensions are still open
    cases, summary = export_project_cases(project, tmp_path)
    assert summary.items == 6 and summary.undecided == 6 * 6 - 2
    assert len(cases) == 6 and not any("gold" in c.case_id for c in cases)
    settled = [c for c in cases if c.labels]
    assert len(settled) == 1 and dict(settled[0].labels) == {"accuracy": 1, "overall": 2}
    assert dict(settled[0].label_sources) == {"accuracy": "adjudication", "overall": "adjudication"}
    decided = {a.dimension: a for a in settled[0].adjudications}
    assert set(decided) == {"accuracy", "overall"} and decided["overall"].label == 2
    assert decided["overall"].by.startswith("cli:") and decided["overall"].note == "radiologist call"
    assert decided["overall"].at is not None and decided["overall"].at.endswith("Z")
    for case in cases:
        assert sorted(a.annotator for a in case.annotations) == ["alice", "bob", "carol"]  # repeats add no vote
        carol_note = next(a for a in case.annotations if a.annotator == "carol")
        assert dict(carol_note.labels) == {}
        assert carol_note.cannot_judge and carol_note.cannot_judge_reason == "too blurry"
        assert carol_note.comment is None
        assert {a.annotator: a.comment for a in case.annotations if a.comment} == {
            "alice": "note alice",
            "bob": "note bob",
        }
        assert case.metadata["generator_1"] == SECRET_MODEL  # the export keeps the source metadata
    # an adjudication that a later majority contradicts is not used, and is reported
    from medrewardbench.annotate.db import Item

    with project.db.read() as s:
        item = s.query(Item).filter(Item.public_id == pending.public_id).one()
        external = item.external_id
    mine = next(
        r for r in project.queue(carol).rows if project.case_view(carol, r.public_id).question == settled[0].question
    )
    view = project.case_view(carol, mine.public_id)
    letter = "A" if view.answer_a.startswith("First") else "B"  # carol now says response_1 everywhere
    project.submit_pair(carol, mine.public_id, PairAnswer({d: letter for d in DIMENSIONS}))
    cases, summary = export_project_cases(project, tmp_path)
    changed = next(c for c in cases if c.case_id == external)
    assert changed.labels["overall"] == 1 and changed.label_sources["overall"] == "majority"
    assert {a.dimension for a in changed.adjudications} == {"accuracy", "overall"}  # kept as written
    assert any("before the votes changed" in w for w in summary.warnings)


def test_the_reference_export_reads_back_with_the_same_labels(project: Project, tmp_path: Path) -> None:
    for name, letter in (("alice", "A"), ("bob", "A"), ("carol", "B")):
        me = who(project, name)
        for row in project.queue(me).rows:
            project.submit_pair(me, row.public_id, PairAnswer({d: letter for d in DIMENSIONS}))
    canonical, _ = export_project_cases(project, tmp_path)
    export_project(project, "reference", tmp_path / "ref")
    reference = load_benchmark(str(tmp_path / "ref"))
    by_text = {c.question: c for c in reference.cases}
    assert len(reference.cases) == 6
    for case in canonical:
        other = by_text[case.question]
        assert dict(other.labels) == dict(case.labels) and case.labels
        assert other.response_1 == case.response_1 and other.image.raw_bytes() == case.image.raw_bytes()
        assert other.organ_system == case.organ_system


def test_export_formats_fit_the_project_mode(project: Project, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="labels pairs"):
        export_project(project, "questions", tmp_path / "q.jsonl")
    with pytest.raises(InvalidInput, match="unknown export format"):
        export_project(project, "xml", tmp_path / "q.xml")
    with pytest.raises(InvalidInput, match="a canonical export is a .jsonl, .json, .parquet file"):
        export_project(project, "canonical", tmp_path / "q.csv")


def test_init_refuses_bad_input_and_reports_every_problem(tmp_path: Path) -> None:
    rows = case_rows(3)
    rows[1]["image"] = "images/missing.png"
    bad = write_cases(tmp_path / "in", rows)
    with pytest.raises(DataError) as info:
        create_project(tmp_path / "p1", cases=str(bad))
    assert any("missing.png" in str(p) for p in info.value.problems)
    assert not (tmp_path / "p1" / "annotate.json").exists()
    good = write_cases(tmp_path / "in2", case_rows(2))
    unlabelled_gold = write_cases(tmp_path / "in3", case_rows(1, prefix="gold"), name="gold.jsonl")
    with pytest.raises(DataError, match="a gold case needs labels"):
        create_project(tmp_path / "p2", cases=str(good), gold=str(unlabelled_gold))
    with pytest.raises(InvalidInput, match="either --cases"):
        create_project(tmp_path / "p3")
    created = create_project(tmp_path / "p4", cases=str(good))
    created.close()
    with pytest.raises(Exception, match="already holds an annotation project"):
        create_project(tmp_path / "p4", cases=str(good))


def write_questions(path: Path) -> Path:
    rows = [
        {
            "id": "q1",
            "image": {"builtin": "pydicom:CT_small.dcm"},
            "question": "Is there a pneumothorax?",
            "reference_answer": "No.",
            "answer_type": "closed",
            "organ_system": "chest",
            "source_dataset": "SLAKE",
            "metadata": {"origin": "x"},
        },
        {
            "id": "q2",
            "image": {"builtin": "skimage:retina"},
            "question": "Grade the retinopathy.",
            "answer_type": "open",
        },
        {"id": "q3", "image": None, "question": "What is shown?"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_screening_project_accept_reject_with_reasons_and_export(tmp_path: Path) -> None:
    questions = write_questions(tmp_path / "questions.jsonl")
    project = create_project(tmp_path / "screen", questions=questions, per_case=2)
    cli = Identity.command_line()
    try:
        for name in ("alice", "bob"):
            project.add_user(cli, name, "annotator", PASSWORD)
        alice, bob = who(project, "alice"), who(project, "bob")
        rows = project.queue(alice).rows
        assert len(rows) == 3 and project.case_view(alice, rows[0].public_id).kind == "question"
        with pytest.raises(InvalidInput, match="at least one reason"):
            project.submit_screening(alice, rows[0].public_id, ScreeningAnswer("reject"))
        with pytest.raises(InvalidInput, match="accept or reject"):
            project.submit_screening(alice, rows[0].public_id, ScreeningAnswer("maybe"))
        with pytest.raises(InvalidInput, match="is a question"):
            project.submit_pair(alice, rows[0].public_id, PairAnswer(ALL_A))
        for me in (alice, bob):
            for row in project.queue(me).rows:
                view = project.case_view(me, row.public_id)
                if view.question.startswith("Grade") and me.name == "bob":
                    answer = ScreeningAnswer("reject", ("image_quality", "complexity"), "too dark")
                elif view.question.startswith("What"):
                    answer = ScreeningAnswer("reject", ("relevance",))
                else:
                    answer = ScreeningAnswer("accept")
                saved = project.submit_screening(me, row.public_id, answer)
                assert saved.decision == answer.decision
        board = dashboard(project)
        assert board.dimensions == ("decision",) and board.items_complete == 3
        assert [p.unresolved for p in board.pending] == [("decision",)]
        summary = export_project(project, "questions", tmp_path / "screened.jsonl")
        exported = {r["id"]: r for r in map(json.loads, (tmp_path / "screened.jsonl").read_text().splitlines())}
        assert summary.items == 3 and summary.undecided == 1
        assert exported["q1"]["metadata"]["screening"]["decision"] == "accept"
        assert exported["q1"]["metadata"]["origin"] == "x" and exported["q1"]["image"] == {
            "builtin": "pydicom:CT_small.dcm"
        }
        assert exported["q2"]["metadata"]["screening"]["decision"] == "undecided"
        assert exported["q3"]["metadata"]["screening"]["decision"] == "reject"
        bob_vote = next(v for v in exported["q2"]["metadata"]["screening"]["votes"] if v["annotator"] == "bob")
        assert bob_vote["reasons"] == ["complexity", "image_quality"] and bob_vote["comment"] == "too dark"
        project.adjudicate(cli, board.pending[0].public_id, {"decision": "accept"})
        export_project(project, "questions", tmp_path / "accepted.jsonl", accepted_only=True)
        accepted = [json.loads(line)["id"] for line in (tmp_path / "accepted.jsonl").read_text().splitlines()]
        assert accepted == ["q1", "q2"]
        assert read_questions(tmp_path / "accepted.jsonl")[1].question_id == "q2"  # the export reads back
    finally:
        project.close()


def test_questions_file_problems_name_file_row_and_field(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"id": "a", "question": "ok?", "image": None}),
                json.dumps({"id": "a", "question": "again", "image": None}),
                json.dumps({"question": "no id"}),
                json.dumps({"id": "b", "question": "", "answer_type": "yes-no", "colour": "red"}),
                "{not json",
            ]
        ),
        encoding="utf-8",
    )
    with pytest.raises(DataError) as info:
        read_questions(path)
    found = {(p.row, p.field) for p in info.value.problems}
    assert {(2, "id"), (3, "id"), (4, "question"), (4, "answer_type"), (4, "colour"), (5, None)} <= found
