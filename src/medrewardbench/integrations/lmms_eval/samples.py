"""lmms-eval's ``--log_samples`` output of ``medrewardbench_pairwise``, read and stored as a run.

lmms-eval writes ``OUTPUT/<model>/<date>_samples_<task>.jsonl`` (one JSON object per request:
``doc_id``, ``target``, ``input``, ``filtered_resps`` (the output text, or a list holding it),
sometimes ``resps``, ``token_counts``, ``doc_hash``, and each metric's value) and
``<date>_results.json`` beside it (``config.model``, ``config.model_args``, ``lmms_eval_version``,
``configs.<task>.generation_kwargs``; the task's name is the samples file's, so a task folder
written under another name is read too). The task's metrics are the records of
:func:`medrewardbench.integrations.lmms_eval.utils.process_results`, so every line names its case
and order.

:func:`read_samples` collects ``(case_id, order) -> output``; :class:`LmmsEvalSamplesJudge`
answers each request with its output, read by the project's parser as the ``api:`` judge reads an
answer; ``medrewardbench import-lmms-eval`` runs it through ``evaluate`` on the same data, so the run
sits in the results store beside ``eval``'s runs. Its configuration holds the model, its
arguments, lmms-eval's version, the generation settings, the template and a hash of the outputs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import Order
from medrewardbench.errors import DataError, DataProblem
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.parsing import parse_verdicts
from medrewardbench.prompts import PromptTemplate, load_template

__all__ = ["TASK_NAME", "LmmsEvalSamples", "LmmsEvalSamplesJudge", "SampleOutput", "read_samples", "samples_files"]

TASK_NAME = "medrewardbench_pairwise"
RECORD_KEY = "medrewardbench_accuracy"
"""The metric whose logged value names the case and order (any of the task's metrics would do)."""


@dataclass(frozen=True)
class SampleOutput:
    """One logged request: the output text and what lmms-eval counted."""

    text: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    logged_verdicts: Mapping[str, int] = field(default_factory=dict)


@dataclass
class LmmsEvalSamples:
    """What the samples files (and the results files beside them) hold."""

    files: list[Path]
    outputs: dict[tuple[str, str], SampleOutput]
    model: str
    model_args: str
    lmms_eval_version: str
    generation_kwargs: dict[str, Any]
    content_sha256: str


def samples_files(paths: Sequence[str | Path]) -> list[Path]:
    """The ``*_samples_*.jsonl`` files given, or found (recursively) in the directories given.

    Args:
        paths: files or directories.

    Returns:
        The files, sorted within each directory.

    Raises:
        DataError: a path that does not exist, or no samples file at all.
    """
    found: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            found.extend(sorted(entry.rglob("*_samples_*.jsonl")))
        elif entry.is_file():
            found.append(entry)
        else:
            raise DataError([DataProblem(str(entry), "no such file or directory")])
    if not found:
        raise DataError([DataProblem(", ".join(map(str, paths)), "no lmms-eval samples file (*_samples_*.jsonl)")])
    return found


def _text(sample: Mapping[str, Any]) -> str | None:
    for key in ("filtered_resps", "resps"):
        value = sample.get(key)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str):
            return value
    return None


def _tokens(sample: Mapping[str, Any]) -> tuple[int | None, int | None]:
    counts = sample.get("token_counts")
    first = counts[0] if isinstance(counts, list) and counts else counts
    if not isinstance(first, Mapping):
        return None, None

    def pick(*keys: str) -> int | None:
        return next((int(first[k]) for k in keys if isinstance(first.get(k), (int, float))), None)

    return pick("input_tokens", "prompt_tokens"), pick("output_tokens", "completion_tokens")


