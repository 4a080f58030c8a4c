"""The app over real HTTP (uvicorn on 127.0.0.1): login, queue, case pages, submitting, images, API, admin."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.annotate import (
    ADMIN,
    CSRF,
    PASSWORD,
    SECRET_MODEL,
    SECRET_SOURCE,
    as_user,
    client_for,
    login,
    serve_in_thread,
)
from PIL import Image

from medrewardbench.annotate.service import Identity
from medrewardbench.data import load_benchmark
from medrewardbench.dimensions import DIMENSIONS


@pytest.fixture(scope="module")
def site(project_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    project = project_factory(tmp_path_factory.mktemp("http") / "proj", gold=True, repeat_share=0.5, per_case=3)
    with serve_in_thread(project) as base:
        yield project, base
    project.close()


def queue_ids(client: httpx.Client) -> list[str]:
    page = client.get("/queue")
    assert page.status_code == 200
    return re.findall(r'href="/a/([A-Za-z0-9_-]+)"', page.text)


def form_for(page: str) -> dict[str, str]:
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    fields.pop("seconds", None)
    return fields


def test_login_sets_a_strict_httponly_session_cookie_and_lands_on_the_queue(site: tuple[Any, str]) -> None:
    _, base = site
    with client_for(base) as client:
        page = client.get("/login")
        assert "autofocus" in page.text and "mrb_login" in page.headers["set-cookie"]
        token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
        response = client.post("/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token})
        assert response.status_code == 303 and response.headers["location"] == "/queue"
        cookie = next(
            v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith("mrb_session=")
        )
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain HTTP; behind a TLS proxy the flag is set (see test below)
        queue = client.get("/queue")
        assert queue.status_code == 200 and re.search(r"0 of \d+ done", queue.text)


def test_the_secure_flag_follows_https_from_a_trusted_proxy(site: tuple[Any, str]) -> None:
    from medrewardbench.annotate.web import create_app

    project, _ = site
    with serve_in_thread(project, create_app(project, secure_cookies=True)) as base, client_for(base) as client:
        page = client.get("/login")
        assert "Secure" in page.headers["set-cookie"]


def test_a_wrong_password_is_refused_without_saying_which_part_was_wrong(site: tuple[Any, str]) -> None:
    _, base = site
    with client_for(base) as client:
        token = CSRF.search(client.get("/login").text).group(1)  # type: ignore[union-attr]
        response = client.post("/login", data={"username": "alice", "password": "wrong-password", "csrf_token": token})
        assert response.status_code == 401 and "wrong user name or password" in response.text
        assert "mrb_session" not in response.headers.get("set-cookie", "")
        token = CSRF.search(response.text).group(1)  # type: ignore[union-attr]
        response = client.post("/login", data={"username": "nobody", "password": "wrong-password", "csrf_token": token})
        assert response.status_code == 401 and "wrong user name or password" in response.text


def test_pages_carry_security_headers(site: tuple[Any, str]) -> None:
    _, base = site
    with client_for(base) as client:
        login(client, "alice")
        for path in ("/queue", "/login", "/guidelines"):
            headers = client.get(path).headers
            assert "script-src 'self'" in headers["content-security-policy"]
            assert "frame-ancestors 'none'" in headers["content-security-policy"]
            assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
            assert headers["cache-control"] == "no-store" and headers["referrer-policy"] == "no-referrer"


def test_the_case_page_is_blind_and_submitting_saves_and_moves_on(site: tuple[Any, str]) -> None:
    project, base = site
    with client_for(base) as client:
        login(client, "bob")
        ids = queue_ids(client)
        first = client.get(f"/a/{ids[0]}")
        assert first.status_code == 200
        text = first.text
        assert "Answer A" in text and "Answer B" in text and f"Case 1 of {len(ids)}" in text
        for secret in (SECRET_MODEL, SECRET_SOURCE, "generator_1", "case-00"):
            assert secret not in text, secret
        for dim in DIMENSIONS:
            assert f'name="dim_{dim}"' in text
        data = form_for(text) | {f"dim_{dim}": "A" for dim in DIMENSIONS} | {"comment": "looks fine", "seconds": "12.5"}
        saved = client.post(f"/a/{ids[0]}", data=data)
        assert saved.status_code == 303 and saved.headers["location"] == f"/a/{ids[1]}"
        assert re.search(rf"1 of {len(ids)} done", client.get("/queue").text)
        again = client.get(f"/a/{ids[0]}").text
        assert again.count("checked") == len(DIMENSIONS) and "looks fine" in again and "saved" in again
        # change it: all B now
        data = form_for(again) | {f"dim_{dim}": "B" for dim in DIMENSIONS} | {"seconds": "3"}
        assert client.post(f"/a/{ids[0]}", data=data).status_code == 303
    bob = as_user(project, "bob")
    view = project.case_view(bob, ids[0])
    assert view.submission is not None and set(view.submission.choices.values()) == {"B"}
    # 12.5 s claimed a moment after the page was served is implausible: the server's own measure
    # (a fraction of a second) counts instead; the 3 s of the second visit are plausible and add up
    assert view.submission.revision == 2 and 3.0 <= view.submission.seconds < 4.0


def test_an_incomplete_form_comes_back_with_the_error_and_what_was_entered(site: tuple[Any, str]) -> None:
    _, base = site
    with client_for(base) as client:
        login(client, "carol")
        ids = queue_ids(client)
        page = client.get(f"/a/{ids[-1]}").text
        data = form_for(page) | {"dim_accuracy": "B", "comment": "half done"}
        response = client.post(f"/a/{ids[-1]}", data=data)
        assert response.status_code == 400
        assert "choose A or B for every criterion" in response.text and "half done" in response.text
        assert re.search(r'name="dim_accuracy" value="B" checked', response.text)


def test_seconds_fall_back_to_the_signed_page_time_without_javascript(site: tuple[Any, str]) -> None:
    project, base = site
    with client_for(base) as client:
        login(client, "carol")
        ids = queue_ids(client)
        page = client.get(f"/a/{ids[0]}").text
        data = form_for(page) | {f"dim_{dim}": "A" for dim in DIMENSIONS}
        # a forged, implausible client time is ignored in favour of the server's measure
        data["seconds"] = "99999"
        assert client.post(f"/a/{ids[0]}", data=data).status_code == 303
    saved = project.case_view(as_user(project, "carol"), ids[0]).submission
    assert saved is not None and 0 <= saved.seconds < 60


def test_images_are_served_and_dicom_windows_are_rendered_on_request(site: tuple[Any, str]) -> None:
    project, base = site
    alice = as_user(project, "alice")
    dicom_id = png_id = None
    for row in project.queue(alice).rows:
        view = project.case_view(alice, row.public_id)
        if view.dicom is not None and view.dicom.units == "HU":
            dicom_id = row.public_id
        elif view.dicom is None and view.has_image:
            png_id = row.public_id
    assert dicom_id and png_id
    with client_for(base) as client:
        login(client, "alice")
        default = client.get(f"/a/{dicom_id}/image")
        lung = client.get(f"/a/{dicom_id}/image", params={"center": -600, "width": 1500})
        bone = client.get(f"/a/{dicom_id}/image", params={"center": 400, "width": 1800})
        for response in (default, lung, bone):
            assert response.status_code == 200 and response.headers["content-type"] == "image/png"
            assert Image.open(io.BytesIO(response.content)).size == (128, 128)
        assert len({hashlib.sha256(r.content).hexdigest() for r in (default, lung, bone)}) == 3
        assert "private" in lung.headers["cache-control"]
        assert client.get(f"/a/{dicom_id}/image", params={"center": 40}).status_code == 400
        assert client.get(f"/a/{dicom_id}/image", params={"center": 40, "width": 0}).status_code == 400
        plain = client.get(f"/a/{png_id}/image")
        assert plain.status_code == 200 and plain.headers["content-type"] in ("image/png", "image/jpeg")
        assert client.get(f"/a/{png_id}/image", params={"center": 40, "width": 400}).status_code == 400
        page = client.get(f"/a/{dicom_id}").text
        for preset in ("Lung", "Mediastinum", "Bone", "Brain", "Abdomen"):
            assert f">{preset}</button>" in page
        assert 'id="wl-center"' in page and 'id="wl-width"' in page


def test_the_api_mirrors_the_pages_with_bearer_tokens(site: tuple[Any, str]) -> None:
    project, base = site
    token = project.create_api_token(Identity.command_line(), "alice", "script")
    auth = {"authorization": f"Bearer {token}"}
    with client_for(base) as client:
        assert client.get("/api/v1/queue").status_code == 401
        me = client.get("/api/v1/me", headers=auth).json()
        assert me["name"] == "alice" and me["role"] == "annotator"
        queue = client.get("/api/v1/queue", headers=auth).json()
        pid = next(a["id"] for a in queue["assignments"] if not a["done"])
        case = client.get(f"/api/v1/assignments/{pid}", headers=auth).json()
        assert case["answer_a"] and case["answer_b"] and "metadata" not in case
        assert SECRET_MODEL not in json.dumps(case) and SECRET_SOURCE not in json.dumps(case)
        body = {"choices": {dim: "B" for dim in DIMENSIONS}, "comment": "via API", "seconds": 8}
        saved = client.put(f"/api/v1/assignments/{pid}/submission", headers=auth, json=body)
        assert saved.status_code == 200 and saved.json()["choices"] == body["choices"]
        bad = client.put(f"/api/v1/assignments/{pid}/submission", headers=auth, json={"choices": {"accuracy": "A"}})
        assert bad.status_code == 422 and "missing" in bad.json()["error"]
        image = client.get(case["image"], headers=auth)
        assert image.status_code == 200 and image.content[:4] in (b"\x89PNG", b"\xff\xd8\xff\xe0", b"\xff\xd8\xff\xe1")
        assert client.get("/api/v1/guidelines", headers=auth).json()["definitions"]["overall"]
        schema = client.get("/api/v1/openapi.json", headers=auth).json()
        assert "/api/v1/assignments/{assignment_id}/submission" in schema["paths"]
        # the API does not take the session cookie: writes need the token, so no CSRF is possible
        login(client, "alice")
        assert client.get("/api/v1/queue").status_code == 401
        tokens = project.list_api_tokens(Identity.command_line(), "alice")
        project.revoke_api_token(Identity.command_line(), "alice", tokens[0].token_id)
        assert client.get("/api/v1/queue", headers=auth).status_code == 401


def test_guidelines_render_markdown_without_html_and_feed_the_hover_definitions(site: tuple[Any, str]) -> None:
    project, base = site
    text = (
        "# Rules\n\n**Be kind.** <b>raw html</b>\n\n"
        "- **Accuracy**: correct medicine, checked against the image <i>twice</i>.\n"
        "[bad](javascript:alert(1))\n"
    )
    project.set_guidelines(Identity.command_line(), text)
    with client_for(base) as client:
        login(client, "alice")
        page = client.get("/guidelines").text
        assert "<strong>Be kind.</strong>" in page and "&lt;b&gt;raw html&lt;/b&gt;" in page
        assert 'href="javascript' not in page
        case = client.get(f"/a/{queue_ids(client)[0]}").text
        assert "correct medicine, checked against the image &lt;i&gt;twice&lt;/i&gt;." in case


def test_logout_ends_the_session(site: tuple[Any, str]) -> None:
    _, base = site
    with client_for(base) as client:
        csrf = login(client, "alice")
        cookie = client.cookies.get("mrb_session")
        assert client.post("/logout", data={"csrf_token": csrf}).status_code == 303
    with client_for(base) as other:
        other.cookies.set("mrb_session", cookie or "")
        response = other.get("/queue")
        assert response.status_code == 303 and response.headers["location"].startswith("/login")


def test_the_admin_sees_the_dashboard_and_downloads_an_export_that_eval_reads(
    site: tuple[Any, str], tmp_path: Path
) -> None:
    _, base = site
    with client_for(base) as client:
        login(client, ADMIN)
        board = client.get("/admin")
        assert board.status_code == 200
        assert "Fleiss" in board.text and "Krippendorff" in board.text and "Position consistency" in board.text
        assert client.get("/admin/adjudication").status_code == 200
        assert client.get("/admin/users").status_code == 200 and client.get("/admin/audit").status_code == 200
        download = client.get("/admin/export/canonical.jsonl")
        assert download.status_code == 200 and "attachment" in download.headers["content-disposition"]
        out = tmp_path / "export.jsonl"
        out.write_bytes(download.content)
        benchmark = load_benchmark(str(out))
        assert len(benchmark.cases) == 6 and any(case.annotations for case in benchmark.cases)
        archive = client.get("/admin/export/reference.zip")
        assert archive.status_code == 200 and archive.content[:2] == b"PK"
        with zipfile.ZipFile(io.BytesIO(archive.content)) as unzipped:
            assert "dataset.json" in unzipped.namelist()
        # the release: the canonical set with its card, which eval reads with its provenance
        release = client.get("/admin/export/release.zip")
        assert release.status_code == 200 and "release.zip" in release.headers["content-disposition"]
        with zipfile.ZipFile(io.BytesIO(release.content)) as unzipped:
            assert sorted(unzipped.namelist()) == ["dataset.json", "labelled.jsonl"]
            unzipped.extractall(tmp_path / "release")
        released = load_benchmark(str(tmp_path / "release" / "labelled.jsonl"))
        assert released.labels.declared and "dataset card" in released.labels.declared_by
        assert [c.case_id for c in released.cases] == [c.case_id for c in benchmark.cases]
        assert client.get("/admin/export/secrets.txt").status_code == 404
        api = client.get("/api/v1/admin/dashboard")
        assert api.status_code == 401  # the API needs a token even for a logged-in admin


def test_an_admin_adds_a_user_in_the_browser_form(site: tuple[Any, str]) -> None:
    project, base = site
    with client_for(base) as client:
        csrf = login(client, ADMIN)
        bad = client.post(
            "/admin/users", data={"csrf_token": csrf, "name": "dave", "role": "annotator", "password": "short"}
        )
        assert bad.status_code == 400 and "at least 10 characters" in bad.text
        ok = client.post(
            "/admin/users", data={"csrf_token": csrf, "name": "dave", "role": "annotator", "password": PASSWORD}
        )
        assert ok.status_code == 303
    assert {u.name for u in project.list_users()} >= {"dave"}
    assert next(u for u in project.list_users() if u.name == "dave").assigned > 0


def test_retrying_an_api_submission_adds_no_time_and_no_revision(site: tuple[Any, str]) -> None:
    project, base = site
    token = project.create_api_token(Identity.command_line(), "carol", "retries")
    auth = {"authorization": f"Bearer {token}"}
    carol = as_user(project, "carol")
    pid = next(row.public_id for row in project.queue(carol).rows if not row.done)
    body = {"choices": {dim: "A" for dim in DIMENSIONS}, "comment": "sent on a bad line", "seconds": 20}
    with client_for(base) as client:
        answers = [client.put(f"/api/v1/assignments/{pid}/submission", headers=auth, json=body) for _ in range(5)]
    assert [a.status_code for a in answers] == [200] * 5
    assert {(a.json()["seconds"], a.json()["revision"]) for a in answers} == {(20.0, 1)}
    entries = [e for e in project.audit_entries(Identity.command_line()) if e.target == f"assignment:{pid}"]
    assert len(entries) == 1


def test_a_stale_api_save_is_refused_with_the_current_revision(site: tuple[Any, str]) -> None:
    project, base = site
    token = project.create_api_token(Identity.command_line(), "carol", "two clients")
    auth = {"authorization": f"Bearer {token}"}
    carol = as_user(project, "carol")
    pid = next(row.public_id for row in project.queue(carol).rows if not row.done)
    url = f"/api/v1/assignments/{pid}/submission"
    with client_for(base) as client:
        case = client.get(f"/api/v1/assignments/{pid}", headers=auth)
        assert case.headers["etag"] == '"0"' and case.json()["submission"] is None
        a = {"choices": {dim: "A" for dim in DIMENSIONS}}
        b = {"choices": {dim: "B" for dim in DIMENSIONS}}
        assert client.put(url, headers={**auth, "if-match": '"0"'}, json=a).json()["revision"] == 1
        stale = client.put(url, headers={**auth, "if-match": '"0"'}, json=b)
        assert stale.status_code == 409 and stale.json()["revision"] == 1 and "saved elsewhere" in stale.json()["error"]
        stale = client.put(url, headers=auth, json={**b, "expected_revision": 0})
        assert stale.status_code == 409
        mixed = client.put(url, headers={**auth, "if-match": '"1"'}, json={**b, "expected_revision": 0})
        assert mixed.status_code == 422 and "If-Match" in mixed.json()["error"]
        bad = client.put(url, headers={**auth, "if-match": "yesterday"}, json=b)
        assert bad.status_code == 422 and bad.json()["error"].startswith("If-Match:")
        assert client.get(f"/api/v1/assignments/{pid}", headers=auth).headers["etag"] == '"1"'
        fresh = client.put(url, headers={**auth, "if-match": '"1"'}, json=b)
        assert fresh.status_code == 200 and fresh.json()["revision"] == 2
        # a client that sends neither saves over whatever is there (documented)
        assert client.put(url, headers=auth, json=a).json()["revision"] == 3


def test_two_tabs_on_one_case_the_later_save_is_refused_and_keeps_its_answer_on_screen(site: tuple[Any, str]) -> None:
    project, base = site
    with client_for(base) as client:
        login(client, "bob")
        ids = queue_ids(client)
        pid = next(i for i in ids if project.case_view(as_user(project, "bob"), i).submission is None)
        first_tab = form_for(client.get(f"/a/{pid}").text)
        second_tab = form_for(client.get(f"/a/{pid}").text)
        assert first_tab["revision"] == second_tab["revision"] == "0"
        saved = client.post(f"/a/{pid}", data=first_tab | {f"dim_{dim}": "A" for dim in DIMENSIONS})
        assert saved.status_code == 303
        mine = {f"dim_{dim}": "B" for dim in DIMENSIONS} | {"comment": "my own careful reading"}
        refused = client.post(f"/a/{pid}", data=second_tab | mine)
        assert refused.status_code == 409
        assert "saved in another tab or window" in refused.text
        assert re.search(rf'<a href="/a/{pid}" id="reload-link">', refused.text)
        for dim in DIMENSIONS:  # what this tab chose is still on screen, not the saved answer
            assert re.search(rf'name="dim_{dim}" value="B" checked', refused.text), dim
        assert "my own careful reading" in refused.text
        assert form_for(refused.text)["revision"] == "1"
        garbled = client.post(f"/a/{pid}", data=form_for(refused.text) | mine | {"revision": "one"})
        assert garbled.status_code == 400 and "revision:" in garbled.text and "my own careful reading" in garbled.text
        view = project.case_view(as_user(project, "bob"), pid)
        assert view.submission is not None and set(view.submission.choices.values()) == {"A"}
        # saving again from that page is a deliberate choice: it replaces the other tab's answer
        again = client.post(f"/a/{pid}", data=form_for(refused.text) | mine)
        assert again.status_code == 303
    view = project.case_view(as_user(project, "bob"), pid)
    assert view.submission is not None and set(view.submission.choices.values()) == {"B"}
    assert view.submission.revision == 2


def test_the_dashboard_says_when_fewer_annotators_are_active_than_per_case(
    project_factory: Any, tmp_path: Path
) -> None:
    project = project_factory(tmp_path / "proj", per_case=5)
    try:
        with serve_in_thread(project) as base, client_for(base) as client:
            login(client, ADMIN)
            page = client.get("/admin")
            assert page.status_code == 200 and 'id="per-case-warning"' in page.text
            assert "per-case is 5 but only 3 active annotators: each case gets 3 until more are added" in page.text
    finally:
        project.close()
    full = project_factory(tmp_path / "full", per_case=3)
    try:
        with serve_in_thread(full) as base, client_for(base) as client:
            login(client, ADMIN)
            assert 'id="per-case-warning"' not in client.get("/admin").text
    finally:
        full.close()
