"""The ``medrewardbench/pairwise`` inspect_ai task: each case in each order, judged on six dimensions.

Run it as ``inspect eval medrewardbench/pairwise --model openai/gpt-4o -T data=demo``. Task
arguments (``-T name=value``):

* ``data``: any data source ``eval`` reads (``demo``, ``hf:...``, a reference-layout folder,
  canonical files); ``organs`` (comma-separated) and ``limit`` select cases as ``eval`` does;
* ``orders``: ``both`` (default), ``original`` or ``swapped``;
* ``template``: ``pairwise`` (default), ``pairwise-cot`` or a template file.

Each sample is one case in one order. Its messages are the template's, rendered by
:mod:`medrewardbench.prompts`, with the image as the ``data:`` URL an ``api:`` judge sends
(:func:`image_data_url`: the file's own bytes where a vision API reads them as
:func:`~medrewardbench.images.load_image` would, else a PNG). The scorer
(:func:`pairwise_verdicts`) reads the completion with :func:`medrewardbench.parsing.parse_verdicts`,
passing the question, both responses and the template's fixed text as quoted passages (as the
``api:`` judge does), and maps the verdicts back to source order. Its value per dimension is 1
when the verdict agrees with the expert label, 0 when it disagrees or the dimension failed (a
failure counts wrong, as in ``eval``'s headline accuracy); a dimension the case has no label on
is left out. The verdicts, failures and parse method are in the score's metadata.
``medrewardbench import-inspect`` (:mod:`~medrewardbench.integrations.inspect.importing`) stores
the logs as runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

from medrewardbench import __version__
from medrewardbench.cases import Case
from medrewardbench.dimensions import DIMENSIONS, Order, to_position, to_source
from medrewardbench.errors import MissingExtraError
from medrewardbench.images.refs import ImageRef
from medrewardbench.models.api.images import passthrough_data_url, to_data_url
from medrewardbench.parsing import ParseResult, parse_verdicts
from medrewardbench.prompts import PromptTemplate, load_template

try:
    from inspect_ai import Task, task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, Content, ContentImage, ContentText
    from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
    from inspect_ai.solver import TaskState, generate
except ImportError as exc:  # pragma: no cover - the extra is installed wherever the tests run
    raise MissingExtraError("inspect_ai", "inspect", "the medrewardbench/pairwise inspect task") from exc

__all__ = [
    "TASK_NAME",
    "TASK_VERSION",
    "agreement",
    "case_samples",
    "failure_rate",
    "image_data_url",
    "parse_completion",
    "pairwise",
    "pairwise_verdicts",
    "sample_id",
]

TASK_NAME = "medrewardbench/pairwise"
"""The task's registered name, as ``inspect eval`` and the logs write it."""

TASK_VERSION = 1
"""Bumped when a sample's messages or the scorer's reading of an output change."""

SCORER_NAME = "pairwise_verdicts"
"""The scorer's name in a log's scores."""

INVALID_FORMAT = "invalid_response_format"
"""inspect's standard reason for an output that could not be read (no dimension decided)."""


def image_data_url(image: ImageRef) -> str:
    """The ``data:`` URL an ``api:`` judge sends for an image (its default image settings).

    Args:
        image: the case's image.

    Returns:
        The file's own bytes where a vision API decodes them to the pixels
        :func:`~medrewardbench.images.load_image` gives, else the decoded image as a PNG at zlib
        level 1: the URL :class:`~medrewardbench.models.api.images.DataUrlCache` makes.

    Raises:
        ImageError: the image cannot be read or decoded.
    """
    return passthrough_data_url(image) or to_data_url(image, compress_level=1)


def sample_id(case_id: str, order: Order) -> str:
    """The id of the sample that shows a case in one order (unique within the task)."""
    return f"{case_id}:{order.value}"


