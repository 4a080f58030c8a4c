"""Results others can read: the Every Eval Ever schema and the Hub's ``.eval_results`` files.

``medrewardbench export-results RESULTS... --out DIR`` writes, for each stored run of one data set:

* **Every Eval Ever** (schema 0.3.0, vendored under ``report/schemas/every_eval_ever``, MIT):
  ``DIR/every_eval_ever/data/medrewardbench/<developer>/<model>/<uuid>.json`` (aggregate) and
  ``<uuid>_samples.jsonl`` beside it (instance level). The aggregate holds one result per
  dimension and one pooled, each the headline accuracy (a failed request counts wrong) with its
  case-bootstrap interval (``uncertainty.confidence_interval``, ``num_bootstrap_samples``), and
  the answered accuracy, failure rate and order consistency pooled. ``source_data`` names the
  data (a Hub dataset for ``hf:`` sources) and carries the labels' provenance (kind, raters,
  wording) in ``additional_details``. An instance is one (case, order, dimension) with a label:
  the judge's raw output, the parsed verdict in the order shown, the expert's, whether they agree;
  the mean of an evaluation's instance scores is its aggregate score.
* **Hub ``.eval_results``** (a model repository's ``.eval_results/*.yaml``: a list of ``{dataset:
  {id, task_id, revision}, value, date, source, notes}``; the format of
  https://github.com/huggingface/community-evals): ``DIR/hub_eval_results/<judge>/.eval_results/
  medrewardbench.yaml``, one entry per dimension and the pooled one (``task_id``), the value in
  percent, the interval, the labels' provenance and the judge's pin in ``notes``. The entries need
  the data set's Hub id: an ``hf:`` source gives it, ``--dataset-id`` names it for local data.

**Judges are named with what pins them** (:mod:`medrewardbench.report.identity`): a Hub
revision (``model_revision`` of ``hf:``/``rm:`` judges), a dated API snapshot
(``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-20241022``), or, for anything else, ``pinned: false``
with the reason (``unpinned API model: the provider may change what this name serves``). Both
formats carry it.

Every aggregate and instance record is validated against the vendored schemas with ``jsonschema``
(extra ``interop``) before anything is written; without ``jsonschema`` nothing is validated and
:attr:`ExportedResults.validated` says so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from medrewardbench import __version__
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.evaluation.store import Store
from medrewardbench.metrics.analysis import DataSet, LoadedRun
from medrewardbench.metrics.results import POOLED, Analysis, Estimate, RunAnalysis
from medrewardbench.report.identity import BENCHMARK, JudgeIdentity, judge_identity, slug

logger = logging.getLogger(__name__)

__all__ = [
    "EEE_SCHEMA_VERSION",
    "ExportedResults",
    "InteropError",
    "eee_records",
    "export_results",
    "hub_eval_entries",
    "validate_eee",
]

EEE_SCHEMA_VERSION = "0.3.0"


class InteropError(MedRewardBenchError):
    """The results cannot be written in a shared format (a record the schema refuses, no dataset id)."""


# ---------------------------------------------------------------------------------------------- EEE
_SCHEMAS = "schemas/every_eval_ever"


def _schema(name: str) -> dict[str, Any]:
    text = resources.files("medrewardbench.report").joinpath(f"{_SCHEMAS}/{name}").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def validate_eee(record: Mapping[str, Any], *, instance: bool = False) -> bool:
    """Check a record against the vendored Every Eval Ever schema.

    Args:
        record: an aggregate record, or an instance record with ``instance=True``.
        instance: which schema.

    Returns:
        True when validated; False when ``jsonschema`` is not installed (nothing was checked).

    Raises:
        InteropError: the record breaks the schema (the message names the field).
    """
    try:
        import jsonschema
    except ImportError:
        return False
    schema = _schema("instance_level_eval.schema.json" if instance else "eval.schema.json")
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(record), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(record)"
        what = "instance" if instance else "aggregate"
        raise InteropError(f"Every Eval Ever {what} record: {where}: {errors[0].message}")
    return True


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(float(value), 6)


def _uuid(*parts: str) -> str:
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


@dataclass(frozen=True)
class DataFacts:
    """What the shared formats say about the data: where it is, its Hub id, and its labels' provenance."""

    name: str
    source: str
    data_hash: str
    n_cases: int
    hub_id: str | None
    hub_revision: str | None
    labels: dict[str, str]


