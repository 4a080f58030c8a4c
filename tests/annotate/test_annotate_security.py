"""Security over real HTTP, on SQLite and on PostgreSQL: every route needs a session, annotators only reach
their own work, CSRF on every form, escaped output, login rate limits (also under a burst of parallel
attempts), trusted proxies only, and the audit log.

Routes are enumerated from the app itself, so a route added later is covered without editing
these tests: each path parameter is filled with a real value that belongs to someone else.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from argon2 import Type, extract_parameters
from fastapi.routing import APIRoute
from helpers.annotate import (
    ADMIN,
    CSRF,
    PASSWORD,
    XSS,
    Site,
    as_user,
    client_for,
    login,
    login_form,
)
from starlette.routing import Mount

from medrewardbench.annotate import security
from medrewardbench.annotate.service import UNKNOWN_USER, Identity
from medrewardbench.annotate.web import PUBLIC_PATHS
from medrewardbench.dimensions import DIMENSIONS


@pytest.fixture
def site(attack_site: Site) -> Site:
    return attack_site


@pytest.fixture
def production_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2's production parameters for this test (the suite hashes cheaply, see tests/conftest.py).

    The burst and gate tests need hashes slow enough that logins overlap, as on a real server.
    """
    monkeypatch.delenv(security.FAST_HASHING_ENV)


def test_production_hashes_with_argon2id_at_64_mib_and_three_passes_and_rehashes_cheap_test_hashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert os.environ.get(security.FAST_HASHING_ENV) == "1", "tests/conftest.py sets the switch by this name"
    cheap = security.hash_password(PASSWORD)
    assert extract_parameters(cheap).memory_cost == 8 and not security.needs_rehash(cheap)
    monkeypatch.delenv(security.FAST_HASHING_ENV)
    strong = security.hash_password(PASSWORD)
    params = extract_parameters(strong)
    assert (params.type, params.memory_cost, params.time_cost, params.parallelism) == (Type.ID, 64 * 1024, 3, 4)
    assert (params.salt_len, params.hash_len) == (16, 32)
    assert security.verify_password(strong, PASSWORD) and not security.verify_password(strong, "wrong-password")
    assert not security.verify_password(None, PASSWORD)  # no such user: checked against a dummy, refused
    assert not security.needs_rehash(strong)
    # a cheap hash met by a real server still logs in, and is replaced at that login
    assert security.verify_password(cheap, PASSWORD) and security.needs_rehash(cheap)
    for value in ("", "0", "true"):  # only exactly "1" switches it on
        monkeypatch.setenv(security.FAST_HASHING_ENV, value)
        assert security.password_hasher().memory_cost == 64 * 1024