def _results_beside(path: Path) -> dict[str, Any]:
    date, sep, _ = path.name.partition("_samples_")
    results = path.with_name(f"{date}_results.json") if sep else None
    if results is None or not results.is_file():
        return {}
    try:
        loaded = json.loads(results.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError([DataProblem(str(results), f"unreadable lmms-eval results file: {exc}")]) from None
    return loaded if isinstance(loaded, dict) else {}


def read_samples(paths: Sequence[str | Path]) -> LmmsEvalSamples:
    """Read lmms-eval samples files of ``medrewardbench_pairwise`` (format in the module docstring).

    Args:
        paths: samples files, or directories holding them.

    Returns:
        The outputs by (case id, order), with the model and settings from the results files.

    Raises:
        DataError: an unreadable line, a line without the task's record (another task's file), or
            one (case, order) logged twice with different outputs; each problem names file and row.
    """
    files = samples_files(paths)
    digest = hashlib.sha256()
    outputs: dict[tuple[str, str], SampleOutput] = {}
    problems: list[DataProblem] = []
    config: dict[str, Any] = {}
    task = TASK_NAME
    for path in files:
        results = _results_beside(path)
        if results and not config:
            config, task = results, path.stem.partition("_samples_")[2] or TASK_NAME
        with path.open("rb") as handle:
            for row, line in enumerate(handle, start=1):
                digest.update(line)
                if not line.strip():
                    continue
                try:
                    sample = json.loads(line)
                except ValueError as exc:
                    problems.append(DataProblem(str(path), f"not JSON: {exc}", row=row))
                    continue
                record = sample.get(RECORD_KEY) if isinstance(sample, dict) else None
                if not isinstance(record, dict) or "case_id" not in record or "order" not in record:
                    problems.append(
                        DataProblem(str(path), f"no {RECORD_KEY} record naming the case and order; is this "
                                    f"the {TASK_NAME} task's file?", row=row, field=RECORD_KEY)
                    )  # fmt: skip
                    continue
                key = (str(record["case_id"]), str(record["order"]))
                if key[1] not in {o.value for o in Order}:
                    problems.append(DataProblem(str(path), f"unknown order {key[1]!r}", row=row, field=RECORD_KEY))
                    continue
                prompt, completion = _tokens(sample)
                verdicts = record.get("verdicts") if isinstance(record.get("verdicts"), dict) else {}
                found = SampleOutput(_text(sample), prompt, completion, dict(verdicts or {}))
                if key in outputs and outputs[key].text != found.text:
                    problems.append(
                        DataProblem(str(path), f"case {key[0]} ({key[1]}) is logged twice with different outputs",
                                    row=row, case_id=key[0])
                    )  # fmt: skip
                outputs[key] = found
    if problems:
        raise DataError(problems)
    found_settings = config.get("config")
    settings: dict[str, Any] = found_settings if isinstance(found_settings, dict) else {}
    task_config = (config.get("configs") or {}).get(task) if isinstance(config.get("configs"), dict) else None
    generation = task_config.get("generation_kwargs") if isinstance(task_config, dict) else None
    return LmmsEvalSamples(
        files=files,
        outputs=outputs,
        model=str(settings.get("model") or "unknown"),
        model_args=str(settings.get("model_args") or ""),
        lmms_eval_version=str(config.get("lmms_eval_version") or "unknown"),
        generation_kwargs=dict(generation) if isinstance(generation, dict) else {},
        content_sha256=digest.hexdigest(),
    )


class LmmsEvalSamplesJudge(Judge):
    """Answers each request with lmms-eval's logged output for its case and order, read by the project's parser.

    Args:
        samples: the outputs (:func:`read_samples`).
        name: the judge's name in the spec (``lmms-eval:NAME``; default: lmms-eval's model and its arguments).
        template: the template the task rendered the prompts with (its fixed text is quoted to the parser).
    """

    kind = "lmms-eval"
    batch_size = 1024

    def __init__(self, samples: LmmsEvalSamples, name: str | None = None, template: str = "pairwise") -> None:
        self.samples = samples
        self.template: PromptTemplate = load_template(template)
        shown = name or (f"{samples.model}({samples.model_args})" if samples.model_args else samples.model)
        self.spec = f"lmms-eval:{shown}"

    def config(self) -> dict[str, Any]:
        """The model, its arguments, lmms-eval's version, the generation settings, the template and the outputs."""
        return {
            "spec": self.spec,
            "kind": self.kind,
            "model": self.samples.model,
            "model_args": self.samples.model_args,
            "lmms_eval_version": self.samples.lmms_eval_version,
            "generation_kwargs": self.samples.generation_kwargs,
            "template": self.template.name,
            "template_sha256": self.template.sha256,
            "outputs_sha256": self.samples.content_sha256,
        }

    def metadata(self) -> dict[str, Any]:
        """The files read."""
        return {"files": [str(f) for f in self.samples.files], "imported_from": "lmms-eval --log_samples"}

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Each request's logged output, parsed as ``eval``'s ``api:`` judge parses an answer."""
        results: list[JudgeResult] = []
        for request in requests:
            output = self.samples.outputs.get((request.case.case_id, request.order.value))
            if output is None:
                results.append(JudgeResult.failed("no output for this case and order in the lmms-eval samples"))
                continue
            quoted = [request.response_a, request.response_b, request.case.question, *self.template.static_chunks()]
            parsed = parse_verdicts(output.text, quoted=quoted)
            extra: dict[str, Any] = {"parse_method": parsed.method}
            if parsed.reason:
                extra["reason"] = parsed.reason
            results.append(
                JudgeResult.from_parse(
                    parsed,
                    output.text,
                    prompt_tokens=output.prompt_tokens,
                    completion_tokens=output.completion_tokens,
                    extra=extra,
                )
            )
        return results

    def covered_case_ids(self) -> set[str]:
        """The cases with at least one logged output."""
        return {case_id for case_id, _ in self.samples.outputs}
