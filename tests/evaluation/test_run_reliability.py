"""Runs that are interrupted, share an output directory, fail or meet bad settings (issue 9).

Real parts only: ``medrewardbench eval`` runs as a subprocess where it gets real signals, is killed
or meets a second process (reruns, readers and failed judges run in this process), API judges talk
to the real local OpenAI-compatible server (which records every request it receives), the store is
a real SQLite file, and permissions are tested as an unprivileged user or on a read-only mount.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.api import API_KEY_ENV
from helpers.images import png_bytes
from typer.testing import CliRunner

import medrewardbench
from medrewardbench.cli import app
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import JudgeSpecError, OutputDirError, OutputLockedError, StoreError
from medrewardbench.evaluation.store import MIGRATIONS, Store
from medrewardbench.judges.api import check_api_settings
from medrewardbench.testing.openai_server import OpenAIServer, RecordedRequest
from medrewardbench.utils.outdir import LOCK_FILENAME, OutputLock, check_output_dir
from medrewardbench.utils.secrets import REDACTED, install_log_scrubber, register_secret, scrub, scrub_value

SRC = Path(medrewardbench.__file__).resolve().parents[1]
STORED = re.compile(r"interrupted: (\d+) of (\d+) requests stored; rerun the same command to resume")
runner = CliRunner()


# ----------------------------------------------------------------------------------------- helpers
def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout's package first, nothing downloads."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def start(args: list[str], env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "medrewardbench.cli", *args],
        env=env or cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def run(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 180, **popen: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "medrewardbench.cli", *args],
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )


def run_here(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a command in this process, answering like :func:`run` (exit code, stdout, stderr).

    For the runs where no signal, kill or second process is what is tested: a rerun that resumes,
    a reader beside a running eval, the exit code and summary of a failed judge. Each saves the
    second or so a fresh interpreter takes to import the package.
    """
    result = runner.invoke(app, args, catch_exceptions=False)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def run_in_process(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def write_cases(directory: Path, n: int) -> Path:
    """A canonical JSONL set of ``n`` labelled cases, each with its own PNG file beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    images = [png_bytes(seed=i, size=(8, 8)) for i in range(min(n, 256))]
    rows = []
    for i in range(n):
        (directory / f"img{i}.png").write_bytes(images[i % len(images)])
        rows.append(
            {
                "id": f"k{i:03d}",
                "image": f"img{i}.png",
                "question": f"Question {i}?",
                "response_1": f"first {i}",
                "response_2": f"second answer {i}",
                "labels": {"overall": 1 + i % 2},
                "organ_system": "chest",
            }
        )
    path = directory / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def all_keys(n: int) -> set[tuple[str, str]]:
    return {(f"k{i:03d}", order) for i in range(n) for order in ("original", "swapped")}


def stored_keys(out: Path) -> list[tuple[str, str]]:
    db = out / "medrewardbench.sqlite"
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return [(r[0], r[1]) for r in conn.execute("SELECT case_id, order_ FROM judgments")]
    except sqlite3.OperationalError:
        return []


def request_key(record: RecordedRequest) -> tuple[str, str]:
    """Which (case, order) a request the server received was about, read from its prompt."""
    text = record.user_text()
    match = re.search(r"Question (\d+)\?", text)
    assert match is not None, text
    shown_first = text.split("[Answer A]", 1)[1].strip()
    return f"k{int(match.group(1)):03d}", "original" if shown_first.startswith("first") else "swapped"


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def read_until(stream: Any, prefix: str, timeout: float = 60.0) -> list[str]:
    """Lines of a text stream up to and including the first that starts with ``prefix``."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    for line in stream:
        lines.append(line)
        if line.startswith(prefix):
            return lines
        assert time.monotonic() < deadline, "".join(lines)
    raise AssertionError(f"no line starting with {prefix!r} in:\n{''.join(lines)}")


def api_args(server: OpenAIServer, data: Path, out: Path, *more: str, judge: str = "api:slow") -> list[str]:
    return [
        "eval", "--data", str(data), "--judge", judge, "--base-url", server.base_url,
        "--api-key-env", API_KEY_ENV, "--out", str(out), *more,
    ]  # fmt: skip


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


# ----------------------------------------------------------------------------- 2. one Ctrl-C works
def test_ctrl_c_mid_run_keeps_what_finished_writes_the_files_and_a_rerun_sends_only_the_rest(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    control = openai_server.control
    control.set_latency(0.25)
    data = write_cases(tmp_path / "data", 12)
    out = tmp_path / "out"
    args = api_args(openai_server, data, out, "--concurrency", "4", "--quiet")
    proc = start(args)
    wait_for(lambda: len(stored_keys(out)) >= 6 or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    interrupted_at = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert time.monotonic() - interrupted_at < 10, "one Ctrl-C stops the run at once"
    match = STORED.search(err)
    assert match is not None, err
    stored, total = map(int, match.groups())
    before = stored_keys(out)
    assert total == 24 and stored == len(before) == len(set(before)) and 6 <= stored < 24
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert {(r["case_id"], r["order"]) for r in rows} == set(before) and len(rows) == stored
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["judge"] for r in metrics["runs"]] == ["api:slow"]
    assert metrics["runs"][0]["metrics"]["requests"]["judged"] == stored
    sent = [request_key(r) for r in control.chat_requests()]
    assert len(sent) == len(set(sent)) and set(before) <= set(sent)
    assert len(sent) - stored <= 4, "only the requests in flight at the interrupt are lost"

    control.clear_requests()
    done = run_here(args)
    assert done.returncode == 0, done.stderr
    resent = [request_key(r) for r in control.chat_requests()]
    assert sorted(resent) == sorted(all_keys(12) - set(before)), "the rerun sends exactly what is missing"
    after = stored_keys(out)
    assert sorted(after) == sorted(all_keys(12))
    assert len((out / "judgments.jsonl").read_text().splitlines()) == 24


@pytest.fixture(scope="module")
def big_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough image files that loading and hashing each take a noticeable time."""
    return write_cases(tmp_path_factory.mktemp("big"), 6000)


@pytest.mark.parametrize("stage", ["loading", "hashing"])
def test_ctrl_c_while_loading_or_hashing_stops_at_once_and_a_rerun_completes(
    stage: str, big_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["eval", "--data", str(big_data), "--judge", "baseline:longer", "--out", str(out)]
    proc = start(args)
    assert proc.stderr is not None
    seen = read_until(proc.stderr, f"{stage} ")
    proc.send_signal(signal.SIGINT)
    interrupted_at = time.monotonic()
    rest = proc.stderr.read()
    proc.wait(timeout=30)
    assert proc.returncode == 130, "".join(seen) + rest
    assert time.monotonic() - interrupted_at < 5
    assert f"interrupted while {stage} the data: no request was sent; rerun the same command to resume" in rest
    if stage == "loading":
        assert not out.exists(), "nothing was created before the data was read"
    else:
        assert stored_keys(out) == [] and not (out / "judgments.jsonl").exists()

    done = run_here([*args, "--quiet"])
    assert done.returncode == 0, done.stderr
    assert len(stored_keys(out)) == 12000 == len(set(stored_keys(out)))
    assert len((out / "judgments.jsonl").read_text().splitlines()) == 12000


# ---------------------------------------------------------------------- 4. the key lands nowhere
LEAKY_KEY = "mrb-local-7f3a9c2e1d5b4a60"
"""Not shaped like ``sk-...`` or a bearer token in prose: only the value scrubber can catch it."""


def _every_byte(paths: Iterator[Path]) -> Iterator[tuple[str, bytes]]:
    for path in paths:
        if not path.is_file():
            continue
        blob = path.read_bytes()
        yield str(path), blob
        if path.suffix == ".xlsx":
            with zipfile.ZipFile(io.BytesIO(blob)) as archive:
                for member in archive.namelist():
                    yield f"{path}!{member}", archive.read(member)


def test_an_api_key_echoed_by_the_endpoint_lands_nowhere(
    openai_server: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(API_KEY_ENV, LEAKY_KEY)
    control = openai_server.control
    control.set_echo_authorization(True)  # a leaky proxy: the Authorization header comes back in every answer
    control.set_responder(
        lambda body: json.dumps(
            {**dict.fromkeys(DIMENSIONS, "A"), "accuracy": f"Bearer {LEAKY_KEY}", "reason": f"key {LEAKY_KEY} ok"}
        )
    )
    control.script_faults(None, "400", "500")  # an error message that echoes it; a retried 500 that does too
    data = write_cases(tmp_path / "data", 4)
    out = tmp_path / "out"
    evaluated = run(api_args(openai_server, data, out, "--concurrency", "1", "--max-retries", "2", "--verbose"))
    assert evaluated.returncode == 0, evaluated.stderr
    reported = run(["report", str(out), "--format", "md,csv,json,xlsx,html", "--bootstrap", "100"])
    assert reported.returncode == 0, reported.stderr
    board = run(["leaderboard", str(out), "--bootstrap", "100"])
    assert board.returncode == 0, board.stderr
    assert all(r.had_auth for r in control.chat_requests())

    captured = [
        ("eval output", (evaluated.stdout + evaluated.stderr).encode()),
        ("report output", (reported.stdout + reported.stderr).encode()),
        ("leaderboard output", (board.stdout + board.stderr).encode()),
        *_every_byte(out.rglob("*")),
    ]
    names = {Path(name.split("!")[0]).name for name, _ in captured}
    assert {"medrewardbench.sqlite", "judgments.jsonl", "metrics.json", "metrics.csv", "report.md",
            "analysis.csv", "analysis.json", "report.xlsx", "report.html"} <= names  # fmt: skip
    for name, blob in captured:
        assert LEAKY_KEY.encode() not in blob, f"the key leaked into {name}"
        assert LEAKY_KEY[:12].encode() not in blob, f"part of the key leaked into {name}"

    # the echoes reached every kind of stored text and were scrubbed there, not lost
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert any(f"[echo] Authorization: Bearer {REDACTED}" in (r["raw_output"] or "") for r in rows)
    assert any(r["failure"] and r["failure"].startswith("HTTP 400") and REDACTED in r["failure"] for r in rows)
    assert any(REDACTED in reason for r in rows for reason in r["dimension_failures"].values())
    with sqlite3.connect(out / "medrewardbench.sqlite") as conn:
        extras = [json.loads(e) for (e,) in conn.execute("SELECT extra_json FROM judgments")]
    assert any(e.get("reason") == f"key {REDACTED} ok" for e in extras)


def test_the_scrubber_removes_registered_values_credential_shapes_and_cut_keys() -> None:
    register_secret("local-key-abcdef0123456789")
    text = (
        "a local-key-abcdef0123456789 b | cut local-key-abcd... | Authorization: Bearer tok.en-123 "
        "| sk-live1234567890 | short pw9x5k2q and pw9x5k2qy | dummy test"
    )
    cleaned = scrub(text, ["pw9x5k2q", "test"])
    assert "local-key-abcd" not in cleaned and "tok.en-123" not in cleaned and "sk-live" not in cleaned
    assert f"Bearer {REDACTED}" in cleaned and f"short {REDACTED} and pw9x5k2qy" in cleaned
    assert cleaned.endswith("dummy test"), "a dummy key shorter than 8 characters is no secret"
    assert scrub("A verdict: accuracy A, overall B.") == "A verdict: accuracy A, overall B."
    assert scrub_value({"k": ["x local-key-abcdef0123456789"], "n": 3}) == {"k": [f"x {REDACTED}"], "n": 3}


def test_log_records_are_scrubbed_by_the_installed_filter() -> None:
    import logging

    register_secret("log-secret-0123456789ab")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    parent = logging.getLogger("mrb-scrub-test")
    parent.addHandler(handler)
    parent.setLevel(logging.INFO)
    try:
        install_log_scrubber(parent)
        child = logging.getLogger("mrb-scrub-test.child")
        child.info("server said %s", "echo log-secret-0123456789ab")
        try:
            raise RuntimeError("boom log-secret-0123456789ab")
        except RuntimeError:
            child.exception("failed")
    finally:
        parent.removeHandler(handler)
    assert "log-secret" not in stream.getvalue() and f"server said echo {REDACTED}" in stream.getvalue()
    assert f"boom {REDACTED}" in stream.getvalue()


# ------------------------------------------------------------------- 5. an unusable --out, early
def test_an_out_that_is_a_file_or_lies_below_one_is_refused_before_any_request(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    data = write_cases(tmp_path / "data", 2)
    a_file = tmp_path / "results.txt"
    a_file.write_text("not a directory")
    code, output = run_in_process(*api_args(openai_server, data, a_file, "--quiet"))
    assert code == 2 and error_lines(output) == [
        f"error: --out {a_file}: is a file, not a directory; choose another output directory"
    ], output
    below = a_file / "run1"
    code, output = run_in_process(*api_args(openai_server, data, below, "--quiet"))
    assert code == 2 and len(error_lines(output)) == 1, output
    assert f"lies below {a_file}, which is a file" in output
    assert control_requests(openai_server) == 0
    with pytest.raises(OutputDirError, match="is a file"):
        check_output_dir(a_file)


def control_requests(server: OpenAIServer) -> int:
    return len(server.control.chat_requests())


def bound_by_permissions(command: list[str]) -> list[str]:
    """The command, run so that permission bits bind it: root ignores them only through its
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH capabilities, which are dropped here."""
    if os.geteuid() != 0:
        return command
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--", *command]


@pytest.mark.skipif(os.geteuid() == 0 and shutil.which("setpriv") is None, reason="root needs setpriv here")
def test_an_unwritable_out_and_an_unwritable_store_say_permission_denied(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    data = write_cases(tmp_path / "data", 2)
    locked = tmp_path / "locked"
    with Store.in_dir(locked):  # a store that exists, in a directory this user may not write
        pass
    locked.chmod(0o555)
    (locked / "medrewardbench.sqlite").chmod(0o444)
    cli = [sys.executable, "-m", "medrewardbench.cli"]
    try:
        for out, expected in (
            (locked / "new", f"--out {locked / 'new'}: cannot create it in {locked} (permission denied)"),
            (locked, f"--out {locked}: cannot write to this directory (permission denied)"),
        ):
            command = bound_by_permissions([*cli, *api_args(openai_server, data, out, "--quiet")])
            done = subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=120)
            assert done.returncode == 2 and error_lines(done.stderr) == [f"error: {expected}"], done.stderr
        assert control_requests(openai_server) == 0
        # the store itself: permission, not "corrupt"
        probe = "from medrewardbench.evaluation.store import Store; import sys; Store(sys.argv[1])"
        command = bound_by_permissions([sys.executable, "-c", probe, str(locked / "medrewardbench.sqlite")])
        opened = subprocess.run(command, env=cli_env(), capture_output=True, text=True, timeout=60)
    finally:
        locked.chmod(0o755)
    assert opened.returncode != 0
    assert "StoreError" in opened.stderr and "permission denied" in opened.stderr, opened.stderr
    assert "not a usable results store" not in opened.stderr


def test_a_store_sqlite_cannot_open_is_not_called_corrupt(tmp_path: Path) -> None:
    (tmp_path / "medrewardbench.sqlite").mkdir()  # "unable to open database file"
    with pytest.raises(StoreError, match="cannot open the results store") as caught:
        Store.in_dir(tmp_path)
    assert "not a usable" not in str(caught.value)


def _read_only_mount_works() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as scratch:
        probe = subprocess.run(
            ["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o ro tmpfs {scratch}"], capture_output=True, timeout=30
        )
    return probe.returncode == 0


@pytest.mark.skipif(not _read_only_mount_works(), reason="needs unshare and mount (root in a mount namespace)")
def test_an_out_on_a_read_only_file_system_is_refused(openai_server: OpenAIServer, tmp_path: Path) -> None:
    data = write_cases(tmp_path / "data", 2)
    mounted = tmp_path / "ro"
    mounted.mkdir()
    command = [sys.executable, "-m", "medrewardbench.cli",
               *api_args(openai_server, data, mounted / "results", "--quiet")]  # fmt: skip
    script = 'mount -t tmpfs -o ro tmpfs "$0" && exec "$@"'
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(mounted), *command],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert error_lines(done.stderr) == [
        f"error: --out {mounted / 'results'}: cannot create it in {mounted} (read-only file system)"
    ]
    assert control_requests(openai_server) == 0


# ------------------------------------------------------------------ 12. API settings, up front
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--base-url", "localhost:8000/v1"], "--base-url must be an http:// or https:// URL"),
        (["--base-url", "ftp://example.org/v1"], "--base-url must be an http:// or https:// URL"),
        (["--base-url", "http:///v1"], "names no host"),
        (["--base-url", "http://user:hunter2secret@127.0.0.1:9/v1"], "must not carry credentials"),
        (["--timeout", "0"], "--timeout must be a number of seconds greater than 0"),
        (["--timeout", "-5"], "--timeout must be a number of seconds greater than 0"),
        (["--max-retries", "-1"], "--max-retries must be a whole number >= 0"),
    ],
)
def test_bad_api_settings_fail_in_one_line_before_any_request_or_directory(
    flags: list[str], message: str, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    data = write_cases(tmp_path / "data", 2)
    out = tmp_path / "out"
    args = [
        "eval",
        "--data",
        str(data),
        "--judge",
        "api:x",
        "--api-key-env",
        API_KEY_ENV,
        "--out",
        str(out),
        "--quiet",
        *(["--base-url", openai_server.base_url] if "--base-url" not in flags else []),
        *flags,
    ]
    code, output = run_in_process(*args)
    assert code == 2 and len(error_lines(output)) == 1 and message in output, output
    assert "hunter2secret" not in output, "a password in the URL is never repeated"
    assert not out.exists() and control_requests(openai_server) == 0


def test_check_api_settings_accepts_good_settings() -> None:
    check_api_settings("https://api.example.org/v1", 30.0, 0)
    check_api_settings(None, 0.5, 6)
    with pytest.raises(JudgeSpecError, match="--api-key-env"):
        check_api_settings("https://key@api.example.org/v1", 30.0, 0)
    with pytest.raises(JudgeSpecError, match="greater than 0"):
        check_api_settings(None, float("nan"), 0)


# ------------------------------------------------------------- 13. judges that fail everything
def test_a_judge_that_failed_every_request_makes_eval_fail_and_names_the_reasons(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.control.set_faults(rate_400=1.0)
    data = write_cases(tmp_path / "data", 3)
    out = tmp_path / "out"
    args = api_args(openai_server, data, out, "--judge", "baseline:longer", judge="api:broken")
    done = run_here(args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "api:broken: 6 of 6 requests failed. Most common: HTTP 400: Invalid request (injected). (6)" in done.stderr
    assert error_lines(done.stderr) == [
        "error: every request failed for api:broken; the failures are stored (see the reasons above), fix the "
        "cause and rerun with --retry-failures"
    ]
    assert "baseline:longer:" not in done.stderr  # a judge that failed nothing is not listed
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert sum(1 for r in rows if r["judge"] == "api:broken" and r["failure"]) == 6  # stored before failing
    # quiet still says why it failed
    done = run_here([*args, "--quiet"])
    assert done.returncode == 1 and "api:broken: 6 of 6 requests failed" in done.stderr


def test_a_judge_that_failed_some_requests_is_summarised_and_eval_succeeds(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.control.script_faults("400", None, "400")
    data = write_cases(tmp_path / "data", 3)
    done = run_here(api_args(openai_server, data, tmp_path / "out", "--concurrency", "1"))
    assert done.returncode == 0, done.stderr
    assert "api:slow: 2 of 6 requests failed. Most common: HTTP 400: Invalid request (injected). (2)" in done.stderr


@pytest.mark.parametrize(
    "flags",
    [["--judge", "nosuch:x"], ["--judge", "api:x", "--base-url", "http://127.0.0.1:9/v1", "--template", "missing.txt"]],
)
def test_a_judge_spec_or_template_error_leaves_no_output_directory(flags: list[str], tmp_path: Path) -> None:
    out = tmp_path / "never"
    code, output = run_in_process("eval", "--limit", "2", "--out", str(out), "--quiet", *flags)
    assert code == 2 and len(error_lines(output)) == 1, output
    assert not out.exists()


# ------------------------------------------------------------ 14. one process per output directory
def test_a_second_eval_on_one_out_stops_at_once_or_waits_and_no_request_goes_out_twice(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    # 20 requests one at a time at 1 s each: the others meet the first eval running, and once they
    # have been checked the latency drops so that the first one finishes at once
    openai_server.control.set_latency(1.0)
    data = write_cases(tmp_path / "data", 10)
    out = tmp_path / "out"
    args = api_args(openai_server, data, out, "--concurrency", "1")
    first = start([*args, "--quiet"])
    wait_for(lambda: len(stored_keys(out)) >= 1 or first.poll() is not None)
    assert first.poll() is None
    assert (out / LOCK_FILENAME).read_text().strip() == str(first.pid)
    second = start([*args, "--quiet"])  # without --wait
    waiting = [start([*args, "--wait"]) for _ in range(2)]

    # without --wait: one line naming the holder, at once
    _, second_err = second.communicate(timeout=60)
    assert second.returncode == 75 and first.poll() is None, second_err
    assert error_lines(second_err) == [
        f"error: another medrewardbench process (pid {first.pid}) is using {out}/; wait for it to finish, or "
        "rerun with --wait to start when it does"
    ]
    # with --wait: both wait; Ctrl-C stops one of them while it waits
    for proc in waiting:
        assert proc.stderr is not None
        read_until(proc.stderr, f"waiting for pid {first.pid} to finish with {out}/")
    assert first.poll() is None, "both started waiting while the first was running"
    interrupted = waiting.pop()
    interrupted.send_signal(signal.SIGINT)
    _, rest = interrupted.communicate(timeout=30)
    assert interrupted.returncode == 130, rest
    assert f"interrupted while waiting for another process to finish with {out}/: no request was sent" in rest
    assert first.poll() is None, "the waiting processes were checked while the first eval was running"

    openai_server.control.set_latency(0.0)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    later_out, later_err = waiting[0].communicate(timeout=60)
    assert waiting[0].returncode == 0, later_err
    assert "Requests judged now: 0, from store: 20" in later_out.replace("\n", " ")
    sent = [request_key(r) for r in openai_server.control.chat_requests()]
    assert sorted(sent) == sorted(all_keys(10)), "every request went out exactly once"


def test_a_killed_holder_leaves_no_stale_lock_and_readers_need_no_lock(
    openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.control.set_latency(0.5)
    data = write_cases(tmp_path / "data", 12)
    out = tmp_path / "out"
    args = api_args(openai_server, data, out, "--concurrency", "1", "--quiet")
    first = start(args)
    wait_for(lambda: len(stored_keys(out)) >= 2 or first.poll() is not None)
    # report and leaderboard read while the eval holds the lock
    for command in (["report", str(out), "--format", "json", "--bootstrap", "100"],
                    ["leaderboard", str(out), "--bootstrap", "100"]):  # fmt: skip
        done = run_here(command)
        assert done.returncode == 0, done.stderr
    assert first.poll() is None, "the readers ran while the eval was still running"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert (out / LOCK_FILENAME).read_text().strip() == str(first.pid)  # the dead holder's pid is still written
    openai_server.control.set_latency(0.0)
    done = run_here(args)
    assert done.returncode == 0, done.stderr
    assert sorted(stored_keys(out)) == sorted(all_keys(12))


def test_the_lock_refuses_a_second_holder_in_the_same_process_and_is_released(tmp_path: Path) -> None:
    with OutputLock(tmp_path, shown_as="somewhere/"):
        with pytest.raises(OutputLockedError) as caught:
            OutputLock(tmp_path, shown_as="somewhere/").acquire()
        assert caught.value.pid == os.getpid()
        assert str(caught.value).startswith(f"another medrewardbench process (pid {os.getpid()}) is using somewhere/")
    with OutputLock(tmp_path):  # released on exit
        pass


OPEN_TOGETHER = """
import os, sys, time
from medrewardbench.evaluation.store import Store
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.0005)
with Store(sys.argv[1]) as store:
    store.runs()
print("ok")
"""


def test_many_processes_opening_a_brand_new_store_together_all_succeed(tmp_path: Path) -> None:
    for attempt in range(2):
        path = tmp_path / f"store{attempt}.sqlite"
        go = tmp_path / f"go{attempt}"  # created once every process has imported the store module
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_TOGETHER, str(path), str(go)],
                env=cli_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        for proc in procs:
            assert proc.stdout is not None
            ready = proc.stdout.readline()
            assert ready == "ready\n", (ready, proc.communicate(timeout=60)[1])
        go.touch()
        outcomes = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * 8, [err for _, err in outcomes]
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            # the schema version, and each named migration once
            assert conn.execute("SELECT COUNT(*) FROM meta").fetchone()[0] == 1 + len(MIGRATIONS)


# --------------------------------------------------------- 15. the text files cover every run
def _eval_two_judges(out: Path) -> None:
    for spec in ("baseline:longer", "baseline:random"):
        code, output = run_in_process("eval", "--judge", spec, "--limit", "4", "--seed", "3", "--out", str(out))
        assert code == 0, output


def test_text_files_describe_every_run_in_the_directory_on_the_data_just_evaluated(tmp_path: Path) -> None:
    out = tmp_path / "a"
    _eval_two_judges(out)
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["judge"] for r in metrics["runs"]] == ["baseline:longer", "baseline:random"]
    assert {row["judge"] for row in metrics["leaderboard"]} == {"baseline:longer", "baseline:random"}
    rows = [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and {r["judge"] for r in rows} == {"baseline:longer", "baseline:random"}
    csv_judges = {line.split(",")[1] for line in (out / "metrics.csv").read_text().splitlines()[1:]}
    assert csv_judges == {"baseline:longer", "baseline:random"}
    # the same set report shows
    code, output = run_in_process("report", str(out), "--format", "json", "--bootstrap", "100")
    assert code == 0, output
    analysis = json.loads((out / "analysis.json").read_text())
    assert {r["run_id"] for r in analysis["runs"]} == {r["run_id"] for r in metrics["runs"]}
    # still byte-identical for the same commands and seed
    again = tmp_path / "b"
    _eval_two_judges(again)
    for name in ("judgments.jsonl", "metrics.json", "metrics.csv"):
        assert (out / name).read_bytes() == (again / name).read_bytes(), name
    # other data in the same directory: the files describe the runs on that data only
    code, output = run_in_process("eval", "--judge", "baseline:first", "--limit", "3", "--out", str(out))
    assert code == 0, output
    metrics = json.loads((out / "metrics.json").read_text())
    assert [r["judge"] for r in metrics["runs"]] == ["baseline:first"]
    assert len((out / "judgments.jsonl").read_text().splitlines()) == 6
