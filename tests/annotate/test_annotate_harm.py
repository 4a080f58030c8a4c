"""The harm flag: an annotator may flag either answer of a pair as harmful, with a severity.

Through the service, the case page's form and the API, over real HTTP; refused to an outsider, to
another annotator and (for the export that carries it) to a non-admin; kept by the migration that
adds it; exported with the labels and read back from the canonical file.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from helpers.annotate import ADMIN, Site, as_user, client_for, login, serve_in_thread

from medrewardbench.annotate.config import InvalidInput
from medrewardbench.annotate.db import current_revision, make_engine, migrate
from medrewardbench.annotate.export import export_project
from medrewardbench.annotate.service import Identity, PairAnswer
from medrewardbench.data import load_benchmark
from medrewardbench.dimensions import DIMENSIONS

ALL_A = dict.fromkeys(DIMENSIONS, "A")


@pytest.fixture(scope="module")
def served(project_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    project = project_factory(tmp_path_factory.mktemp("harm") / "proj", cases=12, per_case=3)
    with serve_in_thread(project) as base:
        yield project, base
    project.close()


def assignment(project: Any, user: str, order: str) -> str:
    """One of the user's assignments shown in ``order``."""
    from medrewardbench.annotate.db import Assignment, User

    with project.db.read() as s:
        found = s.execute(
            sa.select(Assignment.public_id)
            .join(User, User.id == Assignment.user_id)
            .where(User.name == user, Assignment.order_shown == order)
        ).first()
    assert found is not None, (user, order)
    return str(found[0])


def stored_harm(project: Any, public_id: str) -> Any:
    from medrewardbench.annotate.db import Assignment, Submission

    with project.db.read() as s:
        return s.execute(
            sa.select(Submission.harm)
            .join(Assignment, Assignment.id == Submission.assignment_id)
            .where(Assignment.public_id == public_id)
        ).scalar_one_or_none()


def test_a_flag_is_stored_in_source_order_and_shown_as_it_was_clicked(served: tuple[Any, str]) -> None:
    project, _ = served
    alice = as_user(project, "alice")
    swapped = assignment(project, "alice", "swapped")
    saved = project.submit_pair(alice, swapped, PairAnswer(ALL_A, harm={"A": "severe", "B": ""}))
    assert dict(saved.harm) == {"A": "severe"}
    assert stored_harm(project, swapped) == {"2": "severe"}  # A shown first was response 2
    assert dict(project.case_view(alice, swapped).submission.harm) == {"A": "severe"}
    # the same answer again records nothing new; "none" clears the flag
    again = project.submit_pair(alice, swapped, PairAnswer(ALL_A, harm={"A": "severe"}))
    assert again.revision == saved.revision
    cleared = project.submit_pair(alice, swapped, PairAnswer(ALL_A, harm={"A": "none"}))
    assert dict(cleared.harm) == {} and stored_harm(project, swapped) is None


def test_a_bad_severity_or_answer_is_refused_naming_it(served: tuple[Any, str]) -> None:
    project, _ = served
    alice = as_user(project, "alice")
    original = assignment(project, "alice", "original")
    with pytest.raises(InvalidInput, match="harm A: choose none, minor, moderate, severe, critical"):
        project.submit_pair(alice, original, PairAnswer(ALL_A, harm={"A": "deadly"}))
    with pytest.raises(InvalidInput, match="harm: flag answer A or B"):
        project.submit_pair(alice, original, PairAnswer(ALL_A, harm={"C": "minor"}))


def test_the_case_page_and_the_api_save_the_flag(served: tuple[Any, str]) -> None:
    project, base = served
    pid = assignment(project, "bob", "original")
    with client_for(base) as client:
        login(client, "bob")
        page = client.get(f"/a/{pid}").text
        assert 'name="harm_A"' in page and 'name="harm_B"' in page and "critical: death or irreversible" in page
        fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
        fields.pop("seconds", None)
        data = fields | {f"dim_{d}": "B" for d in DIMENSIONS} | {"harm_A": "critical", "harm_B": ""}
        assert client.post(f"/a/{pid}", data=data).status_code == 303
        assert stored_harm(project, pid) == {"1": "critical"}
        shown = client.get(f"/a/{pid}").text
        assert re.search(r'<option value="critical" selected>', shown)
        # a bad severity comes back with the page, the other entries kept
        fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', shown))
        bad = client.post(f"/a/{pid}", data=fields | {f"dim_{d}": "B" for d in DIMENSIONS} | {"harm_B": "fatal"})
        assert bad.status_code == 400 and "harm B: choose none" in bad.text
    token = project.create_api_token(Identity.command_line(), "bob", "script")
    with client_for(base) as client:
        auth = {"authorization": f"Bearer {token}"}
        body = {"choices": dict.fromkeys(DIMENSIONS, "A"), "harm": {"B": "moderate"}}
        response = client.put(f"/api/v1/assignments/{pid}/submission", headers=auth, json=body)
        assert response.status_code == 200, response.text
        assert response.json()["harm"] == {"B": "moderate"}
        assert client.get(f"/api/v1/assignments/{pid}", headers=auth).json()["submission"]["harm"] == {"B": "moderate"}
        bad = client.put(f"/api/v1/assignments/{pid}/submission", headers=auth, json={**body, "harm": {"B": "x"}})
        assert bad.status_code in (400, 422) and "harm B" in bad.text
    assert stored_harm(project, pid) == {"2": "moderate"}


