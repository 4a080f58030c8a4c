"""``medrewardbench annotate``: create a project, add users, serve the app, follow progress, export.

    medrewardbench annotate init PROJECT --cases pairs.jsonl --per-case 3 [--gold gold.jsonl] [--repeat-share 0.1]
    medrewardbench annotate user add NAME --role annotator|admin [--project PROJECT]
    medrewardbench annotate serve [PROJECT] [--host 127.0.0.1 --port 8080]
    medrewardbench annotate status [PROJECT] [--json]
    medrewardbench annotate export [PROJECT] --format canonical|reference --out PATH

This module imports only typer and the standard library at the top: the web and database
dependencies (the ``annotate`` extra) are imported inside the commands, and a missing one is
reported with the command to install it.

Why one module of this size: one typer group (init, user, serve, status, export) of thin commands;
the module is long because the group has many options, not because a command does much.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from medrewardbench.cli.options import ForceReplaceOpt
from medrewardbench.cli.selective import pick_command, plan_command
from medrewardbench.errors import MedRewardBenchError, MissingExtraError

app = typer.Typer(
    name="annotate",
    help="Expert annotation app: doctors screen questions and label pairs in a browser, blind.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
user_app = typer.Typer(
    help="Users: add, list, passwords, deactivation, API tokens.", no_args_is_help=True, add_completion=False
)
app.add_typer(user_app, name="user")

EXTRA_MODULES: tuple[str, ...] = (
    "fastapi",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "argon2",
    "itsdangerous",
    "python_multipart",
    "jinja2",
)

ProjectArg = Annotated[
    Path | None,
    typer.Argument(help="project directory (default: $MEDREWARDBENCH_ANNOTATE_PROJECT or the current directory)"),
]
ProjectOpt = Annotated[
    Path | None,
    typer.Option(
        "--project",
        "-p",
        help="project directory (default: $MEDREWARDBENCH_ANNOTATE_PROJECT or .)",
        parser=lambda value: _nonempty_path("--project")(value),
    ),
]
MAX_PER_CASE = 1000
"""The most annotators per case ``init`` accepts (more is a typo, and must fit the database's integers)."""
SEED_RANGE = (-(2**31), 2**31 - 1)
"""Seeds the database stores (a 32-bit integer column on PostgreSQL)."""


def require_extra(db_url: str | None = None) -> None:
    """Check that the ``annotate`` extra is installed (and psycopg for a PostgreSQL URL).

    Args:
        db_url: the database URL, if known.

    Raises:
        MissingExtraError: naming the module and the extra.
    """
    modules = list(EXTRA_MODULES)
    if db_url and db_url.startswith("postgresql"):
        modules.append("psycopg")
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise MissingExtraError(module, "annotate", "the annotation app") from exc


def _fail(message: str, code: int = 2) -> typer.Exit:
    from medrewardbench.cli.support import fail

    return fail(message, code)


def _print(text: str) -> None:
    from medrewardbench.cli.support import console

    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _warn(text: str) -> None:
    from medrewardbench.cli.support import err_console, terminal_safe

    err_console.print(f"warning: {terminal_safe(text)}", highlight=False, markup=False, soft_wrap=True)


def _nonempty_path(name: str) -> Any:
    from medrewardbench.cli.support import nonempty_path

    return nonempty_path(name)


def _nonempty_text(value: str | None, name: str) -> str | None:
    from medrewardbench.cli.support import nonempty_text

    return nonempty_text(value, name)


def _warn_per_case(opened: Any) -> None:
    from medrewardbench.annotate.assign import per_case_warning

    active = sum(1 for u in opened.list_users() if u.role == "annotator" and u.active)
    warning = per_case_warning(opened.settings.per_case, active)
    if warning is not None:
        _warn(warning)


def _project_dir(path: Path | None) -> Path:
    from medrewardbench.annotate.config import default_project_dir

    return path if path is not None else default_project_dir()


def _open(path: Path | None) -> Any:
    from medrewardbench.annotate.config import read_config

    directory = _project_dir(path)
    config = read_config(directory)
    require_extra(config.db_url)
    from medrewardbench.annotate.service import Project

    return Project(config)


def _one_password_source(from_stdin: bool, generate: bool) -> None:
    if from_stdin and generate:
        raise _fail("give --password-stdin or --generate-password, not both")


def _read_password(from_stdin: bool, generate: bool) -> tuple[str, bool]:
    if generate:
        return secrets.token_urlsafe(12), True
    if from_stdin:
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise _fail("no password on standard input")
        return line, False
    return typer.prompt("Password (at least 10 characters)", hide_input=True, confirmation_prompt=True), False


def _run(func: Any) -> Any:
    from medrewardbench.errors import DataError

    try:
        return func()
    except DataError as exc:
        raise _fail(str(exc)) from exc
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc


def _check_new_project(project: Path, db: str | None) -> None:
    """Refuse, before any case is read, a project directory or database URL that cannot be used."""
    from medrewardbench.annotate.config import CONFIG_FILE, DB_FILE
    from medrewardbench.errors import OutputDirError
    from medrewardbench.utils.outdir import check_output_dir

    try:
        check_output_dir(project, option="PROJECT")
    except OutputDirError as exc:
        raise _fail(str(exc)) from exc
    if (project / CONFIG_FILE).exists():
        raise _fail(f"{project} already holds an annotation project ({CONFIG_FILE} exists); choose another directory")
    if db is None and (project / DB_FILE).exists():
        raise _fail(f"{project / DB_FILE} already exists; remove it or choose another directory")
    if db is not None and not db.startswith(("sqlite:", "postgresql:", "postgresql+")):
        raise _fail(f"--db must be an sqlite:/// or postgresql+psycopg:// URL, not {db.split('@')[-1]!r}")


def _read_guidelines(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise _fail(f"--guidelines {path}: cannot read it ({reason})") from exc


def _remove_if_empty(directory: Path) -> None:
    import contextlib

    with contextlib.suppress(OSError):
        directory.rmdir()


@app.command("init")
def init_command(
    project: Annotated[
        Path, typer.Argument(help="project directory to create", parser=lambda value: _nonempty_path("PROJECT")(value))
    ],
    cases: Annotated[
        str | None, typer.Option("--cases", help="canonical cases to label (any --data source, e.g. pairs.jsonl)")
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(
            "--questions",
            help="questions to screen (JSONL: id, image, question, ...)",
            parser=lambda value: _nonempty_path("--questions")(value),
        ),
    ] = None,
    per_case: Annotated[int, typer.Option("--per-case", min=1, max=MAX_PER_CASE, help="annotators per case (K)")] = 3,
    db: Annotated[
        str | None, typer.Option("--db", help="database URL (default: SQLite in PROJECT; postgresql+psycopg://...)")
    ] = None,
    gold: Annotated[str | None, typer.Option("--gold", help="labelled canonical cases mixed into every queue")] = None,
    repeat_share: Annotated[
        float, typer.Option("--repeat-share", help="share of each queue shown again, swapped (0 to 1)")
    ] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="seed of every random choice (A/B orders, queues)")] = 0,
    name: Annotated[str | None, typer.Option("--name", help="display name (default: the directory name)")] = None,
    guidelines: Annotated[
        Path | None,
        typer.Option(
            "--guidelines",
            help="markdown file to start the guidelines from",
            parser=lambda value: _nonempty_path("--guidelines")(value),
        ),
    ] = None,
) -> None:
    """Create a project from canonical cases (pairs to label) or a questions file (screening).

    Nothing is created when anything is wrong: an unusable directory or --db URL, a file without
    a single case or question (also --gold), a problem in any row or image.
    """
    if not 0.0 <= repeat_share <= 1.0:  # also NaN
        raise _fail(f"--repeat-share must be a number between 0 and 1, not {repeat_share}")
    if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise _fail(f"--seed must be a whole number between {SEED_RANGE[0]} and {SEED_RANGE[1]}, not {seed}")
    _nonempty_text(name, "--name")
    _nonempty_text(db, "--db")
    _run(lambda: require_extra(db))
    from sqlalchemy.exc import SQLAlchemyError

    from medrewardbench.annotate.service import create_project

    _check_new_project(project, db)
    text = _read_guidelines(guidelines)
    existed = project.exists()
    try:
        created = _run(
            lambda: create_project(
                project,
                cases=cases,
                questions=questions,
                per_case=per_case,
                db_url=db,
                gold=gold,
                repeat_share=repeat_share,
                seed=seed,
                name=name,
                guidelines=text,
            )
        )
    except SQLAlchemyError as exc:
        if not existed:
            _remove_if_empty(project)
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _fail(f"the database could not be set up: {reason}") from exc
    except OSError as exc:
        if not existed:
            _remove_if_empty(project)
        raise _fail(f"PROJECT {project}: cannot write it ({exc.strerror or exc})") from exc
    except BaseException:
        if not existed:
            _remove_if_empty(project)
        raise
    try:
        from medrewardbench.annotate.stats import dashboard

        board = dashboard(created)
        what = "pairs to label" if created.is_pairs else "questions to screen"
        _print(
            f"Created {project}/ ({created.settings.mode}): {board.items} {what}, {created.settings.per_case} per case"
        )
        if board.gold_items:
            _print(f"  {board.gold_items} gold pairs go to every annotator")
        _print(f"Next: medrewardbench annotate user add NAME --role annotator --project {project}")
    finally:
        created.close()


