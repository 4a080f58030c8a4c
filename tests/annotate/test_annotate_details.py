"""Details doctors ask about: which case is which in the queue, what its count counts, the true zoom
scale, windows that fit MR as well as CT, adjudication in the adjudicator's own A/B words, and a
dashboard that says what its numbers in brackets count and gives its agreement with intervals."""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.annotate import ADMIN, as_user, client_for, login, serve_in_thread
from PIL import Image

from medrewardbench.annotate.service import PairAnswer, Project
from medrewardbench.annotate.services.assignments import question_start
from medrewardbench.annotate.services.images import THUMBNAIL_SIZE
from medrewardbench.dimensions import DIMENSIONS

ALL_A = {dim: "A" for dim in DIMENSIONS}


@pytest.fixture
def project(tmp_path: Path, project_factory: Any) -> Iterator[Project]:
    opened = project_factory(tmp_path / "proj", gold=True, per_case=2, repeat_share=0.5)
    yield opened
    opened.close()


def test_the_queue_counts_cases_repeats_and_gold_apart_without_saying_which(project: Project) -> None:
    queue = project.queue(as_user(project, "alice"))
    assert queue.total == queue.cases + queue.repeats + queue.gold
    assert queue.repeats >= 1 and queue.gold >= 1
    assert queue.composition.startswith(f"{queue.total} items: {queue.cases} cases, ")
    assert f"{queue.gold} gold check" in queue.composition
    # every row is told apart by its question, and nothing on a row says repeat or gold
    assert all(row.question_start for row in queue.rows)
    for row in queue.rows:
        assert not {"purpose", "role", "gold", "repeat"} & set(vars(row))


def test_the_question_start_keeps_the_first_words() -> None:
    assert question_start("What  does\nthe image show?") == "What does the image show?"
    assert question_start(" ".join(f"w{i}" for i in range(30)), words=3) == "w0 w1 w2 …"


def test_a_cannot_judge_case_shows_as_such_in_the_queue(project: Project) -> None:
    alice = as_user(project, "alice")
    first, second = project.queue(alice).rows[:2]
    project.submit_pair(alice, first.public_id, PairAnswer({}, cannot_judge=True, cannot_judge_reason="blurred"))
    project.submit_pair(alice, second.public_id, PairAnswer(ALL_A))
    rows = {row.public_id: row for row in project.queue(alice).rows}
    assert rows[first.public_id].done and rows[first.public_id].cannot_judge
    assert rows[second.public_id].done and not rows[second.public_id].cannot_judge
    with serve_in_thread(project) as base, client_for(base) as client:
        login(client, "alice")
        page = client.get(f"{base}/queue").text
    assert page.count("cannot judge</span>") == 1
    assert "gold check" in page.split("<table", 1)[0]
    table = page.split("<table", 1)[1].split("</table>", 1)[0]
    # the rows never name a repeat or a gold check (those are totals above the table only)
    assert "repeat" not in table.lower()
    assert set(re.findall(r'class="badge[^"]*">([^<]*)<', table)) == {"to do", "done", "cannot judge"}
    assert "size=thumb" in table and "Question 0: what does the image show?" in table


def test_the_queue_thumbnail_is_small_and_only_for_the_caller(project: Project) -> None:
    alice_rows = project.queue(as_user(project, "alice")).rows
    bob_rows = project.queue(as_user(project, "bob")).rows
    own = next(row for row in alice_rows if row.has_image)
    others = next(row for row in bob_rows if row.has_image)
    with serve_in_thread(project) as base, client_for(base) as client:
        login(client, "alice")
        small = client.get(f"{base}/a/{own.public_id}/image?size=thumb")
        full = client.get(f"{base}/a/{own.public_id}/image")
        refused = client.get(f"{base}/a/{others.public_id}/image?size=thumb")
        bad = client.get(f"{base}/a/{own.public_id}/image?size=huge")
        windowed = client.get(f"{base}/a/{own.public_id}/image?size=thumb&center=40&width=400")
    assert small.status_code == 200 and small.headers["content-type"] == "image/png"
    with Image.open(io.BytesIO(small.content)) as thumb, Image.open(io.BytesIO(full.content)) as whole:
        assert max(thumb.size) <= THUMBNAIL_SIZE
        assert max(thumb.size) == min(THUMBNAIL_SIZE, max(whole.size))
    assert refused.status_code == 404
    assert bad.status_code in (400, 422)
    assert windowed.status_code == 400


