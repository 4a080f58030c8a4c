"""``sweep --batch-api``: an ``api:`` entry's requests go through the provider's Batch API.

For an entry's pending requests the sweep:

1. writes the request file (``batches/RUN-SUBMISSION.jsonl`` beside the results), one line per
   request, ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}``, the body
   built by the same code as the live request's (:meth:`ApiJudge.batch_request`, which hands the
   judge's messages to :meth:`ChatClient.batch_request`);
2. records the submission in the store (table ``batch_api_batches``) *before* uploading, uploads
   the file (``POST /v1/files``, purpose ``batch``) and records the file id, creates the batch
   (``POST /v1/batches``, the submission id in its metadata) and records the batch id;
3. polls ``GET /v1/batches/ID`` (``batch_api.poll_interval``, default 30 s) until the batch ends,
   then downloads the output and error files and reads every answer through the same code as a
   live answer (:meth:`ApiJudge.result_from_response`: :meth:`ChatClient.read_response` reads the
   completion as a live call does, then the same parser; same failure reasons, usage kept; the batch
   id goes into the judgment's ``extra``);
4. sends the requests the batch reports as failed (or left unanswered: expired, cancelled) again
   as live requests (``batch_api.retry_failed: live``, the default), or stores them as failures
   (``store``), and marks the submission ``ingested``.

Nothing holds an entry's requests in memory: they are read from the plan a chunk of cases at a
time (:meth:`~medrewardbench.evaluation.runner.RunPlan.iter_requests`) and written to the request file line
by line; the file is uploaded from disk; the output and error files are downloaded to disk beside
it and read back one answer at a time, by the byte offset of each ``custom_id``, then removed (a
rerun downloads them again). Memory holds a submission's keys and offsets, not its bodies.

A process killed at any step loses nothing and submits nothing twice: a rerun finds the open
submissions in the store and polls their batches; a submission whose file was uploaded but whose
batch id was not recorded is matched to the provider's batches by its input file id before any
new batch is created; one whose upload may not have happened is uploaded again from its file
(an orphan file costs nothing; a second batch would).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.errors import require
from medrewardbench.evaluation.runner import to_stored
from medrewardbench.evaluation.store import BatchSubmission, Store
from medrewardbench.judges.api import PLACEHOLDER_API_KEY, ApiJudge, public_url
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.models.api.chat import CHAT_COMPLETIONS_URL
from medrewardbench.sweep.budget import Budget, EndpointLimits
from medrewardbench.sweep.config import BatchApiSettings
from medrewardbench.sweep.dispatch import EntryPlan, JudgeBackend, StoreWriter, dispatch
from medrewardbench.sweep.errors import EntryFailed
from medrewardbench.sweep.progress import EntryOutcome, SweepProgress

log = logging.getLogger(__name__)

__all__ = ["BATCH_ENDPOINT", "TERMINAL", "BatchRunner", "custom_id"]

BATCH_ENDPOINT = CHAT_COMPLETIONS_URL
TERMINAL = ("completed", "failed", "expired", "cancelled")
"""Batch statuses after which nothing more will be answered."""
_CLOSED = ("ingested", "abandoned")


def custom_id(index: int) -> str:
    """The ``custom_id`` of the request at ``index`` of a submission's file."""
    return f"mrb-{index}"


@dataclass
class _Answer:
    status_code: int
    body: Any
    error: str | None = None


