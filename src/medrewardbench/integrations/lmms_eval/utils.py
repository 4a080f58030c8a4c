"""The functions the lmms-eval task ``medrewardbench_pairwise`` names (``!function utils.NAME``).

lmms-eval loads this file from the task folder (``--include_path``); it needs ``medrewardbench``
installed beside lmms-eval, and nothing from lmms-eval itself, so it is tested without it.

* :func:`process_docs`: every case twice, ``order`` = ``original`` (response_1 shown as A) and
  ``swapped``; images are kept as their bytes so that :func:`doc_to_visual` decodes them the way
  every medrewardbench judge does (DICOM rendered, RGB).
* :func:`doc_to_visual`: ``[PIL image]`` (none for a case without an image).
* :func:`doc_to_text`: the project's prompt (``pairwise`` unless ``lmms_eval_specific_kwargs``
  names another ``template``): its system text, a blank line, then the user text with the
  question and both answers in the doc's order. lmms-eval gives a model one text per request, so
  the system text leads it instead of being a separate message.
* :func:`doc_to_target`: the expert labels in the order shown (``{"overall": "A", ...}`` as JSON).
* :func:`process_results`: the raw output read by :func:`medrewardbench.parsing.parse_verdicts`
  (with the prompt's fixed text, the question and both answers as quoted passages, as the API
  judge does), verdicts mapped back to source order; one record per request under each metric.
* :func:`aggregate_accuracy`, :func:`aggregate_answered_accuracy`, :func:`aggregate_failure_rate`:
  the headline accuracy (a failed request or dimension counts wrong), the accuracy over answered
  (request, dimension) pairs, and the share of requests without any verdict.

The records land in lmms-eval's ``--log_samples`` files, where ``medrewardbench import-lmms-eval``
finds the case and order of each output (:mod:`medrewardbench.integrations.lmms_eval.samples`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.parsing import parse_verdicts
from medrewardbench.prompts import PromptTemplate, load_template

__all__ = [
    "ORDERS",
    "aggregate_accuracy",
    "aggregate_answered_accuracy",
    "aggregate_failure_rate",
    "doc_to_target",
    "doc_to_text",
    "doc_to_visual",
    "process_docs",
    "process_results",
]

ORDERS: tuple[str, ...] = ("original", "swapped")
DEFAULT_TEMPLATE = "pairwise"


@lru_cache(maxsize=8)
def _template(name: str) -> PromptTemplate:
    return load_template(name)


def _template_name(kwargs: Mapping[str, Any] | None) -> str:
    return str((kwargs or {}).get("template") or DEFAULT_TEMPLATE)


def _both_orders(batch: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
    columns = list(batch)
    out: dict[str, list[Any]] = {key: [] for key in columns}
    out["order"] = []
    for index in range(len(batch[columns[0]])):
        for order in ORDERS:
            for key in columns:
                out[key].append(batch[key][index])
            out["order"].append(order)
    return out


def process_docs(dataset: Any) -> Any:
    """Every case twice, once in each order, images left as bytes.

    Args:
        dataset: a ``datasets.Dataset`` of a Hub dataset folder (``build export --format hub``).

    Returns:
        The dataset with twice the rows and an ``order`` column.
    """
    from datasets import Image

    if "image" in dataset.features and isinstance(dataset.features["image"], Image):
        dataset = dataset.cast_column("image", Image(decode=False))
    return dataset.map(_both_orders, batched=True)


def _shown(doc: Mapping[str, Any]) -> tuple[str, str]:
    first, second = str(doc["response_1"]), str(doc["response_2"])
    return (first, second) if doc.get("order", "original") == "original" else (second, first)


def _image_ref(doc: Mapping[str, Any]) -> Any:
    from medrewardbench.cases import ImageRef

    if doc.get("image_builtin"):
        return ImageRef.builtin(str(doc["image_builtin"]))
    original = doc.get("image_original")
    if isinstance(original, Mapping) and original.get("bytes"):
        return ImageRef.from_bytes(bytes(original["bytes"]), str(original.get("path") or ""))
    image = doc.get("image")
    if image is None:
        return None
    if isinstance(image, Mapping):
        if image.get("bytes"):
            return ImageRef.from_bytes(bytes(image["bytes"]), str(image.get("path") or ""))
        return ImageRef.from_path(str(image["path"])) if image.get("path") else None
    buffer = io.BytesIO()  # a decoded PIL image (a dataset read without process_docs)
    image.save(buffer, format="PNG")
    return ImageRef.from_bytes(buffer.getvalue(), "image.png")


def doc_to_visual(doc: Mapping[str, Any]) -> list[Any]:
    """The case's image as every medrewardbench judge sees it.

    Args:
        doc: one row (after :func:`process_docs`).

    Returns:
        ``[PIL.Image]`` in RGB, or ``[]`` for a case without an image.
    """
    from medrewardbench.images import load_image

    ref = _image_ref(doc)
    return [] if ref is None else [load_image(ref)]


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """The project's prompt for the case in the doc's order.

    Args:
        doc: one row (after :func:`process_docs`).
        lmms_eval_specific_kwargs: ``{"template": NAME_OR_PATH}`` to use another prompt.

    Returns:
        The system text, a blank line, and the rendered user text (just the user text when the
        template has no system section).
    """
    template = _template(_template_name(lmms_eval_specific_kwargs))
    response_a, response_b = _shown(doc)
    user = template.render_user_text(str(doc["question"]), response_a, response_b)
    return f"{template.system.strip()}\n\n{user}" if template.system.strip() else user


def _labels(doc: Mapping[str, Any]) -> dict[str, int]:
    labels = doc.get("labels")
    if isinstance(labels, str):
        labels = json.loads(labels)
    return {dim: int(labels[dim]) for dim in DIMENSIONS if isinstance(labels, Mapping) and labels.get(dim) in (1, 2)}


def _letter(winner: int, order: str) -> str:
    first = 1 if order == "original" else 2
    return "A" if winner == first else "B"


def doc_to_target(doc: Mapping[str, Any]) -> str:
    """The expert labels in the order shown, as JSON (what lmms-eval logs as ``target``).

    Args:
        doc: one row.

    Returns:
        ``{"accuracy": "A", ..., "overall": "B"}`` for the labelled dimensions.
    """
    order = str(doc.get("order", "original"))
    return json.dumps({dim: _letter(winner, order) for dim, winner in _labels(doc).items()})


def process_results(
    doc: Mapping[str, Any], results: Sequence[str], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Parse one output with the project's parser and score it against the labels.

    Args:
        doc: one row.
        results: the model's outputs for it (the first is used).
        lmms_eval_specific_kwargs: ``{"template": ...}`` as for :func:`doc_to_text`.

    Returns:
        The same record under each metric name: ``case_id``, ``order``, ``verdicts`` (source order,
        1 = response_1), ``labels``, ``failure``, ``dimension_failures``.
    """
    raw = results[0] if results else None
    order = str(doc.get("order", "original"))
    template = _template(_template_name(lmms_eval_specific_kwargs))
    response_a, response_b = _shown(doc)
    parsed = parse_verdicts(raw, quoted=[response_a, response_b, str(doc["question"]), *template.static_chunks()])
    first = 1 if order == "original" else 2
    verdicts = {dim: (first if letter == "A" else 3 - first) for dim, letter in parsed.verdicts.items()}
    record = {
        "case_id": str(doc["id"]),
        "order": order,
        "verdicts": verdicts,
        "labels": _labels(doc),
        "failure": parsed.failure,
        "dimension_failures": dict(parsed.dimension_failures),
    }
    return {
        "medrewardbench_accuracy": record,
        "medrewardbench_answered_accuracy": record,
        "medrewardbench_failure_rate": record,
    }


