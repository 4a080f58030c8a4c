"""Baseline judges: the floor every leaderboard shows, and probes for position and length bias.

* ``baseline:random`` picks A or B per dimension from a hash of (seed, case, order, dimension), so
  the result does not depend on scheduling and two runs with one seed are identical. A case a probe
  derived from another (``metadata[PARENT_CASE_KEY]``, :mod:`medrewardbench.probes.derive`) counts as
  its parent: changing the image of a case does not change the coin, as it does not change the rule.
* ``baseline:first`` / ``baseline:second`` always pick the response shown first / second.
* ``baseline:longer`` / ``baseline:shorter`` pick by character length; equal lengths are recorded
  as a failure ("tie") rather than silently favouring a position.
* ``instant:`` answers "A" at once and ``instant:decode`` decodes the image first: harness probes
  for benchmarks.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any

from medrewardbench.cases import PARENT_CASE_KEY
from medrewardbench.dimensions import DIMENSIONS, Position
from medrewardbench.errors import JudgeSpecError
from medrewardbench.images import load_image
from medrewardbench.judges.base import Judge, JudgeRequest, JudgeResult
from medrewardbench.judges.registry import JudgeOptions

BASELINE_NAMES: tuple[str, ...] = ("random", "first", "second", "longer", "shorter")


class BaselineJudge(Judge):
    """A rule that needs no model. Instant, deterministic given the seed.

    Args:
        rule: one of :data:`BASELINE_NAMES`.
        seed: the seed of the ``random`` rule.
    """

    kind = "baseline"
    batch_size = 512
    concurrency = 1

    def __init__(self, rule: str, seed: int = 0):
        if rule not in BASELINE_NAMES:
            raise JudgeSpecError(f"unknown baseline {rule!r}; choose one of {', '.join(BASELINE_NAMES)}")
        self.rule = rule
        self.seed = seed
        self.spec = f"baseline:{rule}"

    def config(self) -> dict[str, Any]:
        """The spec, and the seed for the random baseline."""
        config: dict[str, Any] = {"spec": self.spec}
        if self.rule == "random":
            config["seed"] = self.seed
        return config

    def metadata(self) -> dict[str, Any]:
        """Baselines see no image."""
        return {"sees_image": False, "baseline": True}

    def judge_one(self, request: JudgeRequest) -> JudgeResult:
        """The rule's verdict on one request, the same for every dimension (random: per dimension).

        Args:
            request: the case in one order.

        Returns:
            The verdicts; for ``longer`` and ``shorter``, a failure when both responses have the same length.
        """
        if self.rule == "random":
            verdicts = {d: _seeded_letter(self.seed, request, d) for d in DIMENSIONS}
            return JudgeResult(verdicts=verdicts, raw_output=None)
        if self.rule in ("first", "second"):
            letter: Position = "A" if self.rule == "first" else "B"
            return JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, letter))
        len_a, len_b = len(request.response_a), len(request.response_b)
        if len_a == len_b:
            return JudgeResult.failed("tie: both responses have the same length")
        a_longer = len_a > len_b
        pick_a = a_longer if self.rule == "longer" else not a_longer
        letter = "A" if pick_a else "B"
        return JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, letter))

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Apply the rule to each request."""
        return [self.judge_one(r) for r in requests]


def _seeded_letter(seed: int, request: JudgeRequest, dimension: str) -> Position:
    case_key = request.case.metadata.get(PARENT_CASE_KEY) or request.case.case_id
    key = f"{seed}\x1f{case_key}\x1f{request.order.value}\x1f{dimension}".encode()
    return "A" if hashlib.blake2b(key, digest_size=1).digest()[0] & 1 == 0 else "B"


class InstantJudge(Judge):
    """Answers A everywhere at once; with ``decode=True`` it decodes the image first (in a thread).

    Args:
        decode: decode each image before answering.
    """

    kind = "instant"
    batch_size = 64
    concurrency = 2

    def __init__(self, decode: bool):
        self.decode = decode
        self.needs_images = decode
        self.spec = "instant:decode" if decode else "instant:"

    def config(self) -> dict[str, Any]:
        """The spec only: the answer is always A."""
        return {"spec": self.spec}

    async def judge_batch(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """Answer A for every dimension, decoding the images first when asked to."""
        if self.decode:
            return await asyncio.to_thread(self._decode_all, requests)
        return [JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, "A")) for _ in requests]

    def _decode_all(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        results = []
        for request in requests:
            try:
                load_image(request.case.image)
            except Exception as exc:  # a bad image is a recorded failure, not a crash
                results.append(JudgeResult.failed(f"image: {exc}"))
                continue
            results.append(JudgeResult(verdicts=dict.fromkeys(DIMENSIONS, "A")))
        return results


def build(name: str, options: JudgeOptions) -> Judge:
    """Build ``baseline:NAME``."""
    return BaselineJudge(name, seed=options.seed)


def build_instant(name: str, options: JudgeOptions) -> Judge:
    """Build ``instant:`` (no decoding) or ``instant:decode``."""
    if name not in ("", "decode"):
        raise JudgeSpecError(f"unknown instant judge {name!r}; use 'instant:' or 'instant:decode'")
    return InstantJudge(decode=name == "decode")
