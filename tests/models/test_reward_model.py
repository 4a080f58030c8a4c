"""The rm: judge: text-only sequence-classification reward models and image+text reward models
(backbone + linear heads), their directory format, scores stored with judgments, and ties."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers.images import png_bytes

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import JudgeSpecError
from medrewardbench.evaluation.job import evaluate
from medrewardbench.evaluation.store import Store
from medrewardbench.images import load_image
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.judges.registry import build_judge
from medrewardbench.judges.reward_model import TIE_REASON, RewardModelJudge, margin_probability
from medrewardbench.models.loading import ModelLoadError
from medrewardbench.models.options import JudgeOptions, LocalSettings
from medrewardbench.models.reward import (
    HEAD_FILE,
    REWARD_CARD_FILE,
    SINGLE_HEAD_NOTE,
    TEXT_ONLY_NOTE,
    RewardCard,
    RewardItem,
    VLMRewardModel,
)

CPU = JudgeOptions(local=LocalSettings(device="cpu", dtype="float32"))


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    """Tiny models on a 2-core runner run far faster on one thread (behaviour, not speed, is tested)."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def build_text_reward_model(path: Path, labels: Sequence[str] | None = None, *, chat: bool = True) -> Path:
    """A tiny ``LlamaForSequenceClassification``: one score, or one label per named dimension."""
    import torch
    import transformers

    from medrewardbench.testing.tiny_models import (
        LLAVA_CHAT_TEMPLATE,
        LLAVA_SPECIAL_TOKENS,
        tiny_llama_config,
        train_tiny_tokenizer,
    )

    tokenizer = train_tiny_tokenizer(
        LLAVA_SPECIAL_TOKENS, chat_template=LLAVA_CHAT_TEMPLATE, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    if not chat:
        tokenizer.chat_template = None
    names = list(labels or ["reward"])
    config = tiny_llama_config(
        tokenizer,
        num_hidden_layers=1,
        num_labels=len(names),
        id2label=dict(enumerate(names)),
        label2id={name: i for i, name in enumerate(names)},
    )
    torch.manual_seed(0)
    transformers.LlamaForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def text_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_text_reward_model(tmp_path_factory.mktemp("text-rm") / "single")


@pytest.fixture(scope="module")
def vlm_rm(tiny_qwen2_vl: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained multi-head image+text reward model directory (LoRA backbone) on the tiny Qwen2-VL."""
    model = VLMRewardModel.create(str(tiny_qwen2_vl), DIMENSIONS, device="cpu", dtype="float32", lora_r=4, seed=3)
    return model.save(tmp_path_factory.mktemp("vlm-rm") / "multi", training={"note": "untrained"})


def cases() -> tuple[Case, ...]:
    """Three labelled cases with real images; the third has two identical responses (a tie)."""
    return (
        Case(
            case_id="c1",
            image=ImageRef.from_bytes(png_bytes((220, 40, 40), (64, 48), pattern="square"), name="red.png"),
            question="Is there a mass in the left lung?",
            response_1="Yes, a nodule in the left upper lobe.",
            response_2="No mass; the lungs are clear and the heart is normal in size.",
            labels={d: 1 for d in DIMENSIONS},
            organ_system="chest",
        ),
        Case(
            case_id="c2",
            image=ImageRef.builtin("pydicom:CT_small.dcm"),
            question="What does this CT show?",
            response_1="An axial CT slice with normal findings.",
            response_2="Axial CT of the abdomen; the liver shows a small hypodense lesion.",
            labels={d: 2 for d in DIMENSIONS},
            organ_system="abdomen",
        ),
        Case(
            case_id="tie",
            image=ImageRef.from_bytes(png_bytes((40, 40, 220), (64, 48), pattern="square"), name="blue.png"),
            question="Is the heart enlarged?",
            response_1="The heart is normal in size.",
            response_2="The heart is normal in size.",
            labels={d: 1 for d in DIMENSIONS},
            organ_system="heart",
        ),
    )


def flat(rows: Sequence[Sequence[float]]) -> list[float]:
    return [value for row in rows for value in row]


def judge_all(judge: Any, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
    return asyncio.run(judge.judge_batch(requests))


def both_orders(items: Sequence[Case]) -> list[JudgeRequest]:
    return [JudgeRequest(case, order) for case in items for order in (Order.ORIGINAL, Order.SWAPPED)]


# ---------------------------------------------------------------------------- verdict logic (no model)


class FixedScorer:
    """Scores from a table: (answer text) -> per-head scores."""

    sees_image = False

    def __init__(self, heads: tuple[str, ...], table: dict[str, list[float]]):
        self.heads = heads
        self.table = table
        self.calls: list[int] = []

    def score(self, items: Sequence[RewardItem]) -> list[list[float]]:
        self.calls.append(len(items))
        if any(item.answer == "boom" for item in items):
            raise RuntimeError("scorer exploded")
        return [self.table[item.answer] for item in items]

    def config(self) -> dict[str, Any]:
        return {"heads": list(self.heads)}

    def metadata(self) -> dict[str, Any]:
        return {"sees_image": False}


def text_case(case_id: str, first: str, second: str) -> Case:
    return Case(case_id, ImageRef.empty(), "q?", first, second, labels={d: 1 for d in DIMENSIONS})


def test_higher_score_wins_in_presentation_order_and_each_answer_is_scored_once() -> None:
    scorer = FixedScorer(("reward",), {"good": [2.0], "bad": [-1.0]})
    judge = RewardModelJudge("rm:fixed", scorer)
    original, swapped = judge_all(judge, both_orders([text_case("c", "good", "bad")]))
    assert original.verdicts == {d: "A" for d in DIMENSIONS} and swapped.verdicts == {d: "B" for d in DIMENSIONS}
    assert original.scores == {"A": 2.0, "B": -1.0} and swapped.scores == {"A": -1.0, "B": 2.0}
    assert scorer.calls == [2]  # both orders reuse the same two scores
    assert original.extra == {"score_head": "reward"}


def test_each_verdicts_probability_is_the_sigmoid_of_the_score_margin() -> None:
    judge = RewardModelJudge("rm:fixed", FixedScorer(("reward",), {"good": [2.0], "bad": [-1.0]}))
    original, swapped = judge_all(judge, both_orders([text_case("c", "good", "bad")]))
    assert original.preferences == pytest.approx(dict.fromkeys(DIMENSIONS, 1 / (1 + math.exp(-3.0))))
    assert swapped.preferences == pytest.approx(dict.fromkeys(DIMENSIONS, 1 / (1 + math.exp(3.0))))
    heads = ("accuracy", "overall")
    multi = RewardModelJudge("rm:fixed", FixedScorer(heads, {"x": [1.0, 0.5], "y": [1.0, 0.7]}))
    [result] = judge_all(multi, [JudgeRequest(text_case("c", "x", "y"), Order.ORIGINAL)])
    assert result.preferences == pytest.approx({"overall": 1 / (1 + math.exp(0.2))})  # the tied head has none
    assert margin_probability(800.0, 0.0) == 1.0 and margin_probability(-800.0, 0.0) == 0.0  # no overflow
    assert margin_probability(0.3, 0.3) == 0.5


def test_ties_fail_per_dimension_or_as_a_whole() -> None:
    heads = ("accuracy", "overall")
    scorer = FixedScorer(heads, {"x": [1.0, 0.5], "y": [1.0, 0.7], "z": [float("nan"), 0.1]})
    judge = RewardModelJudge("rm:fixed", scorer)
    result = judge_all(judge, [JudgeRequest(text_case("c", "x", "y"), Order.ORIGINAL)])[0]
    assert result.failure is None and result.verdicts == {"overall": "B"}
    assert result.dimension_failures["accuracy"] == TIE_REASON
    assert result.dimension_failures["creativity"] == "the reward model has no head for this dimension"
    assert result.scores == {"accuracy": {"A": 1.0, "B": 1.0}, "overall": {"A": 0.5, "B": 0.7}}
    nan = judge_all(judge, [JudgeRequest(text_case("n", "z", "y"), Order.ORIGINAL)])[0]
    assert nan.dimension_failures["accuracy"] == "non-finite score" and nan.scores["accuracy"]["A"] is None
    single = RewardModelJudge("rm:fixed", FixedScorer(("reward",), {"same": [0.25]}))
    tied = judge_all(single, [JudgeRequest(text_case("t", "same", "same"), Order.SWAPPED)])[0]
    assert tied.failure == TIE_REASON and tied.verdicts == {} and tied.scores == {"A": 0.25, "B": 0.25}


def test_a_failing_item_does_not_sink_the_batch() -> None:
    scorer = FixedScorer(("reward",), {"good": [1.0], "bad": [0.0]})
    judge = RewardModelJudge("rm:fixed", scorer, batch_size=4)
    results = judge_all(judge, [JudgeRequest(text_case("ok", "good", "bad"), Order.ORIGINAL),
                                JudgeRequest(text_case("bad", "boom", "bad"), Order.ORIGINAL)])  # fmt: skip
    assert results[0].verdicts["overall"] == "A"
    assert results[1].failure is not None and "scorer exploded" in results[1].failure


# ---------------------------------------------------------------------------- text-only reward models


def test_text_only_reward_model_says_it_never_sees_the_image(text_rm: Path, tmp_path: Path) -> None:
    benchmark = Benchmark("rm-test", "memory", cases())
    result = evaluate(benchmark, [f"rm:{text_rm}"], tmp_path, options=CPU)
    run = result.runs[0]
    assert run.metadata["sees_image"] is False
    assert TEXT_ONLY_NOTE in run.metadata["notes"] and SINGLE_HEAD_NOTE in run.metadata["notes"]
    assert run.metadata["verdict_scope"] == "one head applied to every dimension"
    assert run.config["model_format"] == "sequence-classification" and run.config["heads"] == ["reward"]
    with Store.in_dir(tmp_path) as store:
        judgments = {(j.case_id, j.order): j for j in store.judgments_for_run(run)}
    first = judgments[("c1", Order.ORIGINAL)]
    assert first.failure is None and len(set(first.verdicts.values())) == 1  # one verdict for every dimension
    assert set(first.scores or {}) == {"A", "B"} and all(math.isfinite(v) for v in (first.scores or {}).values())
    # the tie: identical answers score identically, recorded as a failure that accuracy counts wrong
    tie = judgments[("tie", Order.SWAPPED)]
    assert tie.failure == TIE_REASON and tie.verdicts == {}
    metrics = result.metrics[run.run_id]
    assert metrics.failures == {TIE_REASON: 2}
    cell = metrics.accuracy["overall"]
    assert cell.n == 6 and cell.answered == 4
    # both orders of a case reuse the same scores, so the source winner never changes with the order
    assert metrics.position["overall"].consistency == 1.0


def test_text_only_multi_head_from_dimension_labels(tmp_path: Path) -> None:
    path = build_text_reward_model(tmp_path / "multi", ["Accuracy", "overall"], chat=False)
    judge = build_judge(f"rm:{path}", CPU)
    assert judge.scorer.heads == ("accuracy", "overall")
    result = judge_all(judge, [JudgeRequest(cases()[0], Order.ORIGINAL)])[0]
    assert set(result.verdicts) == {"accuracy", "overall"}
    assert set(result.scores or {}) == {"accuracy", "overall"}
    assert result.dimension_failures["relevance"] == "the reward model has no head for this dimension"
    assert judge.metadata()["single_head"] is False and TEXT_ONLY_NOTE in judge.metadata()["notes"]


def test_models_that_are_not_reward_models_are_refused(tmp_path: Path, tiny_qwen2_vl: Path) -> None:
    with pytest.raises(ModelLoadError, match="use hf: instead"):
        build_judge(f"rm:{tiny_qwen2_vl}", CPU)
    three = build_text_reward_model(tmp_path / "three", ["pos", "neg", "neutral"])
    with pytest.raises(ModelLoadError, match="num_labels=1"):
        build_judge(f"rm:{three}", CPU)
    with pytest.raises(JudgeSpecError):
        build_judge("rm:", CPU)


# ---------------------------------------------------------------------------- image+text reward models


def test_reward_model_directory_round_trips_exact_scores(vlm_rm: Path, tiny_qwen2_vl: Path) -> None:
    card = json.loads((vlm_rm / REWARD_CARD_FILE).read_text())
    assert card["format"] == "medrewardbench-reward-model" and card["version"] == 1
    assert card["heads"] == list(DIMENSIONS) and card["backbone"] == "adapter" and card["hidden_size"] == 32
    assert card["base_model"] == str(tiny_qwen2_vl.resolve()) and card["training"] == {"note": "untrained"}
    assert (vlm_rm / HEAD_FILE).is_file() and (vlm_rm / "adapter" / "adapter_config.json").is_file()
    image = load_image(cases()[0].image)
    items = [RewardItem("q?", "answer one", image), RewardItem("q?", "a longer answer two", image)]
    loaded = VLMRewardModel.load(vlm_rm, device="cpu", dtype="float32")
    again = VLMRewardModel.load(vlm_rm, base_model=str(tiny_qwen2_vl), device="cpu", dtype="float32")
    scores = loaded.score(items)
    assert len(scores) == 2 and len(scores[0]) == 6 and scores[0] != scores[1]
    assert flat(again.score(items)) == pytest.approx(flat(scores), abs=1e-6)
    # batching (padding) does not change a score beyond float noise
    assert flat(loaded.score(items[1:])) == pytest.approx(flat(scores[1:]), abs=1e-5)


def test_image_text_reward_model_judges_with_the_image(vlm_rm: Path, tmp_path: Path) -> None:
    benchmark = Benchmark("rm-test", "memory", cases())
    result = evaluate(benchmark, [f"rm:{vlm_rm}"], tmp_path, options=CPU)
    run = result.runs[0]
    assert run.metadata["sees_image"] is True and run.metadata["single_head"] is False
    assert run.metadata["verdict_scope"] == "one head per dimension"
    assert run.config["reward_model_sha256"] and run.config["heads"] == list(DIMENSIONS)
    with Store.in_dir(tmp_path) as store:
        rows = store.judgments_for_run(run)
    answered = [j for j in rows if j.case_id != "tie"]
    assert all(set(j.scores or {}) == set(DIMENSIONS) for j in answered)
    assert all(j.failure == TIE_REASON for j in rows if j.case_id == "tie")
    for j in answered:  # stored in source order: P(response_1 better) = sigmoid(score_1 - score_2)
        for dim, pair in (j.scores or {}).items():
            first, second = (pair["A"], pair["B"]) if j.order is Order.ORIGINAL else (pair["B"], pair["A"])
            assert j.preferences[dim] == pytest.approx(1 / (1 + math.exp(second - first)))
            assert (j.preferences[dim] > 0.5) == (j.verdicts[dim] == 1)
    assert all(j.preferences == {} for j in rows if j.case_id == "tie")
    # the image matters: the same texts with another image get other scores
    judge = build_judge(f"rm:{vlm_rm}", CPU)
    base_case = cases()[0]
    other = dataclasses.replace(
        base_case, case_id="other", image=ImageRef.builtin("pydicom:CT_small.dcm"), _hash_cache={}
    )
    first, second = judge_all(judge, [JudgeRequest(base_case, Order.ORIGINAL), JudgeRequest(other, Order.ORIGINAL)])
    assert first.scores != second.scores


def test_adapter_option_puts_a_reward_model_on_a_moved_base(vlm_rm: Path, tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in vlm_rm.rglob("*"):
        target = moved / path.relative_to(vlm_rm)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        else:
            target.write_bytes(path.read_bytes())
    card = json.loads((moved / REWARD_CARD_FILE).read_text())
    card["base_model"] = str(tmp_path / "no-such-base")
    (moved / REWARD_CARD_FILE).write_text(json.dumps(card))
    with pytest.raises(ModelLoadError, match="--adapter"):
        build_judge(f"rm:{moved}", CPU)
    judge = build_judge(f"rm:{tiny_qwen2_vl}", CPU.with_local(adapter=str(moved)))
    assert judge.scorer.heads == DIMENSIONS and judge.config()["base_model"] == str(tiny_qwen2_vl.resolve())


@pytest.mark.parametrize("backbone", ["frozen", "full"])
def test_single_head_with_frozen_or_full_backbone_round_trips(
    backbone: str, tiny_qwen2_vl: Path, tmp_path: Path
) -> None:
    model = VLMRewardModel.create(str(tiny_qwen2_vl), ("overall",), device="cpu", dtype="float32", backbone=backbone)
    assert bool(model.backbone_parameters()) is (backbone == "full")
    out = model.save(tmp_path / backbone)
    card = RewardCard.read(out)
    assert card.backbone == ("base" if backbone == "frozen" else "full") and card.single_head
    assert (out / "backbone").is_dir() is (backbone == "full")
    judge = build_judge(f"rm:{out}", CPU)
    result = judge_all(judge, [JudgeRequest(cases()[1], Order.SWAPPED)])[0]
    assert result.failure is None and set(result.verdicts) == set(DIMENSIONS)
    assert set(result.scores or {}) == {"A", "B"} and result.extra == {"score_head": "overall"}
    assert SINGLE_HEAD_NOTE in judge.metadata()["notes"]
    item = RewardItem("q?", "an answer", load_image(cases()[1].image))
    assert flat(judge.scorer.score([item])) == pytest.approx(flat(model.score([item])), abs=1e-6)


def test_bad_cards_and_heads_are_refused(vlm_rm: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a medrewardbench-reward-model"):
        RewardCard.from_dict({"format": "other"})
    good = json.loads((vlm_rm / REWARD_CARD_FILE).read_text())
    with pytest.raises(ModelLoadError, match="unsupported version"):
        RewardCard.from_dict({**good, "version": 99})
    with pytest.raises(ModelLoadError, match="every head"):
        RewardCard.from_dict({**good, "heads": ["overall", "helpfulness"]})
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / REWARD_CARD_FILE).write_text(json.dumps({**good, "hidden_size": 64, "backbone": "base"}))
    with pytest.raises(ModelLoadError, match="hidden size 64"):
        VLMRewardModel.load(broken, device="cpu")
