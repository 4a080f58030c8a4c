"""The services check their caller themselves: the wrong caller is refused without any route in between.

Each service is called directly (no HTTP, no route dependency), with an outsider (no account),
an annotator asking for what only an admin may see, and an annotator asking for another
annotator's work.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.annotate import ADMIN, as_user
from sqlalchemy import select

from medrewardbench.annotate.config import Forbidden, NotFound
from medrewardbench.annotate.db import Item
from medrewardbench.annotate.export import ExportService
from medrewardbench.annotate.service import Identity, PairAnswer, Project
from medrewardbench.annotate.services.quality import QualityService
from medrewardbench.dimensions import DIMENSIONS

ALL_A = {dim: "A" for dim in DIMENSIONS}
OUTSIDER = Identity(None, "mallory", "")
"""Someone with no account (and no role) who reached a service somehow."""
NOT_AN_ACCOUNT = Identity(None, "eve", "annotator")
"""An annotator's role without an account behind it."""


@pytest.fixture
def project(tmp_path: Path, project_factory: Any) -> Iterator[Project]:
    opened = project_factory(tmp_path / "proj", per_case=3)
    yield opened
    opened.close()


def first_item(project: Project) -> str:
    with project.db.read() as s:
        found = s.scalar(select(Item.public_id).where(Item.role == "primary").order_by(Item.id))
    assert found is not None
    return found


def label_everything(project: Project, *names: str) -> None:
    for name in names:
        me = as_user(project, name)
        for row in project.queue(me).rows:
            project.submit_pair(me, row.public_id, PairAnswer(ALL_A))


def test_the_dashboard_is_refused_to_anyone_but_an_admin(project: Project) -> None:
    label_everything(project, "bob")
    quality = QualityService(project)
    for caller in (OUTSIDER, NOT_AN_ACCOUNT, as_user(project, "alice"), as_user(project, "bob")):
        with pytest.raises(Forbidden):
            quality.dashboard(caller)
        with pytest.raises(Forbidden):
            project.dashboard(caller)
    board = quality.dashboard(as_user(project, ADMIN))
    assert board.done == len(project.queue(as_user(project, "bob")).rows)
    assert quality.dashboard(Identity.command_line()).done == board.done


def test_an_item_review_is_refused_to_an_annotator_even_for_an_item_they_labelled(project: Project) -> None:
    label_everything(project, "alice", "bob")
    item_id = first_item(project)
    quality = QualityService(project)
    # bob's labels are on the item alice asks about, and hers on the item bob asks about
    for caller in (OUTSIDER, NOT_AN_ACCOUNT, as_user(project, "alice"), as_user(project, "bob")):
        with pytest.raises(Forbidden):
            quality.item_review(caller, item_id)
        with pytest.raises(Forbidden):  # refused before the id is even looked at
            quality.item_review(caller, "no-such-item")
    review = quality.item_review(as_user(project, ADMIN), item_id)
    assert {name for name, *_ in review.labels} >= {"alice", "bob"}
    with pytest.raises(NotFound):
        quality.item_review(as_user(project, ADMIN), "no-such-item")


def test_the_labelled_set_is_refused_to_anyone_but_an_admin(project: Project, tmp_path: Path) -> None:
    label_everything(project, "alice")
    exports = ExportService(project)
    out = tmp_path / "export.jsonl"
    for caller in (OUTSIDER, NOT_AN_ACCOUNT, as_user(project, "alice"), as_user(project, "bob")):
        with pytest.raises(Forbidden):
            exports.labelled_cases(caller)
        with pytest.raises(Forbidden):
            exports.export(caller, "canonical", out)
        assert not out.exists()
    cases, summary = exports.labelled_cases(as_user(project, ADMIN))
    assert summary.items == len(cases) > 0
    assert any(annotation.annotator == "alice" for case in cases for annotation in case.annotations)


def test_an_annotator_reaches_no_other_annotators_work_through_any_service(project: Project) -> None:
    label_everything(project, "bob")
    alice, bob = as_user(project, "alice"), as_user(project, "bob")
    theirs = project.queue(bob).rows[0].public_id
    for call in (
        lambda: project.assignments.case_view(alice, theirs),
        lambda: project.assignments.assignment_kind(alice, theirs),
        lambda: project.labelling.submit_pair(alice, theirs, PairAnswer(ALL_A)),
        lambda: project.images.assignment_image(alice, theirs),
        lambda: project.assignments.case_view(OUTSIDER, theirs),
        lambda: project.labelling.submit_pair(NOT_AN_ACCOUNT, theirs, PairAnswer(ALL_A)),
    ):
        with pytest.raises(NotFound):
            call()
    for call in (
        lambda: project.accounts.list_api_tokens(alice, "bob"),
        lambda: project.accounts.create_api_token(alice, "bob"),
        lambda: project.accounts.set_password(alice, "bob", "a-new-long-password"),
    ):
        with pytest.raises(Forbidden):
            call()
    assert project.assignments.queue(OUTSIDER).rows == ()


def test_admin_services_refuse_an_annotator(project: Project) -> None:
    alice = as_user(project, "alice")
    item_id = first_item(project)
    for call in (
        lambda: project.accounts.list_users(alice),
        lambda: project.accounts.add_user(alice, "mallory", "admin", "a-long-password"),
        lambda: project.accounts.set_active(alice, "bob", False),
        lambda: project.records.audit_entries(alice),
        lambda: project.records.set_guidelines(alice, "# mine now"),
        lambda: project.adjudication.adjudicate(alice, item_id, {"accuracy": "1"}),
        lambda: project.images.item_image(alice, item_id),
        lambda: project.assignments.rebalance(alice),
    ):
        with pytest.raises(Forbidden):
            call()
    assert [u.name for u in project.accounts.list_users(as_user(project, ADMIN))].count("mallory") == 0