@user_app.command("add")
def user_add(
    name: Annotated[str, typer.Argument(help="user name (letters, digits, . _ @ -)")],
    role: Annotated[str, typer.Option("--role", help="annotator | admin")] = "annotator",
    project: ProjectOpt = None,
    password_stdin: Annotated[bool, typer.Option("--password-stdin", help="read the password from stdin")] = False,
    generate: Annotated[bool, typer.Option("--generate-password", help="make a random password and print it")] = False,
) -> None:
    """Add a user; a new annotator gets a balanced share of the work at once.

    Warns when fewer annotators are active than --per-case asks for each case.
    """
    _one_password_source(password_stdin, generate)
    opened = _run(lambda: _open(project))
    try:
        from medrewardbench.annotate.service import Identity

        password, generated = _read_password(password_stdin, generate)
        _run(lambda: opened.add_user(Identity.command_line(), name, role, password))
        info = next(u for u in opened.list_users() if u.name == name)
        count = f"{info.assigned} assignment{'' if info.assigned == 1 else 's'}"
        _print(f"Added {role} {name}" + (f" with {count}" if role == "annotator" else ""))
        if generated:
            _print(f"Password: {password}")
        _warn_per_case(opened)
    finally:
        opened.close()


@user_app.command("list")
def user_list(project: ProjectOpt = None) -> None:
    """List users with their progress and API tokens."""
    opened = _run(lambda: _open(project))
    try:
        from rich.table import Table

        from medrewardbench.cli.support import console

        table = Table("name", "role", "state", "done", "assigned", "tokens")
        for u in opened.list_users():
            table.add_row(
                u.name, u.role, "active" if u.active else "inactive", str(u.done), str(u.assigned), str(u.tokens)
            )
        from medrewardbench.report.terminal import fit_table

        console.print(fit_table(table, console.width, ("tokens", "assigned", "state")))
    finally:
        opened.close()


