"""Security over real HTTP: every route needs a session, annotators only reach their own work, CSRF on
every form, escaped output, login rate limits and the audit log.

Routes are enumerated from the app itself, so a route added later is covered without editing
these tests: each path parameter is filled with a real value that belongs to someone else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from helpers.annotate import ADMIN, CSRF, PASSWORD, XSS, as_user, client_for, login, serve_in_thread
from starlette.routing import Mount

from medrewardbench.annotate.service import Identity, PairAnswer
from medrewardbench.annotate.web import PUBLIC_PATHS, create_app
from medrewardbench.dimensions import DIMENSIONS


class Site:
    def __init__(self, project: Any, app: Any, base: str):
        self.project = project
        self.app = app
        self.base = base
        alice, bob = as_user(project, "alice"), as_user(project, "bob")
        self.alice_ids = [row.public_id for row in project.queue(alice).rows]
        self.bob_ids = [row.public_id for row in project.queue(bob).rows]
        project.submit_pair(bob, self.bob_ids[0], PairAnswer({d: "A" for d in DIMENSIONS}, comment=XSS))
        self.bob_token = project.create_api_token(Identity.command_line(), "bob", "bob's script")
        self.alice_token = project.create_api_token(Identity.command_line(), "alice", "alice's script")
        self.bob_token_id = project.list_api_tokens(Identity.command_line(), "bob")[0].token_id
        with project.db.read() as s:
            from medrewardbench.annotate.db import Item

            self.item_id = s.query(Item).filter(Item.role == "primary").first().public_id  # type: ignore[union-attr]

    def fill(self, path: str) -> str:
        """A concrete URL for a route: every id belongs to bob (or is an admin-only thing)."""
        values = {
            "assignment_id": self.bob_ids[0],
            "item_id": self.item_id,
            "name": "bob",
            "token_id": str(self.bob_token_id),
            "filename": "canonical.jsonl",
        }
        for key, value in values.items():
            path = path.replace("{" + key + "}", value)
        assert "{" not in path, f"test does not know how to fill {path}; add the parameter to Site.fill"
        return path


@pytest.fixture(scope="module")
def site(project_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    project = project_factory(tmp_path_factory.mktemp("sec") / "proj", gold=True, repeat_share=0.5, per_case=2)
    app = create_app(project)
    with serve_in_thread(project, app) as base:
        yield Site(project, app, base)
    project.close()


def routes(app: Any) -> list[tuple[str, str]]:
    found = []
    for route in app.routes:
        if isinstance(route, APIRoute):
            for method in sorted(route.methods or ()):
                found.append((method, route.path))
    return found


def audit_count(site: Site) -> int:
    return len(site.project.audit_entries(Identity.command_line(), limit=1000))


def test_the_app_has_the_routes_we_expect_to_guard(site: Site) -> None:
    paths = {path for _, path in routes(site.app)}
    assert {"/a/{assignment_id}", "/api/v1/assignments/{assignment_id}/submission", "/admin", "/login"} <= paths
    assert len(routes(site.app)) >= 30
    mounts = [route.path for route in site.app.routes if isinstance(route, Mount)]
    assert mounts == ["/static"]
    assert not {"/docs", "/redoc", "/openapi.json"} & paths


def test_every_route_without_a_session_is_refused(site: Site) -> None:
    checked = 0
    with client_for(site.base) as client:
        for method, path in routes(site.app):
            if path in PUBLIC_PATHS:
                continue
            url = site.fill(path)
            response = client.request(method, url, data={} if method == "POST" else None)
            if path.startswith("/api/"):
                assert response.status_code == 401, (method, path, response.status_code)
                assert response.headers["www-authenticate"] == "Bearer"
            else:
                assert response.status_code == 303, (method, path, response.status_code)
                assert response.headers["location"].startswith("/login"), (method, path)
            checked += 1
        # a forged or stale cookie is no better
        client.cookies.set("mrb_session", "forged-" + "x" * 40)
        assert client.get(site.fill("/a/{assignment_id}")).status_code == 303
    assert checked >= 30
    # the public ones: the login form, and the app's own static files (no data in them)
    with client_for(site.base) as client:
        assert client.get("/login").status_code == 200
        assert client.post("/login", data={"username": "alice", "password": PASSWORD}).status_code == 403
        assert client.get("/static/app.js").status_code == 200
        assert client.get("/static/../service.py").status_code == 404


def test_an_annotator_never_reaches_another_annotators_work(site: Site) -> None:
    own = {route for route in routes(site.app) if "{assignment_id}" in route[1]}
    assert len(own) >= 5
    before = site.project.case_view(as_user(site.project, "bob"), site.bob_ids[0]).submission
    with client_for(site.base) as client:
        csrf = login(client, "alice")
        auth = {"authorization": f"Bearer {site.alice_token}"}
        for method, path in sorted(own):
            url = site.fill(path)
            if method == "POST":
                data = {"csrf_token": csrf, **{f"dim_{d}": "B" for d in DIMENSIONS}}
                response = client.post(url, data=data)
            elif method == "PUT":
                response = client.put(url, headers=auth, json={"choices": {d: "B" for d in DIMENSIONS}})
            else:
                response = client.request(method, url, headers=auth if path.startswith("/api/") else None)
            assert response.status_code == 404, (method, path, response.status_code)
            assert "Answer A" not in response.text and "First answer" not in response.text
        # her own ids work, so the 404s above are about ownership, not broken routes
        assert client.get(f"/a/{site.alice_ids[0]}").status_code == 200
        assert client.get(f"/api/v1/assignments/{site.alice_ids[0]}", headers=auth).status_code == 200
    after = site.project.case_view(as_user(site.project, "bob"), site.bob_ids[0]).submission
    assert after == before


def test_admin_routes_are_admin_only(site: Site) -> None:
    admin_routes = [r for r in routes(site.app) if r[1].startswith(("/admin", "/api/v1/admin"))]
    assert len(admin_routes) >= 12
    with client_for(site.base) as client:
        csrf = login(client, "alice")
        auth = {"authorization": f"Bearer {site.alice_token}"}
        for method, path in admin_routes:
            url = site.fill(path)
            if path.startswith("/api/"):
                response = client.request(method, url, headers=auth, json={"values": {}} if method == "PUT" else None)
            else:
                response = client.request(method, url, data={"csrf_token": csrf} if method == "POST" else None)
            assert response.status_code == 403, (method, path, response.status_code)
        # and an annotator's token cannot act for someone else
        assert client.post(f"/account/tokens/{site.bob_token_id}/revoke", data={"csrf_token": csrf}).status_code == 404


def test_every_form_post_needs_the_sessions_csrf_token(site: Site) -> None:
    posts = [(m, p) for m, p in routes(site.app) if m == "POST" and p not in PUBLIC_PATHS]
    assert len(posts) >= 8
    count = audit_count(site)
    with client_for(site.base) as bobs:
        bob_csrf = login(bobs, "bob")
    with client_for(site.base) as client:
        login(client, ADMIN)
        for _, path in posts:
            url = site.fill(path)
            for data in ({}, {"csrf_token": "forged"}, {"csrf_token": bob_csrf}):
                response = client.post(url, data={**data, "text": "hacked", "name": "mallory", "active": "0"})
                assert response.status_code == 403, (path, data, response.status_code)
    assert audit_count(site) == count + 2, "only the two logins were written"
    assert "hacked" not in site.project.guidelines()
    assert "mallory" not in {u.name for u in site.project.list_users()}


def test_the_login_form_needs_its_signed_token_and_cookie(site: Site) -> None:
    with client_for(site.base) as client:
        token = CSRF.search(client.get("/login").text).group(1)  # type: ignore[union-attr]
    with client_for(site.base) as other:  # the token without the cookie it was issued with
        response = other.post("/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token})
        assert response.status_code == 403


def test_an_xss_payload_in_an_answer_and_in_a_comment_is_shown_as_text(site: Site) -> None:
    project = site.project
    alice = as_user(project, "alice")
    target = next(
        pid
        for pid in site.alice_ids
        if "<script>" in project.case_view(alice, pid).answer_a + project.case_view(alice, pid).answer_b
    )
    with client_for(site.base) as client:
        login(client, "alice")
        page = client.get(f"/a/{target}").text
        assert "<script>window.__pwned" not in page and "<img src=x" not in page
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
        api = client.get(f"/api/v1/assignments/{target}", headers={"authorization": f"Bearer {site.alice_token}"})
        assert "<script>" in api.json()["answer_a"] + api.json()["answer_b"]  # data stays data; JSON is not HTML
        assert api.headers["content-type"].startswith("application/json")
    with client_for(site.base) as client:
        login(client, ADMIN)
        pages = [client.get("/admin/audit").text]
        for pending_id in re.findall(r'href="/admin/items/([\w-]+)"', client.get("/admin/adjudication").text):
            pages.append(client.get(f"/admin/items/{pending_id}").text)
        assert any("__pwned" in page for page in pages)
        for page in pages:
            assert "<script>window.__pwned" not in page and "<img src=x" not in page


def test_login_is_rate_limited_per_user_name(site: Site) -> None:
    with client_for(site.base) as client:
        for attempt in range(5):
            token = CSRF.search(client.get("/login").text).group(1)  # type: ignore[union-attr]
            wrong = client.post(
                "/login", data={"username": "carol", "password": f"guess-{attempt}", "csrf_token": token}
            )
            assert wrong.status_code == 401
        token = CSRF.search(client.get("/login").text).group(1)  # type: ignore[union-attr]
        locked = client.post("/login", data={"username": "carol", "password": PASSWORD, "csrf_token": token})
        assert locked.status_code == 429 and int(locked.headers["retry-after"]) > 0
        assert "too many failed logins" in locked.text
        # other users are not locked out by carol's attempts
        login(client, "alice")
    failed = [e for e in site.project.audit_entries(Identity.command_line()) if e.action == "login.failed"]
    assert sum(1 for e in failed if e.target == "user:carol") == 5


def test_a_redirect_after_login_never_leaves_the_site(site: Site) -> None:
    with client_for(site.base) as client:
        page = client.get("/login", params={"next": "//evil.example/x"}).text
        token = CSRF.search(page).group(1)  # type: ignore[union-attr]
        nxt = re.search(r'name="next" value="([^"]*)"', page).group(1)  # type: ignore[union-attr]
        response = client.post(
            "/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token, "next": nxt}
        )
        assert response.status_code == 303 and response.headers["location"] == "/queue"


def test_every_write_is_in_the_audit_log_with_who_when_old_and_new(site: Site) -> None:
    project = site.project
    with client_for(site.base) as client:
        csrf = login(client, ADMIN)
        client.post("/admin/guidelines", data={"csrf_token": csrf, "text": "# New rules\n"})
        client.get("/admin/export/canonical.jsonl")
        item = site.item_id
        client.post(f"/admin/items/{item}", data={"csrf_token": csrf, "adj_overall": "1", "note": "tie-break"})
        client.post("/logout", data={"csrf_token": csrf})
    entries = project.audit_entries(Identity.command_line(), limit=1000)
    by_action: dict[str, list[Any]] = {}
    for entry in entries:
        by_action.setdefault(entry.action, []).append(entry)
    for action in ("project.create", "user.add", "assignments.rebalance", "login", "submit", "token.create",
                   "guidelines.update", "export", "adjudicate", "logout"):  # fmt: skip
        assert action in by_action, action
    guidelines = by_action["guidelines.update"][0]
    assert guidelines.actor == ADMIN and guidelines.client == "127.0.0.1"
    assert guidelines.new == {"guidelines": "# New rules\n"} and "Labelling guidelines" in guidelines.old["guidelines"]
    adjudication = by_action["adjudicate"][0]
    assert adjudication.old is None and adjudication.new == {"value": "1", "note": "tie-break"}
    submit = by_action["submit"][-1]
    assert submit.actor == "bob" and submit.new["comment"] == XSS and submit.at.tzinfo is not None
    assert all(entry.at is not None for entry in entries)


def test_the_server_binds_to_localhost_unless_told_otherwise() -> None:
    import inspect

    from medrewardbench.cli.annotate import serve_command

    host = inspect.signature(serve_command).parameters["host"].default
    assert host == "127.0.0.1"
