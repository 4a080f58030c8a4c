"""Eval logs of the ``medrewardbench/pairwise`` task stored as runs in a results store.

A run is what ``eval`` would have made: the judge is ``inspect:MODEL``, its configuration (and so
its fingerprint) holds what in the log can change an output (:meth:`InspectLog.judge_config`), the
data is the task's data loaded again (``--data`` may point elsewhere, the selection stays the
task's), and every judgment is made by :func:`medrewardbench.evaluation.runner.to_stored` from a
result read as the ``api:`` judge reads an answer. So the run's cases, case hashes and judgment
fingerprints are those ``eval`` gives, and ``report``, ``leaderboard``, ``compare``, the human
ceiling and the paired tests read it like any other run.

Logs of one model with one configuration on one data selection make one run: an eval split over
several logs (``--limit``, ``eval-retry``) is imported by passing them together, and where two logs
hold the same case and order the later log's sample is kept. A sample that inspect ended with an
error is a failure (``inspect: <message>``); a case and order with no sample in any log is not
stored, as after an interrupted ``eval``. Importing the same log again writes nothing.

Nothing is written before every log has been checked against the data: a sample naming a case
the data lacks, or made on other content (its text or image changed), or a data set whose
fingerprint differs from the one the task recorded, is an error naming the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import Order
from medrewardbench.errors import DataError, DataProblem
from medrewardbench.evaluation.runner import plan_run, to_stored
from medrewardbench.evaluation.store import RunRecord, Store
from medrewardbench.integrations.inspect.logs import InspectLog, LoggedSample, log_files, read_log
from medrewardbench.integrations.inspect.task import parse_completion
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.models.identity import config_hash
from medrewardbench.prompts import PromptTemplate, load_template
from medrewardbench.utils.outdir import OnWait, OutputLock, check_output_dir, prepare_output_dir

__all__ = ["UUID_KEY", "ImportSummary", "InspectLogJudge", "check_against_data", "import_logs"]

UUID_KEY = "inspect_sample_uuid"
"""A judgment's ``extra`` entry: the inspect sample it came from (the same one is not written twice)."""


@dataclass(frozen=True)
class ImportSummary:
    """What importing one group of logs did.

    Attributes:
        run: the run the samples were stored in.
        logs: the log files of the run.
        written: judgments written (new, or replacing another sample's).
        unchanged: samples already stored from the same inspect sample.
        failed: of the run's samples, those that decided no dimension (an error or an unreadable output).
        not_in_logs: cases and orders of the data that no log holds (not stored).
    """

    run: RunRecord
    logs: tuple[Path, ...]
    written: int
    unchanged: int
    failed: int
    not_in_logs: int


