"""The app in a real headless Chromium: three doctors label a project by keyboard only, the admin
sees agreement and exports, and ``medrewardbench eval`` runs on the export.

Uses Debian's chromium (``/usr/bin/chromium``) through the Python playwright package and is skipped,
saying why, only when that browser or playwright is missing. Every request to a host other than
the test server is recorded and aborted: the app must load nothing from elsewhere. Screenshots of
the case screen (a CT in DICOM) and of the dashboard go to ``test-artifacts/`` (the ones in
``docs/screenshots/`` for the README come from this test).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.annotate import (
    ADMIN,
    PASSWORD,
    XSS,
    as_user,
    case_rows,
    make_project,
    serve_in_thread,
    write_cases,
)
from helpers.browser import ARTIFACTS, CHROMIUM, LAUNCH_ARGS

from medrewardbench.data import load_benchmark, write_canonical
from medrewardbench.dimensions import DIMENSIONS

PRIMARY = ("demo-001", "demo-002", "demo-005", "demo-023", "demo-011")
GOLD = ("demo-004",)
# each doctor follows the demo's labels except on these criteria, where they choose the other answer
DISAGREE = {"alice": {"creativity"}, "bob": {"comprehensiveness", "creativity"}, "carol": {"relevance"}}


def _playwright() -> Any:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    return sync_playwright


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, Path]]:
    root = tmp_path_factory.mktemp("browser")
    demo = {case.case_id: case for case in load_benchmark("demo").cases}
    cases = [demo[i] for i in PRIMARY]
    cases[-1] = replace(cases[-1], response_2=cases[-1].response_2 + " " + XSS)
    TRUTH.clear()
    TRUTH.update({case.question: case for case in [*cases, *(demo[i] for i in GOLD)]})
    write_canonical(cases, root / "pairs.jsonl")
    write_canonical([demo[i] for i in GOLD], root / "gold.jsonl")
    project = make_project(
        root / "project",
        root / "pairs.jsonl",
        gold=str(root / "gold.jsonl"),
        per_case=3,
        repeat_share=0.2,
        seed=2,
        name="Chest and brain CT, pilot",
    )
    with serve_in_thread(project) as base:
        yield project, base, root
    project.close()


TRUTH: dict[str, Any] = {}
"""question -> the case, to know which answer the demo's label prefers."""


def keys_for(page: Any, name: str) -> list[str]:
    """The A/B keys this doctor presses for the six criteria of the case on screen."""
    case = TRUTH[page.inner_text("#question-text").strip()]
    a_is_1 = page.inner_text("#answer-a-text").strip() == case.response_1.strip()
    keys = []
    for dim in DIMENSIONS:
        winner = case.labels[dim] if dim not in DISAGREE[name] else 3 - case.labels[dim]
        keys.append("a" if (winner == 1) == a_is_1 else "b")
    return keys


class Browser:
    def __init__(self, playwright: Any):
        self.browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS, headless=True)
        self.errors: list[str] = []
        self.foreign: list[str] = []

    def page(self, base: str) -> Any:
        context = self.browser.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True)
        page = context.new_page()
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

        def route(r: Any) -> None:
            if r.request.url.startswith(base):
                r.continue_()
            else:
                self.foreign.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        return page


def keyboard_login(page: Any, base: str, name: str) -> None:
    page.goto(f"{base}/login")
    # Chromium applies autofocus at its next rendering step, after the load event:
    # typing before then loses keys on a busy machine.
    wait_until(page, "document.activeElement && document.activeElement.id === 'username'")
    page.keyboard.type(name)
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")


