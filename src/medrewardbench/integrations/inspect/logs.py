"""Eval logs of the ``medrewardbench/pairwise`` task, read into plain records and checked.

:func:`read_log` reads a log's header and streams its samples, leaving out the messages, events
and image (only the completion, the sample's metadata, its error, usage and timing are kept), so a
log of any size is read in little memory. What a judge configuration is (:meth:`InspectLog.judge_config`)
comes from the header: the model, its base URL and arguments, the generate config, the template
and the task's version, and inspect's version.

Every problem is a :class:`~medrewardbench.errors.DataError` naming the log file and, for a sample,
its id and the field: a log of another task, a log without samples, a sample without the task's
metadata, several epochs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import Order
from medrewardbench.errors import DataError, DataProblem, MissingExtraError
from medrewardbench.integrations.inspect.task import TASK_NAME
from medrewardbench.models.api.chat import public_url

try:
    from inspect_ai.log import EvalLog, EvalSample, list_eval_logs, read_eval_log, read_eval_log_samples
except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
    raise MissingExtraError("inspect_ai", "inspect", "medrewardbench import-inspect") from exc

__all__ = ["InspectLog", "LoggedSample", "log_files", "read_log"]

_SKIPPED_FIELDS = {"messages", "events", "store", "attachments", "timelines"}
"""Sample fields never read: the transcript and the attachments (the image) are not needed to import."""

_SECRET_WORDS = ("key", "token", "secret", "password", "authorization", "credential")


@dataclass(frozen=True)
class LoggedSample:
    """What a log says about one case shown in one order.

    Attributes:
        case_id: the case.
        order: the order it was shown in.
        case_hash: the content hash of the case when the task rendered it.
        completion: the model's text (None when the sample ended without output).
        error: why inspect ended the sample with an error, or None.
        uuid: inspect's id of this sample run (kept with the judgment; re-importing it writes nothing).
        sample_id: the sample's id in the log.
        question, response_a, response_b: the texts the model was shown (quoted to the parser).
        prompt_tokens, completion_tokens: the usage inspect recorded.
        latency_s: the sample's working time.
        facts: stop reason, output model, limit hit: kept with the judgment.
    """

    case_id: str
    order: Order
    case_hash: str
    completion: str | None
    error: str | None
    uuid: str | None
    sample_id: str
    question: str
    response_a: str
    response_b: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class InspectLog:
    """One eval log of the task: the header facts medrewardbench needs, and its samples.

    Attributes:
        path: the log file.
        eval_id: inspect's id of the eval.
        created: when the eval started (ISO 8601).
        status: ``success``, ``error``, ``cancelled`` or ``started``.
        model: the model as inspect names it (``openai/gpt-4o``).
        model_base_url: its endpoint (no credentials).
        model_args: the model's arguments, without anything that looks like a credential.
        generate_config: the generate settings that were set (None values left out).
        task_version: the task's version.
        task_args: the task's arguments (data, organs, limit, orders, template).
        inspect_version: inspect_ai's version.
        task_metadata: what the task recorded (data fingerprint, template hash, medrewardbench version).
        samples: the samples, in log order.
    """

    path: Path
    eval_id: str
    created: str
    status: str
    model: str
    model_base_url: str | None
    model_args: Mapping[str, Any]
    generate_config: Mapping[str, Any]
    task_version: int | str
    task_args: Mapping[str, Any]
    inspect_version: str
    task_metadata: Mapping[str, Any]
    samples: tuple[LoggedSample, ...]

    @property
    def orders(self) -> tuple[Order, ...]:
        """The orders the task showed each case in."""
        return Order.parse_selection(str(self.task_args.get("orders") or "both"))

    @property
    def template(self) -> str:
        """The template the task rendered (a shipped name or a file path)."""
        return str(self.task_args.get("template") or "pairwise")

    @property
    def judge_spec(self) -> str:
        """The judge as medrewardbench names it: ``inspect:`` and inspect's model name."""
        return f"inspect:{self.model}"

    def judge_config(self) -> dict[str, Any]:
        """Everything in the log that can change the model's outputs (the run's fingerprint is its hash).

        Returns:
            ``spec``, ``kind``, ``model``, ``base_url``, ``model_args``, ``template``,
            ``template_sha256``, ``task``, ``task_version``, ``generate_config``, the sampling
            settings the report shows (``temperature``, ``top_p``, ``max_tokens``, ``seed``) and
            ``inspect_version``.
        """
        config = self.generate_config
        return {
            "spec": self.judge_spec,
            "kind": "inspect",
            "model": self.model,
            "base_url": self.model_base_url,
            "model_args": dict(self.model_args),
            "template": self.template,
            "template_sha256": self.task_metadata.get("template_sha256"),
            "task": TASK_NAME,
            "task_version": self.task_version,
            "generate_config": dict(config),
            "temperature": config.get("temperature"),
            "top_p": config.get("top_p"),
            "max_tokens": config.get("max_tokens"),
            "seed": config.get("seed"),
            "inspect_version": self.inspect_version,
        }

    def data_selection(self) -> tuple[str, tuple[str, ...] | None, int | None, bool]:
        """The task's data arguments: source, organs, limit and whether external images were allowed."""
        organs = self.task_args.get("organs")
        if isinstance(organs, str):
            organs = [o.strip() for o in organs.split(",") if o.strip()]
        limit = self.task_args.get("limit")
        return (
            str(self.task_args.get("data") or "demo"),
            tuple(str(o) for o in organs) if organs else None,
            None if limit is None else int(limit),
            bool(self.task_args.get("allow_external_images", False)),
        )