@user_app.command("password")
def user_password(
    name: Annotated[str, typer.Argument(help="user name")],
    project: ProjectOpt = None,
    password_stdin: Annotated[bool, typer.Option("--password-stdin", help="read the password from stdin")] = False,
    generate: Annotated[bool, typer.Option("--generate-password", help="make a random password and print it")] = False,
) -> None:
    """Set a user's password (their browser sessions end and their API tokens are revoked)."""
    _one_password_source(password_stdin, generate)
    opened = _run(lambda: _open(project))
    try:
        from medrewardbench.annotate.service import Identity

        password, generated = _read_password(password_stdin, generate)
        _run(lambda: opened.set_password(Identity.command_line(), name, password))
        _print(f"Password of {name} changed" + (f": {password}" if generated else ""))
    finally:
        opened.close()


def _set_active(name: str, project: Path | None, active: bool) -> None:
    opened = _run(lambda: _open(project))
    try:
        from medrewardbench.annotate.service import Identity

        _run(lambda: opened.set_active(Identity.command_line(), name, active))
        _print(f"{name} is now {'active' if active else 'inactive'}; queues rebalanced")
        _warn_per_case(opened)
    finally:
        opened.close()


@user_app.command("deactivate")
def user_deactivate(name: Annotated[str, typer.Argument(help="user name")], project: ProjectOpt = None) -> None:
    """Deactivate a user: sessions and tokens end, unstarted cases go to others, labels stay."""
    _set_active(name, project, False)


