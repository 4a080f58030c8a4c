"""``medrewardbench build``: the command group, its one-line errors and its exit statuses."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.curation import (
    OPEN_ROWS,
    VQA_MAP,
    api_flags,
    api_options,
    imported_project,
    open_responder,
    project_store,
    write_jsonl,
    write_vqa_source,
)
from typer.testing import CliRunner

from medrewardbench.cli import app
from medrewardbench.curation.generators import load_answer_template
from medrewardbench.curation.pairs import sample_pairs
from medrewardbench.curation.pool import run_responses
from medrewardbench.curation.project import open_project
from medrewardbench.testing.openai_server import OpenAIServer

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["build", *args], catch_exceptions=False)
    return result.exit_code, result.output


def errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_the_group_lists_its_commands() -> None:
    code, output = invoke("--help")
    assert code == 0
    for command in ("import", "filter", "responses", "pairs", "labels", "export", "report"):
        assert command in output


def test_bad_input_is_one_line_with_exit_status_2(tmp_path: Path) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    code, output = invoke("import", str(tmp_path / "p"), str(source), "--map", "colour=c")
    assert code == 2 and len(errors(output)) == 1 and "'colour' is not a field of the questions format" in output
    code, output = invoke("report", str(tmp_path / "nothing"))
    assert code == 2 and errors(output) == [
        f"error: {tmp_path / 'nothing'}: not a build project (no build.sqlite); start one with 'medrewardbench build "
        f"import {tmp_path / 'nothing'} SOURCE'"
    ]
    assert invoke("import", str(tmp_path / "p"), str(source), "--map", VQA_MAP)[0] == 0
    code, output = invoke("filter", str(tmp_path / "p"), "--model", "gpt-4o", "--max-correct", "0", "-q")
    assert code == 2 and "expected KIND:NAME" in errors(output)[0]
    code, output = invoke("pairs", str(tmp_path / "p"), "--out", str(tmp_path / "x.jsonl"))
    assert code == 2 and "the response pool has 0 generator(s)" in errors(output)[0]


def test_problems_in_a_source_name_file_row_and_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "", "image": None}, {"question": "x"}])
    code, output = invoke("import", str(tmp_path / "p"), str(path))
    assert code == 2
    assert f"{path}, row 1 (case a), field 'question': missing required field" in output
    assert f"{path}, row 2, field 'id': missing id" in output
    assert not (tmp_path / "p" / "build.sqlite").exists() or "imported" not in output


def test_a_generator_that_fails_everything_exits_1_with_its_reasons(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    source = write_vqa_source(tmp_path / "vqa")
    assert invoke("import", str(tmp_path / "p"), str(source), "--map", VQA_MAP)[0] == 0
    answer_server.control.set_faults(rate_400=1.0)
    code, output = invoke("responses", str(tmp_path / "p"), "-g", "api:broken", *api_flags(answer_server), "-q")
    assert code == 1
    assert "api:broken: 6 stored answer(s) failed. Most common: HTTP 400" in output
    assert "every request failed for api:broken" in errors(output)[0] and "--retry-failures" in output
    answer_server.control.set_faults()
    code, output = invoke(
        "responses", str(tmp_path / "p"), "-g", "api:broken", *api_flags(answer_server), "--retry-failures", "-q"
    )
    assert code == 0 and "the pool holds 1 generator(s): api:broken" in output
    code, output = invoke("report", str(tmp_path / "p"))
    assert code == 0 and "api:broken" in output
    assert json.loads(json.dumps(output))  # printable


def test_filter_names_models_and_grader_apart_and_its_last_line_says_what_happened(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    answer_server.control.set_responder(open_responder)
    project = imported_project(tmp_path, OPEN_ROWS)
    flags = ["-m", "api:expert", "-m", "api:novice", "-k", "0", "--grader", "api:grader", *api_flags(answer_server)]
    code, output = invoke("filter", str(project), *flags)
    assert code == 0, output
    assert "Filter models" in output and "grader: api:grader" in output
    last = " ".join(output.strip().splitlines()[-3:])
    assert "decisions stored" in last and "(1 not answered, 0 not graded)" not in last
    flat = " ".join(output.split())
    assert "1 answer(s) could not be scored and count as wrong (0 not answered, 1 not graded)" in flat
    answer_server.control.set_faults(rate_400=1.0)
    code, output = invoke("filter", str(project), *flags, "--fresh", "-q")
    assert code == 1
    assert "every request failed for api:expert, api:novice: the decisions are stored" in " ".join(output.split())
    assert "decided 3 question(s), decisions stored" in output, "the decisions are stated before the error"


# ------------------------------------------------------------------------ bad inputs, one line each


def no_traceback(output: str) -> bool:
    return "Traceback" not in output and "Error:" not in output.replace("error:", "")


@pytest.fixture
def paired(answer_server: OpenAIServer, tmp_path: Path) -> Path:
    """A project with six pairs (JSONL source: CT, MR and retina images, three organ systems)."""
    project = imported_project(tmp_path)
    with open_project(project) as store:
        run_responses(
            store, ["api:gen-a", "api:gen-b"], options=api_options(answer_server), template=load_answer_template()
        )
        sample_pairs(store, tmp_path / "pairs.jsonl", seed=11)
    return project


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (hidden ones included) with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_an_export_target_that_cannot_be_written_is_one_line_before_any_work(paired: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    (tmp_path / "a-dir.jsonl").mkdir()
    cases = [
        (
            ["--format", "canonical", "--out", str(blocker / "x" / "set.jsonl")],
            f"lies below {blocker}, which is a file",
        ),
        (["--format", "questions", "--out", str(blocker / "kept.jsonl")], f"lies below {blocker}, which is a file"),
        (["--format", "reference", "--out", str(blocker)], "is a file, not a directory"),
        (["--format", "reference", "--out", str(blocker / "ref")], f"lies below {blocker}, which is a file"),
        (["--format", "canonical", "--out", str(tmp_path / "a-dir.jsonl")], "is a directory, not a file"),
        (["--format", "canonical", "--out", str(tmp_path / "set.txt")], "a canonical export needs a .jsonl"),
    ]
    before = snapshot(tmp_path)
    for args, message in cases:
        code, output = invoke("export", str(paired), *args)
        assert code == 2 and no_traceback(output), output
        assert len(errors(output)) == 1 and message in errors(output)[0], output
    assert snapshot(tmp_path) == before  # nothing written, nothing created


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc, where nobody can create files")
def test_an_export_into_a_directory_that_refuses_new_files_is_one_line_also_for_root(paired: Path) -> None:
    for fmt, out in (("canonical", "/proc/set.jsonl"), ("reference", "/proc/medrewardbench-ref")):
        code, output = invoke("export", str(paired), "--format", fmt, "--out", out)
        assert code == 2 and no_traceback(output), output
        assert len(errors(output)) == 1 and "cannot " in errors(output)[0] and "/proc" in errors(output)[0], output


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only directories")
def test_an_export_into_a_read_only_directory_is_one_line(paired: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        code, output = invoke("export", str(paired), "--out", str(locked / "set.jsonl"))
        assert code == 2 and no_traceback(output), output
        assert errors(output) == [f"error: --out {locked / 'set.jsonl'}: cannot write in {locked} (permission denied)"]
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_an_earlier_export_is_replaced_only_with_force(paired: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    assert invoke("export", str(paired), "--out", str(release / "set.jsonl"))[0] == 0
    assert invoke("export", str(paired), "--format", "reference", "--out", str(release / "ref"))[0] == 0
    assert invoke("export", str(paired), "--format", "questions", "--out", str(release / "kept.jsonl"))[0] == 0
    before = snapshot(release)
    refused = [
        (["--out", str(release / "set.jsonl")], f"{release / 'set.jsonl'} and {release / 'dataset.json'} exist"),
        # another file in the same directory would replace the first export's card
        (["--out", str(release / "other.parquet")], f"{release / 'dataset.json'} exists already"),
        (["--format", "reference", "--out", str(release / "ref")], f"{release / 'ref' / 'pair_gt_all'} and"),
        (["--format", "questions", "--out", str(release / "kept.jsonl")], f"{release / 'kept.jsonl'} exists"),
    ]
    for args, message in refused:
        code, output = invoke("export", str(paired), *args)
        assert code == 2 and len(errors(output)) == 1, output
        assert message in errors(output)[0] and "--force replaces" in errors(output)[0], output
    assert snapshot(release) == before
    for args, _ in refused:
        code, output = invoke("export", str(paired), *args, "--force")
        assert code == 0, output
    assert (release / "set.jsonl").read_bytes() == before["set.jsonl"]  # the same project: the same bytes
    assert sorted(p.name for p in (release / "ref").iterdir()) == ["dataset.json", "pair_gt_all"]


def test_a_write_that_fails_part_way_is_one_line_and_keeps_the_earlier_export(
    paired: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import medrewardbench.data.canonical as canonical
    import medrewardbench.data.reference_writer as reference_writer

    release = tmp_path / "release"
    assert invoke("export", str(paired), "--format", "reference", "--out", str(release / "ref"))[0] == 0
    assert invoke("export", str(paired), "--out", str(release / "set.parquet"))[0] == 0
    before = snapshot(release)
    real_write_reference = reference_writer.write_reference
    written: list[Path] = []

    def disk_full_on_the_second_organ(cases: Any, root: Any) -> list[Path]:
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")  # as a write() on a full disk: no file name
        written.extend(real_write_reference(cases, root))
        return written

    def disk_full(records: Any, path: Path) -> int:
        path.write_bytes(b"PAR1 half a file")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(reference_writer, "write_reference", disk_full_on_the_second_organ)
    monkeypatch.setattr(canonical, "_write_parquet", disk_full)
    for args, out in (
        (["--format", "reference", "--out", str(release / "ref")], release / "ref"),
        (["--out", str(release / "set.parquet")], release / "set.parquet"),
    ):
        code, output = invoke("export", str(paired), *args, "--force")
        assert code == 1 and no_traceback(output), output
        assert errors(output) == [f"error: --out {out}: writing failed: No space left on device"], output
    assert written  # the first organ was written before the disk filled up
    assert snapshot(release) == before  # the earlier exports, whole; no partial or temporary file left


def test_pairs_and_report_outputs_are_checked_before_any_work(paired: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    (tmp_path / "a-dir.jsonl").mkdir()
    with project_store(paired) as store:
        pairs_before = store.count_pairs()
    for out, message in (
        (tmp_path / "a-dir.jsonl", "is a directory, not a file"),
        (tmp_path / "no-suffix", "pairs are written to a .jsonl"),
        (blocker / "pairs.jsonl", f"lies below {blocker}, which is a file"),
    ):
        code, output = invoke("pairs", str(paired), "--seed", "11", "--out", str(out))
        assert code == 2 and no_traceback(output), output
        assert len(errors(output)) == 1 and message in errors(output)[0], output
    with project_store(paired) as store:
        assert store.count_pairs() == pairs_before  # the sampled pairs are still there
    for out, message in ((blocker, "is a file, not a directory"), (blocker / "report", f"lies below {blocker}")):
        code, output = invoke("report", str(paired), "--out", str(out))
        assert code == 2 and no_traceback(output), output
        assert len(errors(output)) == 1 and message in errors(output)[0], output


def test_empty_paths_and_names_are_refused_not_read_as_the_current_directory(
    paired: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    source = write_vqa_source(tmp_path / "vqa2")
    project = str(paired)
    refused = [
        (["import", "", str(source), "--map", VQA_MAP], "PROJECT is empty"),
        (["import", str(tmp_path / "new"), ""], "SOURCE is empty"),
        (["import", str(tmp_path / "new"), str(source), "--map", ""], "--map was given an empty value"),
        (["import", str(tmp_path / "new"), str(source), "--map", VQA_MAP, "--set", ","], "--set was given an empty"),
        (["import", str(tmp_path / "new"), str(source), "--map", VQA_MAP, "--source-name", ""], "--source-name was"),
        (["labels", project, ""], "FILE is empty"),
        (["pairs", project, "--out", ""], "--out is empty"),
        (["export", project, "--out", ""], "--out is empty"),
        (["export", project, "--out", "x.jsonl", "--name", ""], "--name was given an empty value"),
        (["export", project, "--out", "x.jsonl", "--provenance", " "], "--provenance was given an empty value"),
        (["report", project, "--out", ""], "--out is empty"),
        (["report", ""], "PROJECT is empty"),
    ]
    for args, message in refused:
        code, output = invoke(*args)
        assert code == 2 and len(errors(output)) == 1 and message in errors(output)[0], (args, output)
    assert list(here.iterdir()) == [] and not (tmp_path / "new").exists()


def test_a_first_import_that_fails_leaves_no_project_behind(tmp_path: Path) -> None:
    bad = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": 42, "image": None}])
    for project in (tmp_path / "new", tmp_path / "deeper" / "new"):
        code, output = invoke("import", str(project), str(bad))
        assert code == 2 and errors(output) == [
            f"error: {bad}, row 1 (case a), field 'question': must be a string, got int 42"
        ], output
        assert not project.exists()
    (tmp_path / "empty-dir").mkdir()
    assert invoke("import", str(tmp_path / "empty-dir"), str(bad))[0] == 2
    assert list((tmp_path / "empty-dir").iterdir()) == []  # the directory was there before: it stays, empty


def test_text_fields_that_are_not_text_say_so_with_the_value(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": "a", "question": 42, "image": None},
            {"id": 7, "question": "Is it?", "image": None},
            {"id": "c", "question": ["a", "list"], "reference_answer": 3, "organ_system": True, "image": None},
            {"id": "d", "question": None, "image": None},
        ],
    )
    code, output = invoke("import", str(tmp_path / "p"), str(path))
    assert code == 2 and no_traceback(output)
    assert f"{path}, row 1 (case a), field 'question': must be a string, got int 42" in output
    assert f"{path}, row 2, field 'id': id must be a string, got int 7" in output
    assert f"{path}, row 3 (case c), field 'question': must be a string, got list ['a', 'list']" in output
    assert f"{path}, row 3 (case c), field 'reference_answer': must be a string, got int 3" in output
    assert f"{path}, row 3 (case c), field 'organ_system': must be a string, got bool True" in output
    assert f"{path}, row 4 (case d), field 'question': missing required field (a non-empty string)" in output


def test_a_max_correct_that_can_drop_nothing_is_refused_unless_forced(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    project = imported_project(tmp_path)
    flags = api_flags(answer_server)
    for models, k in ((["-m", "api:a"], "1"), (["-m", "api:a", "-m", "api:b"], "2"), (["-m", "api:a,api:b"], "5")):
        code, output = invoke("filter", str(project), *models, "--max-correct", k, *flags, "-q")
        assert code == 2 and len(errors(output)) == 1, output
        assert f"--max-correct {k} can drop nothing with" in errors(output)[0] and "--force" in errors(output)[0]
    assert answer_server.control.chat_requests() == []  # refused before any request
    code, output = invoke("filter", str(project), "-m", "api:a", "--max-correct", "1", "--force", *flags, "-q")
    assert code == 0 and "dropped 0" in output, output
    assert len(answer_server.control.chat_requests()) == 6


def test_sampling_settings_that_no_server_accepts_are_refused_before_any_request(
    answer_server: OpenAIServer, tmp_path: Path
) -> None:
    project = imported_project(tmp_path)
    base = ["filter", str(project), "-m", "api:a", "-m", "api:b", "--max-correct", "1", *api_flags(answer_server), "-q"]
    for extra, message in (
        (["--temperature", "nan"], "--temperature must be a number >= 0, not nan"),
        (["--temperature", "-1"], "--temperature must be a number >= 0"),
        (["--top-p", "1.5"], "--top-p must be a number in (0, 1], not 1.5"),
        (["--top-p", "nan"], "--top-p must be a number in (0, 1]"),
        (["--grader", ""], "--grader was given an empty value"),
        (["--api-key-env", ""], "--api-key-env was given an empty value"),
    ):
        code, output = invoke(*base, *extra)
        assert code == 2 and len(errors(output)) == 1 and message in errors(output)[0], output
    code, output = invoke(*base, "--max-tokens", "0")
    assert code == 2 and "--max-tokens" in output and no_traceback(output)
    code, output = invoke("responses", str(project), "-g", "api:a", "--temperature", "inf", *api_flags(answer_server))
    assert code == 2 and errors(output) == ["error: --temperature must be a number >= 0, not inf"], output
    assert answer_server.control.chat_requests() == []


def test_a_labelled_only_export_that_would_be_empty_is_refused(paired: Path, tmp_path: Path) -> None:
    for args, message in (
        (["--out", str(tmp_path / "set.jsonl")], "--labelled-only: no pair has labels yet"),
        (["--format", "reference", "--out", str(tmp_path / "ref")], "--labelled-only: no pair has labels yet"),
        (["--format", "questions", "--out", str(tmp_path / "q.jsonl")], "--labelled-only applies to the canonical"),
    ):
        code, output = invoke("export", str(paired), *args, "--labelled-only")
        assert code == 2 and len(errors(output)) == 1 and message in errors(output)[0], output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.jsonl", "project", "vqa"]


def test_a_spec_that_looks_like_an_emoji_code_is_printed_as_it_is(answer_server: OpenAIServer, tmp_path: Path) -> None:
    project = imported_project(tmp_path)
    answer_server.control.set_faults(rate_400=1.0)
    code, output = invoke("responses", str(project), "-g", "api:x", *api_flags(answer_server), "-q")
    assert code == 1 and "api:x: 6 stored answer(s) failed" in output, output  # not "api❌ 6 stored ..."
