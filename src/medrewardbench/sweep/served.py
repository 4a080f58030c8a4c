"""Models the sweep serves itself: start a server, wait for it, judge through it, stop it.

A judge entry with ``serve: {command: "vllm serve {model} --port {port} ...", gpus: 1,
ready_timeout: 900}`` gets a :class:`ServedModel`: the command (``{model}``, ``{port}``,
``{host}`` filled in, a free port) runs in its own process group with its output in a log file
beside the results; the sweep waits until ``GET /v1/models`` answers, judges the entry as an
``api:`` judge against it (:class:`ServedApiJudge`), and stops it: SIGTERM to the process group,
SIGKILL after ``stop_timeout`` seconds. It is stopped however the entry ends: done, failed, or the
sweep interrupted (Ctrl-C, SIGTERM); servers still running when the interpreter exits are stopped
too. Any OpenAI-compatible server works the same way: vLLM, SGLang
(``python -m sglang.launch_server --model-path {model} --port {port}``), TGI
(``text-generation-launcher --model-id {model} --port {port}``), or ``medrewardbench serve``.

The group dies with the sweep even when the sweep gets SIGKILL: the command runs under a small
supervisor process (:mod:`.supervisor`) that holds the read end of a pipe only the sweep writes to;
when the sweep dies the pipe closes and the supervisor stops the group the same way (SIGTERM, then
SIGKILL), and any of its descendants that left the group. The same holds in a Ray worker (the
worker's death closes the pipe). Each group the sweep starts itself is also recorded in
``servers/running.json`` (:mod:`.served_groups`); a sweep that starts and finds a group whose sweep
is gone but which still runs (its supervisor was killed too) stops it and says so in one line.

A server that exits before it is ready, or is not ready within ``ready_timeout``, fails its entry
with :class:`~medrewardbench.sweep.errors.ServerStartError`; one that exits while its entry is
judged fails it with :class:`~medrewardbench.sweep.errors.ServerDiedError`: the requests in flight
are dropped (not stored as the model's failures) and a rerun resumes.

The served judge's fingerprint leaves out the port (a new one each time) and holds the server
command instead, so a rerun resumes and a change of engine flags starts a new run.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import re
import secrets
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrewardbench.judges.api import ApiJudge
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.models.options import JudgeOptions
from medrewardbench.sweep import supervisor as supervisor_module
from medrewardbench.sweep.config import ServeSpec
from medrewardbench.sweep.errors import ServerDiedError, ServerStartError
from medrewardbench.sweep.served_groups import GROUP_TOKEN_ENV, ServedGroup, ServedGroupRecords, new_group
from medrewardbench.sweep.supervisor import process_start_time

log = logging.getLogger(__name__)

__all__ = ["SERVED_KEY_ENV", "ServedApiJudge", "ServedModel", "free_port", "stop_all_servers"]

SERVED_KEY_ENV = "MEDREWARDBENCH_SERVED_API_KEY"
"""The key variable a served entry reads unless it names one (so a real OpenAI key never goes to it)."""
PLACEHOLDER_BASE_URL = "http://127.0.0.1:9/v1"
"""Where a served judge points before its server is up (nothing is ever sent there)."""
POLL_INTERVAL_S = 0.25
EXIT_GRACE_S = 2.0
"""How long a transport failure waits to see whether the server exited (then it is not stored)."""
_TRANSPORT_FAILURE = re.compile(r"^(connection error|timeout|HTTP \d+) after \d+ retries$")
LOG_TAIL_LINES = 15
SUPERVISOR_SCRIPT = Path(supervisor_module.__file__)
SUPERVISOR_REPORT_TIMEOUT_S = 60.0
"""How long the sweep waits for the supervisor to report the command started (a Python start on a busy node)."""
SUPERVISOR_GRACE_S = 45.0
"""How long past ``stop_timeout`` the sweep waits for the supervisor before it kills the group itself."""

_RUNNING: set[ServedModel] = set()
_RUNNING_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _StatusReader:
    """The supervisor's report pipe: JSON lines, read without blocking past a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self._buffer = b""

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next event, or None at end of file or when ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if self.fd is None:
                return None
            remaining = deadline - time.monotonic()
            if remaining < 0 or not select.select([self.fd], [], [], remaining)[0]:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.close()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            event = json.loads(line)
        except ValueError:
            return {}
        return event if isinstance(event, dict) else {}

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class ServedModel:
    """One server of a sweep entry, run under its supervisor (see the module docstring).

    Args:
        name: the entry's name (for messages).
        spec: the entry's ``serve`` section.
        model: what ``{model}`` stands for.
        log_path: the server's log file (created; output of every start is appended).
        host: the address the server listens on and is reached at.
        records: where the server's process group is recorded while it runs (None: nowhere).
    """

    def __init__(
        self,
        name: str,
        spec: ServeSpec,
        model: str,
        log_path: str | Path,
        host: str = "127.0.0.1",
        records: ServedGroupRecords | None = None,
    ) -> None:
        self.name = name
        self.spec = spec
        self.model = model
        self.log_path = Path(log_path)
        self.host = host
        self.records = records
        self.port: int | None = None
        self.command: list[str] = []
        self.group: ServedGroup | None = None
        self.supervisor: subprocess.Popen[bytes] | None = None
        self._control: int | None = None
        self._status: _StatusReader | None = None
        self._returncode: int | None = None
        self._exited = False
        self._escalated = False
        self._stopped = False

    # ------------------------------------------------------------------------------ state
    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1`` of the started server."""
        if self.port is None:
            raise RuntimeError(f"the server of {self.name} has not been started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id, which is its process group's id too (None before the start)."""
        return None if self.group is None else self.group.pid

    def _read_events(self, timeout: float = 0.0) -> None:
        """Take in what the supervisor reported (the server's exit status)."""
        while self._status is not None and not self._exited:
            event = self._status.next(timeout)
            if event is None:
                return
            if "exited" in event:
                code = event.get("exited")
                self._returncode = code if isinstance(code, int) else None
                self._escalated = bool(event.get("escalated"))
                self._exited = True

    def alive(self) -> bool:
        """Whether the server runs (its supervisor runs and has not seen it exit)."""
        if self.supervisor is None or self._exited:
            return False
        self._read_events()
        return not self._exited and self.supervisor.poll() is None

    def exit_code(self) -> int | None:
        """The server's exit status (negative: the signal), None while it runs or before the start."""
        if self.supervisor is None or self.alive():
            return None
        if not self._exited:
            self.supervisor.wait()
            self._read_events(timeout=1.0)
        if not self._exited and self.supervisor.returncode is not None and self.supervisor.returncode < 0:
            return self.supervisor.returncode  # the supervisor was killed before it could say
        return self._returncode

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the server's log."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _describe_exit(self) -> str:
        code = self.exit_code()
        how = f"signal {-code}" if code is not None and code < 0 else f"code {code}"
        tail = self.log_tail()
        return f"exited with {how}; log {self.log_path}" + (f"; last lines:\n{tail}" if tail else "")

    # -------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start the server on a free port under its supervisor (its output goes to the log file).

        Raises:
            ServerStartError: the command cannot be started (not found, not executable).
        """
        self.port = free_port(self.host)
        text = self.spec.command.format(model=shlex.quote(self.model), port=self.port, host=self.host)
        self.command = shlex.split(text)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(12)
        env = {**os.environ, **self.spec.env, GROUP_TOKEN_ENV: token}
        supervisor = [sys.executable, "-I", str(SUPERVISOR_SCRIPT), repr(self.spec.stop_timeout_s), "--"]
        control_read, control_write = os.pipe()
        status_read, status_write = os.pipe()
        try:
            with self.log_path.open("ab") as log_file:
                log_file.write(f"\n=== medrewardbench sweep: starting {text}\n".encode())
                log_file.flush()
                # a session of its own: Ctrl-C in the terminal reaches the sweep only, which then stops
                # the server in order, and a signal to the sweep's group leaves the supervisor to act
                self.supervisor = subprocess.Popen(
                    [*supervisor, *self.command],
                    stdin=control_read,
                    stdout=status_write,
                    stderr=log_file,
                    env=env,
                    start_new_session=True,
                )
        except BaseException:
            for fd in (control_read, control_write, status_read):
                os.close(fd)
            raise
        finally:
            os.close(status_write)
        os.close(control_read)
        self._control = control_write  # not inheritable: only this process holds it
        self._status = _StatusReader(status_read)
        event = self._status.next(SUPERVISOR_REPORT_TIMEOUT_S)
        started = (event or {}).get("started")
        if not isinstance(started, dict):
            why = (event or {}).get("error") or "its supervisor did not report a start"
            self._close_control()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.supervisor.wait(timeout=SUPERVISOR_REPORT_TIMEOUT_S)
            self._status.close()
            self._exited = True
            raise ServerStartError(f"{self.name}: cannot start the server command {self.command[0]!r}: {why}")
        self.group = new_group(
            entry=self.name,
            command=text,
            pid=int(started["pid"]),
            pgid=int(started["pgid"]),
            start_time=started.get("start_time"),
            token=token,
            supervisor_pid=self.supervisor.pid,
            stop_timeout_s=self.spec.stop_timeout_s,
        )
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        if self.records is not None:
            try:
                self.records.add(self.group)
            except OSError as exc:
                log.warning("%s: cannot record the server's process group in %s: %s", self.name, self.records.path, exc)
        log.info("%s: started %s (pid %d, port %d, log %s)", self.name, text, self.group.pid, self.port, self.log_path)

    def probe(self) -> bool:
        """One look at ``GET /v1/models``: True when it answers 200 with a model list."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as answer:
                if answer.status != 200:
                    return False
                payload = json.loads(answer.read() or b"{}")
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return isinstance(payload, dict) and isinstance(payload.get("data"), list)

    def _check_waiting(self, started: float) -> bool:
        """True when ready; raises when the server exited or the time is up."""
        if not self.alive():
            raise ServerStartError(f"{self.name}: the server {self._describe_exit()}")
        if self.probe():
            log.info("%s: server ready after %.1f s", self.name, time.monotonic() - started)
            return True
        if time.monotonic() - started > self.spec.ready_timeout_s:
            self.stop()
            raise ServerStartError(
                f"{self.name}: the server did not answer GET /v1/models within {self.spec.ready_timeout_s:g} s "
                f"(ready_timeout); it was stopped; log {self.log_path}"
                + (f"; last lines:\n{self.log_tail()}" if self.log_tail() else "")
            )
        return False

    def wait_ready(self) -> None:
        """Block until the server answers (for Ray workers, which start servers synchronously).

        Raises:
            ServerStartError: it exited first, or ``ready_timeout`` passed (it is then stopped).
        """
        started = time.monotonic()
        while not self._check_waiting(started):
            time.sleep(POLL_INTERVAL_S)

    async def wait_ready_async(self) -> None:
        """:meth:`wait_ready` without blocking the event loop.

        Raises:
            ServerStartError: it exited first, or ``ready_timeout`` passed (it is then stopped).
        """
        started = time.monotonic()
        while not await asyncio.to_thread(self._check_waiting, started):
            await asyncio.sleep(POLL_INTERVAL_S)

    def _close_control(self) -> None:
        """Tell the supervisor to stop the server (a word, then end of file: what the sweep's death also gives)."""
        if self._control is not None:
            with contextlib.suppress(OSError):
                os.write(self._control, b"stop\n")
            with contextlib.suppress(OSError):
                os.close(self._control)
            self._control = None

    def stop(self) -> int | None:
        """Stop the server: SIGTERM to its process group, SIGKILL after ``stop_timeout``; safe to call twice.

        Returns:
            The exit code (negative: the signal), or None when it was never started.
        """
        supervisor = self.supervisor
        if supervisor is None or self.group is None:
            return None
        if self._stopped:
            return self._returncode
        self._close_control()
        try:
            supervisor.wait(timeout=self.spec.stop_timeout_s + SUPERVISOR_GRACE_S)
        except subprocess.TimeoutExpired:
            log.warning("%s: the server's supervisor did not stop it; killing the process group", self.name)
            if process_start_time(self.group.pid) == self.group.start_time is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.group.pgid, signal.SIGKILL)
            supervisor.kill()
            supervisor.wait()
        self._read_events(timeout=1.0)
        if self._status is not None:
            self._status.close()
        if self._escalated:
            log.warning("%s: the server ignored SIGTERM for %g s; it was killed", self.name, self.spec.stop_timeout_s)
        self._stopped = True
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        if self.records is not None:
            with contextlib.suppress(OSError):
                self.records.remove(self.group.token)
        returncode = self.exit_code()
        with contextlib.suppress(OSError), self.log_path.open("ab") as log_file:
            log_file.write(f"=== medrewardbench sweep: server stopped ({returncode})\n".encode())
        self._returncode = returncode
        return returncode

    async def watch(self, interval_s: float = POLL_INTERVAL_S) -> None:
        """Return when the server process has exited (a task to race requests against)."""
        while self.alive():
            await asyncio.sleep(interval_s)

    def died_error(self) -> ServerDiedError:
        """The error for a server that exited during its entry."""
        return ServerDiedError(f"{self.name}: the server {self._describe_exit()}")


