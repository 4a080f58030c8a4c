"""The annotation app on a phone (390 x 844, touch) and a desktop (1280 x 800), in a real Chromium.

For the queue, the case page, the dashboard, the adjudication queue and an item's review page:
the page never scrolls sideways, what a doctor or an organiser acts on (A/B, save, review, the
header's links) lies inside the screen, a finger can hit it (44 px), a touch screen shows no
keyboard legend and no instruction that needs a mouse, and no table is cut off: a table wider than
the screen scrolls inside a box that says so.

The project holds demo cases (CT in DICOM) labelled so that some have no majority: alice chose A,
bob B, carol could not judge; alice left her first case to do. The phone's case page is saved to
``test-artifacts/annotate-case-phone.png`` (``docs/screenshots/make_screenshots.py`` copies it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.annotate import ADMIN, PASSWORD, as_user, make_project, serve_in_thread
from helpers.browser import (
    ARTIFACTS,
    PHONE,
    SCREENS,
    Browser,
    Screen,
    chromium,
    clipped_tables,
    count_shown,
    outside_viewport,
    screenshot_stitched,
    sideways_overflow,
    too_small_to_tap,
    wait_until,
)

from medrewardbench.data import load_benchmark, write_canonical
from medrewardbench.dimensions import DIMENSIONS

CASES = ("demo-001", "demo-002", "demo-005", "demo-008")
LONG_LINK = " See https://example.org/" + "very-long-path-segment/" * 8 + "guideline.pdf for the grading scale."
HEADER_LINKS = "header.top nav a, header.top nav button"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(base URL, alice's case still to do, her saved case with a long link): a project with three doctors' labels."""
    from medrewardbench.annotate.service import PairAnswer

    root = tmp_path_factory.mktemp("screens")
    demo = {case.case_id: case for case in load_benchmark("demo").cases}
    cases = [demo[i] for i in CASES]
    cases[1] = replace(cases[1], response_2=cases[1].response_2 + LONG_LINK)
    write_canonical(cases, root / "pairs.jsonl")
    project = make_project(root / "project", root / "pairs.jsonl", per_case=3, seed=3, name="Chest and brain CT, pilot")
    by_question = {case.question: case for case in cases}
    todo = long = ""
    for name in ("alice", "bob", "carol"):
        who = as_user(project, name)
        for row in project.queue(who).rows:
            view = project.case_view(who, row.public_id)
            if name == "alice" and not todo and view.question == cases[0].question:
                todo = row.public_id
                continue
            if name == "alice" and view.question == cases[1].question:
                long = row.public_id
            if name == "carol":
                answer = PairAnswer(cannot_judge=True, cannot_judge_reason="the window hides the mediastinum")
            else:  # alice prefers response 1, bob response 2, whichever order each saw them in
                shown_first = view.answer_a.strip() == by_question[view.question].response_1.strip()
                letter = "A" if shown_first == (name == "alice") else "B"
                answer = PairAnswer(dict.fromkeys(DIMENSIONS, letter), comment="checked")
            project.submit_pair(who, row.public_id, answer)
    assert todo and long
    try:
        with serve_in_thread(project) as base:
            yield base, todo, long
    finally:
        project.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser
    assert browser.errors == [], browser.errors
    assert browser.foreign == [], browser.foreign


def logged_in(browser: Browser, screen: Screen, base: str, name: str) -> Any:
    page = browser.page(screen, base)
    page.goto(f"{base}/login")
    page.fill("#username", name)
    page.fill("#password", PASSWORD)
    with page.expect_navigation():
        page.press("#password", "Enter")
    return page


