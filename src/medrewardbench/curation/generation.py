"""Answering questions with generators, resumably: what the filter, the grader and the response pool share.

Answers are keyed like judgments: by the generator's fingerprint (spec, model, template hash,
sampling, seed) and the question's content hash. A step asks only for what the store lacks (or,
with ``retry_failures``, what failed before), streams the questions from the store chunk by chunk,
and stores every batch as it finishes (:mod:`medrewardbench.curation.dispatch`). Ctrl-C stops it with
:class:`~medrewardbench.errors.EvaluationInterrupted` after everything finished is stored; the same
command resumes. ``fresh`` forgets a generator configuration's stored answers first.

The next chunks of questions (their stored answers and images too) are read ahead in a thread of
their own, on a second, read-only connection to the store (:class:`ReadAhead`), so that the event
loop never stalls on a read while requests are in flight; answers are written on the loop, one
transaction for the batches that finish in the same turn.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from medrewardbench.curation.dispatch import dispatch
from medrewardbench.curation.generators import ANSWER_FORMATS, GenerationRequest, GenerationResult, TextGenerator
from medrewardbench.curation.store import BuildStore, StoredGeneration, StoredQuestion
from medrewardbench.errors import EvaluationInterrupted
from medrewardbench.utils.gcpolicy import long_run

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = [
    "READ_AHEAD_CHUNKS",
    "GenerationProgress",
    "GenerationSummary",
    "ReadAhead",
    "answer_request",
    "answer_requests",
    "run_answers",
    "run_requests",
]


@dataclass(frozen=True)
class GenerationSummary:
    """What one generator did in one step.

    Attributes:
        spec: the generator's spec.
        fingerprint: its fingerprint.
        total: requests the step covers (distinct question contents, or gradings).
        reused: found in the store.
        generated: answered now.
        failed: failed now.
        stored_failures: failures among everything stored for the step (reused ones included).
        wall_s: seconds spent answering.
        reasons: the most common failure reasons stored, with counts.
    """

    spec: str
    fingerprint: str
    total: int
    reused: int
    generated: int
    failed: int
    stored_failures: int
    wall_s: float
    reasons: tuple[tuple[str, int], ...] = field(default_factory=tuple)

    @property
    def all_failed(self) -> bool:
        """True when the step covers requests and every stored one of them failed."""
        stored = self.reused + self.generated
        return stored > 0 and self.stored_failures >= stored


class GenerationProgress:
    """Receives a step's progress; the command line shows bars, tests keep lists."""

    def start(self, judge_spec: str, total: int, already_done: int) -> None:
        """A generator begins: ``total`` requests, ``already_done`` of them found in the store."""

    def advance(self, n: int) -> None:
        """``n`` more requests finished."""

    def finish_generation(self, summary: GenerationSummary) -> None:
        """A generator ended."""

    def stage(self, text: str) -> None:
        """A step that may take a while before any request is sent."""


def answer_request(question: StoredQuestion, image: object) -> GenerationRequest:
    """The request that asks a generator one question with the answer prompt's placeholders.

    Args:
        question: the question.
        image: its image reference.

    Returns:
        The request, keyed by the question's content hash.
    """
    from medrewardbench.cases import ImageRef

    ref = image if isinstance(image, ImageRef) else None
    values = {"question": question.question, "answer_format": ANSWER_FORMATS[question.answer_type]}
    return GenerationRequest(key=question.content_hash, values=values, image=ref)


def answer_requests(
    store: BuildStore,
    generator_fp: str,
    *,
    kept_only: bool,
    with_reference: bool,
    retry_failures: bool,
) -> Iterator[GenerationRequest]:
    """The questions a generator has not answered yet, chunk by chunk from the store.

    Args:
        store: the project's store.
        generator_fp: the generator's fingerprint.
        kept_only: only the questions the difficulty filter kept.
        with_reference: only questions with a reference answer.
        retry_failures: ask again where the stored answer is a failure.

    Yields:
        One request per question content missing from the store (a content shared by several
        questions is asked once per chunk).
    """
    for chunk in answer_chunks(
        store, generator_fp, kept_only=kept_only, with_reference=with_reference, retry_failures=retry_failures
    ):
        yield from chunk


def answer_chunks(
    store: BuildStore,
    generator_fp: str,
    *,
    kept_only: bool,
    with_reference: bool,
    retry_failures: bool,
) -> Iterator[list[GenerationRequest]]:
    """:func:`answer_requests` a chunk of questions at a time (chunks with nothing to ask are skipped)."""
    for chunk in store.iter_questions(kept_only=kept_only, with_reference=with_reference):
        stored = store.generations(generator_fp, (q.content_hash for q in chunk))
        todo: dict[str, StoredQuestion] = {}
        for question in chunk:
            done = stored.get(question.content_hash)
            if done is not None and (done.failure is None or not retry_failures):
                continue
            todo.setdefault(question.content_hash, question)
        if not todo:
            continue
        images = store.images(todo.values())
        yield [answer_request(question, images[question.qid]) for question in todo.values()]


READ_AHEAD_CHUNKS = 2
"""Chunks of requests :class:`ReadAhead` holds ready at most (each at most a store chunk of questions)."""

_END = object()


