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

    # eval reads the export directly, as a real console command
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for data in (export, tmp_path / "ref"):
        done = subprocess.run(
            [sys.executable, "-m", "medrewardbench.cli", "eval", "--data", str(data), "--judge", "baseline:longer",
             "--out", str(tmp_path / f"results-{data.name}")],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Leaderboard" in done.stdout and "baseline:longer" in done.stdout


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
