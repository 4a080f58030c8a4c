"""The one protocol every judge implements, and the records that cross it.

A judge receives a batch of :class:`JudgeRequest` (a case and the order its responses are shown in)
and returns one :class:`JudgeResult` per request, in the same order. Verdicts in a result are in
*presentation order* (``"A"`` = the response shown first); the runner maps them back to source
order. A judge never raises for a single bad request: it returns a result whose ``failure`` says why.
The spec, config, fingerprint and life cycle are those of every model back end
(:class:`~medrewardbench.models.backend.Backend`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from medrewardbench.cases import Case
from medrewardbench.dimensions import DIMENSIONS, Order, Position
from medrewardbench.models.backend import Backend


@dataclass(frozen=True)
class JudgeRequest:
    """One case shown in one order."""

    case: Case
    order: Order

    @property
    def response_a(self) -> str:
        """The response shown first."""
        return self.case.response_1 if self.order is Order.ORIGINAL else self.case.response_2

    @property
    def response_b(self) -> str:
        """The response shown second."""
        return self.case.response_2 if self.order is Order.ORIGINAL else self.case.response_1


@dataclass(frozen=True)
class JudgeResult:
    """What a judge produced for one request.

    Attributes:
        verdicts: dimension -> ``"A"`` or ``"B"`` (presentation order), only for dimensions decided.
        raw_output: the judge's text as produced (None for judges that produce none).
        failure: why the whole request failed (API error, unparseable output, ...), or None.
        dimension_failures: dimension -> reason, for dimensions that are missing from an
            otherwise usable answer.
        latency_s: wall time spent on this request (a batch's time divided among its requests).
        prompt_tokens, completion_tokens: token counts when known.
        scores: per-response scores for reward models, e.g. ``{"A": 0.3, "B": 1.2}`` or per
            dimension ``{"accuracy": {"A": .., "B": ..}}``.
        extra: anything else worth storing (retries, finish reason, ...). Must be JSON-serialisable.
        preferences: dimension -> probability that the response shown first (``"A"``) is the
            better one, for the dimensions where the back end gave one (token log-probabilities of
            the verdict, a reward model's score margin, a jury's vote share); empty otherwise.
            Never made up from the verdicts themselves.
    """

    verdicts: Mapping[str, Position] = field(default_factory=dict)
    raw_output: str | None = None
    failure: str | None = None
    dimension_failures: Mapping[str, str] = field(default_factory=dict)
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    scores: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    preferences: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def failed(cls, reason: str, raw_output: str | None = None, **kwargs: Any) -> JudgeResult:
        """A result that records a failure and no verdicts.

        Args:
            reason: why the request failed.
            raw_output: the model's text, when there was one.
            **kwargs: further :class:`JudgeResult` fields (latency, tokens, ...).

        Returns:
            The failed result.
        """
        return cls(verdicts={}, raw_output=raw_output, failure=reason, **kwargs)

    @classmethod
    def from_parse(cls, parsed: Any, raw_output: str | None, **kwargs: Any) -> JudgeResult:
        """Build a result from a :class:`medrewardbench.parsing.ParseResult` and the raw text."""
        return cls(
            verdicts=dict(parsed.verdicts),
            raw_output=raw_output,
            failure=parsed.failure,
            dimension_failures=dict(parsed.dimension_failures),
            **kwargs,
        )

    def missing_dimensions(self) -> list[str]:
        """The dimensions without a verdict, in the order of :data:`DIMENSIONS`."""
        return [d for d in DIMENSIONS if d not in self.verdicts]


class Judge(Backend):
    """Base class of every judge backend.

    Subclasses set ``spec`` (the string the user typed, e.g. ``"baseline:longer"``) and implement
    :meth:`judge_batch`. They describe everything that can change an output in :meth:`config`;
    the runner hashes it into the run fingerprint. Secrets never go into ``config``.
    """

    kind: str = "judge"
    #: whether the judge needs decoded images (the runner can then prefetch them)
    needs_images: bool = False

    @abc.abstractmethod
    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Judge a batch; returns exactly one result per request, in order."""