class _Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class ReadAhead(Generic[T]):
    """The items of a stream of chunks, the chunks made in a thread of their own, a few ahead of the reader.

    The thread runs ``produce()`` (which opens whatever it reads from, a store connection say, in
    that thread, and closes it when it ends) and keeps at most ``depth`` chunks ready. Iterating
    yields their items in order; an exception of ``produce`` is raised where its chunk would have
    come. :meth:`close` (or leaving the ``with`` block) stops the thread, closes ``produce``'s
    generator in its thread and waits for it.

    Args:
        produce: makes the chunks; called once, in the thread.
        depth: chunks held ready at most.
        name: the thread's name.
    """

    def __init__(
        self, produce: Callable[[], Iterator[Sequence[T]]], depth: int = READ_AHEAD_CHUNKS, *, name: str
    ) -> None:
        self._chunks: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._produce = produce
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._items = self._iterate()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._chunks.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            chunks = self._produce()
            try:
                for chunk in chunks:
                    if not self._put(chunk):
                        return
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        except BaseException as exc:  # handed to the reader, raised where its chunk would have come
            self._put(_Raised(exc))
            return
        self._put(_END)

    def _iterate(self) -> Generator[T, None, None]:
        while True:
            chunk = self._chunks.get()
            if chunk is _END:
                return
            if isinstance(chunk, _Raised):
                raise chunk.error
            yield from cast("Sequence[T]", chunk)

    def __iter__(self) -> Iterator[T]:
        return self._items

    def __next__(self) -> T:
        return next(self._items)

    def close(self) -> None:
        """Stop reading ahead and wait for the thread (it closes what it opened)."""
        self._stop.set()
        self._items.close()
        while True:  # a thread waiting to hand over a chunk sees the stop at once
            try:
                self._chunks.get_nowait()
            except queue.Empty:
                break
        self._thread.join()

    def __enter__(self) -> ReadAhead[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stored_generation(generator_fp: str, request: GenerationRequest, result: GenerationResult) -> StoredGeneration:
    return StoredGeneration(
        generator_fp=generator_fp,
        question_hash=request.key,
        text=result.text,
        failure=result.failure,
        finish_reason=result.finish_reason,
        latency_s=result.latency_s,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        extra=dict(result.extra),
    )


def run_requests(
    generator: TextGenerator,
    requests: Iterator[GenerationRequest],
    write: Callable[[Sequence[tuple[GenerationRequest, GenerationResult]]], None],
    *,
    total: int,
    reused: int,
    progress: GenerationProgress,
    count_stored: Callable[[], int],
) -> tuple[int, int, float]:
    """Dispatch one generator's requests, turning Ctrl-C into a resumable interruption.

    Args:
        generator: the model.
        requests: the lazy stream of requests still to answer.
        write: stores finished answers.
        total: requests the step covers, for the progress bar and the interruption message.
        reused: how many of them the store had.
        progress: progress receiver.
        count_stored: how many of the step's requests the store holds (after an interruption).

    Returns:
        ``(generated, failed, wall_s)``.

    Raises:
        EvaluationInterrupted: Ctrl-C, after storing what finished (the message says how many).
    """
    progress.start(generator.spec, total, reused)

    async def main() -> tuple[int, int, float]:
        try:
            summary = await dispatch(generator, requests, write, progress=progress.advance)
        finally:
            await generator.aclose()
        return summary.done, summary.failed, summary.wall_s

    try:
        with long_run():  # the requests: fewer garbage collections, none over what exists already
            return asyncio.run(main())
    except KeyboardInterrupt:
        raise EvaluationInterrupted(count_stored(), total) from None


def run_answers(
    store: BuildStore,
    generator: TextGenerator,
    *,
    kept_only: bool,
    with_reference: bool,
    fresh: bool,
    retry_failures: bool,
    progress: GenerationProgress,
) -> GenerationSummary:
    """Have one generator answer every question of a step that the store has no answer to.

    Args:
        store: the project's store (the caller holds the project's lock).
        generator: the model, with its answer prompt.
        kept_only: only the questions the difficulty filter kept (the response pool).
        with_reference: only questions with a reference answer (the filter).
        fresh: forget this configuration's stored answers first.
        retry_failures: answer again where the stored answer is a failure.
        progress: progress receiver.

    Returns:
        What the generator did.

    Raises:
        EvaluationInterrupted: Ctrl-C, after storing what finished.
    """
    fp = generator.fingerprint()
    store.register_generator(fp, generator.spec, generator.config(), generator.metadata())
    if fresh:
        removed = store.delete_generations(fp)
        log.info("fresh: removed %d stored answers of %s", removed, generator.spec)
    total = store.distinct_hashes(kept_only=kept_only, with_reference=with_reference)
    stored, stored_failed = store.generation_counts(fp, kept_only=kept_only, with_reference=with_reference)
    reused = stored - (stored_failed if retry_failures else 0)

    def write(rows: Sequence[tuple[GenerationRequest, GenerationResult]]) -> None:
        store.write_generations(_stored_generation(fp, request, result) for request, result in rows)

    def count_stored() -> int:
        return store.generation_counts(fp, kept_only=kept_only, with_reference=with_reference)[0]

    def read_chunks() -> Iterator[list[GenerationRequest]]:
        # in the read-ahead thread: its own read-only connection, closed when the stream ends or stops
        with store.reader() as reader:
            yield from answer_chunks(
                reader, fp, kept_only=kept_only, with_reference=with_reference, retry_failures=retry_failures
            )

    with ReadAhead(read_chunks, name=f"read-ahead {generator.spec}") as requests:
        generated, failed, wall = run_requests(
            generator, requests, write, total=total, reused=reused, progress=progress, count_stored=count_stored
        )
    _, failures = store.generation_counts(fp, kept_only=kept_only, with_reference=with_reference)
    summary = GenerationSummary(
        spec=generator.spec,
        fingerprint=fp,
        total=total,
        reused=reused,
        generated=generated,
        failed=failed,
        stored_failures=failures,
        wall_s=wall,
        reasons=tuple(store.failure_reasons(fp)),
    )
    progress.finish_generation(summary)
    return summary
