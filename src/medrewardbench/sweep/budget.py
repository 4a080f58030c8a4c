"""Prices per entry, the ``--budget`` guard, and per-endpoint concurrency caps.

Prices come, first found wins, from the ``--prices`` file, the entry's own ``price:``, and the
sweep file's ``prices:`` table; each table is looked up by the entry's name, then its spec, then
its model name (``gpt-4o`` for ``api:gpt-4o``).

:class:`Budget` keeps the sweep's cost (what is stored already plus what finished since) below
``--budget``. Before a batch is dispatched its cost is estimated: from the mean cost per request
of the entry's answers so far, or, before the first answer, from the prompt's size (characters
/ 3 tokens, :data:`IMAGE_TOKENS` per image, ``max_tokens`` or :data:`DEFAULT_COMPLETION_TOKENS`
answer tokens). The batch is sent only if the cost so far, the estimates of the batches in flight
and its own estimate stay within the budget; otherwise its entry stops dispatching. What finished
is stored, and a rerun with a larger budget resumes from there.

:class:`EndpointLimits` holds one semaphore per base URL named in the sweep's ``endpoints``: every
judge sending to that URL, whatever entry it belongs to, takes a slot per request in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from medrewardbench.evaluation.store import StoredJudgment
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.metrics.cost import Price, judgment_cost
from medrewardbench.prompts import PromptTemplate
from medrewardbench.sweep.config import JudgeEntry, SweepConfig

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_COMPLETION_TOKENS",
    "IMAGE_TOKENS",
    "Budget",
    "CostEstimator",
    "EndpointLimits",
    "check_budget",
    "dollar_figures",
    "resolve_prices",
]

IMAGE_TOKENS = 1000
"""Input tokens assumed per image before the first answer (a high-detail 1024-pixel image is ~765)."""
DEFAULT_COMPLETION_TOKENS = 512
"""Answer tokens assumed before the first answer when the entry sets no ``max_tokens``."""
CHARS_PER_TOKEN = 3.0
"""Characters per input token assumed before the first answer (English runs at about 4)."""


def check_budget(limit: float) -> float:
    """A ``--budget``: a finite number of dollars, zero or more.

    Args:
        limit: the budget as given.

    Returns:
        The budget.

    Raises:
        ValueError: NaN, an infinity, or a negative number (the message names ``--budget``).
    """
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit < 0:
        raise ValueError(f"--budget must be a finite number of dollars >= 0, not {limit!r}")
    return float(limit)


def dollar_figures(*amounts: float, digits: int = 4) -> list[str]:
    """Dollar amounts written with one precision, fine enough that each shows ``digits`` significant digits.

    A budget of $0.004 and a spend of $0.0031 read ``$0.004000`` and ``$0.003100``, not ``$0.00``
    and ``$0.0031``; $50 and $49.87654 read ``$50.00`` and ``$49.88`` (never fewer than cents).

    Args:
        amounts: dollars.
        digits: significant digits of the smallest non-zero amount.

    Returns:
        The texts, in the order given.
    """
    nonzero = [abs(a) for a in amounts if a and math.isfinite(a)]
    decimals = 2
    if nonzero:
        decimals = min(12, max(2, digits - 1 - math.floor(math.log10(min(nonzero)))))
    return [f"${a:,.{decimals}f}" for a in amounts]


def _lookup(table: Mapping[str, Price], entry: JudgeEntry) -> Price | None:
    for key in (entry.name, entry.spec, entry.model):
        if key and key in table:
            return table[key]
    return None


def resolve_prices(config: SweepConfig, cli_prices: Mapping[str, Price] | None = None) -> dict[str, Price | None]:
    """Every entry's price (None where none is known).

    Args:
        config: the sweep.
        cli_prices: the ``--prices`` table, which wins over the sweep file.

    Returns:
        Entry name -> price.
    """
    prices: dict[str, Price | None] = {}
    for entry in config.judges:
        price = _lookup(cli_prices, entry) if cli_prices else None
        if price is None:
            price = entry.price
        if price is None:
            price = _lookup(config.prices, entry)
        prices[entry.name] = price
    return prices


def result_cost(price: Price, result: JudgeResult, *, batch: bool = False) -> float | None:
    """A live result's cost, or None when the server reported no usage."""
    if result.prompt_tokens is None and result.completion_tokens is None:
        return None
    return price.cost(result.prompt_tokens or 0, result.completion_tokens or 0, batch=batch)


