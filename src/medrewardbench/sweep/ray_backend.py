"""``sweep --ray``: every judge entry becomes a Ray actor; the driver dispatches, collects and stores.

Each entry's :class:`JudgeWorker` actor asks the cluster for the entry's resources (``num_cpus``,
``num_gpus``, custom ones; a served entry asks for its ``serve.gpus``) and runs wherever the
cluster has them. When it starts, it opens the data from the same source as the driver (a Hub
data set or storage every node shares) and refuses to work when the data's fingerprint differs
from the driver's (:class:`~medrewardbench.sweep.errors.DataMismatchError`); it then reads the cases
a chunk at a time as the batches name them (:class:`CaseWindow`), as the local path does, so that
its memory does not grow with the data; then it builds the
judge (loading a model, or starting the entry's server on its node) and describes it: spec,
configuration, fingerprint, batch size, concurrency, node and pid.

The driver plans the run from that description (same fingerprint, same resume as without Ray) and
sends small batches of ``(case_id, order)`` keys, up to the judge's concurrency at a time; each
call returns the batch's results, which the driver maps and commits (:mod:`.dispatch`). The driver
stays the only writer of the store, so a kill loses only the batches in flight, on any node.

A worker that dies (killed, out of memory, node lost) is restarted by Ray (``ray.max_restarts``,
default 3); the batches it held are sent again (``ray.batch_retries`` times each) and nothing is
stored twice, since results are stored only when the driver receives them, once per request. The
API key variables the entries name are handed to their workers (the workers of a remote cluster
need them as much as the driver does); nothing else of the environment is.

Ray is optional: ``pip install 'medrewardbench[ray]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import tempfile
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.cases import Case
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import Order
from medrewardbench.errors import require
from medrewardbench.evaluation.runner import PLAN_CHUNK
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.sweep.config import DataSpec, JudgeEntry
from medrewardbench.sweep.dispatch import judge_safely
from medrewardbench.sweep.errors import DataMismatchError, EntryFailed, ServerError
from medrewardbench.sweep.progress import SweepProgress

log = logging.getLogger(__name__)

__all__ = [
    "CaseWindow",
    "DescribedJudge",
    "JudgeWorker",
    "RayBackend",
    "WorkerDescription",
    "WorkerPayload",
    "connect",
    "ray_module",
]


def ray_module() -> Any:
    """The ``ray`` package.

    Raises:
        MissingExtraError: it is not installed (the message names the ``ray`` extra).
    """
    return require("ray", "ray", "sweep --ray")


def connect(address: str) -> bool:
    """Connect this process to a Ray cluster, unless it is connected already.

    Args:
        address: ``auto`` (a cluster started on this machine with ``ray start --head``), ``local``
            (start a one-machine cluster inside this process), or a cluster address
            (``HOST:PORT`` or ``ray://HOST:PORT``).

    Returns:
        True when this call connected (the caller then disconnects), False when it already was.

    Raises:
        MissingExtraError: Ray is not installed.
        EntryFailed: no cluster answers at ``address``.
    """
    ray = ray_module()
    if ray.is_initialized():
        return False
    try:
        if address == "local":
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        hint = " (start one with `ray start --head`, or use --ray local)" if address == "auto" else ""
        raise EntryFailed(f"cannot connect to the Ray cluster at {address!r}{hint}: {exc}") from exc
    return True


def disconnect() -> None:
    """Leave the Ray cluster this process connected to."""
    with contextlib.suppress(Exception):
        ray_module().shutdown()


# ------------------------------------------------------------------------------------- worker


@dataclass(frozen=True)
class WorkerPayload:
    """What a worker needs to start: its entry, the data source and fingerprint, the key variables.

    Attributes:
        entry: the judge entry (spec, options, serve section).
        data: the data source and selection, as the driver loaded it.
        data_hash: the driver's data fingerprint.
        env: the API key variables the entry names, as the driver has them.
    """

    entry: JudgeEntry
    data: DataSpec
    data_hash: str
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerDescription:
    """A started worker's judge, as the driver plans with it."""

    spec: str
    config: dict[str, Any]
    metadata: dict[str, Any]
    fingerprint: str
    batch_size: int
    concurrency: int
    node: str
    pid: int


def _node_label() -> str:
    try:
        ip = ray_module().util.get_node_ip_address()
    except Exception:  # outside Ray (tests call the worker directly)
        ip = "127.0.0.1"
    return f"{socket.gethostname()}/{ip}"


class CaseWindow:
    """Cases by id, read from a (streaming) benchmark a chunk at a time as batches name them.

    The driver sends a run's requests in case order, so a forward reading finds each case in the
    chunk at hand or a few chunks on; the last ``keep`` chunks stay for the batches still in
    flight. A case behind them (a batch sent again after a restart) starts the reading over from
    the first case. Memory holds ``keep`` chunks, whatever the size of the data.

    Args:
        benchmark: the cases (hashed already, so that their content hashes are primed from it).
        chunk_size: cases read at a time.
        keep: chunks kept.
    """

    def __init__(self, benchmark: Benchmark, chunk_size: int = PLAN_CHUNK, keep: int = 4) -> None:
        self.benchmark = benchmark
        self.chunk_size = chunk_size
        self._chunks: deque[dict[str, Case]] = deque(maxlen=max(1, keep))
        self._reader: Iterator[list[Case]] | None = None
        self._position = 0
        self.readings = 0
        """How many times the data was read from its first case (for tests)."""

    def get(self, case_id: str) -> Case:
        """The case with this id.

        Raises:
            KeyError: no case of the data has it.
        """
        for kept in self._chunks:
            case = kept.get(case_id)
            if case is not None:
                return case
        for _ in range(2):  # on from the chunk at hand, then once from the first case
            if self._reader is None:
                self._reader = self.benchmark.iter_chunks(self.chunk_size)
                self._position = 0
                self.readings += 1
            for chunk in self._reader:
                start, self._position = self._position, self._position + len(chunk)
                for offset, read in enumerate(chunk):
                    known = self.benchmark.content_hash_at(start + offset)
                    if known is not None:
                        read.prime_content_hash(known)  # hashed with the data: the image is not read again
                found = {read.case_id: read for read in chunk}
                self._chunks.append(found)
                if case_id in found:
                    return found[case_id]
            self._reader = None
        raise KeyError(case_id)


class JudgeWorker:
    """The judge of one entry, inside a Ray actor (see the module docstring).

    Args:
        payload: the entry, the data source and fingerprint, the key variables.

    Raises:
        DataMismatchError: the data this worker loads is not the driver's.
        ServerStartError: the entry's server did not start.
    """

    def __init__(self, payload: WorkerPayload) -> None:
        from medrewardbench.data import load_benchmark
        from medrewardbench.judges.registry import build_judge
        from medrewardbench.sweep.served import ServedApiJudge, ServedModel

        os.environ.update(payload.env)
        entry = payload.entry
        data = payload.data
        benchmark = load_benchmark(
            data.source, organs=data.organs, limit=data.limit, allow_external_images=data.allow_external_images
        )
        found = benchmark.data_hash()
        self.node = _node_label()
        if found != payload.data_hash:
            raise DataMismatchError(
                f"{entry.name}: the worker on {self.node} loaded {data.source!r} with data fingerprint {found[:12]}, "
                f"the driver {payload.data_hash[:12]}; every node must read the same data (a Hub data set or "
                "shared storage)"
            )
        self.cases = CaseWindow(benchmark)
        self.server: ServedModel | None = None
        judge: Judge
        if entry.serve is not None:
            log_dir = Path(tempfile.mkdtemp(prefix="medrewardbench-server-"))
            self.server = ServedModel(entry.name, entry.serve, entry.serve.model or entry.model, log_dir / "server.log")
            served = ServedApiJudge(entry.model, entry.options, entry.serve)
            self.server.start()
            try:
                self.server.wait_ready()
            except BaseException:
                self.server.stop()
                raise
            served.bind(self.server)
            judge = served
        else:
            judge = build_judge(entry.spec, entry.options)
        self.judge = judge

    async def describe(self) -> WorkerDescription:
        """The judge as the driver plans with it."""
        return WorkerDescription(
            spec=self.judge.spec,
            config=self.judge.config(),
            metadata=self.judge.metadata(),
            fingerprint=self.judge.fingerprint(),
            batch_size=max(1, self.judge.batch_size),
            concurrency=max(1, self.judge.concurrency),
            node=self.node,
            pid=os.getpid(),
        )

    async def judge_keys(self, keys: Sequence[tuple[str, str]]) -> tuple[int, list[JudgeResult]]:
        """Judge a batch named by ``(case_id, order)`` keys.

        Returns:
            This worker's pid (a worker Ray restarted between two batches has a new one, and no call
            saw the old one die) and the results.

        Raises:
            ServerDiedError: the entry's server exited.
        """
        requests = [JudgeRequest(self.cases.get(case_id), Order(order)) for case_id, order in keys]
        return os.getpid(), await judge_safely(self.judge, requests)

    async def close(self) -> str | None:
        """Release the judge and stop the server; returns the server's log (for the results directory)."""
        with contextlib.suppress(Exception):
            await self.judge.aclose()
        if self.server is None:
            return None
        self.server.stop()
        try:
            return self.server.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None


class DescribedJudge(Judge):
    """A worker's judge as the driver sees it: enough to plan and record a run, nothing to judge with.

    Args:
        description: what the worker reported about its judge.
    """

    def __init__(self, description: WorkerDescription) -> None:
        self.description = description
        self.spec = description.spec
        self.batch_size = description.batch_size
        self.concurrency = description.concurrency

    def config(self) -> dict[str, Any]:
        """The worker judge's configuration."""
        return dict(self.description.config)

    def metadata(self) -> dict[str, Any]:
        """The worker judge's facts, plus the Ray node it runs on."""
        return {**self.description.metadata, "ray_node": self.description.node}

    def fingerprint(self) -> str:
        """The worker judge's fingerprint."""
        return self.description.fingerprint

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Never called: the judging happens in the worker.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError(f"{self.spec} judges in its Ray worker, not in the driver")


# ------------------------------------------------------------------------------------- driver


RESTART_WAIT_S = 600.0
"""How long the driver waits for Ray to bring a restarting worker back (it reloads data and judge)."""


def _errors(ray: Any) -> tuple[tuple[type[BaseException], ...], type[BaseException]]:
    exceptions = ray.exceptions
    died = tuple(
        getattr(exceptions, name)
        for name in ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError")
        if hasattr(exceptions, name)
    )
    return died, exceptions.RayTaskError


def _cause(exc: BaseException) -> BaseException:
    """The error a worker raised, out of Ray's wrapper."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAISED = re.compile(r"^(?:[\w.]+\.)?(\w+): (.*)$")


def _first_line(exc: BaseException) -> str:
    """What a worker raised, in one line: the exception line at the end of Ray's traceback text."""
    text = _ANSI.sub("", str(_cause(exc))).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith((" ", "\t"))]
    raised = [line for line in lines if _RAISED.match(line) and not line.startswith("Traceback")]
    if raised:
        return raised[-1][:600]
    return (lines[0] if lines else type(exc).__name__)[:600]


