"""Running the medrewardbench/pairwise inspect task offline: inspect's mock model with scripted answers.

:func:`scripted_answer` decides a judge's answer from the prompt's user text alone (a hash picks
one of several shapes: a clean verdict, the other letters, a code fence with a draft, a cut-off
object, prose with no verdict), so the same prompt gets the same answer whether it reaches an
``api:`` judge through the test OpenAI server (:func:`api_responder`) or inspect's ``mockllm``
(:class:`MockJudge`). :func:`run_task` runs the task in this process and returns the log's path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS


def _letters(seed: int) -> dict[str, str]:
    return {d: "AB"[(seed >> i) & 1] for i, d in enumerate(DIMENSIONS)}


def scripted_answer(user_text: str) -> str:
    """A judge's answer that depends only on the user text of the prompt (deterministic)."""
    seed = int(hashlib.sha256(user_text.encode("utf-8")).hexdigest()[:8], 16)
    letters = _letters(seed >> 4)
    shape = seed % 6
    if shape in (0, 1):
        return json.dumps({**letters, "reason": f"scripted {seed % 97}"})
    if shape == 2:
        draft = json.dumps(dict.fromkeys(DIMENSIONS, "A"))
        return f"Draft: {draft}\nOn reflection:\n```json\n{json.dumps({**letters, 'reason': 'revised'})}\n```"
    if shape == 3:
        partial = {d: v for d, v in letters.items() if d != "overall"}
        return json.dumps({**partial, "reason": "no overall"})
    if shape == 4:
        return '{"accuracy": "' + letters["accuracy"] + '", "relevance": "' + letters["relevance"] + '", "compre'
    return "I cannot decide between the two answers."


def api_user_text(body: dict[str, Any]) -> str:
    """The user text of a Chat Completions request body."""
    return "\n".join(
        part.get("text", "")
        for message in body["messages"]
        if message.get("role") == "user"
        for part in (message["content"] if isinstance(message["content"], list) else [])
        if part.get("type") == "text"
    )


def api_image_urls(body: dict[str, Any]) -> list[str]:
    """The image URLs of a Chat Completions request body."""
    return [
        part["image_url"]["url"]
        for message in body["messages"]
        for part in (message["content"] if isinstance(message["content"], list) else [])
        if part.get("type") == "image_url"
    ]


def api_responder(body: dict[str, Any]) -> str:
    """The test OpenAI server's responder: :func:`scripted_answer` of the request's user text."""
    return scripted_answer(api_user_text(body))


class MockJudge:
    """``custom_outputs`` for inspect's mockllm: answers with :func:`scripted_answer`, records what it saw.

    Not a dataclass: inspect writes a dataclass given as a model argument into the log (and so
    into the imported run's configuration); a plain callable is logged as None.

    Args:
        error_when: a user text containing this raises (inspect records a sample error).
        answer: the answer to a user text.

    Attributes:
        seen: per call, the system text, the user text and the image URLs of the messages.
    """

    def __init__(self, error_when: str | None = None, answer: Callable[[str], str] = scripted_answer) -> None:
        self.error_when = error_when
        self.answer = answer
        self.seen: list[tuple[str, str, tuple[str, ...]]] = []

    def __call__(self, messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> Any:
        from inspect_ai.model import ModelOutput, ModelUsage

        system = "\n".join(m.text for m in messages if m.role == "system")
        user = [m for m in messages if m.role == "user"][-1]
        parts = user.content if isinstance(user.content, list) else []
        text = "\n".join(p.text for p in parts if p.type == "text") if parts else str(user.content)
        images = tuple(p.image for p in parts if p.type == "image")
        self.seen.append((system, text, images))
        if self.error_when is not None and self.error_when in text:
            raise RuntimeError("the provider refused the request (scripted)")
        output = ModelOutput.from_content(model="mockllm", content=self.answer(text))
        # usage given: mockllm would otherwise count tokens with tiktoken, which downloads its vocabulary
        output.usage = ModelUsage(input_tokens=len(text.split()), output_tokens=7, total_tokens=len(text.split()) + 7)
        return output


def run_task(log_dir: Path, judge: MockJudge, **task_args: Any) -> Path:
    """Run the task with inspect's mock model in this process and return the log file.

    Args:
        log_dir: where inspect writes the log.
        judge: the mock model's answers.
        **task_args: the task's arguments (data, organs, limit, orders, template) and, with an
            ``eval_`` prefix, arguments of ``inspect_ai.eval`` (``eval_fail_on_error=False``).

    Returns:
        The path of the log written.
    """
    from inspect_ai import eval as inspect_eval

    from medrewardbench.integrations.inspect.task import pairwise

    eval_args = {k.removeprefix("eval_"): v for k, v in task_args.items() if k.startswith("eval_")}
    args = {k: v for k, v in task_args.items() if not k.startswith("eval_")}
    logs = inspect_eval(
        pairwise(**args),
        model="mockllm/model",
        model_args={"custom_outputs": judge},
        log_dir=str(log_dir),
        display="none",
        **eval_args,
    )
    assert len(logs) == 1 and logs[0].location, logs
    return Path(logs[0].location)


def stored_rows(judgments: Iterable[Any]) -> dict[tuple[str, str], tuple[Any, ...]]:
    """What two runs must share per case and order: verdicts, raw output, failures, case hash."""
    return {
        (j.case_id, j.order.value): (
            j.verdicts,
            j.raw_output,
            j.failure,
            j.dimension_failures,
            j.case_hash,
            j.extra.get("parse_method"),
            j.extra.get("reason"),
        )
        for j in judgments
    }
