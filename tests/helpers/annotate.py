"""Helpers and fixtures of the annotation app tests: real files, real SQLite and PostgreSQL, a real HTTP server.

A pytest plugin (registered in tests/conftest.py); the tests import the helpers from ``helpers.annotate``.

* ``pg_cluster`` (session): a throwaway PostgreSQL cluster in a temporary directory, started with
  the Debian binaries (``/usr/lib/postgresql/*/bin``) as the ``postgres`` user when the tests run
  as root (initdb refuses root), listening on a Unix socket only, stopped by its pid at the end.
  Skipped with the reason when the binaries are missing.
* ``db_url``: parametrised over ``sqlite`` (the default file in the project directory) and
  ``postgresql`` (a fresh database in the cluster), so storage tests run on both.
* ``cases_file`` / ``gold_file``: canonical cases whose ids and metadata name a source and the
  models that wrote the answers (which annotators must never see), with DICOM and other images
  shipped by installed packages, a PNG file, and an answer carrying a ``<script>`` payload.
* ``serve``: runs the app on 127.0.0.1 and a free port in a background thread (the package's
  :class:`~medrewardbench.utils.background_server.BackgroundServer`).
* ``attack_site`` (module): a served project on SQLite and on PostgreSQL (parametrised), with
  users, tokens and a saved label of bob's, for the tests that attack every route.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from medrewardbench.dimensions import DIMENSIONS

if TYPE_CHECKING:
    import httpx

PASSWORD = "correct-horse-battery"
XSS = "<script>window.__pwned = 1</script><img src=x onerror=alert(1)>"
SECRET_MODEL = "SecretModel-72B"
SECRET_SOURCE = "vqa-secret-source"
ANNOTATORS = ("alice", "bob", "carol")
ADMIN = "boss"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------------------------------------
# PostgreSQL
# ------------------------------------------------------------------------------------------------


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


@dataclass
class PgCluster:
    directory: Path
    port: int
    pid: int
    count: int = 0

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.directory}&port={self.port}"

    def create_database(self) -> str:
        import sqlalchemy as sa

        self.count += 1
        name = f"mrb_{os.getpid()}_{self.count}"
        engine = sa.create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as connection:
                connection.exec_driver_sql(f"CREATE DATABASE {name}")
        finally:
            engine.dispose()
        return self.url(name)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin (apt-get install -y postgresql)")
    prefix: list[str] = []
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run initdb as")
        prefix = ["runuser", "-u", "postgres", "--"]
    directory = Path(tempfile.mkdtemp(prefix="mrb-pg-", dir="/tmp"))
    if owner is not None:
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    data = directory / "data"
    port = free_port()
    try:
        subprocess.run(
            [
                *prefix,
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = f"-p {port} -k {directory} -c listen_addresses='' -c fsync=off -c max_connections=300"
        subprocess.run(
            [
                *prefix,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-l",
                str(directory / "log"),
                "-w",
                "start",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        detail = getattr(exc, "stderr", b"") or b""
        pytest.fail(f"could not start a PostgreSQL cluster: {exc} {detail.decode(errors='replace')[-500:]}")
    try:
        yield PgCluster(directory, port, pid)
    finally:
        try:
            os.kill(pid, signal.SIGQUIT)  # immediate shutdown: a throwaway cluster needs no checkpoint
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.05)
        except ProcessLookupError:
            pass
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str | None:
    """None (SQLite in the project directory) or the URL of a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database()


# ------------------------------------------------------------------------------------------------
# Input files
# ------------------------------------------------------------------------------------------------

IMAGES = (
    {"builtin": "pydicom:CT_small.dcm"},
    {"builtin": "skimage:retina"},
    {"builtin": "pydicom:MR_small.dcm"},
    "images/scan.png",
)


def case_rows(count: int = 6, prefix: str = "case") -> list[dict[str, Any]]:
    rows = []
    for index in range(count):
        rows.append(
            {
                "id": f"{SECRET_SOURCE}/{prefix}-{index:03d}",
                "image": IMAGES[index % len(IMAGES)],
                "question": f"Question {index}: what does the image show?",
                "response_1": f"First answer to question {index}." + (f" {XSS}" if index == 1 else ""),
                "response_2": f"Second, longer answer to question {index}, with more detail.",
                "organ_system": ("chest", "eye", "brain")[index % 3],
                "modality": "CT",
                "source_dataset": SECRET_SOURCE,
                "metadata": {"generator_1": SECRET_MODEL, "generator_2": "OtherModel-7B"},
            }
        )
    return rows


