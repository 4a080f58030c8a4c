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
  :class:`~medrewardbench.background_server.BackgroundServer`).
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
    from medrewardbench.background_server import BackgroundServer

    app = app if app is not None else create_app(project)
    with BackgroundServer(app, startup_timeout_s=20, label="the annotation test server") as server:
        yield server.url


@pytest.fixture
def serve() -> Callable[[Any], Any]:
    return serve_in_thread


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


def client_for(base: str) -> httpx.Client:
    import httpx

    return httpx.Client(base_url=base, follow_redirects=False, timeout=30)