def _messages(
    template: PromptTemplate, question: str, response_a: str, response_b: str, image_url: str | None
) -> list[ChatMessage]:
    """The template's messages for one comparison as inspect messages, image first in the user turn."""
    user: list[Content] = []
    if image_url is not None:
        user.append(ContentImage(image=image_url))
    user.append(ContentText(text=template.render_user_text(question, response_a, response_b)))
    messages: list[ChatMessage] = []
    if template.system.strip():
        # the api: judge sends the system turn as plain text too
        messages.append(ChatMessageSystem(content=template.system))
    messages.append(ChatMessageUser(content=user))
    return messages


def case_samples(case: Case, orders: Sequence[Order], template: PromptTemplate) -> list[Sample]:
    """One sample per order for a case.

    Args:
        case: the case.
        orders: the presentation orders to show it in.
        template: the judge prompt.

    Returns:
        The samples, in the order of ``orders``. Their metadata holds what scoring and
        ``import-inspect`` need: the case id, the order, the case's content hash, its labels in
        source order, its organ system, the question and both responses as shown.

    Raises:
        ImageError: the case's image cannot be read or decoded.
    """
    image_url = image_data_url(case.image) if case.image.kind != "none" else None
    labels = {d: int(case.labels[d]) for d in DIMENSIONS if d in case.labels}
    samples = []
    for order in orders:
        response_a = case.response(1 if order is Order.ORIGINAL else 2)
        response_b = case.response(2 if order is Order.ORIGINAL else 1)
        target = {d: to_position(case.labels[d], order) for d in DIMENSIONS if d in case.labels}
        samples.append(
            Sample(
                id=sample_id(case.case_id, order),
                input=_messages(template, case.question, response_a, response_b, image_url),
                target=json.dumps(target),
                metadata={
                    "case_id": case.case_id,
                    "order": order.value,
                    "case_hash": case.content_hash(),
                    "labels": labels,
                    "organ_system": case.organ_system,
                    "question": case.question,
                    "response_a": response_a,
                    "response_b": response_b,
                },
            )
        )
    return samples


def _samples(cases: Iterator[Case], orders: Sequence[Order], template: PromptTemplate) -> Iterator[Sample]:
    for case in cases:
        yield from case_samples(case, orders, template)


def _split_organs(organs: str | Sequence[str] | None) -> list[str] | None:
    """``-T organs=brain,chest`` arrives as one string; a list from Python or YAML as a list."""
    if organs is None:
        return None
    items = organs.split(",") if isinstance(organs, str) else [str(o) for o in organs]
    kept = [o.strip() for o in items if o.strip()]
    return kept or None


# --------------------------------------------------------------------------------------- scoring


@metric
def agreement() -> Metric:
    """Per dimension: the share of labelled samples whose verdict agrees with the experts.

    A failed dimension counts as a disagreement (``eval``'s headline accuracy); samples without a
    label on a dimension are left out of it.
    """

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        out: dict[str, float] = {}
        for dimension in DIMENSIONS:
            values = [
                float(value)
                for s in scores
                if isinstance(s.score.value, dict)
                and (value := s.score.value.get(dimension)) is not None
                and not math.isnan(float(value))
            ]
            if values:
                out[dimension] = sum(values) / len(values)
        return out

    return compute


@metric
def failure_rate() -> Metric:
    """The share of samples whose output decided no dimension at all."""

    def compute(scores: list[SampleScore]) -> float:
        if not scores:
            return 0.0
        failed = sum(1 for s in scores if (s.score.metadata or {}).get("failure") is not None)
        return failed / len(scores)

    return compute


def parse_completion(
    completion: str | None, question: str, response_a: str, response_b: str, template: PromptTemplate
) -> ParseResult:
    """Read a completion as the ``api:`` judge reads an answer: what the model was shown is quoted.

    Args:
        completion: the model's text.
        question: the question shown.
        response_a: the response shown first.
        response_b: the response shown second.
        template: the prompt (its fixed text is quoted too).

    Returns:
        The parser's verdicts (presentation order) or failure.
    """
    return parse_verdicts(completion, quoted=[response_a, response_b, question, *template.static_chunks()])