@user_app.command("activate")
def user_activate(name: Annotated[str, typer.Argument(help="user name")], project: ProjectOpt = None) -> None:
    """Reactivate a user (they get a share of the unstarted work again)."""
    _set_active(name, project, True)


@user_app.command("token")
def user_token(
    name: Annotated[str, typer.Argument(help="user the token acts as")],
    project: ProjectOpt = None,
    label: Annotated[str, typer.Option("--label", help="what the token is for")] = "",
    revoke: Annotated[int | None, typer.Option("--revoke", help="revoke the token with this id")] = None,
    list_tokens: Annotated[bool, typer.Option("--list", help="list the user's tokens")] = False,
) -> None:
    """Create an API token (printed once; only its hash is stored), list tokens, or revoke one."""
    if list_tokens and revoke is not None:
        raise _fail("give --list or --revoke ID, not both")
    if revoke is not None and not 1 <= revoke <= 2**31 - 1:
        raise _fail(f"--revoke {revoke}: no such token; 'annotate user token {name} --list' shows the ids")
    opened = _run(lambda: _open(project))
    try:
        from medrewardbench.annotate.service import Identity

        cli = Identity.command_line()
        if list_tokens:
            for t in _run(lambda: opened.list_api_tokens(cli, name)):
                state = "revoked" if t.revoked else "active"
                _print(f"{t.token_id}\t{state}\t{t.created_at:%Y-%m-%d %H:%M}\t{t.label}")
            return
        if revoke is not None:
            _run(lambda: opened.revoke_api_token(cli, name, revoke))
            _print(f"Token {revoke} of {name} revoked")
            return
        token = _run(lambda: opened.create_api_token(cli, name, label))
        _print(token)
        from medrewardbench.cli.support import err_console

        err_console.print(
            "Send it as 'Authorization: Bearer TOKEN' to /api/v1/...; it is not shown again.", highlight=False
        )
    finally:
        opened.close()


