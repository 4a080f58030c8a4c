"""``medrewardbench annotate`` from the shell: init, users, tokens, status, export, and eval on the export."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.annotate import PASSWORD, as_user, case_rows, free_port, login_form, start_serve_process, write_cases
from typer.testing import CliRunner

from medrewardbench.annotate.service import Identity, PairAnswer, Project
from medrewardbench.cli import annotate as annotate_cli
from medrewardbench.cli import app
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import install_command

runner = CliRunner()


def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), input=stdin, catch_exceptions=False)
    return result.exit_code, result.output


def test_init_users_status_export_and_eval_from_the_command_line(tmp_path: Path, gold_file: Path) -> None:
    cases = write_cases(tmp_path / "input", case_rows(6))
    project = tmp_path / "proj"
    code, out = run(
        "annotate", "init", str(project), "--cases", str(cases), "--per-case", "2",
        "--gold", str(gold_file), "--repeat-share", "0.25", "--seed", "9", "--name", "Chest study",
    )  # fmt: skip
    assert code == 0, out
    assert "6 pairs to label, 2 per case" in out and "2 gold pairs" in out
    for name in ("alice", "bob"):
        code, out = run(
            "annotate",
            "user",
            "add",
            name,
            "--role",
            "annotator",
            "-p",
            str(project),
            "--password-stdin",
            stdin=PASSWORD + "\n",
        )
        assert code == 0 and f"Added annotator {name} with" in out, out
    code, out = run("annotate", "user", "add", "boss", "--role", "admin", "-p", str(project), "--generate-password")
    assert code == 0 and "Password: " in out
    code, out = run("annotate", "user", "list", "-p", str(project))
    assert code == 0 and "alice" in out and "boss" in out
    code, out = run("annotate", "user", "token", "alice", "-p", str(project), "--label", "scripts")
    assert code == 0 and out.strip().splitlines()[0].startswith("mrb_")
    code, out = run("annotate", "user", "token", "alice", "-p", str(project), "--list")
    assert code == 0 and "active" in out and "scripts" in out

    opened = Project.open(project)
    try:
        for index, name in enumerate(("alice", "bob")):
            me = as_user(opened, name)
            for row in opened.queue(me).rows:
                letter = "A" if index == 0 else "B"
                opened.submit_pair(me, row.public_id, PairAnswer({d: letter for d in DIMENSIONS}, seconds=7))
    finally:
        opened.close()

    code, out = run("annotate", "status", str(project))
    assert code == 0 and "Chest study" in out and "Fleiss kappa" in out and "alice" in out, out
    from medrewardbench.cli.support import console

    wide = console.width
    try:
        console.width = 60  # a narrow terminal (COLUMNS is read when the console is made)
        narrow = runner.invoke(app, ["annotate", "status", str(project)], catch_exceptions=False)
    finally:
        console.width = wide
    assert narrow.exit_code == 0 and "alice" in narrow.output
    tables = [line for line in narrow.output.splitlines() if line[:1] in "┃│┏┡└┗╷╵┌├┬┴┼━─"]
    assert tables and max(len(line) for line in tables) <= 60, narrow.output  # the tables fit a narrow terminal
    code, out = run("annotate", "status", str(project), "--json")
    figures = json.loads(out)
    assert figures["items"] == 6 and figures["items_complete"] == 6 and figures["gold_items"] == 2
    assert {a["name"] for a in figures["annotators"]} == {"alice", "bob"}
    assert [d["dimension"] for d in figures["agreement"]] == list(DIMENSIONS)

    export = tmp_path / "labelled.jsonl"
    code, out = run("annotate", "export", str(project), "--format", "canonical", "--out", str(export))
    assert code == 0 and "Wrote 6 item(s)" in out and "medrewardbench eval --data" in out, out
    rows = [json.loads(line) for line in export.read_text().splitlines()]
    assert all(len(row["annotations"]) == 2 for row in rows)
    code, out = run("annotate", "export", str(project), "--format", "reference", "--out", str(tmp_path / "ref"))
    assert code == 0 and (tmp_path / "ref" / "pair_gt_all" / "chest.jsonl").is_file(), out

    # eval reads the export directly: the canonical file as a real console command, the reference
    # layout in this process (what is tested there is the layout, not the process)
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "medrewardbench.cli", "eval", "--data", str(export), "--judge", "baseline:longer",
         "--out", str(tmp_path / f"results-{export.name}")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Leaderboard" in done.stdout and "baseline:longer" in done.stdout
    ref = tmp_path / "ref"
    args = ["eval", "--data", str(ref), "--judge", "baseline:longer", "--out", str(tmp_path / "results-ref")]
    here = runner.invoke(app, args, catch_exceptions=False)
    assert here.exit_code == 0, here.stderr[-2000:]
    assert "Leaderboard" in here.stdout and "baseline:longer" in here.stdout


def test_errors_in_the_input_are_reported_and_nothing_is_created(tmp_path: Path) -> None:
    rows = case_rows(2)
    rows[0]["labels"] = {"overall": "C"}
    cases = write_cases(tmp_path / "input", rows)
    code, out = run("annotate", "init", str(tmp_path / "proj"), "--cases", str(cases))
    assert code == 2 and "row 1" in out and "labels.overall" in out
    assert not (tmp_path / "proj" / "annotate.json").exists()
    code, out = run("annotate", "status", str(tmp_path / "nowhere"))
    assert code == 2 and "is not an annotation project" in out


def test_a_missing_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(annotate_cli, "EXTRA_MODULES", ("surely_not_installed_module",))
    code, out = run("annotate", "init", str(tmp_path / "proj"), "--cases", "demo")
    assert code == 2 and install_command("annotate") in out and "surely_not_installed_module" in out


def test_the_command_line_does_not_import_the_web_stack_until_a_command_needs_it() -> None:
    code = (
        "import sys, medrewardbench.cli; "
        "names = ('fastapi', 'sqlalchemy', 'alembic', 'uvicorn', 'argon2', 'starlette'); "
        "heavy = [m for m in names if m in sys.modules]; "
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------------ bad inputs, one line each


def error_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("error:")]


def test_a_file_without_a_single_case_or_question_creates_no_project(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n\n")
    no_rows = tmp_path / "none.json"
    no_rows.write_text("[]")
    unusable = tmp_path / "unusable.jsonl"
    unusable.write_text(json.dumps({"id": "x", "question": 42}) + "\n")
    cases = write_cases(tmp_path / "input", case_rows(2))
    for args, message in (
        (["--cases", str(empty)], f"error: {empty}: holds no cases to label"),
        (["--cases", str(blank)], f"error: {blank}: holds no cases to label"),
        (["--cases", str(no_rows)], f"error: {no_rows}: holds no cases to label"),
        (["--cases", str(unusable)], f"{unusable}, row 1 (case x), field 'question': must be a string, got int"),
        (["--cases", str(cases), "--gold", str(empty)], f"error: {empty}: holds no gold cases"),
        (["--questions", str(empty)], f"error: {empty}: the file holds no questions"),
        (["--questions", str(blank)], f"error: {blank}: the file holds no questions"),
        (["--questions", str(unusable)], f"{unusable}, row 1 (case x), field 'question': must be a string, got int 42"),
    ):
        code, out = run("annotate", "init", str(tmp_path / "proj"), *args)
        assert code == 2 and "Traceback" not in out and message in out, (args, out)
        assert not (tmp_path / "proj").exists(), args


def test_a_project_directory_or_setting_that_cannot_work_is_one_line_before_any_case_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cases = write_cases(tmp_path / "input", case_rows(2))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    missing = tmp_path / "nope.md"
    new = str(tmp_path / "proj")
    refused = [
        ([str(blocker)], f"error: PROJECT {blocker}: is a file, not a directory"),
        ([str(blocker / "proj")], f"error: PROJECT {blocker / 'proj'}: lies below {blocker}, which is a file"),
        ([""], "error: PROJECT is empty"),
        ([new, "--guidelines", str(missing)], f"error: --guidelines {missing}: cannot read it (No such file"),
        ([new, "--guidelines", str(tmp_path)], f"error: --guidelines {tmp_path}: cannot read it (Is a directory)"),
        ([new, "--db", "garbage://x"], "error: --db must be an sqlite:/// or postgresql+psycopg:// URL"),
        ([new, "--db", ""], "error: --db was given an empty value"),
        ([new, "--name", " "], "error: --name was given an empty value"),
        ([new, "--repeat-share", "nan"], "error: --repeat-share must be a number between 0 and 1, not nan"),
        ([new, "--seed", str(10**20)], "error: --seed must be a whole number between -2147483648 and 2147483647"),
    ]
    if Path("/proc/self").is_dir():  # a directory nobody, root included, can create anything in
        refused.append((["/proc/medrewardbench-proj"], "error: PROJECT /proc/medrewardbench-proj: cannot create it"))
    for args, message in refused:
        code, out = run("annotate", "init", *args, "--cases", str(cases))
        assert code == 2 and "Traceback" not in out, (args, out)
        assert len(error_lines(out)) == 1 and error_lines(out)[0].startswith(message), (args, out)
    code, out = run("annotate", "init", new, "--cases", str(cases), "--per-case", str(10**20))
    assert code == 2 and "Traceback" not in out and "--per-case" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "input"]  # nothing created anywhere
    assert run("annotate", "init", new, "--cases", str(cases))[0] == 0
    before = (tmp_path / "proj" / "annotate.db").read_bytes()
    code, out = run("annotate", "init", new, "--cases", str(tmp_path / "not-read.jsonl"))
    assert code == 2 and error_lines(out) == [
        f"error: {new} already holds an annotation project (annotate.json exists); choose another directory"
    ]
    assert (tmp_path / "proj" / "annotate.db").read_bytes() == before


def test_a_database_that_cannot_be_reached_is_one_line_and_leaves_no_directory(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    cases = write_cases(tmp_path / "input", case_rows(2))
    url = f"postgresql+psycopg://someone:hunter2-secret@127.0.0.1:{free_port()}/nothing"
    code, out = run("annotate", "init", str(tmp_path / "proj"), "--cases", str(cases), "--db", url)
    assert code == 2 and "Traceback" not in out, out
    assert len(error_lines(out)) == 1 and error_lines(out)[0].startswith("error: the database could not be set up")
    assert "hunter2-secret" not in out
    assert not (tmp_path / "proj").exists()


def test_fewer_active_annotators_than_per_case_is_a_warning_wherever_the_numbers_are_shown(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "input", case_rows(4))
    project = str(tmp_path / "proj")
    assert run("annotate", "init", project, "--cases", str(cases), "--per-case", "3")[0] == 0

    def add(name: str, role: str = "annotator") -> str:
        code, out = run("annotate", "user", "add", name, "--role", role, "-p", project, "--generate-password")
        assert code == 0, out
        return out

    warning = "warning: per-case is 3 but only {n} active annotator{s}: each case gets {n} until more are added"
    assert warning.format(n=1, s="") in add("dr_a")
    assert warning.format(n=2, s="s") in add("dr_b")
    assert warning.format(n=2, s="s") in add("boss", "admin")  # an admin labels nothing
    for args in (["status", project], ["status", project, "--json"]):
        code, out = run("annotate", *args)
        assert code == 0 and warning.format(n=2, s="s") in out
    assert "warning" not in add("dr_c")
    code, out = run("annotate", "status", project)
    assert code == 0 and "warning" not in out
    code, out = run("annotate", "user", "deactivate", "dr_c", "-p", project)
    assert code == 0 and warning.format(n=2, s="s") in out
    code, out = run("annotate", "user", "activate", "dr_c", "-p", project)
    assert code == 0 and "warning" not in out


def test_user_commands_refuse_contradictory_or_impossible_options_in_one_line(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "input", case_rows(2))
    project = str(tmp_path / "proj")
    assert run("annotate", "init", project, "--cases", str(cases), "--per-case", "1")[0] == 0
    assert run("annotate", "user", "add", "dr_a", "-p", project, "--generate-password")[0] == 0
    for args, message in (
        (["add", "dr_b", "-p", project, "--password-stdin", "--generate-password"], "give --password-stdin or"),
        (["password", "dr_a", "-p", project, "--password-stdin", "--generate-password"], "give --password-stdin or"),
        (["token", "dr_a", "-p", project, "--revoke", str(10**20)], f"--revoke {10**20}: no such token"),
        (["token", "dr_a", "-p", project, "--revoke", "1", "--list"], "give --list or --revoke ID, not both"),
        (["add", "dr_b", "-p", "", "--generate-password"], "--project is empty"),
    ):
        code, out = run("annotate", "user", *args, stdin=PASSWORD + "\n")
        assert code == 2 and "Traceback" not in out, (args, out)
        assert len(error_lines(out)) == 1 and message in error_lines(out)[0], (args, out)
    code, out = run("annotate", "user", "list", "-p", project)
    assert "dr_b" not in out


def test_an_export_replaces_earlier_files_only_with_force_and_refuses_impossible_targets(
    tmp_path: Path, project_factory: Any
) -> None:
    project = project_factory(tmp_path / "proj")
    project.close()
    out = tmp_path / "release" / "labelled.jsonl"
    code, text = run("annotate", "export", str(tmp_path / "proj"), "--out", str(out))
    assert code == 0 and (out.parent / "dataset.json").is_file(), text
    first = out.read_bytes()
    # a second export stops in one line naming both files, and changes nothing
    code, text = run("annotate", "export", str(tmp_path / "proj"), "--out", str(out))
    assert code != 0 and "--force replaces them" in text and "Traceback" not in text
    assert str(out) in text and "dataset.json" in text and out.read_bytes() == first
    # another data set's card in the same directory is not replaced silently either
    other = tmp_path / "shared" / "dataset.json"
    other.parent.mkdir()
    other.write_text('{"name": "someone else\'s set", "files": ["theirs.jsonl"]}')
    code, text = run("annotate", "export", str(tmp_path / "proj"), "--out", str(tmp_path / "shared" / "ours.jsonl"))
    assert code != 0 and "--force replaces it" in text and "someone else" in other.read_text()
    code, text = run("annotate", "export", str(tmp_path / "proj"), "--out", str(out), "--force")
    assert code == 0, text
    # targets that cannot work: one line, before any work
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for fmt, target in (
        ("canonical", blocker / "labelled.jsonl"),
        ("canonical", tmp_path / "release"),
        ("reference", blocker),
        ("canonical", tmp_path / "labelled.csv"),
    ):
        code, text = run("annotate", "export", str(tmp_path / "proj"), "--format", fmt, "--out", str(target))
        assert code != 0 and "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    # a reference export again replaces its own pair_gt_all/ with --force, never a foreign one
    ref = tmp_path / "ref"
    assert run("annotate", "export", str(tmp_path / "proj"), "--format", "reference", "--out", str(ref))[0] == 0
    assert run("annotate", "export", str(tmp_path / "proj"), "-f", "reference", "--out", str(ref), "--force")[0] == 0
    foreign = tmp_path / "foreign"
    (foreign / "pair_gt_all").mkdir(parents=True)
    code, text = run("annotate", "export", str(tmp_path / "proj"), "-f", "reference", "--out", str(foreign), "--force")
    assert code != 0 and "not written by medrewardbench" in text


# ------------------------------------------------------------------------------------------------
# serve: refuses a bad address in one line before printing anything; wires the limits it is given
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def served_project(project_factory: Any, tmp_path: Path) -> Path:
    project_factory(tmp_path / "proj").close()
    return tmp_path / "proj"


def run_serve(project: Path, *options: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "medrewardbench.cli", "annotate", "serve", str(project), *options],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--port", "70000"), "--port must be between 1 and 65535, got 70000"),
        (("--port", "0"), "--port must be between 1 and 65535, got 0"),
        (("--host", "no-such-host.invalid"), "--host 'no-such-host.invalid' is not an address"),
        (("--forwarded-allow-ips", "10.0.0.1,proxy"), "--forwarded-allow-ips: 'proxy' is not an IP address"),
        (("--max-body-bytes", "10"), "--max-body-bytes must be at least 1024"),
    ],
)
def test_serve_refuses_a_bad_address_in_one_line_before_printing_anything(
    served_project: Path, options: tuple[str, ...], message: str
) -> None:
    code, out = run_serve(served_project, *options)
    assert code == annotate_cli.SERVE_BAD_INPUT == 2
    assert out.strip().count("\n") == 0 and message in out, out
    assert "serving" not in out and "Traceback" not in out


def test_serve_on_an_address_others_reach_refuses_the_suites_cheap_password_hashes(served_project: Path) -> None:
    from medrewardbench.annotate.security import FAST_HASHING_ENV

    assert os.environ.get(FAST_HASHING_ENV) == "1"  # tests/conftest.py sets it; run_serve passes it on
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        port = probe.getsockname()[1]
    code, out = run_serve(served_project, "--host", "0.0.0.0", "--port", str(port))
    assert code == 2 and out.strip().count("\n") == 0, out
    assert f"{FAST_HASHING_ENV}=1" in out and "unset it to serve on 0.0.0.0" in out and "serving" not in out


def test_serve_refuses_a_port_in_use_in_one_line(served_project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        code, out = run_serve(served_project, "--port", str(port))
    assert code == 2 and out.strip().count("\n") == 0, out
    assert f"port {port} on 127.0.0.1 is in use" in out and "serving" not in out


def test_the_option_default_is_the_apps_body_cap() -> None:
    from medrewardbench.annotate.middleware import DEFAULT_MAX_BODY_BYTES

    assert annotate_cli.MAX_BODY_BYTES_DEFAULT == DEFAULT_MAX_BODY_BYTES


def test_serve_applies_its_body_cap_and_trusted_proxies(served_project: Path, tmp_path: Path) -> None:
    import httpx

    port = free_port()
    server = start_serve_process(
        served_project, port, tmp_path / "serve.log", "--max-body-bytes", "4096", "--forwarded-allow-ips", "127.0.0.2"
    )
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base) as client:
            assert client.post("/login", content=b"x" * 5000).status_code == 413
            assert client.post("/login", content=b"x" * 3000).status_code == 403  # under the cap: no form token
        # 127.0.0.1 is no trusted proxy now; 127.0.0.2 is
        for local, claimed in (("127.0.0.1", "198.51.100.1"), ("127.0.0.2", "198.51.100.2")):
            with httpx.Client(base_url=base, transport=httpx.HTTPTransport(local_address=local)) as client:
                headers = {"x-forwarded-for": claimed}
                token = login_form(client, headers)
                data = {"username": "alice", "password": "wrong-password", "csrf_token": token}
                assert client.post("/login", data=data, headers=headers).status_code == 401
    finally:
        server.terminate()
        server.wait(timeout=30)
    opened = Project.open(served_project)
    try:
        failed = [e.client for e in opened.audit_entries(Identity.command_line()) if e.action == "login.failed"]
    finally:
        opened.close()
    assert sorted(failed) == ["127.0.0.1", "198.51.100.2"]