def write_cases(directory: Path, rows: list[dict[str, Any]], name: str = "pairs.jsonl") -> Path:
    from PIL import Image

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "images").mkdir(exist_ok=True)
    Image.new("RGB", (40, 30), (200, 60, 60)).save(directory / "images" / "scan.png")
    path = directory / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def cases_file(tmp_path: Path) -> Path:
    return write_cases(tmp_path / "input", case_rows(6))


def gold_rows(count: int = 2) -> list[dict[str, Any]]:
    rows = case_rows(count, prefix="gold")
    for index, row in enumerate(rows):
        row["question"] = f"Gold question {index}: what does the image show?"
        row["labels"] = {dim: 1 if index % 2 == 0 else 2 for dim in DIMENSIONS}
    return rows


@pytest.fixture
def gold_file(tmp_path: Path) -> Path:
    return write_cases(tmp_path / "input", gold_rows(2), name="gold.jsonl")


# ------------------------------------------------------------------------------------------------
# Projects and servers
# ------------------------------------------------------------------------------------------------


def make_project(
    directory: Path,
    cases: Path,
    *,
    annotators: tuple[str, ...] = ANNOTATORS,
    admin: str | None = ADMIN,
    **options: Any,
) -> Any:
    from medrewardbench.annotate.service import Identity, create_project

    project = create_project(directory, cases=str(cases), **options)
    cli = Identity.command_line()
    for name in annotators:
        project.add_user(cli, name, "annotator", PASSWORD)
    if admin:
        project.add_user(cli, admin, "admin", PASSWORD)
    return project


def as_user(project: Any, name: str) -> Any:
    """The identity of a user, without a login (which costs an argon2 hash)."""
    from sqlalchemy import select

    from medrewardbench.annotate.db import User
    from medrewardbench.annotate.service import Identity

    with project.db.read() as s:
        user = s.scalar(select(User).where(User.name == name))
        assert user is not None, name
        return Identity(user.id, user.name, user.role, None, "session")


@pytest.fixture(scope="session")
def project_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Any]:
    """Make a project (SQLite) from the standard input files, fast: each kind is built once and copied.

    Returns a function ``(directory, **options) -> Project`` taking :func:`make_project`'s options
    plus ``gold`` (bool) and ``cases`` (number of cases).
    """
    from medrewardbench.annotate.service import Project

    templates: dict[str, Path] = {}

    def build(directory: Path, *, gold: bool = False, cases: int = 6, **options: Any) -> Any:
        key = json.dumps([gold, cases, sorted(options.items())], default=str)
        if key not in templates:
            root = tmp_path_factory.mktemp("template")
            cases_path = write_cases(root / "input", case_rows(cases))
            if gold:
                options["gold"] = str(write_cases(root / "input", gold_rows(2), name="gold.jsonl"))
            make_project(root / "project", cases_path, **options).close()
            templates[key] = root / "project"
        shutil.copytree(templates[key], directory)
        return Project.open(directory)

    return build


@contextmanager
def serve_in_thread(project: Any, app: Any = None) -> Iterator[str]:
    """Serve ``app`` (default: the project's app) on 127.0.0.1 in a background thread; yields its URL."""
    from medrewardbench.annotate.web import create_app
    from medrewardbench.utils.background_server import BackgroundServer

    app = app if app is not None else create_app(project)
    with BackgroundServer(app, startup_timeout_s=20, label="the annotation test server") as server:
        yield server.url


@pytest.fixture
def serve() -> Callable[[Any], Any]:
    return serve_in_thread


def start_serve_process(project: Path, port: int, log: Path, *options: str) -> subprocess.Popen[bytes]:
    """Run ``medrewardbench annotate serve`` as a real process; returns once /login answers."""
    import sys

    import httpx

    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "medrewardbench.cli", "annotate", "serve", str(project)]
    command += ["--port", str(port), "--log-level", "warning", *options]
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/login", timeout=1).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("the server did not start in time")


