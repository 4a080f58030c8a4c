"""The optional ``api:`` paraphraser of the counterfactual probe: more harmless variants, written by a model.

``--rewriter api:MODEL`` sends each original answer once to an OpenAI-compatible endpoint through
the package's chat client (:class:`~medrewardbench.models.api.chat.ChatClient`: the same settings,
retries and key handling as ``api:`` judges) with :data:`PROMPT`, and the answer becomes an
``api_paraphrase`` variant. A failed request or an unchanged text skips that case (counted with
the reason). Nothing is sent unless the flag is given; tests run it against the local test server
(:mod:`medrewardbench.testing.openai_server`), never the network.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from medrewardbench.models.api.chat import ChatClient
from medrewardbench.models.options import JudgeOptions

__all__ = ["PROMPT", "as_rewriter", "paraphrases"]

PROMPT = (
    "Rewrite the following answer to a medical image question in different words. Keep every "
    "finding, number, side, organ, negation and recommendation exactly as it is; add nothing and "
    "leave nothing out. Reply with the rewritten answer only.\n\nAnswer:\n{answer}"
)
"""The rewriting instruction; ``{answer}`` is replaced by the original answer."""


def paraphrases(spec: str, answers: Sequence[str], options: JudgeOptions | None = None) -> dict[str, str | Exception]:
    """Each distinct answer rewritten by the ``api:`` model of ``spec``.

    Args:
        spec: ``api:MODEL``.
        answers: the original answers (duplicates are sent once).
        options: endpoint, key variable, timeout, retries, concurrency (``options.api``).

    Returns:
        answer -> its paraphrase, or a :class:`RuntimeError` naming why the request failed.

    Raises:
        ValueError: a spec that is not ``api:MODEL``.
    """
    kind, _, model = spec.partition(":")
    if kind != "api" or not model:
        raise ValueError(f"the rewriter must be api:MODEL, got {spec!r}")
    client = ChatClient(model, options or JudgeOptions(), spec=spec, purpose="the api: rewriter (--rewriter)")
    unique = list(dict.fromkeys(answers))

    async def run() -> list[str | Exception]:
        try:
            outcomes = await asyncio.gather(
                *(client.call([{"role": "user", "content": PROMPT.format(answer=a)}]) for a in unique)
            )
        finally:
            await client.aclose()
        return [
            o.text if o.failure is None and o.text is not None else RuntimeError(o.failure or "no text")
            for o in outcomes
        ]

    return dict(zip(unique, asyncio.run(run()), strict=True))


def as_rewriter(table: dict[str, str | Exception]) -> Callable[[str], str]:
    """A rewriter for :func:`~medrewardbench.probes.counterfactual.make_pairs` from :func:`paraphrases`' table.

    Args:
        table: answer -> paraphrase or the failure.

    Returns:
        A function giving the paraphrase, raising the recorded failure (the case is then skipped).
    """

    def rewrite(answer: str) -> str:
        value = table.get(answer, RuntimeError("not sent to the rewriter"))
        if isinstance(value, Exception):
            raise value
        return value

    return rewrite
