"""Bad data input is refused in one line naming file, row, case and field; nothing hangs or escapes.

Issue 9, data half: special files (named pipes, devices, sockets, directories, link loops) and
oversized images are refused before anything is read; image paths stay inside the data unless
allowed; deep nesting, duplicate keys, I/O errors and unprintable ids are problems, not
tracebacks; a byte-order mark is accepted; unlabeled data is warned about (and an unmeasurable
source refused); empty flag values are errors; data never reaches the terminal unescaped.
Everything here uses real files: real FIFOs, a real unix socket, /dev/zero, /proc/self/mem.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.data import (
    build_canonical_set,
    build_reference_layout,
    canonical_rows,
    reference_label_rows,
    reference_rows,
    write_canonical_parquet_rows,
    write_jsonl,
    write_reference_parquet,
)
from helpers.images import png_bytes, write_png
from typer.testing import CliRunner

from medrewardbench import images
from medrewardbench.cases import ImageRef
from medrewardbench.cli import app
from medrewardbench.data import (
    collect_source,
    load_benchmark,
    nothing_to_measure,
    read_canonical,
    summarize_warnings,
    validate_source,
)
from medrewardbench.data import demo as demo_module
from medrewardbench.data.jsonio import MAX_JSON_DEPTH, parse_json, too_deep
from medrewardbench.errors import DataError, DataProblem, ImageError
from medrewardbench.images import files as image_files
from medrewardbench.images.files import FileRefused, open_regular_file, read_regular_file
from medrewardbench.utils.safe_text import terminal_safe

T = TypeVar("T")
runner = CliRunner()


def _within(seconds: float, call: Callable[[], T]) -> T:
    """Run ``call`` in a daemon thread; fail (instead of hanging the suite) if it takes too long."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: the input hangs the tool"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _row(case_id: str, image: object = None, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": case_id,
        "image": image,
        "question": "What is shown?",
        "response_1": "A short answer.",
        "response_2": "A longer, second answer.",
        "labels": {"overall": 1},
    }
    row.update(fields)
    return row


def _only(problems: list[DataProblem], **where: Any) -> DataProblem:
    found = [p for p in problems if all(getattr(p, key) == value for key, value in where.items())]
    assert len(found) == 1, f"expected one problem at {where}, got {[str(p) for p in problems]}"
    return found[0]


def _cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def _console_script(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess:
    code = "import sys; from medrewardbench.cli import main; sys.argv = ['medrewardbench', *sys.argv[1:]]; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )


@pytest.fixture
def special_files(tmp_path: Path) -> Iterator[Path]:
    """A data directory whose image names are a FIFO, a directory, a link loop and a unix socket."""
    data = tmp_path / "data"
    write_png(data / "ok.png")
    os.mkfifo(data / "pipe.png")
    (data / "folder.png").mkdir()
    (data / "loop.png").symlink_to("loop.png")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(data / "sock.png"))
    try:
        yield data
    finally:
        sock.close()


# --------------------------------------------------------------------------- 1, 7: nothing hangs


def test_special_image_files_are_refused_when_rows_are_read(special_files: Path) -> None:
    rows = [
        _row("ok", "ok.png"),
        _row("pipe", "pipe.png"),
        _row("folder", {"path": "folder.png"}),
        _row("loop", "loop.png"),
        _row("sock", "sock.png"),
    ]
    path = write_jsonl(special_files / "cases.jsonl", rows)

    with pytest.raises(DataError) as caught:
        _within(30, lambda: load_benchmark(str(path)))
    problems = caught.value.problems

    expected = {
        "pipe": (2, "image", "is a named pipe (FIFO), not a regular file"),
        "folder": (3, "image.path", "is a directory, not a regular file"),
        "loop": (4, "image", "symbolic link loop"),
        "sock": (5, "image", "is a socket, not a regular file"),
    }
    assert len(problems) == len(expected)
    for case_id, (row, field, reason) in expected.items():
        problem = _only(problems, case_id=case_id)
        assert (problem.file, problem.row, problem.field) == (str(path), row, field)
        assert reason in problem.message and "\n" not in str(problem)
    # validation says the same, once per row, and never blocks on the pipe
    reported = _within(30, lambda: validate_source(str(path)))
    assert sorted((p.row, p.field) for p in reported) == sorted((r, f) for r, f, _ in expected.values())