def data_facts(analysis: Analysis, dataset: DataSet, dataset_id: str | None) -> DataFacts:
    """The data set's facts for the shared formats.

    Args:
        analysis: the analysis of the runs.
        dataset: the runs' data set.
        dataset_id: the Hub id to name it by (overrides what an ``hf:`` source gives).

    Returns:
        The facts.
    """
    source = dataset.runs[0].record.dataset_source
    hub_id, revision = None, None
    if source.startswith("hf:"):
        repo, _, rev = source[3:].partition("@")
        hub_id, revision = (repo or "Nandzy/Med-RewardBench"), (rev or None)
    if dataset_id:
        hub_id, _, rev = dataset_id.partition("@")
        revision = rev or (revision if dataset_id.partition("@")[0] == hub_id else None)
    provenance = analysis.dataset.labels
    labels = {
        "labels_provenance": provenance.text(),
        "labels_kind": provenance.kind,
        "labels_raters": "" if provenance.raters is None else str(provenance.raters),
        "labels_declared_by": provenance.declared_by,
    }
    return DataFacts(dataset.name, source, dataset.data_hash, dataset.n_cases, hub_id, revision, labels)


def _source_data(facts: DataFacts, n_cases: int) -> dict[str, Any]:
    details = {"data_hash": facts.data_hash, "source": facts.source, **facts.labels}
    if facts.hub_id:
        found: dict[str, Any] = {
            "dataset_name": facts.name,
            "source_type": "hf_dataset",
            "hf_repo": facts.hub_id,
            "hf_split": "test",
            "samples_number": n_cases,
            "additional_details": {**details, **({"hf_revision": facts.hub_revision} if facts.hub_revision else {})},
        }
        return found
    return {"dataset_name": facts.name, "source_type": "other", "additional_details": details}


def _result(
    name: str, metric: str, estimate: Estimate, facts: DataFacts, analysis: Analysis, description: str, run_time: str
) -> dict[str, Any]:
    settings = analysis.settings
    uncertainty: dict[str, Any] = {"num_samples": estimate.n}
    if estimate.has_interval:
        uncertainty["confidence_interval"] = {
            "lower": _number(estimate.low),
            "upper": _number(estimate.high),
            "confidence_level": settings.confidence,
            "method": settings.interval,
        }
        uncertainty["num_bootstrap_samples"] = settings.n_resamples
    return {
        "evaluation_result_id": name,
        "evaluation_name": name,
        "source_data": _source_data(facts, analysis.dataset.n_cases),
        "evaluation_timestamp": run_time,
        "metric_config": {
            "evaluation_description": description,
            "metric_id": metric,
            "metric_name": metric.rpartition(".")[2].replace("_", " "),
            "metric_kind": "accuracy" if "accuracy" in metric else "proportion",
            "metric_unit": "proportion",
            "lower_is_better": metric.endswith("failure_rate"),
            "score_type": "continuous",
            "min_score": 0,
            "max_score": 1,
            "additional_details": {"failures": settings.failures, "unit_of_resampling": "case"},
        },
        "score_details": {
            "score": _number(estimate.point) if estimate.defined else 0.0,
            "details": {"defined": "true" if estimate.defined else "false", "n": str(estimate.n)},
            "uncertainty": uncertainty,
        },
    }


