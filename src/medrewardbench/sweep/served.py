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
import ctypes
import json
import logging
import os
import re
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
from medrewardbench.judges.options import JudgeOptions
from medrewardbench.sweep.config import ServeSpec
from medrewardbench.sweep.errors import ServerDiedError, ServerStartError

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

_RUNNING: set[ServedModel] = set()
_RUNNING_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to send SIGTERM to the server when the process that started it dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ServedModel:
    """One server process of a sweep entry.

    Args:
        name: the entry's name (for messages).
        spec: the entry's ``serve`` section.
        model: what ``{model}`` stands for.
        log_path: the server's log file (created; output of every start is appended).
        host: the address the server listens on and is reached at.
    """

    def __init__(self, name: str, spec: ServeSpec, model: str, log_path: str | Path, host: str = "127.0.0.1") -> None:
        self.name = name
        self.spec = spec
        self.model = model
        self.log_path = Path(log_path)
        self.host = host
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.command: list[str] = []

    # ------------------------------------------------------------------------------ state
    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1`` of the started server."""
        if self.port is None:
            raise RuntimeError(f"the server of {self.name} has not been started")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The server's process id (None before the start)."""
        return None if self.process is None else self.process.pid

    def alive(self) -> bool:
        """Whether the server process is running."""
        return self.process is not None and self.process.poll() is None

    def exit_code(self) -> int | None:
        """The exit status (negative: the signal), None while it runs or before the start."""
        return None if self.process is None else self.process.poll()

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
        """Start the server on a free port (its output goes to the log file).

        Raises:
            ServerStartError: the command cannot be started (not found, not executable).
        """
        self.port = free_port(self.host)
        text = self.spec.command.format(model=shlex.quote(self.model), port=self.port, host=self.host)
        self.command = shlex.split(text)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.spec.env}
        with self.log_path.open("ab") as log_file:
            log_file.write(f"\n=== medrewardbench sweep: starting {text}\n".encode())
            log_file.flush()
            try:
                self.process = subprocess.Popen(
                    self.command,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    env=env,
                    # its own process group: one signal reaches its workers, and Ctrl-C in the
                    # terminal reaches the sweep only, which then stops it in order
                    start_new_session=True,
                    preexec_fn=_die_with_parent if _main_thread_on_linux() else None,
                )
            except OSError as exc:
                raise ServerStartError(
                    f"{self.name}: cannot start the server command {self.command[0]!r}: {exc.strerror or exc}"
                ) from exc
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        log.info(
            "%s: started %s (pid %d, port %d, log %s)", self.name, text, self.process.pid, self.port, self.log_path
        )

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

    def stop(self) -> int | None:
        """Stop the server: SIGTERM to its process group, SIGKILL after ``stop_timeout``; safe to call twice.

        Returns:
            The exit code (negative: the signal), or None when it was never started.
        """
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            self._signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=self.spec.stop_timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s: the server ignored SIGTERM for %g s; killing it", self.name, self.spec.stop_timeout_s)
                self._signal_group(process, signal.SIGKILL)
                process.wait(timeout=30)
        # whatever the server started and left behind in its group goes too
        self._signal_group(process, signal.SIGKILL)
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        with contextlib.suppress(OSError), self.log_path.open("ab") as log_file:
            log_file.write(f"=== medrewardbench sweep: server stopped ({process.returncode})\n".encode())
        return process.returncode

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signum)

    async def watch(self, interval_s: float = POLL_INTERVAL_S) -> None:
        """Return when the server process has exited (a task to race requests against)."""
        while self.alive():
            await asyncio.sleep(interval_s)

    def died_error(self) -> ServerDiedError:
        """The error for a server that exited during its entry."""
        return ServerDiedError(f"{self.name}: the server {self._describe_exit()}")


def _main_thread_on_linux() -> bool:
    return sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()


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