def stop_all_servers() -> None:
    """Stop every server this process started and has not stopped (at exit, and after an interrupt)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for server in running:
        with contextlib.suppress(Exception):
            server.stop()


atexit.register(stop_all_servers)


class ServedApiJudge(ApiJudge):
    """An ``api:`` judge whose server the sweep runs (see the module docstring).

    Args:
        model: the model name the server answers to.
        options: the entry's options (its ``api.base_url`` is set when the server is up).
        serve: the entry's ``serve`` section (its command enters the fingerprint).
    """

    def __init__(self, model: str, options: JudgeOptions, serve: ServeSpec) -> None:
        key_env = options.api.api_key_env or SERVED_KEY_ENV
        super().__init__(model, options.with_api(base_url=PLACEHOLDER_BASE_URL, api_key_env=key_env))
        self.serve = serve
        self.server: ServedModel | None = None

    def bind(self, server: ServedModel) -> None:
        """Send requests to this (started) server from now on."""
        self.server = server
        self.chat.use_base_url(server.base_url)  # the next request makes a client for the new URL

    def config(self) -> dict[str, Any]:
        """The API judge's configuration with the server command in place of the (changing) URL."""
        config = super().config()
        config["base_url"] = None
        config["served_by"] = self.serve.command
        return config

    def metadata(self) -> dict[str, Any]:
        """The API judge's run facts, and that a sweep served the model (its log's name)."""
        metadata = super().metadata()
        metadata["served"] = True
        metadata["server_gpus"] = self.serve.gpus
        if self.server is not None:
            metadata["server_log"] = self.server.log_path.name
        return metadata

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Judge as the API judge does, unless the server exits first (then nothing is returned).

        Raises:
            ServerDiedError: the server exited before or while the batch was judged.
        """
        server = self.server
        if server is None:
            raise RuntimeError(f"{self.spec}: no server bound")
        if not server.alive():
            raise server.died_error()
        judging = asyncio.ensure_future(super().judge_batch(requests))
        watching = asyncio.ensure_future(server.watch())
        finished = False
        try:
            await asyncio.wait({judging, watching}, return_when=asyncio.FIRST_COMPLETED)
            finished = judging.done()
        finally:
            watching.cancel()
            if not judging.done():
                judging.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await judging
        if not finished:
            raise server.died_error()
        results = judging.result()
        if any(r.failure is not None and _TRANSPORT_FAILURE.match(r.failure) for r in results):
            # a dropped connection can arrive a moment before the exit is visible: look again
            deadline = time.monotonic() + EXIT_GRACE_S
            while server.alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        if not server.alive() and any(r.failure for r in results):
            # failures that raced the exit are the server's, not the model's: they are not stored
            raise server.died_error()
        return results