def _record(line: bytes | str, number: int) -> tuple[str, dict[str, Any]] | None:
    """A result line's ``custom_id`` and record, or None (malformed lines are skipped, and logged)."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError:
        log.warning("batch result line %d is not JSON; skipped", number)
        return None
    if not isinstance(record, dict) or not isinstance(record.get("custom_id"), str):
        return None
    return record["custom_id"], record


def _answer(record: dict[str, Any]) -> _Answer:
    response = record.get("response")
    error = record.get("error")
    if isinstance(response, dict) and isinstance(response.get("status_code"), int):
        return _Answer(int(response["status_code"]), response.get("body"))
    message = error.get("message") if isinstance(error, dict) else error
    return _Answer(0, None, str(message or "no response"))


def _read_lines(text: str) -> dict[str, _Answer]:
    """custom_id -> answer, from an output or error file held in memory (the last line of an id wins)."""
    answers: dict[str, _Answer] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        found = _record(line, number)
        if found is not None:
            answers[found[0]] = _answer(found[1])
    return answers


class _AnswerFiles:
    """A batch's output and error files on disk, read one answer at a time by ``custom_id``.

    One pass over each file notes the byte offset of every id's line (the last line of an id wins,
    and an id in the output file wins over the error file); :meth:`get` reads that one line again.

    Args:
        paths: the downloaded files, output first (missing ones are skipped).
    """

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self._handles = [path.open("rb") for path in paths if path.is_file()]
        self._offsets: dict[str, tuple[int, int]] = {}
        for which, handle in enumerate(self._handles):
            found: dict[str, tuple[int, int]] = {}
            offset = 0
            for number, line in enumerate(handle, start=1):
                record = _record(line, number)
                if record is not None:
                    found[record[0]] = (which, offset)
                offset += len(line)
            for key, place in found.items():
                self._offsets.setdefault(key, place)

    def get(self, key: str) -> _Answer | None:
        """The answer to the request ``key``, or None when neither file has one."""
        place = self._offsets.get(key)
        if place is None:
            return None
        handle = self._handles[place[0]]
        handle.seek(place[1])
        record = _record(handle.readline(), 0)
        return None if record is None else _answer(record[1])

    def close(self) -> None:
        """Close the files."""
        for handle in self._handles:
            handle.close()


STORE_EVERY = 512
"""Answers (or unpreparable requests) stored at a time while a submission is written or read."""


class BatchRunner:
    """Runs one ``api:`` entry through the Batch API (see the module docstring).

    Args:
        entry: the entry and its plan.
        judge: the entry's API judge (builds bodies, reads answers).
        store: the results store.
        writer: the sweep's store writer.
        outcome: the entry's outcome, updated as answers are stored.
        progress: told of stored answers and status changes.
        settings: the sweep's ``batch_api`` section.
        out_dir: the results directory (request files go to ``batches/``).
        live: the entry's live backend, for failed requests.
        budget: the sweep's budget, if any.
        limits: the sweep's endpoint caps (for live retries).
    """

    def __init__(
        self,
        entry: EntryPlan,
        judge: ApiJudge,
        store: Store,
        writer: StoreWriter,
        outcome: EntryOutcome,
        progress: SweepProgress,
        settings: BatchApiSettings,
        out_dir: Path,
        live: JudgeBackend,
        *,
        budget: Budget | None = None,
        limits: EndpointLimits | None = None,
    ) -> None:
        self.entry = entry
        self.judge = judge
        self.store = store
        self.writer = writer
        self.outcome = outcome
        self.progress = progress
        self.settings = settings
        self.out_dir = out_dir
        self.live = live
        self.budget = budget
        self.limits = limits
        self.fingerprint = entry.plan.run.judge_fingerprint
        self._client: Any = None
        self._reserved: dict[str, float] = {}

    # ------------------------------------------------------------------------------- client
    def client(self) -> Any:
        """An async OpenAI client for the judge's endpoint and key (its own retries on)."""
        if self._client is None:
            openai: Any = require("openai", "api", "the Batch API")
            key = os.environ.get(self.judge.api_key_env, "").strip() or PLACEHOLDER_API_KEY
            self._client = openai.AsyncOpenAI(
                api_key=key, base_url=self.judge.base_url, max_retries=4, timeout=self.judge.settings.timeout_s
            )
        return self._client

    async def aclose(self) -> None:
        """Close the client (safe to call twice)."""
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None

    # ---------------------------------------------------------------------------------- run
    async def run(self) -> None:
        """Submit what no open submission covers, follow every open submission to its end, store.

        Raises:
            EntryFailed: the provider refused the file or the batch, or answered something unusable.
        """
        try:
            open_submissions = self.store.batch_submissions(self.fingerprint, open_only=True)
            covered = {(k[0], k[1]) for s in open_submissions for k in s.request_keys}
            self._reserve_open(open_submissions)
            fresh = (r for r in self._pending() if (r.case.case_id, r.order.value) not in covered)
            submissions = list(open_submissions)
            while True:
                submission, more = await self._submit(fresh)
                if submission is not None:
                    submissions.append(submission)
                if not more:
                    break
            await asyncio.gather(*(self._follow(s) for s in submissions))
        except Exception as exc:
            openai: Any = require("openai", "api", "the Batch API")
            if isinstance(exc, openai.OpenAIError):
                raise EntryFailed(f"{self.entry.name}: the Batch API failed: {type(exc).__name__}: {exc}") from exc
            raise
        finally:
            await self.aclose()

    def _pending(self) -> Iterator[JudgeRequest]:
        """The entry's requests still to judge, read from its plan a chunk of cases at a time."""
        return self.entry.plan.iter_requests(self.store)

    def _reserve_open(self, submissions: Sequence[BatchSubmission]) -> None:
        """Submissions of an earlier process will cost money too: hold their estimate in the budget."""
        if self.budget is None or self.entry.estimator is None or not submissions:
            return
        owner = {(k[0], k[1]): s.submission_id for s in submissions for k in s.request_keys}
        estimates = dict.fromkeys((s.submission_id for s in submissions), 0.0)
        for request in self._pending():
            submission_id = owner.get((request.case.case_id, request.order.value))
            if submission_id is not None:
                estimates[submission_id] += self.entry.estimator.per_request(request, batch=True)
        for submission_id, estimate in estimates.items():
            self.budget.reserved += estimate
            self._reserved[submission_id] = estimate

    def _fits(self, request: JudgeRequest, reserved: float) -> float | None:
        """The estimated cost of one more request when the budget holds it beside ``reserved``, else None."""
        if self.budget is None or self.entry.estimator is None:
            return 0.0
        cost = self.entry.estimator.per_request(request, batch=True)
        if self.budget.spent + self.budget.reserved + reserved + cost > self.budget.limit + 1e-12:
            return None
        return cost

    async def _submit(self, fresh: Iterator[JudgeRequest]) -> tuple[BatchSubmission | None, bool]:
        """Write the next request file from ``fresh`` (at most ``max_requests``, within the budget) and submit it.

        Returns:
            The submission (None when no request was taken), and whether ``fresh`` may hold more.
        """
        run = self.entry.plan.run
        submission_id = uuid.uuid4().hex[:16]
        folder = self.out_dir / "batches"
        path = folder / f"{run.run_id}-{submission_id}.jsonl"
        partial = path.with_name(path.name + ".part")
        keys: list[tuple[str, str, str]] = []
        unprepared: list[tuple[JudgeRequest, JudgeResult]] = []
        taken = 0
        reserved = 0.0
        more = True
        folder.mkdir(parents=True, exist_ok=True)
        with partial.open("w", encoding="utf-8") as handle:
            for request in fresh:
                cost = self._fits(request, reserved)
                if cost is None:
                    assert self.budget is not None
                    self.budget.stopped.setdefault(self.entry.name, 1 + sum(1 for _ in fresh))
                    self.outcome.status = "budget"
                    more = False
                    break
                reserved += cost
                taken += 1
                try:
                    line = await self.judge.batch_request(custom_id(len(keys)), request)
                except Exception as exc:  # an unreadable image fails this request only, as it would live
                    reason = f"could not prepare the request: {type(exc).__name__}: {exc}"
                    unprepared.append((request, JudgeResult.failed(self.judge.chat.reason(reason))))
                    if len(unprepared) >= STORE_EVERY:
                        await self._store(unprepared)
                        unprepared = []
                else:
                    handle.write(json.dumps(line, ensure_ascii=False) + "\n")
                    keys.append((request.case.case_id, request.order.value, request.case.content_hash()))
                if taken >= self.settings.max_requests:
                    break
            else:
                more = False
            if not keys:
                handle.write("\n")
        if self.budget is not None:
            self.budget.reserved += reserved
        await self._store(unprepared)
        if not taken:
            partial.unlink(missing_ok=True)
            return None, False
        os.replace(partial, path)
        submission = BatchSubmission(
            submission_id=submission_id,
            judge_fingerprint=self.fingerprint,
            run_id=run.run_id,
            base_url=public_url(self.judge.base_url),
            request_file=str(path),
            request_keys=tuple(keys),
            input_file_id=None,
            batch_id=None,
            status="uploading",
        )
        self.store.add_batch_submission(submission)
        self._reserved[submission_id] = reserved
        return await self._upload_and_create(submission, resuming=False), more

    async def _upload_and_create(self, submission: BatchSubmission, *, resuming: bool = True) -> BatchSubmission:
        """Upload the submission's file (unless uploaded) and create its batch (unless created).

        Only a resumed submission whose file was uploaded but whose batch id was never recorded (a
        process killed between the two) can have a batch at the provider already: only then is the
        provider's batch list searched for it, not before every new batch.
        """
        client = self.client()
        # a file uploaded just now has no batch anywhere: only a file uploaded by an earlier process may
        uploaded_before = resuming and submission.input_file_id is not None
        if submission.input_file_id is None:
            path = Path(submission.request_file)
            if not path.is_file():
                self.store.update_batch_submission(submission.submission_id, status="abandoned")
                raise EntryFailed(
                    f"{self.entry.name}: the request file {path} of an unfinished submission is gone; "
                    "rerun to submit its requests again"
                )
            with path.open("rb") as handle:  # read from disk as it is sent, not held whole
                uploaded = await client.files.create(file=(path.name, handle), purpose="batch")
            self.store.update_batch_submission(submission.submission_id, input_file_id=uploaded.id, status="uploaded")
            submission = _with(submission, input_file_id=uploaded.id, status="uploaded")
            self.progress.note(f"{self.entry.name}: uploaded {path.name} ({len(submission.request_keys)} requests)")
        if submission.batch_id is None:
            existing = await self._find_batch(submission.input_file_id or "") if uploaded_before else None
            if existing is not None:
                self.progress.note(f"{self.entry.name}: found batch {existing.id} of an earlier run; not resubmitting")
                batch = existing
            else:
                batch = await client.batches.create(
                    input_file_id=submission.input_file_id,
                    endpoint=BATCH_ENDPOINT,
                    completion_window=self.settings.completion_window,
                    metadata={"medrewardbench_submission": submission.submission_id},
                )
                self.progress.note(f"{self.entry.name}: created batch {batch.id}")
            self.store.update_batch_submission(submission.submission_id, batch_id=batch.id, status=batch.status)
            submission = _with(submission, batch_id=batch.id, status=batch.status)
        return submission

    async def _find_batch(self, input_file_id: str) -> Any:
        """A batch the provider already has for this uploaded file (created by a process that was killed)."""
        async for batch in self.client().batches.list(limit=100):
            if batch.input_file_id == input_file_id:
                return batch
        return None

    async def _follow(self, submission: BatchSubmission) -> None:
        if submission.batch_id is None:
            submission = await self._upload_and_create(submission)
        client = self.client()
        status = submission.status
        while True:
            batch = await client.batches.retrieve(submission.batch_id)
            if batch.status != status:
                status = batch.status
                self.store.update_batch_submission(submission.submission_id, status=status)
                counts = batch.request_counts
                done = "" if counts is None else f" ({counts.completed} done, {counts.failed} failed of {counts.total})"
                self.progress.note(f"{self.entry.name}: batch {batch.id} {status}{done}")
            if status in TERMINAL:
                break
            await asyncio.sleep(self.settings.poll_interval_s)
        await self._ingest(_with(submission, status=status), batch)

    async def _download(self, file_id: str | None, path: Path) -> Path:
        """Download a file to ``path`` as it arrives (an empty file for no id)."""
        partial = path.with_name(path.name + ".part")
        with partial.open("wb") as handle:
            if file_id:
                async with self.client().files.with_streaming_response.content(file_id) as response:
                    async for chunk in response.iter_bytes():
                        handle.write(chunk)
        os.replace(partial, path)
        return path

    async def _ingest(self, submission: BatchSubmission, batch: Any) -> None:
        stem = Path(submission.request_file).with_suffix("")
        files = _AnswerFiles(
            [
                await self._download(batch.output_file_id, stem.with_name(stem.name + ".output.jsonl")),
                await self._download(batch.error_file_id, stem.with_name(stem.name + ".errors.jsonl")),
            ]
        )
        try:
            await self._ingest_answers(submission, batch, files)
        finally:
            files.close()
            for path in files.paths:  # downloaded again by a rerun: the results directory keeps none
                path.unlink(missing_ok=True)

    async def _ingest_answers(self, submission: BatchSubmission, batch: Any, answers: _AnswerFiles) -> None:
        batch_id = str(batch.id)
        index_of = {
            (case_id, order): (index, case_hash)
            for index, (case_id, order, case_hash) in enumerate(submission.request_keys)
        }
        stored: list[tuple[JudgeRequest, JudgeResult]] = []
        failed: list[tuple[JudgeRequest, JudgeResult]] = []
        actual = 0.0
        n_stored = 0
        for request in self._pending():
            place = index_of.get((request.case.case_id, request.order.value))
            if place is None:
                continue  # not in this submission, or judged since
            index, case_hash = place
            if request.case.content_hash() != case_hash:
                continue  # the case changed: this answer is for other content
            answer = answers.get(custom_id(index))
            if answer is not None and answer.status_code == 200:
                stored.append(
                    (request, self.judge.result_from_response(request, 200, answer.body, extra={"batch_id": batch_id}))
                )
                if len(stored) >= STORE_EVERY:
                    actual += self._cost(stored)
                    n_stored += len(stored)
                    await self._store(stored)
                    stored = []
                continue
            if answer is None:
                result = JudgeResult.failed(f"batch {batch.status}: no answer", extra={"batch_id": batch_id})
            elif answer.status_code == 0:
                result = JudgeResult.failed(f"batch error: {answer.error}"[:300], extra={"batch_id": batch_id})
            else:
                result = self.judge.result_from_response(
                    request, answer.status_code, answer.body, extra={"batch_id": batch_id}
                )
            failed.append((request, result))
        actual += self._cost(stored)
        n_stored += len(stored)
        await self._store(stored)
        if self.budget is not None:
            self.budget.settle(self._reserved.pop(submission.submission_id, 0.0), actual)
        if self.entry.estimator is not None and n_stored:
            self.entry.estimator.observe(actual, n_stored)
        if failed:
            if self.settings.retry_failed == "live":
                self.progress.note(
                    f"{self.entry.name}: batch {batch_id} left {len(failed)} request(s) unanswered or failed; "
                    "sending them live"
                )
                await dispatch(
                    self.entry,
                    self.live,
                    self.writer,
                    self.outcome,
                    self.progress,
                    budget=self.budget,
                    limits=self.limits,
                    requests=[request for request, _ in failed],
                )
            else:
                await self._store(failed)
        self.store.update_batch_submission(
            submission.submission_id,
            status="ingested",
            output_file_id=batch.output_file_id,
            error_file_id=batch.error_file_id,
        )
        if batch_id not in self.outcome.batch_ids:
            self.outcome.batch_ids.append(batch_id)

    def _cost(self, pairs: Sequence[tuple[JudgeRequest, JudgeResult]]) -> float:
        """What the answered requests cost at batch prices (0 without a price)."""
        price = self.entry.price
        if price is None:
            return 0.0
        return sum(price.cost(r.prompt_tokens or 0, r.completion_tokens or 0, batch=True) for _, r in pairs)

    async def _store(self, pairs: Sequence[tuple[JudgeRequest, JudgeResult]]) -> None:
        if not pairs:
            return
        rows = [to_stored(self.fingerprint, request, result) for request, result in pairs]
        await self.writer.add_judged(self.fingerprint, rows)
        self.writer.flush()
        self.outcome.judged += len(rows)
        self.outcome.failed += sum(1 for row in rows if row.failure is not None)
        self.outcome.nodes["batch-api"] = self.outcome.nodes.get("batch-api", 0) + len(rows)
        self.progress.advance(self.entry.name, len(rows), "batch-api")


def _with(submission: BatchSubmission, **changes: Any) -> BatchSubmission:
    from dataclasses import replace

    return replace(submission, **changes)