@dataclass
class CostEstimator:
    """Estimates the cost of an entry's next batch (see the module docstring).

    Attributes:
        price: the entry's price.
        template: the entry's prompt template (its fixed text counts toward the prompt size).
        max_tokens: the entry's answer limit, or None.
        spent: dollars of the answers seen so far.
        answered: answers seen so far.
    """

    price: Price
    template: PromptTemplate | None
    max_tokens: int | None
    spent: float = 0.0
    answered: int = 0
    _static_chars: int = field(default=-1, repr=False)

    def observe(self, cost: float, requests: int) -> None:
        """Count the cost of ``requests`` answers."""
        self.spent += cost
        self.answered += requests

    def observe_stored(self, judgments: Iterable[StoredJudgment]) -> None:
        """Count judgments stored before this sweep (their usage is the best estimate there is)."""
        for judgment in judgments:
            if judgment.prompt_tokens is None and judgment.completion_tokens is None:
                continue
            self.observe(judgment_cost(self.price, judgment), 1)

    def per_request(self, request: JudgeRequest, *, batch: bool = False) -> float:
        """The estimated cost of one request."""
        if self.answered:
            return self.spent / self.answered
        if self._static_chars < 0:
            self._static_chars = sum(len(chunk) for chunk in self.template.static_chunks()) if self.template else 0
        case = request.case
        chars = self._static_chars + len(case.question) + len(case.response_1) + len(case.response_2)
        prompt = chars / CHARS_PER_TOKEN + (IMAGE_TOKENS if case.image.kind != "none" else 0)
        completion = self.max_tokens or DEFAULT_COMPLETION_TOKENS
        return self.price.cost(int(prompt) + 1, completion, batch=batch)

    def batch(self, requests: Sequence[JudgeRequest], *, batch: bool = False) -> float:
        """The estimated cost of a batch."""
        return sum(self.per_request(r, batch=batch) for r in requests)


@dataclass
class Budget:
    """The most a sweep may cost, in dollars, shared by every entry with a price.

    Attributes:
        limit: the budget.
        spent: the cost of what is stored (before this sweep, and finished since).
        reserved: the estimates of the batches in flight.
        stopped: entries that stopped dispatching because their next batch would not fit.
    """

    limit: float
    spent: float = 0.0
    reserved: float = 0.0
    stopped: dict[str, int] = field(default_factory=dict)

    @property
    def remaining(self) -> float:
        """Dollars neither spent nor reserved."""
        return self.limit - self.spent - self.reserved

    def try_reserve(self, entry: str, estimate: float, pending: int) -> bool:
        """Reserve a batch's estimate, or refuse it (and mark the entry stopped).

        Args:
            entry: the entry's name.
            estimate: the batch's estimated cost.
            pending: requests the entry still had to judge, for the message.

        Returns:
            True when the batch may be sent.
        """
        if self.spent + self.reserved + estimate > self.limit + 1e-12:
            if entry not in self.stopped:
                self.stopped[entry] = pending
                used, limit = dollar_figures(self.spent + self.reserved, self.limit)
                log.info(
                    "budget: %s stops with %d requests left (next batch ~%s, %s of %s spent or in flight)",
                    entry,
                    pending,
                    dollar_figures(estimate)[0],
                    used,
                    limit,
                )
            return False
        self.reserved += estimate
        return True

    def settle(self, estimate: float, actual: float) -> None:
        """A reserved batch finished: its estimate is replaced by its actual cost."""
        self.reserved = max(0.0, self.reserved - estimate)
        self.spent += actual


class EndpointLimits:
    """One semaphore per capped base URL, shared by every judge that sends to it (see the module docstring).

    Args:
        caps: normalised base URL -> the most requests in flight to it.
    """

    def __init__(self, caps: Mapping[str, int]) -> None:
        self.caps = dict(caps)
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    def cap(self, base_url: str | None) -> int | None:
        """The cap of a URL, or None when it has none."""
        return None if base_url is None else self.caps.get(base_url)

    @contextlib.asynccontextmanager
    async def slot(self, base_url: str | None) -> AsyncIterator[None]:
        """Hold one of the URL's slots (no wait for a URL without a cap)."""
        cap = self.cap(base_url)
        if cap is None or base_url is None:
            yield
            return
        semaphore = self._semaphores.get(base_url)
        if semaphore is None:
            semaphore = self._semaphores[base_url] = asyncio.Semaphore(cap)
        async with semaphore:
            yield