class InspectLogJudge(Judge):
    """Answers each request with the logged sample of its case and order, read as ``eval`` reads an answer.

    Args:
        logs: logs of one judge configuration (:meth:`InspectLog.judge_config` equal), oldest first.
        template: the template they were rendered with.
    """

    kind = "inspect"
    batch_size = 256

    def __init__(self, logs: Sequence[InspectLog], template: PromptTemplate) -> None:
        if not logs:
            raise ValueError("InspectLogJudge needs at least one log")
        self.logs = tuple(logs)
        self.template = template
        self.spec = logs[0].judge_spec
        self._config = logs[0].judge_config()
        self._samples: dict[tuple[str, Order], tuple[InspectLog, LoggedSample]] = {}
        for log in self.logs:  # oldest first: a later log's sample replaces an earlier one's
            for sample in log.samples:
                self._samples[(sample.case_id, sample.order)] = (log, sample)

    def config(self) -> dict[str, Any]:
        """The log's model, endpoint, arguments, generate config, template, task version and inspect version."""
        return dict(self._config)

    def metadata(self) -> dict[str, Any]:
        """The logs, their eval ids and statuses, and the medrewardbench version that rendered the task."""
        return {
            "inspect_logs": [str(log.path) for log in self.logs],
            "inspect_eval_ids": [log.eval_id for log in self.logs],
            "inspect_status": [log.status for log in self.logs],
            "inspect_version": self.logs[-1].inspect_version,
            "task_medrewardbench_version": self.logs[-1].task_metadata.get("medrewardbench_version"),
        }

    @property
    def orders(self) -> tuple[Order, ...]:
        """Every order some log showed the cases in, original first."""
        shown = {order for log in self.logs for order in log.orders}
        return tuple(order for order in Order if order in shown)

    def sample(self, case_id: str, order: Order) -> LoggedSample | None:
        """The sample kept for a case and order, or None when no log holds one."""
        found = self._samples.get((case_id, order))
        return None if found is None else found[1]

    def samples(self) -> Iterable[tuple[InspectLog, LoggedSample]]:
        """Every kept sample with its log."""
        return self._samples.values()

    def result(self, request: JudgeRequest) -> JudgeResult:
        """The logged sample of a request as a judge result (a failure when it has no sample or an error)."""
        found = self._samples.get((request.case.case_id, request.order))
        if found is None:
            return JudgeResult.failed("no sample in the inspect logs")
        log, sample = found
        facts: dict[str, Any] = {**sample.facts, UUID_KEY: sample.uuid, "inspect_eval_id": log.eval_id}
        usage = {
            "latency_s": sample.latency_s,
            "prompt_tokens": sample.prompt_tokens,
            "completion_tokens": sample.completion_tokens,
        }
        if sample.error is not None:
            return JudgeResult.failed(f"inspect: {sample.error}", raw_output=sample.completion, extra=facts, **usage)
        parsed = parse_completion(
            sample.completion, sample.question, sample.response_a, sample.response_b, self.template
        )
        facts["parse_method"] = parsed.method
        if parsed.reason:
            facts["reason"] = parsed.reason
        return JudgeResult.from_parse(parsed, sample.completion, extra=facts, **usage)

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Replay the logged samples of a batch of requests."""
        return [self.result(request) for request in requests]


def _groups(logs: Sequence[InspectLog], data: str | None) -> list[tuple[tuple[Any, ...], list[InspectLog]]]:
    """Logs of one configuration on one data selection, oldest first within each group."""
    groups: dict[tuple[Any, ...], list[InspectLog]] = {}
    for log in sorted(logs, key=lambda entry: entry.created):
        source, organs, limit, external = log.data_selection()
        selection = (data or source, organs, limit, external)
        groups.setdefault((config_hash(log.judge_config()), selection), []).append(log)
    return [(key[1], members) for key, members in groups.items()]


def _template(logs: Sequence[InspectLog]) -> PromptTemplate:
    """The template of a group's logs, checked against the hash the task recorded."""
    template = load_template(logs[0].template)
    for log in logs:
        recorded = log.task_metadata.get("template_sha256")
        if recorded is not None and recorded != template.sha256:
            raise DataError(
                [
                    DataProblem(
                        str(log.path),
                        f"rendered with another text of the template {log.template!r} than the one found now",
                        field="template",
                    )
                ]
            )
    return template


def check_against_data(judge: InspectLogJudge, benchmark: Benchmark, source: str) -> int:
    """Check every kept sample against the data: its case exists and has the content it was judged on.

    Args:
        judge: the logs' judge.
        benchmark: the data loaded with the logs' selection.
        source: how the data was named (for messages).

    Returns:
        How many of the data's cases and orders no log holds.

    Raises:
        DataError: samples whose case the data lacks or whose case content differs, each naming its
            log and sample; or a data fingerprint other than the one the task recorded.
    """
    problems: list[DataProblem] = []
    in_data: set[str] = set()
    missing = 0
    for chunk in benchmark.iter_chunks():
        for case in chunk:
            in_data.add(case.case_id)
            for order in judge.orders:
                sample = judge.sample(case.case_id, order)
                if sample is None:
                    missing += 1
                elif sample.case_hash != case.content_hash():
                    problems.append(
                        DataProblem(
                            f"{_log_of(judge, sample)}, sample {sample.sample_id}",
                            f"the case was judged on other content than {source} holds now (its text or image "
                            "changed): import it with the data the eval was run on",
                            case_id=case.case_id,
                        )
                    )
    for log, sample in judge.samples():
        if sample.case_id not in in_data:
            problems.append(
                DataProblem(
                    f"{log.path}, sample {sample.sample_id}",
                    f"names a case that is not in {source} (with the task's organs and limit): "
                    "pass the data the eval was run on with --data",
                    case_id=sample.case_id,
                )
            )
    if problems:
        raise DataError(problems)
    data_hash = benchmark.data_hash()
    for log in judge.logs:
        recorded = log.task_metadata.get("medrewardbench_data_hash")
        if recorded is not None and recorded != data_hash:
            raise DataError(
                [
                    DataProblem(
                        str(log.path),
                        f"the task ran on data with fingerprint {str(recorded)[:12]}, but {source} gives "
                        f"{data_hash[:12]} (other cases or labels): import it with the data the eval was run on",
                    )
                ]
            )
    return missing