def test_the_flag_is_exported_with_the_labels_and_read_back(served: tuple[Any, str], tmp_path: Path) -> None:
    project, _ = served
    carol = as_user(project, "carol")
    pid = assignment(project, "carol", "swapped")
    project.submit_pair(carol, pid, PairAnswer(ALL_A, harm={"B": "minor", "A": "critical"}))
    out = tmp_path / "export" / "labelled.jsonl"
    export_project(project, "canonical", out)
    card = json.loads((out.parent / "dataset.json").read_text())
    assert card["labels"]["harm_flags"]["critical"] >= 1 and card["labels"]["harm_flags"]["minor"] >= 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    flagged = [a for r in rows for a in r.get("annotations", []) if a["annotator"] == "carol" and "harm" in a]
    assert {"1": "minor", "2": "critical"} in [a["harm"] for a in flagged]  # swapped: A was response 2
    released = load_benchmark(str(out))
    harms = [dict(a.harm) for c in released.cases for a in c.annotations if a.annotator == "carol" and a.harm]
    assert {1: "minor", 2: "critical"} in harms


def test_an_outsider_another_annotator_and_a_non_admin_are_refused(attack_site: Site) -> None:
    site = attack_site
    bobs = site.bob_ids[0]
    before = stored_harm(site.project, bobs)
    with client_for(site.base) as client:  # no session, no token
        posted = client.post(f"/a/{bobs}", data={f"dim_{d}": "B" for d in DIMENSIONS} | {"harm_A": "critical"})
        assert posted.status_code == 303 and posted.headers["location"].startswith("/login")
        put = client.put(f"/api/v1/assignments/{bobs}/submission", json={"choices": ALL_A, "harm": {"A": "critical"}})
        assert put.status_code == 401
    with client_for(site.base) as client:  # alice, on bob's case
        csrf = login(client, "alice")
        data = {"csrf_token": csrf, **{f"dim_{d}": "B" for d in DIMENSIONS}, "harm_A": "critical"}
        assert client.post(f"/a/{bobs}", data=data).status_code == 404
        body = {"choices": ALL_A, "harm": {"A": "critical"}}
        put = client.put(f"/api/v1/assignments/{bobs}/submission", headers=site.auth("alice"), json=body)
        assert put.status_code == 404
        # the exports that carry every doctor's flags are the admins' alone
        assert client.get("/admin/export/canonical.jsonl").status_code == 403
        assert client.get("/api/v1/admin/export/canonical.jsonl", headers=site.auth("alice")).status_code == 403
    assert stored_harm(site.project, bobs) == before
    with client_for(site.base) as client:  # the admin gets them
        response = client.get("/api/v1/admin/export/release.zip", headers=site.auth(ADMIN))
        assert response.status_code == 200
        names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
        assert any(name.endswith("dataset.json") for name in names)


def _downgrade(url: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    from medrewardbench.annotate.db import MIGRATIONS_DIR

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, revision)
    finally:
        engine.dispose()


def _columns(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return {c["name"] for c in sa.inspect(connection).get_columns("submissions")}
    finally:
        engine.dispose()


def test_the_migration_adds_the_flag_to_an_existing_project_and_can_be_undone(
    project_factory: Any, tmp_path: Path
) -> None:
    project = project_factory(tmp_path / "proj", per_case=2)
    try:
        alice = as_user(project, "alice")
        for row in project.queue(alice).rows:
            project.submit_pair(alice, row.public_id, PairAnswer(ALL_A, comment="kept"))
        url = project.db.url
        done = project.queue(alice).done
    finally:
        project.close()
    assert current_revision(url) == "r0002" and "harm" in _columns(url)
    _downgrade(url, "r0001")  # the database as the app before the flag left it, with its answers
    assert current_revision(url) == "r0001" and "harm" not in _columns(url)
    migrate(url)
    assert current_revision(url) == "r0002" and "harm" in _columns(url)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT comment, harm FROM submissions")).all()
    finally:
        engine.dispose()
    assert len(rows) == done and all(comment == "kept" and harm is None for comment, harm in rows)


def test_the_adjudicator_sees_each_doctors_flags_in_their_own_a_and_b(served: tuple[Any, str]) -> None:
    from medrewardbench.annotate.db import Assignment, Item

    project, base = served
    alice = as_user(project, "alice")
    pid = assignment(project, "alice", "swapped")
    project.submit_pair(alice, pid, PairAnswer(ALL_A, harm={"A": "critical"}))  # her A: response 2
    with project.db.read() as s:
        item = s.execute(
            sa.select(Item.public_id).join(Assignment, Assignment.item_id == Item.id).where(Assignment.public_id == pid)
        ).scalar_one()
    review = project.item_review(as_user(project, ADMIN), item)
    (alice_votes,) = [v for v in review.votes_as_shown() if v.annotator == "alice"]
    assert alice_votes.harm == {"B": "critical"}  # the adjudicator's B is response 2
    with client_for(base) as client:
        login(client, ADMIN)
        page = client.get(f"/admin/items/{item}").text
        assert "<strong>B</strong>: critical" in page
    token = project.create_api_token(Identity.command_line(), ADMIN, "review")
    with client_for(base) as client:
        found = client.get(f"/api/v1/admin/items/{item}", headers={"authorization": f"Bearer {token}"}).json()
    assert {"2": "critical"} in [label["harm"] for label in found["labels"] if label["annotator"] == "alice"]