def _display(name: str) -> Any:
    import pydicom.data

    from medrewardbench.cases import ImageRef
    from medrewardbench.images import dicom_display

    path = Path(pydicom.data.get_testdata_file(name))  # type: ignore[arg-type]
    return dicom_display(ImageRef.from_bytes(path.read_bytes(), name))


def test_mr_gets_percentile_windows_and_ct_keeps_its_hu_presets() -> None:
    from medrewardbench.annotate.routes.pages import WINDOW_PRESETS, window_presets

    ct, mr = _display("CT_small.dcm"), _display("MR_small.dcm")
    assert [p.key for p in window_presets(ct)] == list(WINDOW_PRESETS)
    assert all(p.title.endswith(" HU") for p in window_presets(ct))
    presets = window_presets(mr)
    assert [p.label for p in presets] == ["Full range", "1-99 %", "5-95 %"]
    full, wide, narrow = presets
    # the full range spans the frame's values; the percentile windows sit inside it, narrowing
    assert full.center - full.width / 2 == pytest.approx(mr.minimum)
    assert full.center + full.width / 2 == pytest.approx(mr.maximum)
    assert full.width > wide.width > narrow.width >= 1
    assert mr.minimum <= narrow.center - narrow.width / 2 <= mr.maximum
    assert window_presets(None) == ()


def test_a_percentile_window_clips_about_its_share_of_an_mr(project: Project) -> None:
    import numpy as np
    import pydicom.data

    from medrewardbench.cases import ImageRef
    from medrewardbench.images import render_dicom_window

    path = Path(pydicom.data.get_testdata_file("MR_small.dcm"))  # type: ignore[arg-type]
    ref = ImageRef.from_bytes(path.read_bytes(), "MR_small.dcm")
    _, center, width = _display("MR_small.dcm").percentile_windows[2]
    grey = np.asarray(render_dicom_window(ref, center, width))[..., 0]
    clipped = float(np.mean((grey == 0) | (grey == 255)))
    assert 0.05 <= clipped <= 0.2  # about 10 % of the pixels (5 % each side), not a black or white box


def test_the_case_page_offers_the_windows_that_fit_its_image(project: Project) -> None:
    from sqlalchemy import select

    from medrewardbench.annotate.db import Assignment, ImageBlob, Item

    alice = as_user(project, "alice")
    with project.db.read() as s:
        found = dict(
            s.execute(
                select(ImageBlob.name, Assignment.public_id)
                .join(Item, Item.image_id == ImageBlob.id)
                .join(Assignment, Assignment.item_id == Item.id)
                .where(Assignment.user_id == alice.user_id, Assignment.purpose == "primary")
            ).all()
        )
    ct = next(pid for name, pid in found.items() if "CT_small" in name)
    mr = next(pid for name, pid in found.items() if "MR_small" in name)
    with serve_in_thread(project) as base, client_for(base) as client:
        login(client, "alice")
        ct_page, mr_page = client.get(f"{base}/a/{ct}").text, client.get(f"{base}/a/{mr}").text
    assert 'data-preset="lung"' in ct_page and "1-99 %" not in ct_page
    assert 'data-preset="lung"' not in mr_page and ">1-99 %</button>" in mr_page and ">Full range</button>" in mr_page
    assert "presets from this image's value percentiles" in mr_page


def _zoom_label(page: Any) -> float:
    return float(page.inner_text("#zoom-level").strip().rstrip("%").strip())