def _log_of(judge: InspectLogJudge, sample: LoggedSample) -> Path:
    for log, kept in judge.samples():
        if kept is sample:
            return log.path
    return judge.logs[-1].path


def _store_samples(judge: InspectLogJudge, benchmark: Benchmark, store: Store, run: RunRecord) -> tuple[int, int]:
    """Write the kept samples of the benchmark's cases; those stored from the same inspect sample are skipped."""
    written = unchanged = 0
    fingerprint = run.judge_fingerprint
    for chunk in benchmark.iter_chunks():
        requests = [
            JudgeRequest(case, order)
            for case in chunk
            for order in judge.orders
            if judge.sample(case.case_id, order) is not None
        ]
        if not requests:
            continue
        stored = {
            (j.case_id, j.order): j.extra.get(UUID_KEY)
            for j in store.iter_judgments_for_run(run, [case.case_id for case in chunk])
        }
        rows = []
        for request in requests:
            key = (request.case.case_id, request.order)
            sample = judge.sample(*key)
            if sample is not None and sample.uuid is not None and stored.get(key) == sample.uuid:
                unchanged += 1
                continue
            rows.append(to_stored(fingerprint, request, judge.result(request)))
        written += store.write_judgments(fingerprint, rows)
    return written, unchanged


def import_logs(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    *,
    data: str | None = None,
    wait: bool = False,
    on_wait: OnWait | None = None,
) -> list[ImportSummary]:
    """Store eval logs of the ``medrewardbench/pairwise`` task as runs.

    Args:
        paths: log files, or folders searched for the task's logs (other tasks' logs passed over).
        out_dir: the results directory (its store is created when missing).
        data: where the data is now, when not where the task read it (the task's organs and limit
            still apply).
        wait: when another process works in ``out_dir``, wait for it instead of failing.
        on_wait: told the other process's pid before waiting.

    Returns:
        One summary per run, in the order of the logs' first eval.

    Raises:
        DataError: a log cannot be read, is of another task or holds no samples, a folder holds no
            log of the task, or a log does not match the data (:func:`check_against_data`). Nothing
            is written then.
        TemplateError: the template the task used cannot be found.
        OutputDirError, OutputLockedError: the results directory cannot be used.
    """
    if not paths:
        raise ValueError("import_logs needs at least one log")
    logs = [read_log(path) for path in log_files(paths)]
    prepared = []
    for (source, organs, limit, external), members in _groups(logs, data):
        judge = InspectLogJudge(members, _template(members))
        benchmark = load_benchmark(source, organs=organs, limit=limit, allow_external_images=external)
        missing = check_against_data(judge, benchmark, source)
        prepared.append((judge, benchmark, missing))
    out = Path(out_dir)
    check_output_dir(out)
    prepare_output_dir(out)
    summaries = []
    with OutputLock(out, wait=wait, on_wait=on_wait), Store.in_dir(out) as store:
        for judge, benchmark, missing in prepared:
            store.set_label_provenance(benchmark.data_hash(), benchmark.labels)
            plan = plan_run(judge, benchmark, store, judge.orders)
            written, unchanged = _store_samples(judge, benchmark, store, plan.run)
            failed = sum(1 for j in store.iter_judgments_for_run(plan.run) if j.failure is not None)
            summaries.append(
                ImportSummary(
                    run=store.run(plan.run.run_id),
                    logs=tuple(log.path for log in judge.logs),
                    written=written,
                    unchanged=unchanged,
                    failed=failed,
                    not_in_logs=missing,
                )
            )
    return summaries
