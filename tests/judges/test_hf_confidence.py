"""hf: judges give each verdict a probability from the model's own logits, checked against a forward pass."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.images import load_image
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.judges.hf import HFJudge
from medrewardbench.judges.registry import build_judge
from medrewardbench.models.generation import GenerationSettings, VLMGenerator
from medrewardbench.models.options import JudgeOptions, LocalSettings

from .test_hf_judge import make_cases

PREFIX = '{"accuracy": "'


def _judge(hf_judge: Any, requests: list[JudgeRequest]) -> list[JudgeResult]:
    return asyncio.run(hf_judge.judge_batch(requests))


def _consistent(result: JudgeResult) -> None:
    assert result.failure is None, result.failure
    assert set(result.preferences) == set(DIMENSIONS)
    for dim, p in result.preferences.items():
        assert 0.0 < p < 1.0
        assert (p > 0.5) == (result.verdicts[dim] == "A"), f"{dim}: P(A) = {p} beside verdict {result.verdicts[dim]}"


def _first_letter_probability(generator: VLMGenerator, request: JudgeRequest, hf_judge: HFJudge) -> float:
    """P(A) at the first generated token, computed by hand: one forward pass over the prompt and prefix."""
    import torch

    case = request.case
    messages = hf_judge.template.render_messages(
        case.question, request.response_a, request.response_b, load_image(case.image)
    )
    text, images = generator.render_prompt(messages, PREFIX)
    inputs = generator.processor(text=[text], images=images or None, return_tensors="pt")
    with torch.inference_mode():
        logits = generator.model(**inputs).logits[0, -1].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    letter_ids = {
        letter: [i for i, t in zip(*generator.letter_tokens(), strict=True) if t == letter] for letter in "AB"
    }
    p_a, p_b = (math.exp(float(logprobs[letter_ids[letter][0]])) for letter in "AB")
    return p_a / (p_a + p_b)


def test_a_constrained_judge_reports_the_models_own_probability_for_each_verdict(tiny_qwen2_vl: Path) -> None:
    hf_judge = build_judge(
        "hf:" + str(tiny_qwen2_vl) + "#constrained",
        JudgeOptions(max_tokens=120, local=LocalSettings(force_prefix=PREFIX)),
    )
    assert isinstance(hf_judge, HFJudge)
    request = JudgeRequest(make_cases()[0], Order.ORIGINAL)
    [result] = _judge(hf_judge, [request])
    _consistent(result)
    expected = _first_letter_probability(hf_judge.model.generator, request, hf_judge)
    assert result.preferences["accuracy"] == pytest.approx(expected, rel=1e-4)
    # the probabilities do not enter the fingerprint: they are read from the same generation
    assert "logprobs" not in hf_judge.config()


def test_unparseable_outputs_carry_no_probability(tiny_qwen2_vl: Path) -> None:
    hf_judge = build_judge("hf:" + str(tiny_qwen2_vl), JudgeOptions(max_tokens=8))
    results = _judge(hf_judge, [JudgeRequest(make_cases()[0], order) for order in Order])
    assert all(r.failure is not None and r.preferences == {} for r in results)


def test_the_generator_records_every_tokens_logprob_and_its_alternatives(tiny_llava: Path) -> None:
    generator = VLMGenerator.load(str(tiny_llava), device="cpu")
    conversation = [{"role": "user", "content": "Describe a normal chest radiograph in one sentence."}]
    settings = GenerationSettings(max_new_tokens=6)
    plain = generator.generate([conversation], settings)[0]
    generation, again = generator.generate([conversation, conversation], settings, top_logprobs=3)
    assert again == generation  # a batch of two: the same answer and numbers for both rows
    assert plain.tokens is None and generation.text == plain.text  # recording changes nothing
    assert generation.tokens is not None and len(generation.tokens) == generation.completion_tokens
    assert "".join(t.token for t in generation.tokens) == generation.text
    for token in generation.tokens:
        assert len(token.top) == 3 and token.top[0][1] >= token.top[1][1] >= token.top[2][1]
        assert token.top[0] == (token.token, pytest.approx(token.logprob))  # greedy: the most likely one
        assert token.logprob <= 0.0


@pytest.mark.slow
def test_every_family_gives_consistent_probabilities_in_both_orders(tiny_vlm: tuple[str, Path]) -> None:
    _family, path = tiny_vlm
    hf_judge = build_judge("hf:" + str(path), JudgeOptions(max_tokens=120, local=LocalSettings(constrained=True)))
    for result in _judge(hf_judge, [JudgeRequest(case, order) for case in make_cases() for order in Order]):
        _consistent(result)
