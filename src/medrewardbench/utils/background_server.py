"""Serve an ASGI app with uvicorn in a daemon thread: the one background server of the package.

Both in-process servers use it: :class:`medrewardbench.serve.BackgroundServer` (the model server
for tests and notebooks) is this class, and :class:`medrewardbench.testing.openai_server.OpenAIServer`
(the fault-injecting test server) runs its app in one. What they need, and what it does:

* **No Nagle delay.** The listening socket is made here with ``IPPROTO_TCP`` as its protocol:
  asyncio sets ``TCP_NODELAY`` on accepted sockets only then. Without it Nagle's algorithm meets
  the client's delayed ACK and a keep-alive request can wait about 40 ms for its answer.
* **A lean server**: no ``Server`` or ``Date`` header, no proxy-header parsing, no access log, no
  lifespan, a deep backlog and 30 s keep-alive, so that the server spends little CPU per request
  on a machine it shares with the client it serves.
* **A port chosen at start** (``port=0``: a free one), known once :meth:`BackgroundServer.start`
  returns, which is when the server accepts connections.
* **A bounded stop**: in-flight requests get ``graceful_shutdown_s`` to finish (unbounded when
  None), then the thread is told to exit at once.

Needs uvicorn (the ``serve`` extra).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from medrewardbench.errors import require

logger = logging.getLogger(__name__)

__all__ = ["BackgroundServer", "http_implementation"]


def http_implementation(choice: str) -> str:
    """The HTTP implementation uvicorn should use for ``choice``: ``"auto"`` is httptools when installed, else h11.

    Args:
        choice: ``"auto"``, ``"h11"`` or ``"httptools"``.

    Returns:
        ``"h11"`` or ``"httptools"`` (or ``choice`` unchanged when it is not ``"auto"``).
    """
    if choice != "auto":
        return choice
    try:
        import httptools  # noqa: F401
    except ImportError:
        return "h11"
    return "httptools"


class BackgroundServer:
    """Run an ASGI app under uvicorn in a daemon thread; a context manager.

    Args:
        app: the ASGI application.
        host: the address to bind (the loopback by default).
        port: the port; 0 picks a free one, known as :attr:`port` once started.
        startup_timeout_s: how long :meth:`start` waits for the server to accept connections.
        http: uvicorn's HTTP implementation (see :func:`http_implementation`).
        graceful_shutdown_s: how long :meth:`stop` lets in-flight requests finish; None lets uvicorn
            wait for them. Either way a thread still serving 10 s after that grace (5 s for None) is
            told to exit at once.
        label: names the server in the error raised when it does not start.
        thread_name: the serving thread's name.
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout_s: float = 30.0,
        *,
        http: str = "auto",
        graceful_shutdown_s: float | None = None,
        label: str = "the model server",
        thread_name: str = "medrewardbench-serve",
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.http = http_implementation(http)
        self.graceful_shutdown_s = graceful_shutdown_s
        self.label = label
        self.thread_name = thread_name
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def running(self) -> bool:
        """Whether the server has been started and not stopped."""
        return self._thread is not None

    @property
    def url(self) -> str:
        """``http://HOST:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://HOST:PORT/v1``."""
        return f"{self.url}/v1"

    def start(self) -> BackgroundServer:
        """Start serving; returns once the port accepts connections (at once when already serving).

        Returns:
            The server itself.

        Raises:
            MissingExtraError: uvicorn is not installed.
            OSError: the address cannot be bound (a port in use).
            RuntimeError: the server did not come up within ``startup_timeout_s``.
        """
        if self._thread is not None:
            return self
        uvicorn: Any = require("uvicorn", "serve", "the background server")
        # proto must be IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted sockets only then (see above)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((self.host, self.port))
            sock.listen(2048)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            loop="asyncio",
            http=self.http,
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            server_header=False,
            date_header=False,
            backlog=2048,
            timeout_keep_alive=30,
            timeout_graceful_shutdown=self.graceful_shutdown_s,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.label} did not start on {self.host}:{self.port}")
            time.sleep(0.01)
        logger.debug("%s listening on %s (http=%s)", self.label, self.url, self.http)
        return self

    def stop(self) -> None:
        """Stop serving and join the thread; safe to call twice."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            grace = self.graceful_shutdown_s if self.graceful_shutdown_s is not None else 5.0
            self._thread.join(timeout=grace + 10.0)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(timeout=5.0)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
