"""What judging cost, from token usage and prices in dollars per million tokens.

Prices never change an output, so they are not part of a judge's fingerprint: a sweep records a
run's price and cost in the run's metadata (:data:`COST_KEY`), and reports read them from there
(:func:`recorded_cost`). A request answered through a provider's Batch API (its stored ``extra``
names a ``batch_id``) is charged at the batch prices when the price gives them.

A request asked again is billed again: a judgment that replaced a stored one carries the usage of
the one it replaced (``extra["earlier_usage"]``), counted in :func:`judgment_cost`. Totals over
runs (:func:`total_usd`) leave juries out: a jury's cost is its members'.

Cost per 1,000 cases divides by the cases judged in every order the run asked for (two requests
per case for both orders), so a run stopped early by a budget is priced per case it finished.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from medrewardbench.errors import MedRewardBenchError
from medrewardbench.evaluation.store import EARLIER_USAGE_KEY, StoredJudgment

__all__ = ["COST_KEY", "Price", "RunCost", "judgment_cost", "recorded_cost", "run_cost", "total_usd"]

COST_KEY = "cost"
"""The run metadata entry that holds a :meth:`RunCost.to_json` record."""
PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens.

    Attributes:
        input: per million prompt (input) tokens.
        output: per million completion (output) tokens.
        batch_input, batch_output: the same through the provider's Batch API; None: the live price.
    """

    input: float
    output: float
    batch_input: float | None = None
    batch_output: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "batch_input", "batch_output"):
            value = getattr(self, name)
            if value is None and name.startswith("batch"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise MedRewardBenchError(f"price {name} must be a number of dollars >= 0, not {value!r}")
            object.__setattr__(self, name, float(value))

    @property
    def is_free(self) -> bool:
        """True when every token costs nothing (a model served on one's own hardware)."""
        return self.input == 0 and self.output == 0 and not self.batch_input and not self.batch_output

    def cost(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float:
        """The dollars for one request's tokens.

        Args:
            prompt_tokens: input tokens.
            completion_tokens: output tokens.
            batch: answered through the Batch API.

        Returns:
            The cost in dollars.
        """
        price_in = self.batch_input if batch and self.batch_input is not None else self.input
        price_out = self.batch_output if batch and self.batch_output is not None else self.output
        return (prompt_tokens * price_in + completion_tokens * price_out) / PER_MILLION

    def to_json(self) -> dict[str, float]:
        """``{"input", "output"}`` plus the batch prices that are set."""
        out = {"input": self.input, "output": self.output}
        if self.batch_input is not None:
            out["batch_input"] = self.batch_input
        if self.batch_output is not None:
            out["batch_output"] = self.batch_output
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Price:
        """Read :meth:`to_json` output."""
        return cls(
            input=data["input"],
            output=data["output"],
            batch_input=data.get("batch_input"),
            batch_output=data.get("batch_output"),
        )


def judgment_cost(price: Price, judgment: StoredJudgment) -> float:
    """One stored judgment's cost, with the requests it replaced (tokens not reported count as zero).

    A request asked again (a failure retried with ``--retry-failures``, say an answer that could not
    be read) was billed each time: the store keeps the usage of the judgments replaced under
    ``extra["earlier_usage"]``, and it is counted here with the last answer's.

    Args:
        price: the model's price.
        judgment: the stored judgment (``extra["batch_id"]`` marks a Batch API answer).

    Returns:
        Dollars.
    """
    usd = price.cost(
        judgment.prompt_tokens or 0, judgment.completion_tokens or 0, batch=bool(judgment.extra.get("batch_id"))
    )
    earlier = judgment.extra.get(EARLIER_USAGE_KEY)
    if isinstance(earlier, Mapping):

        def tokens(name: str) -> int:
            value = earlier.get(name)
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

        usd += price.cost(tokens("prompt_tokens"), tokens("completion_tokens"))
        usd += price.cost(tokens("batch_prompt_tokens"), tokens("batch_completion_tokens"), batch=True)
    return usd


@dataclass(frozen=True)
class RunCost:
    """A run's cost, as a sweep records it in the run's metadata.

    Attributes:
        usd: dollars for every stored judgment of the run.
        per_1000_cases: dollars per 1,000 cases judged in every order (NaN when none was).
        cases: cases judged in every order of the run.
        requests: stored requests (judgments) counted.
        price: the price used; None for a jury, whose cost is its members'.
        members: for a jury, the member runs whose costs were added up.
    """

    usd: float
    per_1000_cases: float
    cases: int
    requests: int
    price: Price | None = None
    members: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The record kept under :data:`COST_KEY` (NaN as null)."""
        return {
            "usd": round(self.usd, 6),
            "per_1000_cases": None if math.isnan(self.per_1000_cases) else round(self.per_1000_cases, 6),
            "cases": self.cases,
            "requests": self.requests,
            "price": None if self.price is None else self.price.to_json(),
            "members": list(self.members),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunCost:
        """Read :meth:`to_json` output."""
        per_1000 = data.get("per_1000_cases")
        price = data.get("price")
        return cls(
            usd=float(data["usd"]),
            per_1000_cases=math.nan if per_1000 is None else float(per_1000),
            cases=int(data.get("cases", 0)),
            requests=int(data.get("requests", 0)),
            price=None if price is None else Price.from_json(price),
            members=tuple(str(m) for m in data.get("members", ())),
        )


def per_1000(usd: float, cases: int) -> float:
    """Dollars per 1,000 cases; NaN for no case."""
    return math.nan if cases <= 0 else usd / cases * 1000


def run_cost(price: Price, judgments: Iterable[StoredJudgment], n_orders: int) -> RunCost:
    """The cost of a run's stored judgments.

    Args:
        price: the model's price.
        judgments: the run's judgments (:meth:`~medrewardbench.evaluation.store.Store.judgments_for_run`).
        n_orders: the orders the run asks for per case (1 or 2).

    Returns:
        Dollars in all and per 1,000 cases judged in every order.
    """
    usd = 0.0
    requests = 0
    orders_per_case: dict[str, int] = {}
    for judgment in judgments:
        usd += judgment_cost(price, judgment)
        requests += 1
        orders_per_case[judgment.case_id] = orders_per_case.get(judgment.case_id, 0) + 1
    cases = sum(1 for count in orders_per_case.values() if count >= max(1, n_orders))
    return RunCost(usd=usd, per_1000_cases=per_1000(usd, cases), cases=cases, requests=requests, price=price)


def total_usd(costs: Iterable[RunCost]) -> float:
    """What a set of runs cost together: a jury's cost is its members' and is not added again.

    Args:
        costs: the runs' costs, juries (those with ``members``) among them or not.

    Returns:
        Dollars over the runs that sent requests.
    """
    return math.fsum(cost.usd for cost in costs if not cost.members)


def recorded_cost(metadata: Mapping[str, Any]) -> RunCost | None:
    """The cost a sweep recorded in a run's metadata, or None when it recorded none.

    Args:
        metadata: the run's metadata.

    Returns:
        The cost, or None (no price was known, or the run was not made by a sweep).
    """
    data = metadata.get(COST_KEY)
    if not isinstance(data, Mapping) or not isinstance(data.get("usd"), (int, float)):
        return None
    try:
        return RunCost.from_json(data)
    except (KeyError, TypeError, ValueError, MedRewardBenchError):
        return None