def score_completion(completion: str | None, metadata: dict[str, Any], template: PromptTemplate) -> Score:
    """Read one completion as ``eval`` reads an ``api:`` judge's answer, and score it against the labels.

    Args:
        completion: the model's text.
        metadata: the sample's metadata (:func:`case_samples`).
        template: the prompt the sample was rendered with (its fixed text is quoted to the parser).

    Returns:
        The score: per-dimension agreement (1 or 0; labelled dimensions only) as its value, the
        verdicts in source order as its answer, and in its metadata the verdicts, the failure or
        per-dimension failures, the parse method and the judge's reason.
    """
    order = Order(metadata["order"])
    parsed = parse_completion(
        completion, metadata["question"], metadata["response_a"], metadata["response_b"], template
    )
    verdicts = {d: to_source(parsed.verdicts[d], order) for d in DIMENSIONS if d in parsed.verdicts}
    labels: dict[str, int] = metadata.get("labels") or {}
    # a dimension without a label is left out (inspect's reducers would read None as 0)
    value: dict[str, float] = {d: 1.0 if verdicts.get(d) == labels[d] else 0.0 for d in DIMENSIONS if d in labels}
    return Score(
        value=value,
        answer=json.dumps(verdicts),
        explanation=parsed.failure or parsed.reason,
        reason=INVALID_FORMAT if parsed.failure is not None else None,
        metadata={
            "case_id": metadata["case_id"],
            "order": order.value,
            "verdicts": verdicts,
            "failure": parsed.failure,
            "dimension_failures": dict(parsed.dimension_failures),
            "parse_method": parsed.method,
            "reason": parsed.reason,
        },
    )


@scorer(metrics=[agreement(), failure_rate()], name=SCORER_NAME)
def pairwise_verdicts(template: str = "pairwise") -> Scorer:
    """Score a judge's output with medrewardbench's verdict parser, verdicts in source order.

    Args:
        template: the template the samples were rendered with (its fixed text is quoted to the
            parser, so an echoed prompt yields no verdict).

    Returns:
        The scorer.
    """
    prompt = load_template(template)

    async def score(state: TaskState, target: Target) -> Score:
        return score_completion(state.output.completion, state.metadata, prompt)

    return score


# ------------------------------------------------------------------------------------------ task


@task
def pairwise(
    data: str = "demo",
    organs: str | None = None,
    limit: int | None = None,
    orders: str = "both",
    template: str = "pairwise",
    allow_external_images: bool = False,
) -> Task:
    """Judge each case of a medrewardbench data source in each order, scored against the expert labels.

    Args:
        data: a data source as ``eval --data`` takes it.
        organs: organ systems to keep, comma-separated (all when None).
        limit: the first N cases only.
        orders: ``both``, ``original`` or ``swapped``.
        template: ``pairwise``, ``pairwise-cot`` or a template file.
        allow_external_images: accept image paths outside the data's folder (as ``eval``'s flag).

    Returns:
        The task: one sample per case and order, ``generate()``, and :func:`pairwise_verdicts`.
    """
    from medrewardbench.data import load_benchmark

    selected_orders = Order.parse_selection(orders)
    prompt = load_template(template)
    benchmark = load_benchmark(
        data,
        organs=_split_organs(organs),
        limit=None if limit is None else int(limit),
        allow_external_images=allow_external_images,
    )
    samples = list(_samples(iter(benchmark), selected_orders, prompt))
    return Task(
        dataset=MemoryDataset(samples, name=benchmark.name, location=benchmark.source),
        solver=generate(),
        scorer=pairwise_verdicts(template=template),
        version=TASK_VERSION,
        metadata={
            "medrewardbench_version": __version__,
            "medrewardbench_data_hash": benchmark.data_hash(),
            "medrewardbench_dataset": benchmark.name,
            "template_sha256": prompt.sha256,
        },
    )