class Site:
    """A served project to attack: alice, bob and carol (annotators), boss (admin), tokens, a label of bob's."""

    def __init__(self, project: Any, app: Any, base: str, backend: str):
        from medrewardbench.annotate.service import Identity, PairAnswer

        self.project = project
        self.app = app
        self.base = base
        self.backend = backend
        cli = Identity.command_line()
        alice, bob = as_user(project, "alice"), as_user(project, "bob")
        self.alice_ids = [row.public_id for row in project.queue(alice).rows]
        self.bob_ids = [row.public_id for row in project.queue(bob).rows]
        project.submit_pair(bob, self.bob_ids[0], PairAnswer({d: "A" for d in DIMENSIONS}, comment=XSS))
        self.bob_token = project.create_api_token(cli, "bob", "bob's script")
        self.alice_token = project.create_api_token(cli, "alice", "alice's script")
        self.admin_token = project.create_api_token(cli, ADMIN, "the organiser's script")
        self.bob_token_id = project.list_api_tokens(cli, "bob")[0].token_id
        with project.db.read() as s:
            from medrewardbench.annotate.db import Item

            self.item_id = s.query(Item).filter(Item.role == "primary").first().public_id  # type: ignore[union-attr]

    def fill(self, path: str) -> str:
        """A concrete URL for a route: every id belongs to bob (or is an admin-only thing)."""
        values = {
            "assignment_id": self.bob_ids[0],
            "item_id": self.item_id,
            "name": "bob",
            "token_id": str(self.bob_token_id),
            "filename": "canonical.jsonl",
        }
        for key, value in values.items():
            path = path.replace("{" + key + "}", value)
        assert "{" not in path, f"test does not know how to fill {path}; add the parameter to Site.fill"
        return path

    def identity(self, name: str) -> Any:
        return as_user(self.project, name)

    def auth(self, name: str) -> dict[str, str]:
        token = {"alice": self.alice_token, "bob": self.bob_token, ADMIN: self.admin_token}[name]
        return {"authorization": f"Bearer {token}"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def attack_site(
    request: pytest.FixtureRequest, project_factory: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    """A project with gold pairs and repeats, served on 127.0.0.1: on SQLite, then on PostgreSQL."""
    from medrewardbench.annotate.web import create_app

    root = tmp_path_factory.mktemp(f"attack-{request.param}")
    options: dict[str, Any] = {"repeat_share": 0.5, "per_case": 2}
    if request.param == "sqlite":
        project = project_factory(root / "proj", gold=True, **options)
    else:
        cluster: PgCluster = request.getfixturevalue("pg_cluster")
        cases = write_cases(root / "input", case_rows(6))
        gold = write_cases(root / "input", gold_rows(2), name="gold.jsonl")
        project = make_project(root / "proj", cases, db_url=cluster.create_database(), gold=str(gold), **options)
    app = create_app(project)
    try:
        with serve_in_thread(project, app) as base:
            yield Site(project, app, base, request.param)
    finally:
        project.close()


CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def login(client: httpx.Client, name: str, password: str = PASSWORD) -> str:
    """Log in through the real form; returns the session's CSRF token (from the logout form)."""
    page = client.get("/login")
    token = CSRF.search(page.text)
    assert token, page.text[:500]
    response = client.post(
        "/login", data={"username": name, "password": password, "csrf_token": token.group(1), "next": "/"}
    )
    assert response.status_code == 303, (response.status_code, response.text[:500])
    home = client.get(response.headers["location"])
    found = CSRF.search(home.text)
    assert found, home.text[:500]
    return found.group(1)


def client_for(base: str, local_address: str | None = None) -> httpx.Client:
    """An HTTP client of a test server; ``local_address`` picks the address it connects from (127.0.0.2, ...)."""
    import httpx

    transport = httpx.HTTPTransport(local_address=local_address) if local_address else None
    return httpx.Client(base_url=base, follow_redirects=False, timeout=30, transport=transport)


def login_form(client: httpx.Client, headers: dict[str, str] | None = None) -> str:
    """Fetch the login form (setting its cookie on the client); returns the form's CSRF token."""
    page = client.get("/login", headers=headers)
    found = CSRF.search(page.text)
    assert found, page.text[:500]
    return found.group(1)


def raw_request(base: str, head: str, body_chunks: Any = (), timeout: float = 10.0) -> tuple[int, bytes, int]:
    """Send a request over a plain socket: the head as given, then body chunks until the server answers.

    Returns the status code, the response bytes read, and how many body bytes were sent before the
    server answered (or closed). Lets a test declare a body larger than it sends, or stream one.
    """
    import select
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    sent = 0
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1"))
        deadline = time.monotonic() + timeout
        for chunk in body_chunks:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(chunk)
            except OSError:  # the server answered and closed while we were sending
                break
            sent += len(chunk)
            if time.monotonic() > deadline:
                break
        received = b""
        sock.settimeout(timeout)
        try:
            while b"\r\n\r\n" not in received:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
            length = re.search(rb"(?im)^content-length:\s*(\d+)", received)
            want = received.find(b"\r\n\r\n") + 4 + (int(length.group(1)) if length else 0)
            while len(received) < want:
                data = sock.recv(65536)
                if not data:
                    break
                received += data
        except (TimeoutError, OSError):
            pass
    status = int(received.split(b" ", 2)[1]) if received.startswith(b"HTTP/1.1 ") else 0
    return status, received, sent