def _problem(path: Path, message: str, *, sample: str | None = None, field: str | None = None) -> DataError:
    where = str(path) if sample is None else f"{path}, sample {sample}"
    return DataError([DataProblem(where, message, field=field)])


def _safe_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Model arguments fit to record: no credentials, only JSON values (a callable is named by its type)."""
    out: dict[str, Any] = {}
    for name, value in args.items():
        if any(word in name.lower() for word in _SECRET_WORDS):
            continue
        out[name] = value if value is None or isinstance(value, (str, int, float, bool, list, dict)) else repr(value)
    return out


def _header(path: Path) -> EvalLog:
    try:
        return read_eval_log(str(path), header_only=True)
    except FileNotFoundError:
        raise _problem(path, "no such file") from None
    except Exception as exc:  # inspect raises many kinds for a file that is not a log
        raise _problem(path, f"not an inspect eval log ({type(exc).__name__}: {exc})") from None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _sample(path: Path, sample: EvalSample) -> LoggedSample:
    shown = str(sample.id)
    metadata = sample.metadata or {}
    for key in ("case_id", "order", "case_hash", "question", "response_a", "response_b"):
        if not isinstance(metadata.get(key), str):
            raise _problem(
                path, "missing from the sample's metadata (not a sample of this task)", sample=shown, field=key
            )
    try:
        order = Order(metadata["order"])
    except ValueError:
        raise _problem(
            path, f"{metadata['order']!r} is not an order (original, swapped)", sample=shown, field="order"
        ) from None
    output = sample.output
    answered = output is not None and bool(output.choices)  # an errored sample has no choice
    usage = output.usage if output is not None else None
    facts: dict[str, Any] = {"inspect_sample_id": shown}
    if answered and output.stop_reason:
        facts["finish_reason"] = output.stop_reason
    if output is not None and output.model:
        facts["inspect_output_model"] = output.model
    if sample.limit is not None:
        facts["inspect_limit"] = f"{sample.limit.type} limit {sample.limit.limit}"
    completion = output.completion if answered else None
    return LoggedSample(
        case_id=metadata["case_id"],
        order=order,
        case_hash=metadata["case_hash"],
        completion=completion,
        error=None if sample.error is None else (sample.error.message or "error").strip(),
        uuid=sample.uuid,
        sample_id=shown,
        question=metadata["question"],
        response_a=metadata["response_a"],
        response_b=metadata["response_b"],
        prompt_tokens=None if usage is None else usage.input_tokens,
        completion_tokens=None if usage is None else usage.output_tokens,
        latency_s=_number(sample.working_time),
        facts=facts,
    )


def _of_the_task(header: EvalLog) -> bool:
    """Whether a log header is one of the ``medrewardbench/pairwise`` task."""
    spec = header.eval
    if TASK_NAME in (spec.task, spec.task_registry_name):
        return True
    # run from a source tree that is not installed, inspect names the task without its package
    return spec.task == TASK_NAME.partition("/")[2] and "medrewardbench_data_hash" in (spec.metadata or {})


def log_files(paths: Sequence[str | Path]) -> list[Path]:
    """The log files named: files as given, and in each folder the task's logs (oldest first).

    Args:
        paths: log files, or folders of logs (inspect's ``--log-dir``), searched recursively;
            a folder's logs of other tasks are passed over.

    Returns:
        The log files.

    Raises:
        DataError: a folder that holds no log of the task.
    """
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            found.append(path)
            continue
        infos = list_eval_logs(str(path), filter=_of_the_task, recursive=True, descending=False)
        if not infos:
            raise DataError([DataProblem(str(path), f"a folder with no inspect log of the task {TASK_NAME}")])
        found.extend(Path(info.name.removeprefix("file://")) for info in infos)
    return found


def read_log(path: str | Path) -> InspectLog:
    """Read an eval log of the ``medrewardbench/pairwise`` task.

    Args:
        path: an inspect log file (``.eval`` or ``.json``).

    Returns:
        The log's header facts and its samples (one per case and order).

    Raises:
        DataError: the file is missing or not a log, the log is of another task, was run with
            several epochs or holds no samples, or a sample lacks the task's metadata or repeats
            a case and order; each names the file (and the sample and field).
    """
    path = Path(path)
    header = _header(path)
    spec = header.eval
    if not _of_the_task(header):
        raise _problem(path, f"a log of the task {spec.task!r}, not {TASK_NAME!r}: there is nothing to import from it")
    if spec.config.epochs not in (None, 1):
        raise _problem(
            path,
            f"run with {spec.config.epochs} epochs; a run holds one judgment per case and order: rerun with --epochs 1",
            field="epochs",
        )
    samples: list[LoggedSample] = []
    seen: set[tuple[str, Order]] = set()
    try:
        stream = read_eval_log_samples(str(path), all_samples_required=False, exclude_fields=_SKIPPED_FIELDS)
        for raw in stream:
            sample = _sample(path, raw)
            key = (sample.case_id, sample.order)
            if key in seen:
                raise _problem(path, "a second sample of the same case and order", sample=sample.sample_id)
            seen.add(key)
            samples.append(sample)
    except DataError:
        raise
    except Exception as exc:
        if not samples and "no samples" in str(exc).lower():
            samples = []
        else:
            raise _problem(path, f"its samples cannot be read ({type(exc).__name__}: {exc})") from None
    if not samples:
        raise _problem(
            path,
            f"holds no samples (status {header.status}; was it written with --no-log-samples, "
            "or did the eval stop before any sample finished?)",
        )
    generate = spec.model_generate_config.model_dump(exclude_none=True, mode="json")
    return InspectLog(
        path=path,
        eval_id=spec.eval_id,
        created=str(spec.created),
        status=str(header.status),
        model=spec.model,
        model_base_url=public_url(spec.model_base_url),
        model_args=_safe_args(spec.model_args or {}),
        generate_config=generate,
        task_version=spec.task_version,
        task_args=dict(spec.task_args or {}),
        inspect_version=str((spec.packages or {}).get("inspect_ai", "unknown")),
        task_metadata=dict(spec.metadata or {}),
        samples=tuple(samples),
    )