def test_image_functions_refuse_special_files_without_opening_them(special_files: Path) -> None:
    calls = (images.load_image, images.raw_image_bytes, images.image_content_hash, images.image_size)
    cases = {
        "pipe.png": "named pipe",
        "folder.png": "is a directory",
        "loop.png": "symbolic link loop",
        "sock.png": "is a socket",
        "/dev/zero": "character device",
    }
    for name, reason in cases.items():
        ref = ImageRef.from_path(special_files / name)
        for call in calls:
            with pytest.raises(ImageError, match=reason):
                _within(10, lambda call=call, ref=ref: call(ref))


def test_dev_zero_is_outside_the_data_and_a_device_even_when_allowed(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cases.jsonl", [_row("z", "/dev/zero")])

    outside = _only(validate_source(str(path)), case_id="z")
    assert "outside the data directory" in outside.message

    with pytest.raises(DataError) as caught:
        _within(30, lambda: load_benchmark(str(path), allow_external_images=True))
    (problem,) = caught.value.problems
    assert (problem.row, problem.case_id, problem.field) == (1, "z", "image")
    assert "character device" in problem.message


def test_images_over_the_size_cap_are_refused_before_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sparse = tmp_path / "huge.png"
    with sparse.open("wb") as handle:
        handle.truncate(5_000_000)  # a sparse file: 5 MB long, nothing written
    monkeypatch.setattr(image_files, "MAX_IMAGE_BYTES", 1_000_000)

    ref = ImageRef.from_path(sparse)
    for call in (images.load_image, images.raw_image_bytes, images.image_content_hash, images.image_size):
        with pytest.raises(ImageError, match=r"huge\.png.*over the limit.*MEDREWARDBENCH_MAX_IMAGE_BYTES"):
            call(ref)
    path = write_jsonl(tmp_path / "cases.jsonl", [_row("big", "huge.png")])
    problem = _only(validate_source(str(path)), case_id="big")
    assert problem.row == 1 and "over the limit" in problem.message

    monkeypatch.setattr(image_files, "MAX_IMAGE_BYTES", 5_000_000)  # exactly at the limit: read
    assert len(images.raw_image_bytes(ref)) == 5_000_000


def test_image_size_cap_is_read_from_the_environment() -> None:
    code = "from medrewardbench.images import files; print(files.MAX_IMAGE_BYTES)"
    env = {**os.environ, "MEDREWARDBENCH_MAX_IMAGE_BYTES": "4_096"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "4096"
    assert image_files._DEFAULT_MAX_IMAGE_BYTES == 512 * 2**20


def test_reading_never_returns_more_than_the_cap_of_a_file_stat_calls_empty(tmp_path: Path) -> None:
    # /proc files report size 0 yet can be long: the cap holds while reading too
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("needs /proc")
    assert maps.stat().st_size == 0
    with pytest.raises(FileRefused, match="more than the limit"):
        read_regular_file(maps, max_bytes=16)


def test_data_files_that_are_pipes_or_loops_are_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "cases.jsonl")
    with pytest.raises(DataError, match="named pipe") as caught:
        _within(30, lambda: collect_source(str(tmp_path / "cases.jsonl")))
    assert str(caught.value).count("\n") == 0
    with pytest.raises(FileRefused, match="named pipe"):
        open_regular_file(tmp_path / "cases.jsonl")

    (tmp_path / "loop.jsonl").symlink_to("loop.jsonl")
    with pytest.raises(DataError, match="symbolic link loop"):
        collect_source(str(tmp_path / "loop.jsonl"))


def test_a_looping_or_special_file_in_a_data_directory_is_a_problem_not_skipped(tmp_path: Path) -> None:
    data = tmp_path / "set"
    write_jsonl(data / "a.jsonl", [_row("a1")])
    (data / "b.jsonl").symlink_to("b.jsonl")
    os.mkfifo(data / "c.jsonl")
    (data / "d.jsonl").symlink_to("nowhere.jsonl")
    (data / "partitioned.parquet").mkdir()  # directories are still not data files

    problems = _within(30, lambda: validate_source(str(data)))

    assert [(Path(p.file).name, p.message) for p in problems] == [
        ("b.jsonl", "symbolic link loop (a link that points back to itself)"),
        ("c.jsonl", "is a named pipe (FIFO), not a regular file"),
        ("d.jsonl", "broken symbolic link (its target does not exist)"),
    ]
    with pytest.raises(DataError, match="b.jsonl: symbolic link loop"):
        load_benchmark(str(data))


def test_reference_layout_files_that_loop_are_reported_as_loops(tmp_path: Path) -> None:
    root = build_reference_layout(tmp_path / "mrb")
    labels = root / "pair_gt_all" / "chest.jsonl"
    labels.unlink()
    labels.symlink_to("chest.jsonl")

    problems = validate_source(str(root))

    problem = _only(problems, file=f"{root}/pair_gt_all/chest.jsonl")
    assert problem.message == "symbolic link loop (a link that points back to itself)"
    assert not any("mismatched" in p.message for p in problems)


def test_eval_and_validate_fail_fast_on_special_files_from_the_command_line(
    special_files: Path, tmp_path: Path
) -> None:
    path = write_jsonl(special_files / "cases.jsonl", [_row("ok", "ok.png"), _row("pipe", "pipe.png")])

    evaluated = _console_script("eval", "--data", str(path), "-j", "baseline:first", "-o", str(tmp_path / "out"))
    assert evaluated.returncode == 2
    assert "Traceback" not in evaluated.stderr
    *progress, line = [text for text in evaluated.stderr.splitlines() if text.strip()]
    assert all(text.startswith("loading ") for text in progress)
    assert f"{path}, row 2 (case pipe), field 'image'" in line and "named pipe" in line
    assert not (tmp_path / "out" / "medrewardbench.sqlite").exists()

    zero = write_jsonl(special_files / "zero.jsonl", [_row("z", "/dev/zero")])
    validated = _console_script("validate", str(zero), "--allow-external-images")
    assert validated.returncode == 1 and "Traceback" not in validated.stderr
    assert f"{zero}, row 1 (case z), field 'image'" in validated.stdout and "character device" in validated.stdout


# --------------------------------------------------------------------------- 3: images stay inside


def test_image_paths_must_resolve_inside_the_data_directory(tmp_path: Path) -> None:
    write_png(tmp_path / "private" / "photo.png")
    data = tmp_path / "data"
    write_png(data / "images" / "inside.png")
    (data / "images" / "link.png").symlink_to(tmp_path / "private" / "photo.png")
    (data / "linked").symlink_to(tmp_path / "private")  # a directory link: the file itself is no link
    rows = [
        _row("inside", "images/inside.png"),
        _row("absolute-inside", str(data / "images" / "inside.png")),
        _row("dotdot", "../private/photo.png"),
        _row("absolute", {"path": str(tmp_path / "private" / "photo.png")}),
        _row("link", "images/link.png"),
        _row("dirlink", "linked/photo.png"),
        _row("embedded", {"bytes": base64.b64encode(png_bytes()).decode()}),
        _row("builtin", {"builtin": "skimage:cell"}),
    ]
    path = write_jsonl(data / "cases.jsonl", rows)

    problems = validate_source(str(path))

    assert sorted(p.case_id or "" for p in problems) == ["absolute", "dirlink", "dotdot", "link"]
    for problem in problems:
        assert "outside the data directory" in problem.message and "--allow-external-images" in problem.message
        assert problem.field in ("image", "image.path") and problem.row in (3, 4, 5, 6)
    assert "-> " + str(tmp_path / "private" / "photo.png") in _only(problems, case_id="link").message
    with pytest.raises(DataError):
        load_benchmark(str(path))

    allowed = load_benchmark(str(path), allow_external_images=True)
    assert len(allowed) == len(rows)
    assert allowed.cases[2].image.raw_bytes() == (tmp_path / "private" / "photo.png").read_bytes()
    assert len(load_benchmark(str(path), image_roots=[tmp_path / "private"])) == len(rows)


def test_image_roots_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_png(tmp_path / "elsewhere" / "photo.png")
    path = write_jsonl(tmp_path / "data" / "cases.jsonl", [_row("x", "../elsewhere/photo.png")])
    with pytest.raises(DataError, match="outside the data directory"):
        load_benchmark(str(path))

    monkeypatch.setenv("MEDREWARDBENCH_IMAGE_ROOTS", os.pathsep.join(["/nonexistent", str(tmp_path / "elsewhere")]))
    assert load_benchmark(str(path)).case_ids() == ("x",)


def test_reference_layout_images_stay_under_the_data_directory(tmp_path: Path) -> None:
    write_png(tmp_path / "private.png")
    gt = tmp_path / "mrb" / "pair_gt_all"
    write_png(tmp_path / "mrb" / "images" / "foot.png")
    rows = reference_rows("foot", 2)
    rows[0]["image"] = {"bytes": None, "path": "../../images/foot.png"}  # inside mrb/: fine
    rows[1]["image"] = {"bytes": None, "path": str(tmp_path / "private.png")}
    write_reference_parquet(gt / "parquet" / "foot.parquet", rows)
    write_jsonl(gt / "foot.jsonl", reference_label_rows([0, 1]))

    problems = validate_source(str(tmp_path / "mrb"))

    problem = _only(problems, case_id="foot/1")
    assert problem.row == 2 and problem.field == "image.path" and "outside the data directory" in problem.message
    assert len(problems) == 1
    assert validate_source(str(tmp_path / "mrb"), allow_external_images=True) == []


def test_cli_flag_allows_external_images(tmp_path: Path) -> None:
    write_png(tmp_path / "elsewhere.png")
    path = write_jsonl(tmp_path / "data" / "cases.jsonl", [_row("x", "../elsewhere.png")])

    code, output = _cli("validate", str(path))
    assert code == 1 and "outside the data directory" in output
    code, output = _cli("validate", str(path), "--allow-external-images")
    assert code == 0 and "no problems" in output
    code, output = _cli("eval", "--data", str(path), "-j", "baseline:first", "-o", str(tmp_path / "o"), "-q")
    assert code == 2 and "row 1 (case x), field 'image'" in output
    code, output = _cli(
        "eval", "--data", str(path), "-j", "baseline:first", "-o", str(tmp_path / "o"), "-q", "--allow-external-images"
    )
    assert code == 0, output


# --------------------------------------------------------------------------- 6: nesting and I/O errors


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_deeply_nested_jsonl_rows_are_problems_naming_the_row(tmp_path: Path) -> None:
    lines = [
        json.dumps(_row("fine", metadata={"tree": json.loads(_nested(MAX_JSON_DEPTH - 2))})),
        '{"id": "parser", "metadata": ' + _nested(200_000) + "}",
        json.dumps(_row("deep", metadata={"tree": json.loads(_nested(100))})),
        json.dumps(_row("deep-label", labels={"overall": json.loads(_nested(100))})),
    ]
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n")

    problems = validate_source(str(path))

    assert "nested too deeply" in _only(problems, row=2).message
    assert _only(problems, row=3).field == "metadata" and "more than 64 levels" in _only(problems, row=3).message
    assert _only(problems, row=4).field == "labels"
    assert len(problems) == 3
    # what is accepted can be stored: json.dumps copes with the deepest metadata allowed
    (case,) = load_benchmark(str(path), strict=False).labeled().cases
    assert json.loads(json.dumps(dict(case.metadata))) == dict(case.metadata)


def test_deeply_nested_json_file_and_parquet_strings(tmp_path: Path) -> None:
    deep_file = tmp_path / "deep.json"
    deep_file.write_text(_nested(300_000))
    (problem,) = validate_source(str(deep_file))
    assert problem.row is None and "invalid JSON file: nested too deeply" in problem.message

    rows = canonical_rows()
    rows[0]["metadata"] = json.loads(_nested(100))  # written as a JSON string column
    rows[2]["labels"] = {"overall": 1}
    parquet = write_canonical_parquet_rows(tmp_path / "set" / "cases.parquet", rows)
    build_canonical_set(tmp_path / "set", name="unused.jsonl")
    table = pq.read_table(parquet).to_pylist()
    table[1]["labels"] = '{"overall": ' + _nested(5000) + "}"
    pq.write_table(pa.Table.from_pylist(table), parquet)

    problems = [p for p in validate_source(str(parquet)) if p.kind is None]

    assert (_only(problems, row=1).field, _only(problems, row=2).field) == ("metadata", "labels")
    assert all("nested" in p.message for p in problems) and len(problems) == 2


def test_io_errors_while_reading_data_files_name_the_file(tmp_path: Path) -> None:
    mem = Path("/proc/self/mem")  # a regular file whose first page cannot be read: EIO
    if not mem.exists():
        pytest.skip("needs /proc/self/mem")
    for name in ("cases.jsonl", "cases.json"):
        link = tmp_path / name
        link.symlink_to(mem)
        (problem,) = validate_source(str(link))
        assert problem.file == str(link) and "Input/output error" in problem.message
    root = build_reference_layout(tmp_path / "mrb")
    labels = root / "pair_gt_all" / "chest.jsonl"
    labels.unlink()
    labels.symlink_to(mem)
    problem = _only(validate_source(str(root)), file=f"{root}/pair_gt_all/chest.jsonl")
    assert "Input/output error" in problem.message

    with pytest.raises(ImageError, match=r"mem.*Input/output error"):
        images.raw_image_bytes(ImageRef.from_path(mem))

    # a path below a file is no data at all, and says so
    (tmp_path / "plain").write_text("x")
    with pytest.raises(DataError, match="no such file or directory"):
        collect_source(str(tmp_path / "plain" / "cases.jsonl"))


def test_too_deep_and_parse_json_directly() -> None:
    assert not too_deep({"a": [1, {"b": 2}]}, 3)
    assert too_deep({"a": [1, {"b": []}]}, 3)
    assert not too_deep(json.loads(_nested(64)))
    assert too_deep(json.loads(_nested(65)))
    assert parse_json('\ufeff{"a": 1}') == {"a": 1}


# --------------------------------------------------------------------------- 8: duplicate keys, BOM


def test_duplicate_keys_are_errors_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    line = '{"id": "x", "id": "y", "question": "q", "response_1": "a", "response_2": "b"}'
    nested = (
        '{"id": "z", "question": "q", "response_1": "a", "response_2": "b", "labels": {"overall": 1, "overall": 2}}'
    )
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text(line + "\n" + nested + "\n")
    problems = validate_source(str(jsonl))
    assert [(p.row, p.message) for p in problems] == [
        (1, "invalid JSON: duplicate key 'id' in one object"),
        (2, "invalid JSON: duplicate key 'overall' in one object"),
    ]

    doc = tmp_path / "cases.json"
    doc.write_text('{"cases": [], "cases": [' + json.dumps(_row("a")) + "]}")
    (problem,) = validate_source(str(doc))
    assert problem.message == "invalid JSON file: duplicate key 'cases' in one object"

    demo = tmp_path / "demo_cases.json"
    demo.write_text('{"name": "a", "name": "b", "cases": []}')
    from contextlib import nullcontext

    monkeypatch.setattr(demo_module, "_demo_resource", lambda: nullcontext(demo))
    with pytest.raises(DataError, match="duplicate key 'name'"):
        load_benchmark("demo")

    root = build_reference_layout(tmp_path / "mrb")
    (root / "pair_gt_all" / "chest.jsonl").write_text(
        '{"question_id": 0, "question_id": 1, "human_answer": {"overall": "A"}}\n'
    )
    problem = _only(validate_source(str(root)), row=1, file=f"{root}/pair_gt_all/chest.jsonl")
    assert "duplicate key 'question_id'" in problem.message


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [_row("a"), _row("b")]
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8-sig")
    doc = tmp_path / "other" / "cases.json"
    doc.parent.mkdir()
    doc.write_text(json.dumps(rows), encoding="utf-8-sig")
    assert jsonl.read_bytes().startswith(b"\xef\xbb\xbf")

    assert validate_source(str(jsonl)) == [] and validate_source(str(doc)) == []
    assert load_benchmark(str(jsonl)).case_ids() == ("a", "b") == load_benchmark(str(doc)).case_ids()

    demo = tmp_path / "demo_cases.json"
    demo.write_text(json.dumps({"name": "bom", "cases": rows}), encoding="utf-8-sig")
    from contextlib import nullcontext

    monkeypatch.setattr(demo_module, "_demo_resource", lambda: nullcontext(demo))
    assert load_benchmark("demo").case_ids() == ("a", "b")

    root = build_reference_layout(tmp_path / "mrb")
    labels = root / "pair_gt_all" / "chest.jsonl"
    labels.write_text(labels.read_text(), encoding="utf-8-sig")
    assert validate_source(str(root)) == []


# --------------------------------------------------------------------------- 9: printable ids, escapes


@pytest.mark.parametrize(
    ("case_id", "reason"),
    [
        ("evil\x1b[31mred", "'\\x1b' at position 5"),
        ("two\nlines", "'\\n' at position 4"),
        ("nul\x00", "'\\x00' at position 4"),
        ("bidi\u202eoverride", "'\\u202e' at position 5"),
        ("x" * 513, "513 characters long; at most 512"),
    ],
)
def test_case_ids_must_be_printable_and_bounded(tmp_path: Path, case_id: str, reason: str) -> None:
    path = write_jsonl(tmp_path / "cases.jsonl", [_row("fine"), _row(case_id)])

    problems = validate_source(str(path))

    (problem,) = problems
    assert (problem.row, problem.field, problem.case_id) == (2, "id", None)
    assert reason in problem.message
    assert load_benchmark(str(path), strict=False).case_ids() == ("fine",)
    assert len(load_benchmark(str(write_jsonl(tmp_path / "ok.jsonl", [_row("y" * 512)])))) == 1


def test_reference_question_ids_must_be_printable(tmp_path: Path) -> None:
    gt = tmp_path / "mrb" / "pair_gt_all"
    rows = reference_rows("brain", 2)
    rows[1]["question_id"] = 1
    write_reference_parquet(gt / "parquet" / "brain.parquet", rows)
    write_jsonl(gt / "brain.jsonl", [*reference_label_rows([0, 1]), {"question_id": "q\x1b[2J", "human_answer": {}}])

    problem = _only(validate_source(str(tmp_path / "mrb")), row=3)
    assert problem.field == "question_id" and "'\\x1b'" in problem.message


def test_terminal_safe_escapes_control_characters() -> None:
    assert terminal_safe("plain text, tabs\tand ünïcödé") == "plain text, tabs\tand ünïcödé"
    assert terminal_safe("a\x1b[31mb\x07c\x9bd\x7f") == "a\\x1b[31mb\\x07c\\x9bd\\x7f"
    assert terminal_safe("one\ntwo\rthree") == "one\ntwo\\x0dthree"
    assert terminal_safe("one\ntwo", keep_newlines=False) == "one\\x0atwo"
    assert terminal_safe("x\u202ey\u2028z") == "x\\u202ey\\u2028z"


def test_nothing_from_data_reaches_the_terminal_unescaped(tmp_path: Path) -> None:
    data = tmp_path / "evil\x1b[2Jdata"
    rows = [_row(f"c{i}", metadata={"site": "\x1b[31mRED[/]\x07"}) for i in range(4)]
    rows.append(_row("bad", labels={"overall": "C\x1b]0;title\x07"}))
    path = write_jsonl(data / "cases.jsonl", rows)

    code, output = _cli("validate", str(path))
    assert code == 1 and "\x1b" not in output and "\x07" not in output
    assert "evil\\x1b[2Jdata" in output and "'C\\x1b]0;title\\x07'" in output

    good = write_jsonl(data / "good.jsonl", rows[:4])
    code, output = _cli("eval", "--data", str(good), "-j", "baseline:first", "--by", "site", "-o", str(tmp_path / "o"))
    assert code == 0, output
    assert "\x1b" not in output and "\x07" not in output
    assert "\\x1b[31mRED[/]\\x07" in output  # shown literally: not markup, not an escape sequence


def test_log_lines_escape_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    from medrewardbench.cli.support import _SafeFormatter

    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "case %s", ("a\x1b[2Jb",), None)
    assert _SafeFormatter("%(message)s").format(record) == "case a\\x1b[2Jb"