def test_the_zoom_label_reads_screen_pixels_per_image_pixel_in_a_browser(tmp_path: Path) -> None:
    """A 64x64 MR fitted to the viewer box reads its true magnification, on zoom and on resize."""
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    from helpers.annotate import PASSWORD, case_rows, make_project, write_cases

    rows = case_rows(1)
    rows[0]["image"] = {"builtin": "pydicom:MR_small.dcm"}
    project = make_project(tmp_path / "proj", write_cases(tmp_path / "input", rows), annotators=("alice",), per_case=1)
    case = project.queue(as_user(project, "alice")).rows[0].public_id
    size = "(() => { let b = document.querySelector('#viewer').getBoundingClientRect();return [b.width, b.height]; })"
    size += "()"
    loaded = "document.querySelector('#viewer-img').complete && document.querySelector('#viewer-img').naturalWidth"
    try:
        with serve_in_thread(project) as base, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"], headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
            page.goto(f"{base}/login")
            page.fill("#username", "alice")
            page.fill("#password", PASSWORD)
            with page.expect_navigation():
                page.press("#password", "Enter")
            page.goto(f"{base}/a/{case}")
            deadline = time.monotonic() + 10
            while not page.evaluate(loaded):  # not wait_for_function: the app's CSP forbids eval
                assert time.monotonic() < deadline, "the image did not load"
                page.wait_for_timeout(50)
            width, height = page.evaluate(size)
            fitted = min(width, height) / 64 * 100
            assert fitted > 300  # the small MR is magnified several times: "100%" would hide that
            assert _zoom_label(page) == pytest.approx(fitted, abs=1)
            page.click('[data-zoom="in"]')
            assert _zoom_label(page) == pytest.approx(fitted * 1.25, abs=1)
            page.set_viewport_size({"width": 700, "height": 700})
            page.wait_for_timeout(300)
            width, height = page.evaluate(size)
            assert _zoom_label(page) == pytest.approx(min(width, height) / 64 * 100, abs=1)
            browser.close()
    finally:
        project.close()


def _both_clicked_a_on_one_item(project: Project) -> tuple[str, dict[str, str]]:
    """Every annotator clicks A on every item; returns an item its two annotators saw in different orders."""
    from sqlalchemy import select

    from medrewardbench.annotate.db import Assignment, Item, User

    for name in ("alice", "bob", "carol"):
        me = as_user(project, name)
        for row in project.queue(me).rows:
            project.submit_pair(me, row.public_id, PairAnswer(ALL_A))
    with project.db.read() as s:
        rows = s.execute(
            select(Item.public_id, User.name, Assignment.order_shown)
            .join(Assignment, Assignment.item_id == Item.id)
            .join(User, User.id == Assignment.user_id)
            .where(Assignment.purpose == "primary", Item.role == "primary")
        ).all()
    orders: dict[str, dict[str, str]] = {}
    for item, name, order in rows:
        orders.setdefault(item, {})[name] = order
    item, seen = next((i, o) for i, o in orders.items() if len(set(o.values())) == 2)
    return item, seen


def test_the_adjudicator_reads_each_vote_in_their_own_ab_and_in_the_doctors(project: Project) -> None:
    item, seen = _both_clicked_a_on_one_item(project)
    review = project.item_review(as_user(project, ADMIN), item)
    shown = {v.annotator: v for v in review.votes_as_shown()}
    for name, order in seen.items():
        # both clicked A; for the adjudicator (A = response 1) that is A when shown original, else B
        expected = "A" if order == "original" else "B"
        assert shown[name].swapped == (order == "swapped")
        assert {letters for letters in shown[name].letters.values()} == {(expected, "A")}
    assert review.majority == {} and set(review.unresolved) == set(DIMENSIONS)
    with serve_in_thread(project) as base, client_for(base) as client:
        login(client, ADMIN)
        page = client.get(f"{base}/admin/items/{item}").text
        queue = client.get(f"{base}/admin/adjudication").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
        assert csrf is not None
        saved = client.post(f"{base}/admin/items/{item}", data={"csrf_token": csrf.group(1), "adj_overall": "2"})
    assert "Answer A <span" in page and 'id="ab-legend"' in page
    assert "swapped: their A = your B" in page and "same: their A = your A" in page
    assert '<strong>B</strong> <span class="muted">(their A)</span>' in page
    assert '<option value="1">A (response 1)</option>' in page and '<option value="2">B (response 2)</option>' in page
    assert "A &times;1, B &times;1" in queue and "response 1" in queue
    assert saved.status_code in (200, 303)
    assert project.item_review(as_user(project, ADMIN), item).adjudicated["overall"] == "2"


