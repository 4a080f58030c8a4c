"""What a hostile probe sends, over real HTTP on SQLite and on PostgreSQL: oversized bodies (declared or
streamed), ids beyond the database's integers, NaN and Infinity in JSON, NUL bytes in text. Each gets a
clear 4xx naming the field (never a 500), a doctor's answer is never lost, and every error response
carries the security headers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from helpers.annotate import ADMIN, Site, client_for, login, login_form, raw_request, serve_in_thread

from medrewardbench.annotate.middleware import DEFAULT_MAX_BODY_BYTES, SECURITY_HEADERS
from medrewardbench.annotate.service import MAX_GUIDELINES, Identity
from medrewardbench.annotate.web import create_app
from medrewardbench.dimensions import DIMENSIONS

ALL_A = {dim: "A" for dim in DIMENSIONS}


@pytest.fixture
def site(attack_site: Site) -> Site:
    return attack_site


def routes(app: Any) -> list[tuple[str, str]]:
    return sorted(
        (method, route.path) for route in app.routes if isinstance(route, APIRoute) for method in route.methods
    )


def assert_security_headers(response: Any) -> None:
    for name, value in SECURITY_HEADERS:
        if name != "cache-control":
            assert response.headers.get(name) == value, (response.status_code, name)


def head(method: str, path: str, base: str, extra: str = "") -> str:
    host = base.split("//", 1)[1]
    return f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n"


# ------------------------------------------------------------------------------------------------
# Request bodies
# ------------------------------------------------------------------------------------------------


def test_a_declared_body_over_the_cap_is_refused_on_every_route_before_it_is_read(site: Site) -> None:
    declared = 300 * 1024 * 1024  # what the probe sent: 300 MB, and here not one byte of it follows
    checked = 0
    for method, path in [*routes(site.app), ("POST", "/static/app.js")]:
        url = site.fill(path) if "{" in path else path
        status, response, _ = raw_request(
            site.base,
            head(method, url, site.base, f"Content-Length: {declared}\r\nContent-Type: application/json\r\n"),
            timeout=10,
        )
        assert status == 413, (method, path, response[:300])
        assert b"content-security-policy" in response.lower()
        checked += 1
    assert checked >= 30


def test_a_streamed_chunked_body_is_cut_off_soon_after_the_cap(site: Site) -> None:
    chunk = b"x" * 65536
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    # routes whose body is read before the caller is known (JSON bodies, the login form)
    targets = [
        ("PUT", site.fill("/api/v1/assignments/{assignment_id}/submission"), "application/json"),  # no token
        ("PUT", site.fill("/api/v1/admin/items/{item_id}/adjudication"), "application/json"),  # no token
        ("POST", "/login", "application/x-www-form-urlencoded"),  # the one form open to anyone
    ]
    for method, url, kind in targets:
        extra = f"Transfer-Encoding: chunked\r\nContent-Type: {kind}\r\n"
        body = (framed for _ in range(16 * DEFAULT_MAX_BODY_BYTES // len(chunk)))  # 32 MiB, never ended
        status, response, sent = raw_request(site.base, head(method, url, site.base, extra), body, timeout=20)
        assert status == 413, (method, url, response[:300])
        assert b"larger than this server accepts" in response
        # answered while the body was still coming: the server stopped reading at the cap (what was sent
        # beyond it sat in socket buffers)
        assert sent < 8 * DEFAULT_MAX_BODY_BYTES, sent


def test_the_largest_legitimate_body_fits_the_default_cap(site: Site) -> None:
    # the guidelines form at its limit, in the characters that URL-encode to the most bytes
    text = "\U0001f9e0" * MAX_GUIDELINES
    with client_for(site.base) as client:
        csrf = login(client, ADMIN)
        response = client.post("/admin/guidelines", data={"csrf_token": csrf, "text": text})
        assert response.status_code == 303, response.text[:300]
        sent = len(response.request.content)
    assert 1_000_000 < sent <= DEFAULT_MAX_BODY_BYTES
    assert site.project.guidelines() == text
    site.project.set_guidelines(Identity.command_line(), "# Guidelines\n")


# ------------------------------------------------------------------------------------------------
# Error responses
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def crashing(site: Site) -> Iterator[str]:
    """The same app plus one route that fails unexpectedly, served on its own."""
    app = create_app(site.project)

    @app.get("/crash-for-test")
    def crash() -> None:
        raise RuntimeError("an unexpected failure")

    with serve_in_thread(site.project, app) as base:
        yield base


def test_every_kind_of_error_response_carries_the_security_headers(site: Site, crashing: str) -> None:
    with client_for(site.base) as client:
        responses = {
            404: client.get("/no/such/page"),
            405: client.delete("/login"),
            413: client.put(
                site.fill("/api/v1/assignments/{assignment_id}/submission"),
                content=b"x" * (DEFAULT_MAX_BODY_BYTES + 1),
            ),
            422: client.put(
                f"/api/v1/assignments/{site.alice_ids[0]}/submission",
                headers={**site.auth("alice"), "content-type": "application/json"},
                content=b"{not json",
            ),
        }
        responses[403] = client.post("/login", data={"username": "nobody", "password": "x"})  # no form token
        proxy = {"x-forwarded-for": "198.51.100.91"}
        for index in range(6):
            data = {"username": "ghost", "password": f"guess-{index}", "csrf_token": login_form(client, proxy)}
            last = client.post("/login", data=data, headers=proxy)
        responses[429] = last
    with client_for(crashing) as client:
        responses[500] = client.get("/crash-for-test")
    for status, response in responses.items():
        assert response.status_code == status, (status, response.status_code, response.text[:200])
        assert_security_headers(response)
    assert "allow" in responses[405].headers
    assert "retry-after" in responses[429].headers
    assert "an unexpected failure" not in responses[500].text  # details go to the log, not to the caller
    assert "not valid JSON" in responses[422].json()["error"]


# ------------------------------------------------------------------------------------------------
# Values the databases cannot hold
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("huge", [2**31, 2**63, 10**30])
def test_ids_beyond_the_databases_integers_are_4xx_naming_the_field(site: Site, huge: int) -> None:
    with client_for(site.base) as client:
        csrf = login(client, "alice")
        revoke = client.post(f"/account/tokens/{huge}/revoke", data={"csrf_token": csrf})
        assert revoke.status_code == 400 and "token_id" in revoke.text
        assert_security_headers(revoke)
    with client_for(site.base) as client:
        login(client, ADMIN)
        page = client.get("/admin/audit", params={"before": huge})
        assert page.status_code == 400 and "before" in page.text
        api = client.get("/api/v1/admin/audit", params={"before": huge}, headers=site.auth(ADMIN))
        assert api.status_code == 422 and "before" in api.json()["error"]
        limit = client.get("/api/v1/admin/audit", params={"limit": huge}, headers=site.auth(ADMIN))
        assert limit.status_code == 422 and "limit" in limit.json()["error"]
    assert not site.project.list_api_tokens(Identity.command_line(), "alice")[-1].revoked


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"choices": %s, "seconds": NaN}', "seconds"),
        ('{"choices": %s, "seconds": Infinity}', "seconds"),
        ('{"choices": %s, "seconds": -Infinity}', "seconds"),
        ('{"choices": {"overall": NaN}, "comment": %s}', "choices.overall"),
        ('{"choices": %s, "comment": NaN}', "comment"),
        ('{"choices": %s, "expected_revision": 99999999999999999999}', "expected_revision"),
    ],
)
def test_nan_and_infinity_in_a_json_body_are_422_naming_the_field(site: Site, body: str, field: str) -> None:
    import json

    pid = site.alice_ids[1]
    before = site.project.case_view(site.identity("alice"), pid).submission
    content = body % (json.dumps(ALL_A) if '"choices": %s' in body else '"fine"')
    with client_for(site.base) as client:
        response = client.put(
            f"/api/v1/assignments/{pid}/submission",
            headers={**site.auth("alice"), "content-type": "application/json"},
            content=content.encode(),
        )
    assert response.status_code == 422, response.text[:300]
    assert response.json()["error"].startswith(field + ":"), response.json()
    assert_security_headers(response)
    assert site.project.case_view(site.identity("alice"), pid).submission == before


def test_a_non_finite_window_is_422_naming_the_field(site: Site) -> None:
    with client_for(site.base) as client:
        for value in ("nan", "inf", "-Infinity"):
            response = client.get(
                f"/api/v1/assignments/{site.alice_ids[0]}/image",
                params={"center": value, "width": 400},
                headers=site.auth("alice"),
            )
            assert response.status_code == 422 and response.json()["error"].startswith("center:"), response.text


def test_a_nul_in_a_comment_is_refused_and_the_doctors_answer_stays_on_the_page(site: Site) -> None:
    me = site.identity("alice")
    pid = site.alice_ids[2]
    assert site.project.case_view(me, pid).submission is None
    with client_for(site.base) as client:
        csrf = login(client, "alice")
        page = client.get(f"/a/{pid}").text
        hidden = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
        form = {**hidden, "csrf_token": csrf, **{f"dim_{d}": "B" for d in DIMENSIONS}}
        form["comment"] = "the left lung\x00 is clear"
        response = client.post(f"/a/{pid}", data=form)
        assert response.status_code == 400
        assert "comment: it contains a NUL character" in response.text
        for dim in DIMENSIONS:  # every choice the doctor made is still on screen
            assert re.search(rf'name="dim_{dim}" value="B" checked', response.text), dim
        assert "the left lung" in response.text and "is clear" in response.text
        assert_security_headers(response)
        api = client.put(
            f"/api/v1/assignments/{pid}/submission",
            headers=site.auth("alice"),
            json={"choices": ALL_A, "cannot_judge": False, "comment": "ok\x00"},
        )
        assert api.status_code == 422 and api.json()["error"].startswith("comment:")
        reason = client.put(
            f"/api/v1/assignments/{pid}/submission",
            headers=site.auth("alice"),
            json={"cannot_judge": True, "cannot_judge_reason": "blurred\x00"},
        )
        assert reason.status_code == 422 and reason.json()["error"].startswith("cannot_judge_reason:")
    assert site.project.case_view(me, pid).submission is None
    # and with the NUL gone, the same answer is saved
    with client_for(site.base) as client:
        ok = client.put(
            f"/api/v1/assignments/{pid}/submission",
            headers=site.auth("alice"),
            json={"choices": ALL_A, "comment": "ok"},
        )
        assert ok.status_code == 200


def test_nul_bytes_in_other_text_and_in_ids_are_4xx(site: Site) -> None:
    with client_for(site.base) as client:
        csrf = login(client, ADMIN)
        guidelines = client.post("/admin/guidelines", data={"csrf_token": csrf, "text": "# Rules\x00"})
        assert guidelines.status_code == 400 and "guidelines: it contains a NUL" in guidelines.text
        assert "# Rules" in guidelines.text  # the edit is still in the box
        note = client.post(
            f"/admin/items/{site.item_id}", data={"csrf_token": csrf, "adj_overall": "1", "note": "tie\x00"}
        )
        assert note.status_code == 400 and "note:" in note.text
        user = client.post("/admin/users/bo%00b/active", data={"csrf_token": csrf, "active": "0"})
        assert user.status_code == 404
        item = client.get("/api/v1/admin/items/x%00y", headers=site.auth(ADMIN))
        assert item.status_code == 404
    with client_for(site.base) as client:
        csrf = login(client, "alice")
        label = client.post("/account/tokens", data={"csrf_token": csrf, "label": "laptop\x00"})
        assert label.status_code == 400 and "label:" in label.text
        for url in ("/a/ab%00cd", "/a/ab%00cd/image", "/api/v1/assignments/ab%00cd"):
            headers = site.auth("alice") if url.startswith("/api/") else None
            assert client.get(url, headers=headers).status_code == 404, url
    assert "\x00" not in site.project.guidelines()
    assert next(u for u in site.project.list_users() if u.name == "bob").active
