"""Spread an API judge's requests over several client processes.

At high concurrency an API run is bound by the client's CPU, not by the server: the official
``openai`` client spends about a millisecond of CPU per request (building, sending and reading it),
so one Python process tops out near 700-800 requests per second however many are in flight. With
``--client-processes N`` each of N worker processes runs its own event loop and :class:`ApiJudge`
with a share of the concurrency; this process only hands requests out and collects results.

Workers are started with ``spawn`` and inherit the environment, so the API key reaches them the way
it reaches a single-process judge and is never pickled, logged or stored. Queues (with their feeder
threads) carry requests and results, so neither side blocks the other. A worker that dies fails its
requests with a reason instead of hanging the run; the store keeps everything finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import queue as queue_module
import threading
from collections.abc import Sequence
from typing import Any

from medrewardbench.judges.api.client import ApiJudge
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions

logger = logging.getLogger(__name__)


def _worker_main(model: str, options: JudgeOptions, requests: Any, results: Any) -> None:
    """A client process: judge every request that arrives, send each result back at once."""
    asyncio.run(_serve(ApiJudge(model, options), requests, results))


async def _serve(judge: ApiJudge, requests: Any, results: Any) -> None:
    """Read requests in the event loop; results leave through a sender thread.

    The thread means that a slow reader on the other side can never stop this process from taking
    in requests.
    """
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    outbox: queue_module.SimpleQueue[Any] = queue_module.SimpleQueue()

    def send_results() -> None:
        while True:
            item = outbox.get()
            if item is None:
                return
            try:
                results.send(item)
            except (BrokenPipeError, OSError):
                return

    sender = threading.Thread(target=send_results, name="mrb-api-results", daemon=True)
    sender.start()
    tasks: set[asyncio.Task[None]] = set()

    async def handle(request_id: int, request: JudgeRequest) -> None:
        try:
            [result] = await judge.judge_batch([request])
        except Exception as exc:  # judge_batch does not raise by contract; keep the run alive if it does
            result = JudgeResult.failed(f"client process error: {type(exc).__name__}: {exc}")
        outbox.put((request_id, result))

    def on_readable() -> None:
        while requests.poll():
            try:
                item = requests.recv()
            except (EOFError, OSError):
                item = None
            if item is None:
                loop.remove_reader(requests.fileno())
                if not done.done():
                    done.set_result(None)
                return
            task = asyncio.ensure_future(handle(*item))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    loop.add_reader(requests.fileno(), on_readable)
    try:
        await done
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        outbox.put(None)
        await asyncio.to_thread(sender.join, 5.0)
        await judge.aclose()


class ProcessPoolApiJudge(Judge):
    """An :class:`ApiJudge` whose requests run in ``processes`` client processes.

    Its fingerprint equals the single-process judge's: how requests are sent does not change what
    comes back, so a run can be resumed with or without the pool.

    Args:
        model: the model name the server knows.
        options: judge options, as for :class:`ApiJudge` (the concurrency is shared among the processes).
        processes: how many client processes (at least 1).
    """

    kind = "api"
    batch_size = 1
    needs_images = True

    def __init__(self, model: str, options: JudgeOptions, processes: int):
        # built here too: validates the model, key and template before any process starts
        self.reference = ApiJudge(model, options)
        self.spec = self.reference.spec
        self.concurrency = self.reference.concurrency
        self.processes = max(1, processes)
        per_worker = math.ceil(self.concurrency / self.processes)
        self.worker_options = options.with_changes(concurrency=per_worker).with_api(client_processes=1)
        self.model = model
        import multiprocessing  # here: most runs use one process, and the import costs ~10 ms at start-up

        self._context = multiprocessing.get_context("spawn")
        self._workers: list[Any] = []
        self._request_pipes: list[Any] = []
        self._result_pipes: list[Any] = []
        self._pending: dict[int, tuple[int, asyncio.Future[JudgeResult]]] = {}
        self._load: list[int] = []
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None

    def config(self) -> dict[str, Any]:
        """The configuration of an in-process API judge with the same settings (the processes change no output)."""
        return self.reference.config()

    def metadata(self) -> dict[str, Any]:
        """The in-process judge's facts, plus the number of client processes."""
        return {**self.reference.metadata(), "client_processes": self.processes}

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for index in range(self.processes):
            request_reader, request_writer = self._context.Pipe(duplex=False)
            result_reader, result_writer = self._context.Pipe(duplex=False)
            worker = self._context.Process(
                target=_worker_main,
                args=(self.model, self.worker_options, request_reader, result_writer),
                name=f"mrb-api-client-{index}",
                daemon=True,
            )
            worker.start()
            request_reader.close()
            result_writer.close()
            self._workers.append(worker)
            self._request_pipes.append(request_writer)
            self._result_pipes.append(result_reader)
            self._load.append(0)
            self._loop.add_reader(result_reader.fileno(), self._on_results, index)
        logger.info("%s: started %d client processes", self.spec, self.processes)

    def _on_results(self, index: int) -> None:
        pipe = self._result_pipes[index]
        try:
            while pipe.poll():
                request_id, result = pipe.recv()
                self._resolve(request_id, result)
        except (EOFError, OSError):
            self._worker_gone(index)

    def _resolve(self, request_id: int, result: JudgeResult) -> None:
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return
        worker, future = entry
        self._load[worker] -= 1
        if not future.done():
            future.set_result(result)

    def _worker_gone(self, index: int) -> None:
        assert self._loop is not None
        self._loop.remove_reader(self._result_pipes[index].fileno())
        worker = self._workers[index]
        worker.join(1.0)
        lost = [rid for rid, (w, _) in self._pending.items() if w == index]
        if lost:
            logger.error(
                "%s: client process %d exited (code %s) with %d requests in flight",
                self.spec,
                index,
                worker.exitcode,
                len(lost),
            )
        for request_id in lost:
            self._resolve(request_id, JudgeResult.failed(f"client process exited (code {worker.exitcode})"))
        self._load[index] = 1 << 30  # never chosen again

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Send each request to the least loaded client process (starting them on first use) and await the results."""
        if not self._workers:
            self._start()
        loop = asyncio.get_running_loop()
        futures = []
        for request in requests:
            future: asyncio.Future[JudgeResult] = loop.create_future()
            worker = min(range(self.processes), key=lambda i: self._load[i])
            if self._load[worker] >= 1 << 30 or not self._workers[worker].is_alive():
                future.set_result(JudgeResult.failed("every client process has exited"))
                futures.append(future)
                continue
            request_id = next(self._ids)
            self._load[worker] += 1
            self._pending[request_id] = (worker, future)
            try:
                self._request_pipes[worker].send((request_id, request))
            except (BrokenPipeError, OSError):
                self._worker_gone(worker)
            futures.append(future)
        return list(await asyncio.gather(*futures))

    async def aclose(self) -> None:
        """Ask the client processes to stop, wait for them (terminating any that hang) and close the pipes."""
        for pipe in self._request_pipes:
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.send(None)
        for index, worker in enumerate(self._workers):
            await asyncio.to_thread(worker.join, 10.0)
            if worker.is_alive():
                worker.terminate()
            if self._loop is not None:
                self._loop.remove_reader(self._result_pipes[index].fileno())
        for pipe in (*self._request_pipes, *self._result_pipes):
            pipe.close()
        await self.reference.aclose()
        self._workers.clear()
        self._request_pipes.clear()
        self._result_pipes.clear()