def _reraised(exc: BaseException) -> BaseException | None:
    """The sweep's own error a worker raised (a server that did not start, other data), rebuilt here."""
    cause = _cause(exc)
    if isinstance(cause, (ServerError, DataMismatchError, EntryFailed)):
        return cause
    match = _RAISED.match(_first_line(exc))
    if match is None:
        return None
    from medrewardbench.sweep import errors

    kind = getattr(errors, match.group(1), None)
    if isinstance(kind, type) and issubclass(kind, (ServerError, DataMismatchError, EntryFailed)):
        return kind(match.group(2))
    return None


class RayBackend:
    """One entry's Ray actor, as the dispatcher uses it (see the module docstring).

    Args:
        entry: the entry.
        payload: what the worker starts from.
        max_restarts: Ray's restarts of the worker.
        batch_retries: how often a batch is sent again after its worker died.
        progress: told of every worker start (and restart).
    """

    def __init__(
        self,
        entry: JudgeEntry,
        payload: WorkerPayload,
        *,
        max_restarts: int,
        batch_retries: int,
        progress: SweepProgress,
    ) -> None:
        self.ray = ray_module()
        self.entry = entry
        self.payload = payload
        self.max_restarts = max_restarts
        self.batch_retries = batch_retries
        self.progress = progress
        self.actor: Any = None
        self.description: WorkerDescription | None = None
        self.node: str | None = None
        self.batch_size = 1
        self.concurrency = 1
        self._pids: set[int] = set()
        self._died, self._task_error = _errors(self.ray)
        self._unavailable: type[BaseException] | None = getattr(self.ray.exceptions, "ActorUnavailableError", None)

    async def start(self) -> WorkerDescription:
        """Create the worker and wait until it describes its judge.

        Raises:
            EntryFailed: the worker could not start (its error is in the message).
            ServerError, DataMismatchError: as the worker raised them.
        """
        actor_class = self.ray.remote(JudgeWorker)
        self.actor = actor_class.options(
            **self.entry.ray_resources(),
            max_restarts=self.max_restarts,
            max_task_retries=0,
            name=None,
        ).remote(self.payload)
        return await self._describe()

    async def _describe(self) -> WorkerDescription:
        deadline = asyncio.get_running_loop().time() + RESTART_WAIT_S
        while True:
            try:
                description: WorkerDescription = await self.actor.describe.remote()
                break
            except (*self._died, self._task_error) as exc:
                # Ray answers "temporarily unavailable" while it restarts the worker: wait for it.
                if (
                    self._unavailable is not None
                    and isinstance(exc, self._unavailable)
                    and asyncio.get_running_loop().time() < deadline
                ):
                    await asyncio.sleep(0.5)
                    continue
                own = _reraised(exc)
                if own is not None:
                    raise own from None
                raise EntryFailed(f"{self.entry.name}: its Ray worker failed: {_first_line(exc)}") from exc
        self.description = description
        self.node = description.node
        self.batch_size = description.batch_size
        self.concurrency = description.concurrency
        if description.pid not in self._pids:
            self._pids.add(description.pid)
            self.progress.worker_started(self.entry.name, description.node, description.pid)
        return description

    async def judge(self, batch: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Send a batch to the worker; when the worker dies, wait for its restart and send it again.

        Raises:
            EntryFailed: the worker died more often than the batch may be retried, or cannot restart.
            ServerError: the entry's server exited.
        """
        keys = [(request.case.case_id, request.order.value) for request in batch]
        attempt = 0
        while True:
            try:
                pid, results = await self.actor.judge_keys.remote(keys)
                if pid not in self._pids:  # restarted between two batches: say so, as after a failed one
                    await self._describe()
                return list(results)
            except self._task_error as exc:
                own = _reraised(exc)
                if own is not None:
                    raise own from None
                raise EntryFailed(f"{self.entry.name}: its Ray worker failed: {_first_line(exc)}") from exc
            except self._died as exc:
                attempt += 1
                if attempt > self.batch_retries:
                    raise EntryFailed(
                        f"{self.entry.name}: its Ray worker died {attempt} times during one batch: {_first_line(exc)}"
                    ) from exc
                self.progress.note(
                    f"{self.entry.name}: its Ray worker on {self.node} died ({_first_line(exc)}); "
                    f"sending {len(keys)} request(s) again (attempt {attempt + 1})"
                )
                await asyncio.sleep(0.2 * attempt)
                await self._describe()  # waits for Ray's restart (or fails when it cannot restart)

    async def close(self) -> str | None:
        """Stop the worker (its server first); returns the server's log text, if any."""
        if self.actor is None:
            return None
        text: str | None = None
        try:
            text = await asyncio.wait_for(self.actor.close.remote(), timeout=120)
        except Exception as exc:  # a dead worker has nothing to close
            log.debug("closing the worker of %s: %s", self.entry.name, exc)
        with contextlib.suppress(Exception):
            self.ray.kill(self.actor, no_restart=True)
        self.actor = None
        return text

    def kill(self) -> None:
        """Stop the worker at once (after an interrupt)."""
        if self.actor is not None:
            with contextlib.suppress(Exception):
                self.ray.kill(self.actor, no_restart=True)
            self.actor = None
