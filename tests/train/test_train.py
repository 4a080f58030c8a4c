"""Training: configuration, examples that match the evaluation prompt exactly, and SFT / DPO / RM runs
on a tiny random Qwen2-VL that produce checkpoints the ordinary judges load and evaluate."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.images import png_bytes
from typer.testing import CliRunner

from medrewardbench.cases import Case, ImageRef
from medrewardbench.data import load_benchmark
from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import DIMENSIONS, Order, to_position
from medrewardbench.evaluation.job import evaluate
from medrewardbench.evaluation.runner import to_stored
from medrewardbench.images import load_image
from medrewardbench.judges.base import JudgeResult
from medrewardbench.models.options import JudgeOptions, LocalSettings
from medrewardbench.parsing import parse_verdicts
from medrewardbench.prompts import load_template
from medrewardbench.train import (
    RecordingProgress,
    TrainConfig,
    judge_examples,
    read_training_card,
    reward_pairs,
    split_fold,
    train,
)
from medrewardbench.train.config import LANGUAGE_MODEL_LORA_TARGETS, ConfigError, lora_target_modules
from medrewardbench.train.examples import flip_letters, sft_rows, verdict_json, verdict_letters

# Tiny models on a 2-core runner: one thread avoids thread-synchronisation overhead that dominates
# such small matrices (the tests check behaviour, not speed).
QUICK = TrainConfig(max_steps=2, batch_size=2, grad_accum=1, learning_rate=1e-3, warmup_ratio=0.0, device="cpu")
EVAL_OPTIONS = JudgeOptions(max_tokens=64, local=LocalSettings(device="cpu", constrained=True))


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread() -> Iterator[None]:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def demo() -> Benchmark:
    return load_benchmark("demo").labeled()


def labelled_case(case_id: str, labels: dict[str, int], organ: str = "chest") -> Case:
    return Case(
        case_id=case_id,
        image=ImageRef.from_bytes(png_bytes((200, 40, 40), (64, 48), pattern="square"), name=f"{case_id}.png"),
        question="Is there a nodule in the left lung?",
        response_1="Yes: a nodule in the left upper lobe.",
        response_2="No; the lungs are clear.",
        labels=labels,
        organ_system=organ,
    )


# ---------------------------------------------------------------------------- configuration


def test_config_precedence_defaults_yaml_method_section_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text("epochs: 3\nlora_r: 8\nlearning_rate: '2e-4'\ndpo:\n  learning_rate: 5.0e-6\n  beta: 0.2\n")
    sft = TrainConfig.from_yaml(path, "sft")
    dpo = TrainConfig.from_yaml(path, "dpo")
    assert (sft.epochs, sft.lora_r, sft.learning_rate, sft.beta) == (3.0, 8, 2e-4, 0.1)
    assert (dpo.learning_rate, dpo.beta) == (5e-6, 0.2)
    flagged = dpo.with_overrides(lora_r=4, epochs=None)  # an unset flag changes nothing
    assert (flagged.lora_r, flagged.epochs) == (4, 3.0)
    assert TrainConfig().resolved_learning_rate("dpo") == 1e-5
    assert TrainConfig(learning_rate=1e-3).resolved_head_learning_rate() == pytest.approx(1e-2)


def test_config_rejects_unknown_keys_and_bad_values(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("lora_rank: 8\n")
    with pytest.raises(ConfigError, match="lora_rank.*known"):
        TrainConfig.from_yaml(path)
    with pytest.raises(ConfigError, match="heads"):
        TrainConfig(heads="many")
    with pytest.raises(ConfigError, match="batch_size"):
        TrainConfig().with_overrides(batch_size=0)
    with pytest.raises(ConfigError, match="invalid value"):
        TrainConfig().with_overrides(max_steps="lots")


def test_lora_targets_default_to_the_language_model_only() -> None:
    assert lora_target_modules("language-model") == LANGUAGE_MODEL_LORA_TARGETS
    assert lora_target_modules("q_proj, v_proj") == ["q_proj", "v_proj"]
    assert lora_target_modules("all-linear") == "all-linear"
    import re

    pattern = re.compile(LANGUAGE_MODEL_LORA_TARGETS)
    assert pattern.fullmatch("model.language_model.layers.0.self_attn.q_proj")
    assert not pattern.fullmatch("model.visual.blocks.0.attn.qkv")
    assert not pattern.fullmatch("model.vision_tower.encoder.layers.0.self_attn.q_proj")


# ---------------------------------------------------------------------------- examples


def test_sft_targets_parse_back_to_the_expert_labels_in_both_orders(demo: Benchmark) -> None:
    """A judge that answers exactly the SFT target is right on every dimension in both orders."""
    template = load_template("pairwise")
    examples, skipped = judge_examples(demo.cases[:6], (Order.ORIGINAL, Order.SWAPPED), template)
    assert skipped == [] and len(examples) == 12
    cases = {case.case_id: case for case in demo.cases}
    for example in examples:
        case = cases[example.case_id]
        parsed = parse_verdicts(example.chosen)
        assert parsed.failure is None and set(parsed.verdicts) == set(DIMENSIONS)
        from medrewardbench.judges.base import JudgeRequest

        stored = to_stored("fp", JudgeRequest(case, example.order), JudgeResult.from_parse(parsed, example.chosen))
        assert dict(stored.verdicts) == dict(case.labels)
        rejected = parse_verdicts(example.rejected)
        assert all(rejected.verdicts[d] != parsed.verdicts[d] for d in DIMENSIONS)
        # the target is the template's object: the six dimensions then "reason", in that order
        assert list(json.loads(example.chosen)) == [*DIMENSIONS, "reason"]


def test_letters_follow_the_presentation_order() -> None:
    labels = {d: 1 for d in DIMENSIONS} | {"creativity": 2}
    original = verdict_letters(labels, Order.ORIGINAL)
    swapped = verdict_letters(labels, Order.SWAPPED)
    assert original["accuracy"] == "A" and swapped["accuracy"] == "B"
    assert original["creativity"] == "B" and swapped["creativity"] == "A"
    assert flip_letters(original) == swapped
    assert json.loads(verdict_json(original))["reason"].startswith("Answer A is better on accuracy")
    assert all(to_position(labels[d], Order.SWAPPED) == swapped[d] for d in DIMENSIONS)


def test_partially_labelled_cases_are_left_out_of_sft_but_feed_reward_heads() -> None:
    partial = labelled_case("p", {"overall": 2, "accuracy": 1})
    full = labelled_case("f", {d: 1 for d in DIMENSIONS})
    examples, skipped = judge_examples([partial, full], (Order.ORIGINAL,), load_template("pairwise"))
    assert skipped == ["p"] and [e.case_id for e in examples] == ["f"]
    pairs = reward_pairs([partial, full], DIMENSIONS)
    assert pairs[0].targets == (1, 0, 0, 0, 0, -1)
    assert pairs[1].targets == (1,) * 6
    assert reward_pairs([labelled_case("none", {})], DIMENSIONS) == []


def test_training_prompt_is_exactly_the_evaluation_prompt(tiny_qwen2_vl: Path, demo: Benchmark) -> None:
    """TRL renders the SFT prompt; the hf: judge renders its prompt; they must be the same text."""
    from trl.data_utils import apply_chat_template, prepare_multimodal_messages

    from medrewardbench.models.generation import VLMGenerator

    generator = VLMGenerator.load(str(tiny_qwen2_vl), device="cpu", dtype="float32")
    template = load_template("pairwise")
    case = demo.cases[0]
    for order in (Order.ORIGINAL, Order.SWAPPED):
        (example,), _ = judge_examples([case], (order,), template)
        row = sft_rows([example])[0]
        prompt = prepare_multimodal_messages(row["prompt"], images=row["images"])
        completion = prepare_multimodal_messages(row["completion"])
        rendered = apply_chat_template({"prompt": prompt, "completion": completion}, generator.processor)
        first, second = (
            (case.response_1, case.response_2) if order is Order.ORIGINAL else (case.response_2, case.response_1)
        )
        judge_messages = template.render_messages(case.question, first, second, load_image(case.image))
        eval_prompt, images = generator.render_prompt(judge_messages)
        assert rendered["prompt"] == eval_prompt and len(images) == 1
        assert rendered["completion"].startswith(example.chosen)


# ---------------------------------------------------------------------------- trainers


def _fold_and_eval(demo: Benchmark) -> tuple[Any, Benchmark]:
    fold = split_fold(demo, 5, 0)
    return fold, fold.evaluation.select(limit=2)


@pytest.mark.parametrize("method", ["sft", "dpo"])
def test_trl_trainers_write_an_adapter_that_the_hf_judge_evaluates(
    method: str, tiny_qwen2_vl: Path, demo: Benchmark, tmp_path: Path
) -> None:
    fold, held_out = _fold_and_eval(demo)
    progress = RecordingProgress()
    config = QUICK.with_overrides(max_cases=3, save_steps=1, save_total_limit=1)
    result = train(method, str(tiny_qwen2_vl), demo, tmp_path / method, config, fold=fold, progress=progress)
    out = result.output_dir
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]  # save_total_limit=1
    card = read_training_card(out)
    assert card.method == method and card.base_model == str(tiny_qwen2_vl.resolve())
    assert card.data["data_hash"] == demo.data_hash()
    assert card.data["n_train_cases"] == 3 and card.data["n_train_examples"] == 6  # both orders
    assert card.fold is not None and card.fold["k"] == 5 and card.fold["index"] == 0
    assert set(card.fold["eval_case_ids"]) == set(fold.evaluation.case_ids())
    assert not set(card.train_case_ids) & set(card.eval_case_ids)
    assert card.hyperparameters["learning_rate"] == 1e-3 and card.hyperparameters["lora_r"] == 16
    assert card.losses["final"] is not None and len(card.losses["history"]) == 2
    assert card.performance["steps"] == 2 and card.performance["examples_per_s"] > 0
    assert Path(card.data["heldout_cases_file"]).is_file()
    if method == "dpo":
        assert card.losses["first"] == pytest.approx(math.log(2), abs=1e-4)  # policy == reference
    assert max(progress.steps) == 2 and progress.events[0] == ("start", (f"{method} {tiny_qwen2_vl.name}", 2))
    assert result.judge_spec == f"hf:{tiny_qwen2_vl}" and result.judge_adapter == str(out)
    evaluation = evaluate(
        held_out,
        [result.judge_spec],
        tmp_path / f"eval-{method}",
        options=EVAL_OPTIONS.with_local(adapter=result.judge_adapter),
    )
    run = evaluation.runs[0]
    assert run.config["adapter"] == str(out.resolve()) and run.config["adapter_sha256"]
    metrics = evaluation.metrics[run.run_id]
    assert (metrics.requests.judged, metrics.requests.failed) == (4, 0)  # constrained decoding always parses


def test_reward_model_trainer_writes_a_reward_model_that_the_rm_judge_evaluates(
    tiny_qwen2_vl: Path, demo: Benchmark, tmp_path: Path
) -> None:
    fold, held_out = _fold_and_eval(demo)
    config = QUICK.with_overrides(max_cases=4, save_steps=1)
    result = train("rm", str(tiny_qwen2_vl), demo, tmp_path / "rm", config, fold=fold)
    out = result.output_dir
    assert {p.name for p in out.iterdir()} >= {"reward_model.json", "reward_head.safetensors", "adapter"}
    assert (out / "checkpoint-1" / "reward_model.json").is_file()
    card = read_training_card(out)
    assert card.data["heads"] == list(DIMENSIONS) and card.data["n_train_examples"] == 4
    assert card.metrics["train_pair_accuracy"]["n"] == 24
    assert result.judge_spec == f"rm:{out}" and result.judge_adapter is None
    evaluation = evaluate(
        held_out, [result.judge_spec], tmp_path / "eval-rm", options=JudgeOptions(local=LocalSettings(device="cpu"))
    )
    run = evaluation.runs[0]
    assert run.metadata["sees_image"] is True and run.metadata["heads"] == list(DIMENSIONS)
    assert run.metadata["training"]["fold"] == [5, 0]
    assert evaluation.metrics[run.run_id].requests.judged == 4


def test_bradley_terry_training_visibly_learns_its_training_cases(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    """Eight cases with arbitrary labels: the loss falls and the model ranks its training pairs well."""
    import random

    rng = random.Random(7)
    words = ["nodule", "effusion", "fracture", "edema", "mass", "opacity", "lesion", "infarct"]
    cases = []
    for i, word in enumerate(words):
        cases.append(
            Case(
                case_id=f"bt-{i}",
                image=ImageRef.from_bytes(
                    png_bytes((30 * i, 200 - 20 * i, 90), (64, 48), pattern="square"), name=f"{i}.png"
                ),
                question=f"Is there a {word} on this image?",
                response_1=f"There is a {word} in the {rng.choice(['left', 'right'])} lobe.",
                response_2=f"No {word}; {rng.choice(['normal', 'benign'])} findings.",
                labels={d: rng.choice([1, 2]) for d in DIMENSIONS},
                organ_system="chest",
            )
        )
    benchmark = Benchmark("bt", "memory", tuple(cases))
    config = TrainConfig(
        max_steps=60, batch_size=4, grad_accum=1, learning_rate=5e-3, head_learning_rate=5e-2,
        warmup_ratio=0.0, lr_scheduler="constant", device="cpu", lora_r=4, lora_alpha=8, lora_dropout=0.0,
    )  # fmt: skip
    result = train("rm", str(tiny_qwen2_vl), benchmark, tmp_path / "bt", config)
    history = [entry["loss"] for entry in result.card.losses["history"]]
    assert sum(history[-5:]) / 5 < 0.6 * sum(history[:5]) / 5
    accuracy = result.card.metrics["train_pair_accuracy"]
    assert accuracy["n"] == 48 and accuracy["pooled"] >= 0.8  # chance is 0.5
    # and the rm: judge, loading the saved model, agrees with the experts on these same cases
    evaluation = evaluate(
        benchmark, [result.judge_spec], tmp_path / "bt-eval", options=JudgeOptions(local=LocalSettings(device="cpu"))
    )
    assert evaluation.leaderboard[0].score.point >= 0.8


# ---------------------------------------------------------------------------- CLI


def _app() -> Any:
    import typer

    from medrewardbench.cli.train import register_commands

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    register_commands(app)
    return app


def test_train_cli_with_a_fold_and_a_yaml_config(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    config = tmp_path / "rm.yaml"
    config.write_text("max_steps: 1\nbatch_size: 2\ngrad_accum: 1\ndevice: cpu\nrm:\n  heads: single\n")
    out = tmp_path / "rm-cli"
    result = CliRunner().invoke(
        _app(),
        ["train", "rm", "--base", str(tiny_qwen2_vl), "--data", "demo", "--limit", "10", "--folds", "3",
         "--fold", "1", "--config", str(config), "--out", str(out), "--lr", "1e-3"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    card = read_training_card(out)
    assert card.hyperparameters["heads"] == "single" and card.hyperparameters["learning_rate"] == 1e-3
    assert card.fold is not None and (card.fold["k"], card.fold["index"]) == (3, 1)
    assert json.loads((out / "reward_model.json").read_text())["heads"] == ["overall"]
    assert "trained rm" in result.output and f"--judge rm:{out}" in result.output
    heldout = load_benchmark(card.data["heldout_cases_file"])
    assert set(heldout.case_ids()) == set(card.eval_case_ids)
    # the hint evaluates the held-out cases, never the training set
    assert f"evaluate it on its held-out cases: medrewardbench eval --data {card.data['heldout_cases_file']}" in (
        result.output
    )


def test_train_without_folds_says_its_data_is_not_for_evaluating_it(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    out = tmp_path / "rm-all"
    result = CliRunner().invoke(
        _app(),
        ["train", "rm", "--base", str(tiny_qwen2_vl), "--data", "demo", "--limit", "6", "--max-steps", "1",
         "--batch-size", "2", "--grad-accum", "1", "--device", "cpu", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "it was trained on every labelled case of demo" in result.output
    assert "--folds K --fold I" in result.output and "heldout_cases.jsonl" in result.output
    assert "eval --data demo" not in result.output


def test_train_cli_errors_are_clear(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(_app(), ["train", "sft", "--base", "x", "--folds", "3"])
    assert result.exit_code == 2 and "--folds and --fold go together" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("nonsense_setting: 1\n")
    result = runner.invoke(_app(), ["train", "dpo", "--base", "x", "--config", str(bad)])
    assert result.exit_code == 2 and "nonsense_setting" in result.output


@pytest.mark.parametrize("family", ["tiny_qwen2_5_vl", "tiny_llava"])
def test_other_model_families_train_and_evaluate(family: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Qwen2.5-VL and LLaVA (CLIP + Llama) go through the same SFT and reward-model paths."""
    base = str(request.getfixturevalue(family))
    demo = load_benchmark("demo")
    fold = split_fold(demo.labeled(), 5, 1)
    held_out = fold.evaluation.select(limit=1)
    config = QUICK.with_overrides(max_steps=1, max_cases=2)
    for method in ("sft", "rm"):
        result = train(method, base, demo, tmp_path / method, config, fold=fold)
        options = EVAL_OPTIONS.with_local(adapter=result.judge_adapter)
        evaluation = evaluate(held_out, [result.judge_spec], tmp_path / f"eval-{method}", options=options)
        requests = evaluation.metrics[evaluation.runs[0].run_id].requests
        assert (requests.judged, requests.failed) == (2, 0)