def _pairs(records: Sequence[Mapping[str, Any]]) -> list[tuple[int, int | None]]:
    """(label, verdict or None) for every labelled (request, dimension)."""
    return [(int(label), record["verdicts"].get(dim)) for record in records for dim, label in record["labels"].items()]


def aggregate_accuracy(records: Sequence[Mapping[str, Any]]) -> float:
    """Headline accuracy: agreement with the labels, a failed request or dimension counting wrong.

    Args:
        records: :func:`process_results` records.

    Returns:
        The share of labelled (request, dimension) pairs judged like the experts; NaN for none.
    """
    pairs = _pairs(records)
    return sum(1 for label, verdict in pairs if verdict == label) / len(pairs) if pairs else float("nan")


def aggregate_answered_accuracy(records: Sequence[Mapping[str, Any]]) -> float:
    """Accuracy over the labelled (request, dimension) pairs that got a verdict.

    Args:
        records: :func:`process_results` records.

    Returns:
        The share; NaN when nothing was answered.
    """
    answered = [(label, verdict) for label, verdict in _pairs(records) if verdict is not None]
    return sum(1 for label, verdict in answered if verdict == label) / len(answered) if answered else float("nan")


def aggregate_failure_rate(records: Sequence[Mapping[str, Any]]) -> float:
    """The share of requests whose output decided no dimension at all.

    Args:
        records: :func:`process_results` records.

    Returns:
        The share; NaN for no records.
    """
    return sum(1 for r in records if r["failure"]) / len(records) if records else float("nan")