def _timestamp(value: float | None) -> str:
    if value is None:
        return ""
    return datetime.fromtimestamp(value, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def eee_records(
    analysis: Analysis,
    run: RunAnalysis,
    bundle: LoadedRun,
    facts: DataFacts,
    *,
    source_organization: str,
    retrieved: float,
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """One run as an Every Eval Ever aggregate record and its instance records.

    Args:
        analysis: the analysis the run belongs to.
        run: the run's analysis.
        bundle: the stored run (arrays, store, record).
        facts: the data set's facts.
        source_organization: who ran the evaluation (``source_metadata.source_organization_name``).
        retrieved: when the record is made (seconds since the epoch).

    Returns:
        ``(aggregate, instances, relative folder)``; the folder is ``data/medrewardbench/<developer>/<model>``.
    """
    from medrewardbench.metrics import stats

    identity = judge_identity(run.label, run.judge, run.config)
    run_time = _timestamp(bundle.record.updated_at or bundle.record.created_at)
    evaluation_id = _uuid(BENCHMARK, run.run_id, facts.data_hash)
    folder = f"data/{BENCHMARK}/{slug(identity.developer)}/{slug(identity.model_id.split('/')[-1])}"
    results = [
        _result(f"accuracy/{column}", f"{BENCHMARK}.accuracy", estimate, facts, analysis,
                f"agreement with the expert label on {column}, both answer orders; a failed request counts wrong",
                run_time)
        for column, estimate in run.accuracy.columns()
    ]  # fmt: skip
    for name, estimate, text in (
        ("answered_accuracy", run.answered_accuracy.pooled, "accuracy over answered requests only"),
        ("order_consistency", run.position.consistency.pooled, "same verdict in both answer orders"),
    ):
        results.append(_result(name, f"{BENCHMARK}.{name}", estimate, facts, analysis, text, run_time))
    failure = Estimate(run.failure_rate.pooled, n=run.requests.judged + run.requests.failed)
    results.append(
        _result("failure_rate", f"{BENCHMARK}.failure_rate", failure, facts, analysis,
                "share of requests without a usable verdict", run_time)
    )  # fmt: skip
    instances = list(_instances(bundle, run, identity, evaluation_id, stats.request_outcomes))
    samples = f"{folder}/{evaluation_id}_samples.jsonl"
    aggregate: dict[str, Any] = {
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "retrieved_timestamp": str(int(retrieved)),
        "source_metadata": {
            "source_name": f"medrewardbench {__version__}",
            "source_type": "evaluation_run",
            "source_organization_name": source_organization,
            "evaluator_relationship": "third_party",
            "additional_details": {"run_id": run.run_id, "judge_spec": run.judge, "data_hash": facts.data_hash},
        },
        "model_info": {
            "name": identity.name,
            "id": identity.model_id,
            "developer": identity.developer,
            "additional_details": identity.details(),
        },
        "eval_library": {
            "name": "medrewardbench",
            "version": __version__,
            "additional_details": {"task": "pairwise judging of two answers to a medical image question"},
        },
        "evaluation_results": results,
        "detailed_evaluation_results": {
            "format": "jsonl",
            "file_path": samples,
            "hash_algorithm": "sha256",
            "total_rows": len(instances),
        },
    }
    if run_time:
        aggregate["evaluation_timestamp"] = run_time
    return aggregate, instances, folder


def _letter(winner: int, order: Order) -> str:
    first = 1 if order is Order.ORIGINAL else 2
    return "A" if winner == first else "B"


def _instances(
    bundle: LoadedRun, run: RunAnalysis, identity: JudgeIdentity, evaluation_id: str, outcomes: Any
) -> Iterator[dict[str, Any]]:
    data = bundle.data
    correct, counted = outcomes(data.verdicts, data.labels)
    stored: dict[tuple[str, str], Any] = {}
    for store_path, record in bundle.sources:
        with Store(store_path) as store:
            stored.update({(j.case_id, j.order.value): j for j in store.iter_judgments_for_run(record)})
    orders = (Order.ORIGINAL, Order.SWAPPED)
    for c, case_id in enumerate(data.case_ids):
        for o, order in enumerate(orders):
            judgment = stored.get((case_id, order.value))
            for d, dim in enumerate(DIMENSIONS):
                if not counted[c, o, d]:
                    continue
                verdict = int(data.verdicts[c, o, d])
                label = int(data.labels[c, d])
                extracted = _letter(verdict, order) if verdict in (1, 2) else ""
                row: dict[str, Any] = {
                    "schema_version": EEE_SCHEMA_VERSION,
                    "evaluation_id": evaluation_id,
                    "model_id": identity.model_id,
                    "evaluation_name": f"accuracy/{dim}",
                    "evaluation_result_id": f"accuracy/{dim}",
                    "sample_id": f"{case_id}:{order.value}:{dim}",
                    "sample_hash": getattr(judgment, "case_hash", None),
                    "interaction_type": "single_turn",
                    "input": {
                        "raw": f"case {case_id}, answers in {order.value} order: which answer is better on {dim}?",
                        "reference": [_letter(label, order)],
                        "choices": ["A", "B"],
                    },
                    "output": {"raw": [(judgment.raw_output or "") if judgment is not None else ""]},
                    "answer_attribution": [
                        {
                            "turn_idx": 0,
                            "source": "output.raw",
                            "extracted_value": extracted,
                            "extraction_method": "medrewardbench.parsing",
                            "is_terminal": True,
                        }
                    ],  # fmt: skip
                    "evaluation": {"score": 1.0 if correct[c, o, d] else 0.0, "is_correct": bool(correct[c, o, d])},
                    "error": (judgment.failure or judgment.dimension_failures.get(dim)) if judgment else "not stored",
                    "metadata": {"case_id": case_id, "order": order.value, "dimension": dim},
                }
                if judgment is not None and judgment.prompt_tokens is not None:
                    used = judgment.completion_tokens or 0
                    row["token_usage"] = {"input_tokens": judgment.prompt_tokens, "output_tokens": used,
                                          "total_tokens": judgment.prompt_tokens + used}  # fmt: skip
                if judgment is not None and judgment.latency_s is not None:
                    row["performance"] = {"latency_ms": round(judgment.latency_s * 1000.0, 3)}
                yield row


# --------------------------------------------------------------------------------- Hub .eval_results
def hub_eval_entries(
    run: RunAnalysis, analysis: Analysis, facts: DataFacts, *, source_url: str | None, date: str | None = None
) -> list[dict[str, Any]]:
    """One run's ``.eval_results`` entries: one per dimension and the pooled one (``task_id``).

    Args:
        run: the run's analysis.
        analysis: the analysis it belongs to.
        facts: the data set's facts (``hub_id`` must be set).
        source_url: where the evidence lives (the Every Eval Ever record, a report); optional.
        date: when the run was made (ISO 8601); optional.

    Returns:
        The entries, in dimension order then pooled; values in percent.

    Raises:
        InteropError: the data set has no Hub id.
    """
    if not facts.hub_id:
        raise InteropError(
            f"the data {facts.source!r} has no Hugging Face Hub id, which .eval_results entries need: "
            "pass --dataset-id OWNER/NAME (where 'medrewardbench push' published it)"
        )
    identity = judge_identity(run.label, run.judge, run.config)
    named = identity.how if (identity.pin or "") in identity.how else f"{identity.how}: {identity.pin}"
    pin = f"pinned ({named})" if identity.pinned else f"NOT pinned ({identity.how})"
    level = round(analysis.settings.confidence * 100)
    entries: list[dict[str, Any]] = []
    for column, estimate in run.accuracy.columns():
        if not estimate.defined:
            continue
        interval = (
            f"{level}% CI {estimate.low * 100:.1f}-{estimate.high * 100:.1f} (case bootstrap, "
            f"{analysis.settings.n_resamples} resamples)"
            if estimate.has_interval
            else "no interval computed"
        )
        dataset: dict[str, Any] = {"id": facts.hub_id, "task_id": "all" if column == POOLED else column}
        if facts.hub_revision:
            dataset["revision"] = facts.hub_revision
        entry: dict[str, Any] = {
            "dataset": dataset,
            "value": round(estimate.point * 100, 2),
            "notes": (
                f"medrewardbench {__version__} pairwise judging accuracy, both answer orders, failures counted "
                f"wrong; n={estimate.n}; {interval}; labels: {facts.labels['labels_provenance']}; "
                f"judge {identity.model_id} {pin}"
            ),
        }
        if date:
            entry["date"] = date
        if source_url:
            entry["source"] = {"url": source_url, "name": "medrewardbench results"}
        entries.append(entry)
    return entries


# --------------------------------------------------------------------------------------- the export
@dataclass
class ExportedResults:
    """What :func:`export_results` wrote."""

    paths: list[Path] = field(default_factory=list)
    runs: int = 0
    instances: int = 0
    validated: bool = False
    unpinned: list[str] = field(default_factory=list)
    """judges whose model is not pinned"""
    skipped_hub: str | None = None
    """why the Hub entries were not written (no dataset id), when they were not"""


EXPORT_FORMATS: tuple[str, ...] = ("eee", "hub", "all")


def export_results(
    analysis: Analysis,
    dataset: DataSet,
    out: str | Path,
    *,
    formats: str = "all",
    dataset_id: str | None = None,
    source_organization: str = "unknown",
    source_url: str | None = None,
    retrieved: float | None = None,
) -> ExportedResults:
    """Write the runs of one analysed data set in the shared formats (see the module docstring).

    Every record is validated before any file is written.

    Args:
        analysis: the analysis (:func:`~medrewardbench.metrics.loading.analyze_dataset`).
        dataset: the runs it analysed.
        out: the output directory.
        formats: ``eee``, ``hub`` or ``all``.
        dataset_id: the data set's Hub id (``OWNER/NAME[@REVISION]``) for local data.
        source_organization: who ran the evaluation.
        source_url: where the evidence is published, for the Hub entries' ``source``.
        retrieved: the records' time stamp (seconds since the epoch; default now).

    Returns:
        The files written and counts.

    Raises:
        InteropError: an unknown format, a record the schema refuses, or ``hub`` alone for data
            without a Hub id.
    """
    import time

    import yaml

    if formats not in EXPORT_FORMATS:
        raise InteropError(f"unknown format {formats!r}; use one of {', '.join(EXPORT_FORMATS)}")
    root = Path(out)
    facts = data_facts(analysis, dataset, dataset_id)
    when = time.time() if retrieved is None else retrieved
    summary = ExportedResults()
    bundles = {b.record.run_id: b for b in dataset.runs}
    pending: list[tuple[Path, str]] = []
    for run in analysis.runs:
        identity = judge_identity(run.label, run.judge, run.config)
        if not identity.pinned:
            summary.unpinned.append(f"{run.label}: {identity.how}")
        summary.runs += 1
        if formats in {"eee", "all"}:
            aggregate, instances, folder = eee_records(
                analysis, run, bundles[run.run_id], facts, source_organization=source_organization, retrieved=when
            )
            checked = validate_eee(aggregate)
            for record in instances:
                validate_eee(record, instance=True)
            summary.validated = checked
            lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in instances)
            aggregate["detailed_evaluation_results"]["checksum"] = hashlib.sha256(lines.encode("utf-8")).hexdigest()
            base = root / "every_eval_ever" / folder
            pending.append((base / f"{aggregate['evaluation_id']}.json", json.dumps(aggregate, indent=2) + "\n"))
            pending.append((base / f"{aggregate['evaluation_id']}_samples.jsonl", lines))
            summary.instances += len(instances)
        if formats in {"hub", "all"}:
            if not facts.hub_id and formats == "all":
                summary.skipped_hub = (
                    f"no Hub id for the data {facts.source!r}: pass --dataset-id OWNER/NAME to write .eval_results"
                )
                continue
            stored = bundles[run.run_id].record
            date = _timestamp(stored.updated_at or stored.created_at) or None
            entries = hub_eval_entries(run, analysis, facts, source_url=source_url, date=date)
            target = root / "hub_eval_results" / slug(identity.model_id.replace("/", "--")) / ".eval_results"
            text = yaml.safe_dump(entries, sort_keys=False, allow_unicode=True, width=100)
            pending.append((target / f"{BENCHMARK}.yaml", text))
    for path, text in pending:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        summary.paths.append(path)
    return summary
