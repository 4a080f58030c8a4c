"""The package's one in-process server: both OpenAI-compatible servers run in it, with no Nagle delay."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

import medrewardbench
from medrewardbench.testing.openai_server import OpenAIServer
from medrewardbench.utils.background_server import BackgroundServer, http_implementation

pytest.importorskip("uvicorn")


async def nodelay_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answer with the TCP_NODELAY flag of the accepted socket the request came in on."""
    assert scope["type"] == "http"
    transport = send.__self__.transport  # uvicorn's request cycle holds the connection's transport
    sock = transport.get_extra_info("socket")
    body = json.dumps(
        {
            "nodelay": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
            "thread": threading.current_thread().name,
        }
    ).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def get(url: str, path: str) -> tuple[http.client.HTTPResponse, bytes]:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_accepted_connections_have_tcp_nodelay_and_the_server_stays_lean(http: str) -> None:
    if http == "httptools":
        pytest.importorskip("httptools")
    with BackgroundServer(nodelay_app, http=http, thread_name="nodelay-test") as server:
        assert server.running and server.port != 0
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        response, body = get(server.url, "/")
        answer = json.loads(body)
        assert answer["nodelay"] != 0  # without it, Nagle meets delayed ACKs: ~40 ms per keep-alive request
        assert answer["thread"] == "nodelay-test"
        assert response.getheader("server") is None and response.getheader("date") is None
    assert not server.running


def test_start_and_stop_are_idempotent_and_the_port_is_free_again() -> None:
    server = BackgroundServer(nodelay_app)
    assert server.port == 0 and not server.running
    assert server.start() is server.start()
    port = server.port
    server.stop()
    server.stop()
    with socket.socket() as probe:  # the listening socket is closed
        probe.bind(("127.0.0.1", port))


def test_a_port_in_use_is_refused_at_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = BackgroundServer(nodelay_app, port=taken.getsockname()[1])
        with pytest.raises(OSError):
            server.start()
        assert not server.running


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_server_whose_thread_dies_at_start_is_stopped_and_named() -> None:
    server = BackgroundServer(nodelay_app, http="no-such-protocol", label="the probe server")
    with pytest.raises(RuntimeError, match=r"the probe server did not start on 127\.0\.0\.1:\d+"):
        server.start()
    assert not server.running


def test_http_auto_prefers_httptools_when_installed() -> None:
    try:
        import httptools  # noqa: F401
    except ImportError:
        assert http_implementation("auto") == "h11"
    else:
        assert http_implementation("auto") == "httptools"
    assert http_implementation("h11") == "h11"


def test_the_test_openai_server_runs_in_the_background_server() -> None:
    with OpenAIServer(http="h11") as server:
        background = server._background
        assert isinstance(background, BackgroundServer)
        assert background.port == server.port and background.http == "h11"
        thread = background._thread
        assert thread is not None and thread.name == "openai-test-server" and thread.is_alive()
        response, body = get(server.url, "/v1/models")
        assert response.status == 200 and json.loads(body)["data"][0]["id"] == "test-model"
    assert server._background is None and not thread.is_alive()


def test_the_model_server_class_is_the_background_server() -> None:
    from medrewardbench.serve import BackgroundServer as ServeBackgroundServer

    assert ServeBackgroundServer is BackgroundServer


def test_no_other_module_runs_uvicorn_in_a_thread() -> None:
    package = Path(medrewardbench.__file__).parent
    starters = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if re.search(r"uvicorn\.Server\(", text := path.read_text(encoding="utf-8")) and re.search(r"Thread\(", text)
    )  # `annotate serve` runs uvicorn.Server in the foreground, on a socket it bound and checked first
    assert starters == ["utils/background_server.py"]