# --------------------------------------------------------------------------- 10: unlabeled, empty


def test_empty_and_unlabeled_sources_cannot_be_measured(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    (problem,) = validate_source(str(empty))
    assert problem.message == "no cases in the data: nothing can be measured"

    unlabeled = write_jsonl(tmp_path / "unlabeled.jsonl", [_row("u1", labels=None), _row("u2", labels={})])
    problems = validate_source(str(unlabeled))
    assert "none of the 2 case(s) carries an expert label" in problems[0].message
    assert [(p.row, p.case_id, p.kind) for p in problems[1:]] == [(1, "u1", "unlabeled"), (2, "u2", "unlabeled")]

    for source in (empty, unlabeled):
        code, output = _cli("eval", "--data", str(source), "-j", "baseline:first", "-o", str(tmp_path / "o"))
        assert code == 2 and "nothing can be measured" in output
    assert not (tmp_path / "o" / "medrewardbench.sqlite").exists()
    assert nothing_to_measure("x", load_benchmark(str(unlabeled)).cases) is not None


def test_null_labels_and_unlabeled_cases_are_warned_about(tmp_path: Path) -> None:
    rows = [_row("a", labels={"overall": 1, "accuracy": None}), _row("b", labels=None)]
    path = write_jsonl(tmp_path / "cases.jsonl", rows)

    bench = load_benchmark(str(path))

    assert [(w.row, w.field, w.kind) for w in bench.warnings] == [
        (1, "labels.accuracy", "null_label"),
        (2, "labels", "unlabeled"),
    ]
    assert dict(bench.cases[0].labels) == {"overall": 1}

    root = build_reference_layout(tmp_path / "mrb")
    write_jsonl(
        root / "pair_gt_all" / "chest.jsonl",
        [{"question_id": 0, "human_answer": {"overall": None}}, *reference_label_rows([1, 2])],
    )
    warnings = load_benchmark(str(root)).warnings
    assert sorted((w.kind, w.case_id) for w in warnings) == [("null_label", "chest/0"), ("unlabeled", "chest/0")]


def test_parquet_label_structs_have_no_null_warnings(canonical_file: Path, tmp_path: Path) -> None:
    from medrewardbench.data import write_canonical

    cases, _ = read_canonical(canonical_file)
    out = write_canonical(cases, canonical_file.parent / "copy.parquet")  # labels struct: absent = null

    assert [w.kind for w in load_benchmark(str(out)).warnings] == ["unlabeled"]  # c4 only


def test_eval_counts_warnings_instead_of_listing_them(tmp_path: Path) -> None:
    rows = [_row(f"c{i}", labels={"overall": 1} if i % 5 == 0 else None) for i in range(40)]
    path = write_jsonl(tmp_path / "cases.jsonl", rows)

    code, output = _cli("eval", "--data", str(path), "-j", "baseline:first", "-o", str(tmp_path / "o"))

    assert code == 0, output
    warnings = [line for line in output.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: 32 case(s) without expert labels (first: {path}, row 2 (case c1))"]
    code, output = _cli("validate", str(path))
    assert output.count("case without expert labels") == 32


def test_summarize_warnings_counts_kinds_and_lists_the_rest() -> None:
    many = [DataProblem("f", "case without expert labels", row=i, case_id=f"c{i}", kind="unlabeled") for i in (3, 4)]
    one = [DataProblem("f", "labels without a case", row=9, kind="orphan_labels")]
    other = [DataProblem("g", f"problem {i}", row=i) for i in range(12)]

    lines = summarize_warnings([*many, *one, *other], max_lines=5)

    assert lines[0] == "2 case(s) without expert labels (first: f, row 3 (case c3))"
    assert lines[1] == "f, row 9: labels without a case"
    assert lines[2:4] == ["g, row 0: problem 0", "g, row 1: problem 1"]
    assert lines[4] == "... and 10 more warning(s)"


# --------------------------------------------------------------------------- 11: empty flag values


def test_empty_data_organs_and_judge_values_are_errors(tmp_path: Path) -> None:
    out = str(tmp_path / "o")
    code, output = _cli("eval", "--data", "", "-o", out)
    assert code == 2 and "empty data source" in output
    code, output = _cli("eval", "--data", "   ", "-o", out)
    assert code == 2 and "empty data source" in output
    code, output = _cli("eval", "--organs", ",", "-o", out)
    assert code == 2 and "--organs was given an empty value" in output
    code, output = _cli("eval", "--judge", "", "-o", out)
    assert code == 2 and "--judge was given an empty value" in output
    code, output = _cli("validate", "")
    assert code == 1 and "empty data source" in output
    code, output = _cli("validate", "demo", "--organs", " , ")
    assert code == 2 and "--organs was given an empty value" in output
    assert not Path(out).exists()
    with pytest.raises(DataError, match="empty data source"):
        load_benchmark("")