def wait_until(page: Any, expression: str, timeout: float = 10.0) -> None:
    """Poll an expression (page.wait_for_function evaluates strings, which the app's CSP forbids)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"timed out waiting for {expression}"
        time.sleep(0.05)


def label_queue(page: Any, name: str, screenshot: Path | None) -> int:
    """Label every case of the queue with the keyboard; returns how many pages were submitted."""
    wait_until(page, "document.activeElement && document.activeElement.tagName === 'BUTTON'")
    with page.expect_navigation():
        page.keyboard.press("Enter")  # the Start button has the focus
    page.wait_for_selector("#case-form")
    submitted = 0
    changed_back = False
    while "/a/" in page.url:
        assert page.evaluate("window.__pwned") is None, "a script from the data ran"
        is_ct = page.locator("#window-tools").count() == 1 and "HU" in page.locator(".units").inner_text()
        if screenshot is not None and is_ct and not screenshot.exists():
            page.keyboard.press("w")  # window preset: lung ...
            page.keyboard.press("w")  # ... mediastinum
            wait_until(page, "document.querySelector('#viewer-img').src.includes('center=50')")
            wait_until(page, "document.querySelector('#viewer-img').complete")
            assert page.evaluate("document.querySelector('#viewer-img').naturalWidth") == 128
            page.keyboard.press("+")
            for key in keys_for(page, name)[:3]:
                page.keyboard.press(key)
            page.wait_for_timeout(300)
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(screenshot))
            page.keyboard.press("0")
            page.keyboard.press("1")  # back to the first criterion
        for key in keys_for(page, name):
            page.keyboard.press(key)
        if name == "carol" and submitted == 1:
            page.keyboard.press("m")
            page.keyboard.type("The second answer over-calls a normal finding.")
            page.keyboard.press("Escape")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        submitted += 1
        if name == "alice" and submitted == 2 and not changed_back:
            # reopen the previous case by keyboard, change every criterion to B, save again
            changed_back = True
            with page.expect_navigation():
                page.keyboard.press("p")
            assert page.locator('input[type="radio"]:checked').count() == len(DIMENSIONS)
            page.keyboard.press("Shift+B")
            with page.expect_navigation():
                page.keyboard.press("Enter")
    assert page.url.endswith("/queue?done=1"), page.url
    return submitted


@pytest.mark.slow
def test_three_doctors_label_by_keyboard_and_the_admin_exports_for_eval(site: tuple[Any, str, Path]) -> None:
    sync_playwright = _playwright()
    project, base, root = site
    case_shot = ARTIFACTS / "annotate-case.png"
    case_shot.unlink(missing_ok=True)
    with sync_playwright() as playwright:
        browser = Browser(playwright)
        try:
            for name in DISAGREE:
                page = browser.page(base)
                keyboard_login(page, base, name)
                assert page.url.endswith("/queue"), page.inner_text("body")[:400]
                total = int(re.search(r"0 of (\d+) done", page.inner_text("#progress-text")).group(1))  # type: ignore[union-attr]
                submitted = label_queue(page, name, case_shot if name == "alice" else None)
                assert submitted == total
                assert f"{total} of {total} done" in page.inner_text("#progress-text")
                page.context.close()

            page = browser.page(base)
            keyboard_login(page, base, ADMIN)
            assert page.url.endswith("/admin")
            rows = page.locator("#agreement-table tbody tr")
            assert rows.count() == len(DIMENSIONS)
            assert "Fleiss" in page.inner_text("#agreement-table thead")
            assert page.locator("#annotator-table tbody tr").count() == 3
            assert page.locator("#loo-table tbody tr").count() == 3
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "annotate-dashboard.png"), full_page=True)
            with page.expect_download() as info:
                page.click("#export-canonical")
            export = root / "export.jsonl"
            info.value.save_as(str(export))
            page.goto(f"{base}/admin/audit")
            assert page.locator("#audit-table tbody tr").count() > 20
            page.context.close()
        finally:
            browser.browser.close()
    assert browser.errors == [] and browser.foreign == []
    assert case_shot.stat().st_size > 20_000
    assert (ARTIFACTS / "annotate-dashboard.png").stat().st_size > 20_000

    # what the browser exported is what the doctors did
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert [row["id"] for row in rows] == list(PRIMARY)
    assert all(sorted(a["annotator"] for a in row["annotations"]) == ["alice", "bob", "carol"] for row in rows)
    assert all(set(a["labels"]) == set(DIMENSIONS) for row in rows for a in row["annotations"])
    assert any(a.get("comment") for row in rows for a in row["annotations"])
    carol = as_user(project, "carol")
    assert all(row.done for row in project.queue(carol).rows)
    alice = as_user(project, "alice")
    # after her second case she went back (P) to it and changed every criterion to B (Shift+B)
    reopened = project.case_view(alice, project.queue(alice).rows[1].public_id).submission
    assert reopened is not None and reopened.revision == 2 and set(reopened.choices.values()) == {"B"}

    done = subprocess.run(
        [sys.executable, "-m", "medrewardbench.cli", "eval", "--data", str(export), "--out", str(root / "results")],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Leaderboard" in done.stdout and "baseline:longer" in done.stdout
    metrics = json.loads((root / "results" / "metrics.json").read_text())
    assert len(metrics["runs"]) >= 5


def test_a_doctor_screens_questions_by_keyboard(tmp_path: Path) -> None:
    sync_playwright = _playwright()
    from medrewardbench.annotate.service import Identity, create_project

    rows = [
        {"id": "q1", "image": {"builtin": "pydicom:CT_small.dcm"}, "question": "Was contrast given?",
         "reference_answer": "Yes.", "answer_type": "closed"},
        {"id": "q2", "image": {"builtin": "skimage:retina"}, "question": "Grade the retinopathy.",
         "answer_type": "open"},
    ]  # fmt: skip
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    project = create_project(tmp_path / "screen", questions=tmp_path / "questions.jsonl", per_case=1)
    project.add_user(Identity.command_line(), "alice", "annotator", PASSWORD)
    try:
        with serve_in_thread(project) as base, sync_playwright() as playwright:
            browser = Browser(playwright)
            try:
                page = browser.page(base)
                keyboard_login(page, base, "alice")
                wait_until(page, "document.activeElement && document.activeElement.tagName === 'BUTTON'")
                with page.expect_navigation():
                    page.keyboard.press("Enter")
                decisions = {}
                while "/a/" in page.url:
                    question = page.inner_text("#question-text")
                    if question.startswith("Was"):
                        page.keyboard.press("a")
                        decisions[question] = "accept"
                    else:
                        page.keyboard.press("r")
                        page.keyboard.press("Enter")  # a rejection without a reason is refused in the page
                        assert "at least one reason" in page.inner_text("#client-error")
                        page.keyboard.press("4")
                        decisions[question] = "reject"
                    with page.expect_navigation():
                        page.keyboard.press("Enter")
                assert page.url.endswith("/queue?done=1")
            finally:
                browser.browser.close()
        assert browser.errors == [] and browser.foreign == []
        alice = as_user(project, "alice")
        saved = {
            project.case_view(alice, row.public_id).question: project.case_view(alice, row.public_id).submission
            for row in project.queue(alice).rows
        }
        assert {q: s.decision for q, s in saved.items() if s} == decisions
        assert saved["Grade the retinopathy."].reasons == ("image_quality",)  # type: ignore[union-attr]
    finally:
        project.close()


def test_two_tabs_on_one_case_the_later_save_is_refused_and_keeps_its_choices(tmp_path: Path) -> None:
    sync_playwright = _playwright()
    project = make_project(tmp_path / "proj", write_cases(tmp_path / "input", case_rows(2)), annotators=("alice",))
    try:
        with serve_in_thread(project) as base, sync_playwright() as playwright:
            browser = Browser(playwright)
            try:
                first = browser.page(base)
                keyboard_login(first, base, "alice")
                pid = project.queue(as_user(project, "alice")).rows[0].public_id
                second = first.context.new_page()  # a second tab of the same browser (same session)
                for tab in (first, second):
                    tab.goto(f"{base}/a/{pid}")
                    tab.wait_for_selector("#case-form")
                first.bring_to_front()
                first.keyboard.press("Shift+A")
                with first.expect_navigation():
                    first.keyboard.press("Enter")
                second.bring_to_front()
                second.keyboard.press("Shift+B")
                second.keyboard.press("m")
                second.keyboard.type("read in the second tab")
                second.keyboard.press("Escape")
                with second.expect_navigation():
                    second.keyboard.press("Enter")
                assert "saved in another tab or window" in second.inner_text("#form-error")
                assert second.locator("#reload-link").get_attribute("href") == f"/a/{pid}"
                assert second.locator('input[type="radio"][value="B"]:checked').count() == len(DIMENSIONS)
                assert second.input_value("#comment") == "read in the second tab"
                saved = project.case_view(as_user(project, "alice"), pid).submission
                assert saved is not None and set(saved.choices.values()) == {"A"}
                with second.expect_navigation():
                    second.click("#reload-link")
                assert second.locator('input[type="radio"][value="A"]:checked').count() == len(DIMENSIONS)
            finally:
                browser.browser.close()
        assert browser.errors == [] and browser.foreign == []
    finally:
        project.close()
