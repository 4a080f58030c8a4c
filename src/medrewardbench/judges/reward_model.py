"""Reward models as judges (the ``rm:`` spec kind): the response with the higher score wins.

The networks (image+text reward models written by ``medrewardbench train rm``, and text-only
sequence-classification models) and their directory format are in :mod:`medrewardbench.models.reward`.

Scores are stored with every judgment in :attr:`JudgeResult.scores`, in presentation order:
``{"A": 0.31, "B": -0.12}`` for a single head, ``{"accuracy": {"A": .., "B": ..}, ...}`` for
multi-head models. Equal scores are a tie, recorded as the failure ``"tie: equal scores"`` (for a
dimension, or for the whole request when no dimension is decided), which accuracy counts as wrong.
Because a response's score does not depend on what it is compared with, the judge scores each
response once per case and reuses the score in the other presentation order: both orders then
agree by construction.

Each verdict's probability (:attr:`JudgeResult.preferences`) is the Bradley-Terry probability the
reward model was trained to give, the logistic sigmoid of the score margin:
``P(A) = 1 / (1 + exp(-(score_A - score_B)))``, per head.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

from medrewardbench.dimensions import DIMENSIONS, Order, Position
from medrewardbench.errors import JudgeSpecError
from medrewardbench.images import load_image
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions
from medrewardbench.models.reward import RewardItem, RewardScorer, load_reward_model

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_BATCH_SIZE", "TIE_REASON", "RewardModelJudge", "build", "margin_probability"]

TIE_REASON = "tie: equal scores"
DEFAULT_BATCH_SIZE = 8
"""Requests per batch; each request needs at most two scores."""


def _finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))


def margin_probability(score_a: float, score_b: float) -> float:
    """P(A is better) from two scores: the logistic sigmoid of their margin (Bradley-Terry).

    Args:
        score_a: the finite score of the response shown first.
        score_b: the finite score of the response shown second.

    Returns:
        ``1 / (1 + exp(-(score_a - score_b)))``, computed without overflow.
    """
    margin = score_a - score_b
    if margin >= 0:
        return 1.0 / (1.0 + math.exp(-margin))
    exp_margin = math.exp(margin)
    return exp_margin / (1.0 + exp_margin)


class RewardModelJudge(Judge):
    """Scores both responses of a request with a reward model; the higher score wins.

    Args:
        spec: the spec as given (``rm:PATH``).
        scorer: the reward model.
        batch_size: items per scoring call.
    """

    kind = "rm"

    def __init__(self, spec: str, scorer: RewardScorer, *, batch_size: int = DEFAULT_BATCH_SIZE):
        self.spec = spec
        self.scorer = scorer
        self.batch_size = max(1, batch_size)
        self.concurrency = 1
        self.needs_images = scorer.sees_image
        self._scores: dict[tuple[str, str, int], list[float]] = {}

    def config(self) -> dict[str, Any]:
        """The spec and the reward model's configuration."""
        return {"spec": self.spec, "kind": "rm", **self.scorer.config()}

    def metadata(self) -> dict[str, Any]:
        """The reward model's facts, plus the batch size."""
        return {**self.scorer.metadata(), "batch_size": self.batch_size}

    def _score_isolated(self, items: Sequence[RewardItem]) -> list[list[float] | str]:
        """Scores per item, or a failure reason; a failing batch is retried item by item."""
        try:
            return list(self.scorer.score(items))
        except Exception as exc:  # isolate the culprit below
            if len(items) == 1:
                return [f"scoring failed: {type(exc).__name__}: {exc}"[:500]]
            logger.warning("scoring a batch of %d failed (%s); retrying one by one", len(items), exc)
        outcomes: list[list[float] | str] = []
        for item in items:
            outcomes.extend(self._score_isolated([item]))
        return outcomes

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Score both responses of each case (once per case across orders) and pick the higher per head.

        A batch that fails is scored again item by item, so only the culprit's requests fail.
        """
        started = time.perf_counter()
        failures: dict[int, str] = {}
        wanted: dict[tuple[str, str, int], RewardItem] = {}
        keys: list[tuple[tuple[str, str, int], tuple[str, str, int]]] = []
        images: dict[str, Any] = {}
        for index, request in enumerate(requests):
            case = request.case
            key_1 = (case.case_id, case.text_hash(), 1)
            key_2 = (case.case_id, case.text_hash(), 2)
            keys.append((key_1, key_2))
            missing = [k for k in (key_1, key_2) if k not in self._scores and k not in wanted]
            if not missing:
                continue
            image: Any = None
            if self.scorer.sees_image and case.image.kind != "none":
                if case.case_id not in images:
                    try:
                        images[case.case_id] = load_image(case.image)
                    except Exception as exc:  # one bad image must not sink the batch
                        failures[index] = f"image could not be loaded ({case.image.describe()}): {exc}"
                        continue
                image = images[case.case_id]
            for key in missing:
                wanted[key] = RewardItem(case.question, case.response(key[2]), image)  # type: ignore[arg-type]
        errors: dict[tuple[str, str, int], str] = {}
        if wanted:
            wanted_keys = list(wanted)
            outcomes = await asyncio.to_thread(self._score_isolated, [wanted[k] for k in wanted_keys])
            for key, outcome in zip(wanted_keys, outcomes, strict=True):
                if isinstance(outcome, str):
                    errors[key] = outcome
                else:
                    self._scores[key] = outcome
        share = (time.perf_counter() - started) / max(1, len(requests))
        results: list[JudgeResult] = []
        for index, request in enumerate(requests):
            if index in failures:
                results.append(JudgeResult.failed(failures[index], latency_s=share))
                continue
            key_1, key_2 = keys[index]
            error = errors.get(key_1) or errors.get(key_2)
            if error is not None or key_1 not in self._scores or key_2 not in self._scores:
                results.append(JudgeResult.failed(error or "not scored", latency_s=share))
                continue
            results.append(self._verdicts(request.order, self._scores[key_1], self._scores[key_2], share))
        return results

    def _verdicts(self, order: Order, scores_1: list[float], scores_2: list[float], latency: float) -> JudgeResult:
        scores_a, scores_b = (scores_1, scores_2) if order is Order.ORIGINAL else (scores_2, scores_1)
        heads = self.scorer.heads
        if len(heads) == 1:
            a, b = scores_a[0], scores_b[0]
            single = {"A": a if _finite(a) else None, "B": b if _finite(b) else None}
            if not (_finite(a) and _finite(b)):
                return JudgeResult.failed("non-finite score", scores=single, latency_s=latency)
            if a == b:
                return JudgeResult.failed(TIE_REASON, scores=single, latency_s=latency)
            letter: Position = "A" if a > b else "B"
            return JudgeResult(
                verdicts={dim: letter for dim in DIMENSIONS},
                scores=single,
                latency_s=latency,
                extra={"score_head": heads[0]},
                preferences=dict.fromkeys(DIMENSIONS, margin_probability(a, b)),
            )
        verdicts: dict[str, Position] = {}
        dimension_failures: dict[str, str] = {}
        per_dimension: dict[str, dict[str, float | None]] = {}
        preferences: dict[str, float] = {}
        for position, head in enumerate(heads):
            a, b = scores_a[position], scores_b[position]
            per_dimension[head] = {"A": a if _finite(a) else None, "B": b if _finite(b) else None}
            if head not in DIMENSIONS:
                continue
            if not (_finite(a) and _finite(b)):
                dimension_failures[head] = "non-finite score"
            elif a == b:
                dimension_failures[head] = TIE_REASON
            else:
                verdicts[head] = "A" if a > b else "B"
                preferences[head] = margin_probability(a, b)
        for dim in DIMENSIONS:
            if dim not in heads:
                dimension_failures[dim] = "the reward model has no head for this dimension"
        if not verdicts:
            reasons = sorted(set(dimension_failures.values()))
            reason = TIE_REASON if TIE_REASON in reasons else "; ".join(reasons)
            return JudgeResult.failed(reason, scores=per_dimension, latency_s=latency)
        return JudgeResult(
            verdicts=verdicts,
            dimension_failures=dimension_failures,
            scores=per_dimension,
            latency_s=latency,
            preferences=preferences,
        )

    async def aclose(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self._scores.clear()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


def build(name: str, options: JudgeOptions) -> RewardModelJudge:
    """Build the judge for ``rm:NAME``.

    Args:
        name: a reward model directory, a sequence-classification model, or (with
            ``options.local.adapter`` naming a reward model directory) its base model.
        options: ``batch_size`` and ``local.device``, ``local.dtype``, ``local.adapter`` are read.

    Raises:
        JudgeSpecError: an empty name.
        MissingExtraError: torch/transformers not installed.
        ModelLoadError: the model is not a reward model or cannot be loaded.
    """
    if not name:
        raise JudgeSpecError("the rm: judge needs a model, e.g. rm:/path/to/reward-model")
    local = options.local
    scorer = load_reward_model(name, device=local.device, dtype=local.dtype, adapter=local.adapter)
    return RewardModelJudge(f"rm:{name}", scorer, batch_size=options.batch_size or DEFAULT_BATCH_SIZE)