SERVE_BAD_INPUT = 2
MAX_BODY_BYTES_DEFAULT = 2 * 1024 * 1024
"""``--max-body-bytes``: the app's DEFAULT_MAX_BODY_BYTES (not imported here: that pulls in the web stack)."""
"""Exit status of ``serve`` for an address it cannot use: a bad or unbindable host or port (in use included)."""


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Hosts only this machine reaches: ``serve`` warns about plain HTTP on any other."""


def _listen(host: str, port: int) -> Any:
    """A listening socket on host:port, or the one-line reason it cannot be had (as a typer.Exit)."""
    import errno
    import socket

    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise _fail(f"--host {host!r} is not an address this machine has ({exc})", SERVE_BAD_INPUT) from exc
    family, kind, proto, _name, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            reason = f"port {port} on {host} is in use (another server?); stop it or choose another --port"
        elif exc.errno == errno.EACCES:
            reason = f"not allowed to listen on port {port} of {host} (ports below 1024 need privileges)"
        else:
            reason = f"cannot listen on {host}:{port} ({exc.strerror or exc})"
        raise _fail(reason, SERVE_BAD_INPUT) from exc
    return sock


@app.command("serve")
def serve_command(
    project: ProjectArg = None,
    host: Annotated[str, typer.Option("--host", help="interface to bind; keep 127.0.0.1 behind a proxy")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="port to listen on (1-65535)")] = 8080,
    root_path: Annotated[
        str, typer.Option("--root-path", help="URL prefix when a proxy serves the app under one")
    ] = "",
    forwarded_allow_ips: Annotated[
        str,
        typer.Option(
            "--forwarded-allow-ips",
            help="proxies (addresses or networks, comma-separated; '' for none) whose X-Forwarded-For/-Proto "
            "are believed",
        ),
    ] = "127.0.0.1",
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", help="largest request body accepted (413 beyond it)")
    ] = MAX_BODY_BYTES_DEFAULT,
    secure_cookies: Annotated[
        bool | None,
        typer.Option(
            "--secure-cookies/--no-secure-cookies", help="force the Secure cookie flag (default: per request)"
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level")] = "info",
) -> None:
    """Serve the web app (HTTP; put it behind a TLS reverse proxy for anything beyond this machine).

    A bad host or port, or one that cannot be bound (in use), is refused in one line with exit
    status 2 before anything else is printed.
    """
    if not 1 <= port <= 65535:
        raise _fail(f"--port must be between 1 and 65535, got {port}", SERVE_BAD_INPUT)
    if max_body_bytes < 1024:
        raise _fail(f"--max-body-bytes must be at least 1024, got {max_body_bytes}", SERVE_BAD_INPUT)
    from medrewardbench.annotate.middleware import parse_trusted
    from medrewardbench.annotate.security import FAST_HASHING_ENV

    try:
        parse_trusted(forwarded_allow_ips)
    except ValueError as exc:
        raise _fail(f"--forwarded-allow-ips: {exc}", SERVE_BAD_INPUT) from exc
    opened = _run(lambda: _open(project))
    try:
        sock = _listen(host, port)
        if os.environ.get(FAST_HASHING_ENV) == "1" and host not in LOOPBACK_HOSTS:
            sock.close()
            raise _fail(
                f"{FAST_HASHING_ENV}=1 (the test suite's cheap password hashes) is set: unset it to serve on {host}",
                SERVE_BAD_INPUT,
            )
    except typer.Exit:
        opened.close()
        raise
    import uvicorn

    from medrewardbench.annotate.web import create_app
    from medrewardbench.cli.support import err_console

    if host not in LOOPBACK_HOSTS:
        err_console.print(
            f"warning: binding {host}: the app speaks plain HTTP; use a TLS reverse proxy (see the README)",
            highlight=False,
        )
    err_console.print(
        f"serving {opened.settings.name} on http://{host}:{port}{root_path}/ (Ctrl-C to stop)", highlight=False
    )
    try:
        app_ = create_app(
            opened,
            secure_cookies=secure_cookies,
            max_body_bytes=max_body_bytes,
            forwarded_allow_ips=forwarded_allow_ips,
        )
        config = uvicorn.Config(
            app_,
            root_path=root_path,
            # the app reads X-Forwarded-* itself, from --forwarded-allow-ips only
            proxy_headers=False,
            log_level=log_level,
            server_header=False,
            access_log=log_level == "debug",
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        opened.close()


@app.command("status")
def status_command(
    project: ProjectArg = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures as JSON")] = False,
) -> None:
    """Progress, agreement, gold accuracy, position consistency and the adjudication queue."""
    opened = _run(lambda: _open(project))
    try:
        from medrewardbench.annotate.stats import dashboard

        board = dashboard(opened)
        if as_json:
            sys.stdout.write(json.dumps(board.as_dict(), indent=2) + "\n")
        else:
            _print_status(board)
        _warn_per_case(opened)
    finally:
        opened.close()


def _fmt(value: float | None, percent: bool = False) -> str:
    if value is None or value != value:
        return "-"
    return f"{100 * value:.1f}%" if percent else f"{value:.3f}"


def _print_status(board: Any) -> None:
    from rich.table import Table

    from medrewardbench.cli.support import console

    console.print(
        f"[bold]{board.name}[/] ({board.mode}): {board.done} of {board.assignments} labels, "
        f"{board.items_complete} of {board.items} items complete, median {_fmt(board.median_seconds)} s per case, "
        f"{len(board.pending)} item(s) to adjudicate",
        highlight=False,
    )
    agreement = Table(
        "dimension", "items", "pairwise", "Fleiss kappa", "Krippendorff alpha", "majority", title="Agreement"
    )
    for d in board.agreement:
        agreement.add_row(
            d.dimension,
            str(d.n_items),
            _fmt(d.percent_agreement, True),
            _fmt(d.fleiss_kappa),
            _fmt(d.krippendorff_alpha),
            _fmt(d.majority_share, True),
        )
    from medrewardbench.report.terminal import fit_table

    console.print(fit_table(agreement, console.width, ("majority", "Krippendorff", "Fleiss")))
    people = Table(
        "annotator", "done", "median s", "vs others", "gold", "position consistency", "picks A", title="Annotators"
    )
    for a in board.annotators:
        total = sum(n for _, n in a.vs_others.values())
        pooled = sum(v * n for v, n in a.vs_others.values() if n) / total if total else None
        people.add_row(
            a.name + ("" if a.active else " (inactive)"),
            f"{a.done}/{a.assigned}",
            _fmt(a.median_seconds),
            _fmt(pooled, True),
            f"{_fmt(a.gold_accuracy, True)} ({a.gold_compared})",
            f"{_fmt(a.repeat_consistency, True)} ({a.repeat_compared})",
            _fmt(a.first_share, True),
        )
    console.print(fit_table(people, console.width, ("picks A", "median", "position", "gold")))


@app.command("export")
def export_command(
    project: ProjectArg = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="canonical | reference | questions")] = "canonical",
    out: Annotated[
        Path, typer.Option("--out", "-o", help="file (.jsonl/.json/.parquet) or directory (reference)")
    ] = Path("labelled.jsonl"),
    only_complete: Annotated[
        bool, typer.Option("--only-complete", help="only items every assigned annotator has labelled")
    ] = False,
    accepted_only: Annotated[bool, typer.Option("--accepted-only", help="questions: only the accepted ones")] = False,
    force: ForceReplaceOpt = False,
) -> None:
    """Write the released set (canonical with every annotation and adjudication, or the reference layout) and its card.

    Files already at --out (an earlier export, its dataset.json) are replaced only with --force.
    """
    opened = _run(lambda: _open(project))
    try:
        from medrewardbench.annotate.export import export_project
        from medrewardbench.annotate.service import Identity

        summary = _run(
            lambda: export_project(
                opened, fmt, out, only_complete=only_complete, accepted_only=accepted_only, force=force
            )
        )
        opened.record_export(Identity.command_line(), f"{fmt}:{out}", summary.items)
        where = out if fmt != "reference" else f"{out}/ ({len(summary.paths)} files)"
        if fmt == "questions":
            _print(
                f"Wrote {summary.items} item(s) to {where}: {summary.labelled} with votes, "
                f"{summary.undecided} undecided"
            )
        else:
            adjudicated = summary.tally.sources.get("adjudication", 0)
            _print(
                f"Wrote {summary.items} item(s) to {where}: {summary.labelled} with labels ({adjudicated} label(s) "
                f"adjudicated), {summary.undecided} dimension(s) without a strict majority or an adjudication left "
                f"unlabelled; dataset card {summary.card}"
            )
        for warning in summary.warnings:
            _print(f"warning: {warning}")
        if fmt != "questions":
            _print(f"Evaluate judges on it: medrewardbench eval --data {out}")
    finally:
        opened.close()


@app.command("rebalance")
def rebalance_command(project: ProjectArg = None) -> None:
    """Recompute the queues now (done automatically when annotators are added or deactivated)."""
    opened = _run(lambda: _open(project))
    try:
        from medrewardbench.annotate.service import Identity

        counts = _run(lambda: opened.rebalance(Identity.command_line()))
        _print(f"{counts['added']} assignment(s) added, {counts['removed']} removed, {counts['annotators']} annotators")
    finally:
        opened.close()


app.command("pick")(pick_command)
app.command("plan")(plan_command)


def main() -> None:
    """Run the annotate commands on their own (``python -m medrewardbench.cli.annotate``)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    app()


if __name__ == "__main__":
    main()