def test_the_dashboard_gives_agreement_with_the_reports_intervals_and_says_what_brackets_count(
    project: Project,
) -> None:
    import numpy as np

    admin = as_user(project, ADMIN)
    alice = as_user(project, "alice")
    project.submit_pair(alice, project.queue(alice).rows[0].public_id, PairAnswer(ALL_A))
    few = project.quality.dashboard(admin, intervals=True)
    assert few.intervals is not None and few.interval("fleiss_kappa", 0) is None  # too few items to resample
    _both_clicked_a_on_one_item(project)
    plain = project.quality.dashboard(admin)
    board = project.quality.dashboard(admin, intervals=True)
    assert plain.intervals is None and plain.interval("fleiss_kappa", 0) is None
    assert board.intervals is not None
    # the same points as the table's, and the report's case bootstrap around them
    for index, d in enumerate(board.agreement):
        assert board.intervals.percent_agreement.point[index] == pytest.approx(d.percent_agreement)
        low, high = board.interval("percent_agreement", index) or (np.nan, np.nan)
        assert low <= d.percent_agreement <= high
    assert board.intervals.fleiss_kappa.point.shape == (len(DIMENSIONS) + 1,)  # the dimensions, then pooled
    # seeded by the project: the same figures on every load
    again = project.quality.dashboard(admin, intervals=True)
    assert again.interval("krippendorff_alpha", -1) == board.interval("krippendorff_alpha", -1)
    with serve_in_thread(project) as base, client_for(base) as client:
        login(client, ADMIN)
        page = client.get(f"{base}/admin").text
    assert 'id="bracket-legend"' in page and "gold labels compared" in page
    assert 'id="agreement-legend"' in page and "95 % intervals" in page and "2,000 bootstrap resamples" in page
    assert page.count('<span class="ci">[') >= 3 * len(DIMENSIONS)
    assert 'id="agreement-pooled"' in page


def test_user_add_counts_its_assignments_in_english(tmp_path: Path) -> None:
    from helpers.annotate import PASSWORD, case_rows, write_cases
    from typer.testing import CliRunner

    from medrewardbench.cli import app

    cases = write_cases(tmp_path / "input", case_rows(1))
    project = str(tmp_path / "proj")
    runner = CliRunner()
    assert runner.invoke(app, ["annotate", "init", project, "--cases", str(cases), "--per-case", "1"]).exit_code == 0
    added = runner.invoke(
        app, ["annotate", "user", "add", "dr_a", "-p", project, "--password-stdin"], input=PASSWORD + "\n"
    )
    assert added.exit_code == 0 and "Added annotator dr_a with 1 assignment\n" in added.output, added.output


def test_the_api_queue_counts_apart_and_flags_cannot_judge(project: Project) -> None:
    from medrewardbench.annotate.service import Identity

    alice = as_user(project, "alice")
    first = project.queue(alice).rows[0].public_id
    project.submit_pair(alice, first, PairAnswer({}, cannot_judge=True, cannot_judge_reason="no image"))
    token = project.create_api_token(Identity.command_line(), "alice", "script")
    with serve_in_thread(project) as base, client_for(base) as client:
        body = client.get(f"{base}/api/v1/queue", headers={"authorization": f"Bearer {token}"}).json()
    queue = project.queue(alice)
    assert body["counts"] == {"cases": queue.cases, "repeats": queue.repeats, "gold": queue.gold}
    assert [a["cannot_judge"] for a in body["assignments"]] == [a["id"] == first for a in body["assignments"]]
    assert not {"purpose", "role", "gold", "repeat"} & set(body["assignments"][0])