def test_a_cheap_test_hash_is_replaced_by_a_production_hash_at_the_next_login(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stored(name: str) -> str:
        with site.project.db.read() as s:
            return str(s.execute(sa.text("SELECT password_hash FROM users WHERE name = :n"), {"n": name}).scalar())

    add_annotator(site, "rehash-user")  # made with the suite's cheap parameters
    assert extract_parameters(stored("rehash-user")).memory_cost == 8
    monkeypatch.delenv(security.FAST_HASHING_ENV)  # the server now runs with production parameters
    with client_for(site.base) as client:
        login(client, "rehash-user")
    params = extract_parameters(stored("rehash-user"))
    assert (params.memory_cost, params.time_cost, params.parallelism) == (64 * 1024, 3, 4)
    with client_for(site.base) as client:
        login(client, "rehash-user")  # and the new hash logs in


def test_an_app_made_with_the_test_only_hashing_switch_says_so_in_its_log(
    project_factory: Callable[..., Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from medrewardbench.annotate.web import create_app

    project = project_factory(tmp_path / "proj")
    try:
        with caplog.at_level(logging.WARNING, logger="medrewardbench.annotate.web"):
            create_app(project)
            assert [r.getMessage() for r in caplog.records] == [
                f"{security.FAST_HASHING_ENV}=1: passwords are hashed with test-only cheap parameters; "
                "unset it for a real server"
            ]
            caplog.clear()
            monkeypatch.delenv(security.FAST_HASHING_ENV)
            create_app(project)
            assert caplog.records == []
    finally:
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


def is_admin_route(path: str) -> bool:
    return path.startswith(("/admin", "/api/v1/admin"))


def test_an_annotator_never_reaches_another_annotators_work(site: Site) -> None:
    # every route open to annotators that takes an id, each id filled with one of bob's
    with_ids = sorted(r for r in routes(site.app) if "{" in r[1] and not is_admin_route(r[1]))
    assert {path for _, path in with_ids} >= {"/a/{assignment_id}", "/account/tokens/{token_id}/revoke"}
    assert len(with_ids) >= 6
    before = site.project.case_view(as_user(site.project, "bob"), site.bob_ids[0]).submission
    with client_for(site.base) as client:
        csrf = login(client, "alice")
        auth = site.auth("alice")
        for method, path in with_ids:
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
    bobs = site.project.list_api_tokens(Identity.command_line(), "bob")
    assert not next(t for t in bobs if t.token_id == site.bob_token_id).revoked


def test_admin_routes_are_admin_only(site: Site) -> None:
    admin_routes = [r for r in routes(site.app) if is_admin_route(r[1])]
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


# ------------------------------------------------------------------------------------------------
# Logins under a burst, trusted proxies, what a failed login leaves behind
# ------------------------------------------------------------------------------------------------


def burst(
    site: Site,
    attempts: list[tuple[str, str]],
    headers: dict[str, str] | list[dict[str, str]] | None = None,
    local_address: str | None = None,
) -> list[int]:
    """Post every (name, password) to the login form at once, each from its own fresh form; the statuses."""
    each = headers if isinstance(headers, list) else [headers or {} for _ in attempts]
    clients = [client_for(site.base, local_address) for _ in attempts]
    try:
        tokens = [login_form(client, each[index]) for index, client in enumerate(clients)]
        start = threading.Barrier(len(attempts))

        def attempt(index: int) -> int:
            name, password = attempts[index]
            start.wait(timeout=30)
            data = {"username": name, "password": password, "csrf_token": tokens[index]}
            return clients[index].post("/login", data=data, headers=each[index]).status_code

        with ThreadPoolExecutor(len(attempts)) as pool:
            return list(pool.map(attempt, range(len(attempts))))
    finally:
        for client in clients:
            client.close()


def attempts_of(site: Site, **where: str) -> int:
    with site.project.db.read() as s:
        column, value = next(iter(where.items()))
        return int(
            s.execute(sa.text(f"SELECT COUNT(*) FROM login_attempts WHERE {column} = :v"), {"v": value}).scalar()
        )


def add_annotator(site: Site, name: str) -> None:
    if name not in {u.name for u in site.project.list_users()}:
        site.project.add_user(Identity.command_line(), name, "annotator", PASSWORD)


def test_a_burst_of_parallel_wrong_passwords_checks_at_most_the_per_name_limit(
    site: Site, production_hashing: None
) -> None:
    add_annotator(site, "erin")
    proxy = {"x-forwarded-for": "198.51.100.10"}  # its own address, so other tests' failures do not count
    codes = burst(site, [("erin", f"wrong-guess-{i}") for i in range(30)], proxy)
    checked = codes.count(401)
    assert set(codes) <= {401, 429}, codes
    assert 1 <= checked <= security.MAX_FAILURES_PER_USER, codes
    assert attempts_of(site, username="erin") == checked  # the refused ones were never hashed nor stored
    with client_for(site.base) as client:
        token = login_form(client, proxy)
        right = client.post(
            "/login", data={"username": "erin", "password": PASSWORD, "csrf_token": token}, headers=proxy
        )
        assert right.status_code == 429 and "too many failed logins" in right.text


class CountingGate(security.HashGate):
    """The real gate, also recording the most hashes it let run at once."""

    def __init__(self, slots: int, wait_seconds: float):
        super().__init__(slots, wait_seconds)
        self.inside = self.peak = 0
        self._count = threading.Lock()

    def slot(self) -> Any:
        inner = super().slot()
        gate = self

        class Counted:
            def __enter__(self) -> None:
                inner.__enter__()
                with gate._count:
                    gate.inside += 1
                    gate.peak = max(gate.peak, gate.inside)

            def __exit__(self, *exc: object) -> None:
                with gate._count:
                    gate.inside -= 1
                inner.__exit__(*exc)

        return Counted()


def test_password_hashes_in_flight_are_bounded_and_the_excess_is_told_to_retry(
    site: Site, monkeypatch: pytest.MonkeyPatch, production_hashing: None
) -> None:
    if site.backend != "sqlite":
        pytest.skip("the gate is the same code whatever the database")
    gate = CountingGate(2, 60.0)
    monkeypatch.setattr(security, "HASH_GATE", gate)
    codes = burst(site, [(f"wait-{i}", "wrong-password") for i in range(6)], {"x-forwarded-for": "198.51.100.30"})
    assert codes == [401] * 6 and gate.peak == 2  # all checked, never more than two at once
    monkeypatch.setattr(security, "HASH_GATE", security.HashGate(1, 0.0))
    proxy = {"x-forwarded-for": "198.51.100.31"}
    statuses: list[tuple[int, str | None]] = []
    clients = [client_for(site.base) for _ in range(4)]
    tokens = [login_form(client, proxy) for client in clients]
    start = threading.Barrier(4)

    def attempt(index: int) -> tuple[int, str | None]:
        start.wait(timeout=30)
        data = {"username": f"busy-{index}", "password": "wrong-password", "csrf_token": tokens[index]}
        response = clients[index].post("/login", data=data, headers=proxy)
        return response.status_code, response.headers.get("retry-after")

    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(attempt, range(4)))
    for client in clients:
        client.close()
    busy = [retry for code, retry in statuses if code == 503]
    assert busy and all(retry is not None and int(retry) >= 1 for retry in busy), statuses
    assert {code for code, _ in statuses} <= {401, 503}
    # a login the server was too busy to check does not count against the limits
    assert attempts_of(site, client="198.51.100.31") == sum(1 for code, _ in statuses if code == 401)


@pytest.mark.slow
def test_a_burst_from_one_address_rotating_forwarded_for_checks_at_most_the_per_address_limit(
    site: Site, production_hashing: None
) -> None:
    # 127.0.0.2 is not a trusted proxy: each attempt claims another address and another name, in vain
    attempts = [(f"rotating-{i}", "wrong-password") for i in range(24)]
    headers = [{"x-forwarded-for": f"203.0.113.{i + 1}", "x-forwarded-proto": "https"} for i in range(24)]
    codes = burst(site, attempts, headers, local_address="127.0.0.2")
    assert set(codes) <= {401, 429}, codes
    assert 1 <= codes.count(401) <= security.MAX_FAILURES_PER_CLIENT, codes
    assert attempts_of(site, client="127.0.0.2") == codes.count(401)
    assert attempts_of(site, client="203.0.113.1") == 0
    with client_for(site.base, local_address="127.0.0.2") as client:
        fake = {"x-forwarded-for": "203.0.113.250", "x-forwarded-proto": "https"}
        page = client.get("/login", headers=fake)
        assert "Secure" not in page.headers["set-cookie"]  # nor is the scheme it claims believed
        token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
        data = {"username": "alice", "password": PASSWORD, "csrf_token": token}
        assert client.post("/login", data=data, headers=fake).status_code == 429


def test_forwarded_for_from_a_client_that_is_no_trusted_proxy_is_ignored(site: Site) -> None:
    with client_for(site.base, local_address="127.0.0.3") as client:
        fake = {"x-forwarded-for": "203.0.113.200", "x-forwarded-proto": "https"}
        page = client.get("/login", headers=fake)
        assert "Secure" not in page.headers["set-cookie"]
        token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
        data = {"username": "untrusted-nobody", "password": "wrong-password", "csrf_token": token}
        assert client.post("/login", data=data, headers=fake).status_code == 401
    assert attempts_of(site, username=site.project.signer.unknown_name("untrusted-nobody")) == 1
    assert attempts_of(site, client="203.0.113.200") == 0
    entry = next(e for e in site.project.audit_entries(Identity.command_line()) if e.action == "login.failed")
    assert entry.client == "127.0.0.3"


def test_trusted_proxy_lists_take_addresses_networks_or_everyone() -> None:
    from medrewardbench.annotate.middleware import TrustedProxies

    proxies = TrustedProxies(lambda *args: None, "127.0.0.1, 10.0.0.0/8,::1")  # type: ignore[arg-type,return-value]
    for host in ("127.0.0.1", "10.1.2.3", "::1", "::ffff:127.0.0.1", "[::1]"):
        assert proxies.trusts(host), host
    for host in ("127.0.0.2", "11.0.0.1", "fe80::1", "", None, "unix:/run/socket", "203.0.113.1, 127.0.0.1"):
        assert not proxies.trusts(host), host
    assert not TrustedProxies(lambda *args: None, "").trusts("127.0.0.1")  # type: ignore[arg-type,return-value]
    assert TrustedProxies(lambda *args: None, "*").trusts("198.51.100.1")  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="'proxy.example' is not an IP address"):
        TrustedProxies(lambda *args: None, "127.0.0.1,proxy.example")  # type: ignore[arg-type,return-value]


def test_a_trusted_proxy_is_believed(site: Site) -> None:
    # 127.0.0.1 is the default trusted proxy: the address and the scheme it reports count
    with client_for(site.base) as client:
        proxy = {"x-forwarded-for": "192.0.2.77"}
        token = login_form(client, proxy)
        data = {"username": "proxied-nobody", "password": "wrong-password", "csrf_token": token}
        assert client.post("/login", data=data, headers=proxy).status_code == 401
        https = client.get("/login", headers={**proxy, "x-forwarded-proto": "https"})
        assert "Secure" in https.headers["set-cookie"]
    assert attempts_of(site, client="192.0.2.77") == 1
    entry = next(e for e in site.project.audit_entries(Identity.command_line()) if e.action == "login.failed")
    assert entry.client == "192.0.2.77"


def test_a_failed_login_never_stores_an_unknown_name_as_typed(site: Site) -> None:
    typed = "Tr0ub4dor&3-my-password"  # a password typed into the name box
    proxy = {"x-forwarded-for": "198.51.100.40"}
    with client_for(site.base) as client:
        for _ in range(2):
            token = login_form(client, proxy)
            data = {"username": typed, "password": "whatever-it-was", "csrf_token": token}
            assert client.post("/login", data=data, headers=proxy).status_code == 401
        token = login_form(client, proxy)
        data = {"username": "bob", "password": "wrong-for-bob", "csrf_token": token}
        assert client.post("/login", data=data, headers=proxy).status_code == 401
    with site.project.db.read() as s:
        rows = s.execute(sa.text("SELECT actor, action, target, old, new FROM audit_log")).all()
        rows += s.execute(sa.text("SELECT username, client, at, success, id FROM login_attempts")).all()
    assert not any(typed in str(value) for row in rows for value in row)
    failed = [
        e
        for e in site.project.audit_entries(Identity.command_line())
        if e.action == "login.failed" and e.client == "198.51.100.40"
    ]
    unknown = [e for e in failed if e.actor == UNKNOWN_USER]
    assert len(unknown) == 2 and unknown[0].target == unknown[1].target  # the same name, recognisably
    assert unknown[0].target.startswith("unknown-user:")
    assert [e.target for e in failed if e.actor == "bob"] == ["user:bob"]  # known names are fine


def test_a_nul_in_the_login_name_is_refused_naming_the_field(site: Site) -> None:
    with client_for(site.base) as client:
        token = login_form(client)
        data = {"username": "alice\x00", "password": PASSWORD, "csrf_token": token}
        response = client.post("/login", data=data)
        assert response.status_code == 400 and "user name" in response.text and "NUL" in response.text
        assert "csrf_token" in response.text  # the form, ready to try again


def test_changing_a_password_ends_every_session_and_revokes_every_token(site: Site) -> None:
    add_annotator(site, "frank")
    cli = Identity.command_line()
    token = site.project.create_api_token(cli, "frank", "script")
    auth = {"authorization": f"Bearer {token}"}
    with client_for(site.base) as other, client_for(site.base) as client:
        login(other, "frank")
        csrf = login(client, "frank")
        assert client.get("/api/v1/queue", headers=auth).status_code == 200
        new = "a-brand-new-password"
        data = {"csrf_token": csrf, "current_password": PASSWORD, "new_password": new, "repeat_password": new}
        changed = client.post("/account/password", data=data)
        assert changed.status_code == 303 and changed.headers["location"] == "/login"
        assert other.get("/queue").status_code == 303  # the other browser is logged out
        assert client.get("/api/v1/queue", headers=auth).status_code == 401  # the token is revoked
        login(client, "frank", new)
    assert all(t.revoked for t in site.project.list_api_tokens(cli, "frank"))
    entry = next(e for e in site.project.audit_entries(cli) if e.action == "user.password")
    assert entry.new == {"sessions_ended": 2, "tokens_revoked": 1}
    # an admin's (or the command line's) reset does the same
    again = site.project.create_api_token(cli, "frank", "script 2")
    site.project.set_password(cli, "frank", PASSWORD)
    with client_for(site.base) as client:
        assert client.get("/api/v1/queue", headers={"authorization": f"Bearer {again}"}).status_code == 401


def test_the_api_schema_lists_only_the_routes_of_the_callers_role(site: Site) -> None:
    api_paths = {path for _, path in routes(site.app) if path.startswith("/api/v1/")}
    admin_paths = {path for path in api_paths if is_admin_route(path)}
    assert admin_paths
    with client_for(site.base) as client:
        mine = client.get("/api/v1/openapi.json", headers=site.auth("alice")).json()
        theirs = client.get("/api/v1/openapi.json", headers=site.auth(ADMIN)).json()
        assert client.get("/api/v1/openapi.json").status_code == 401
    assert set(mine["paths"]) == api_paths - admin_paths
    assert set(theirs["paths"]) == api_paths
    assert "admin" not in str(mine).lower().replace("adminis", "")