def check_layout(page: Any, screen: Screen, *must_show: str) -> None:
    """No sideways scrolling, the given elements inside the screen, no table cut off, the header tappable."""
    assert sideways_overflow(page) == 0, f"{page.url} is wider than the {screen}"
    for selector in must_show:
        assert count_shown(page, selector) > 0, f"nothing shown for {selector} on {page.url}"
        assert outside_viewport(page, selector) == [], f"{selector} off screen on {page.url}"
    assert clipped_tables(page) == [], page.url
    assert outside_viewport(page, HEADER_LINKS) == []
    if screen.touch:
        assert too_small_to_tap(page, HEADER_LINKS) == []


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_a_doctor_can_label_on_a_phone_and_a_desktop(
    site: tuple[str, str, str], browser: Browser, screen: Screen
) -> None:
    base, todo, long = site
    page = logged_in(browser, screen, base, "alice")
    assert page.url.endswith("/queue")
    check_layout(page, screen, "form.start button", "table.queue td a")
    if screen.touch:
        assert too_small_to_tap(page, "form.start button, table.queue td a") == []

    page.goto(f"{base}/a/{todo}")
    wait_until(page, "document.querySelector('#viewer-img').complete")
    check_layout(page, screen, ".choice", "#submit-button", "#question-text", "#answer-a", "#answer-b", "#viewer")
    assert page.locator(".choice").count() == 2 * len(DIMENSIONS)
    names = page.locator(".dim-name")
    for i in range(names.count()):  # each criterion's name inside its own box, none over the next
        name, box = names.nth(i).bounding_box(), page.locator(".dim").nth(i).bounding_box()
        assert name is not None and box is not None
        assert box["x"] <= name["x"] and name["x"] + name["width"] <= box["x"] + box["width"] + 0.5
    legend_and_hover = "#legend, .hover-hint, kbd"
    if screen.touch:
        assert too_small_to_tap(page, ".choice, #case-form button, .actions .button, .check, .case-bar a") == []
        assert count_shown(page, legend_and_hover) == 0, "keyboard legend or a hover instruction on a touch screen"
        assert count_shown(page, ".touch-hint") == 2
        page.locator(".dim").nth(2).locator(".choice").nth(1).tap()
        assert page.locator("#dim-comprehensiveness input[value=B]").is_checked()
        assert page.inner_text("#current-definition").startswith("Comprehensiveness")
        ARTIFACTS.mkdir(exist_ok=True)
        screenshot_stitched(page, ARTIFACTS / "annotate-case-phone.png")
        assert (ARTIFACTS / "annotate-case-phone.png").stat().st_size > 20_000
    else:
        assert page.locator("#legend").is_visible() and page.locator(".hover-hint").first.is_visible()
        assert count_shown(page, ".touch-hint") == 0
    page.goto(f"{base}/a/{long}")  # an answer with a long link wraps inside its box
    check_layout(page, screen, ".choice", "#answer-b", "#submit-button")
    assert page.locator("input[type=radio]:checked").count() == len(DIMENSIONS)
    page.context.close()


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_a_doctor_flags_a_harmful_answer_on_a_phone_and_a_desktop(
    site: tuple[str, str, str], browser: Browser, screen: Screen
) -> None:
    base, _todo, long = site
    page = logged_in(browser, screen, base, "alice")
    page.goto(f"{base}/a/{long}")
    check_layout(page, screen, "#harm legend", "#harm-a", "#harm-b", "#submit-button")
    if screen.touch:
        assert too_small_to_tap(page, "#harm select") == []
    severity = "critical" if screen.touch else "moderate"
    page.select_option("#harm-b", severity)
    with page.expect_navigation():
        page.click("#submit-button")
    page.goto(f"{base}/a/{long}")
    assert page.locator("#harm-b").input_value() == severity
    assert page.locator("#harm-a").input_value() == ""
    check_layout(page, screen, "#harm-b")
    page.context.close()


@pytest.mark.parametrize("screen", SCREENS, ids=str)
def test_an_organiser_follows_and_adjudicates_on_a_phone_and_a_desktop(
    site: tuple[str, str, str], browser: Browser, screen: Screen
) -> None:
    base, _, _ = site
    page = logged_in(browser, screen, base, ADMIN)
    assert page.url.endswith("/admin")
    check_layout(page, screen, ".card", ".export-bar .button", "#agreement-table tbody th", "#annotator-table tbody th")
    if screen.touch:
        assert too_small_to_tap(page, ".export-bar .button, #adjudication-count") == []
    if screen == PHONE:  # the dashboard's tables are wider than a phone: they scroll and say so
        assert page.locator(".scroll-hint:not([hidden])").count() >= 1

    page.goto(f"{base}/admin/adjudication")
    rows = page.locator("#pending-table tbody tr")
    assert rows.count() == len(CASES) - 1, page.inner_text("main")
    check_layout(page, screen, "#pending-table td a", "#pending-table .badge")
    if screen.touch:
        assert too_small_to_tap(page, "#pending-table td a") == []

    with page.expect_navigation():
        rows.first.locator("a").click()
    assert "/admin/items/" in page.url
    check_layout(page, screen, ".adjudicate select", ".adjudicate button", ".adjudicate input[name=note]")
    if screen.touch:
        assert too_small_to_tap(page, ".adjudicate select, .adjudicate button") == []
    page.locator(".adjudicate select").first.select_option("1")
    assert page.locator(".adjudicate select").first.input_value() == "1"
    page.context.close()


def test_the_screenshot_helper_keeps_the_phone_a_touch_screen(browser: Browser, tmp_path: Path) -> None:
    """Stitched screenshots keep ``(hover: none)``: Playwright's full-page ones would drop it."""
    page = browser.page(PHONE, "data:")
    style = "<style>p { height: 2000px } @media (hover: none) { p { background: #0a0 } }</style>"
    page.set_content(f'<meta name="viewport" content="width=device-width">{style}<p>x</p>')
    screenshot_stitched(page, tmp_path / "shot.png")
    from PIL import Image

    with Image.open(tmp_path / "shot.png") as image:
        assert image.size[0] == PHONE.width and image.size[1] >= 2000
        assert image.getpixel((100, 1500)) == (0, 170, 0)
    page.context.close()
