"""The hf: judge on real tiny transformers models (Qwen2-VL, Qwen2.5-VL, LLaVA), built offline.

Random weights answer with nonsense: that exercises failure accounting for real. Constrained
decoding turns the same models into parseable judges, which exercises the parsed path end to end.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers.images import png_bytes

from medrewardbench.cases import Case, ImageRef
from medrewardbench.dimensions import DIMENSIONS, Order
from medrewardbench.errors import MissingExtraError, install_command
from medrewardbench.images import load_image
from medrewardbench.judges.base import JudgeRequest, JudgeResult
from medrewardbench.judges.hf import HFJudge
from medrewardbench.judges.registry import build_judge
from medrewardbench.models.constraints import VerdictConstraint, verdict_skeleton
from medrewardbench.models.generation import GenerationSettings, VLMGenerator
from medrewardbench.models.identity import config_hash
from medrewardbench.models.loading import ModelLoadError, load_vlm, resolve_device, resolve_dtype
from medrewardbench.models.options import JudgeOptions, LocalSettings
from medrewardbench.prompts import load_template

PREFIX = '{"accuracy": "'


def make_cases() -> list[Case]:
    """Two cases with real images (a PNG and pydicom's CT_small) and responses of unequal length."""
    return [
        Case(
            case_id="png-1",
            image=ImageRef.from_bytes(png_bytes((220, 40, 40), (64, 48), pattern="square"), name="red.png"),
            question="Is there a mass in the left lung?",
            response_1="Yes, a nodule in the left upper lobe.",
            response_2="No mass; the lungs are clear and the heart is normal in size.",
            organ_system="chest",
        ),
        Case(
            case_id="ct-1",
            image=ImageRef.builtin("pydicom:CT_small.dcm"),
            question="What does this CT show?",
            response_1="An axial CT slice with normal findings.",
            response_2="Axial CT of the abdomen; the liver shows a small hypodense lesion.",
            organ_system="abdomen",
        ),
    ]


def both_orders(cases: Sequence[Case]) -> list[JudgeRequest]:
    return [JudgeRequest(case, order) for case in cases for order in (Order.ORIGINAL, Order.SWAPPED)]


def judge(hf_judge: Any, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
    return asyncio.run(hf_judge.judge_batch(list(requests)))


def vision_tower(model: Any) -> Any:
    """The vision encoder module of a Qwen-VL (``visual``) or LLaVA (``vision_tower``) model."""
    matches = [
        (name, module) for name, module in model.named_modules() if name.split(".")[-1] in ("visual", "vision_tower")
    ]
    assert matches, f"no vision tower found in {type(model).__name__}"
    return min(matches, key=lambda item: len(item[0]))[1]


def test_each_family_judges_both_orders_and_records_failures(tiny_vlm: tuple[str, Path]) -> None:
    family, path = tiny_vlm
    hf_judge = build_judge("hf:" + str(path), JudgeOptions(max_tokens=12, batch_size=4))
    assert isinstance(hf_judge, HFJudge)
    seen: list[tuple[int, ...]] = []
    hook = vision_tower(hf_judge.model.generator.model).register_forward_hook(
        lambda _module, args, _output: seen.append(tuple(args[0].shape))
    )
    try:
        results = judge(hf_judge, both_orders(make_cases()))
    finally:
        hook.remove()
    assert len(results) == 4
    # the vision tower really received pixels: one call per generate, covering four images
    assert seen, f"{family}: pixel_values never reached the vision tower"
    assert all(shape and shape[0] > 0 for shape in seen)
    for result in results:
        assert result.failure, f"{family}: random weights should not produce a parseable verdict"
        assert result.verdicts == {}
        assert result.raw_output is not None and result.raw_output != ""
        assert result.prompt_tokens is not None and result.prompt_tokens > 50
        assert result.completion_tokens is not None and 1 <= result.completion_tokens <= 12
        assert result.latency_s is not None and result.latency_s > 0
        assert result.extra["finish_reason"] in ("stop", "length")


def test_constrained_decoding_gives_six_parsed_verdicts(tiny_vlm: tuple[str, Path]) -> None:
    family, path = tiny_vlm
    hf_judge = build_judge("hf:" + str(path), JudgeOptions(max_tokens=120, local=LocalSettings(constrained=True)))
    results = judge(hf_judge, both_orders(make_cases()))
    assert len(results) == 4
    for result in results:
        assert result.failure is None, f"{family}: {result.failure} in {result.raw_output!r}"
        assert set(result.verdicts) == set(DIMENSIONS)
        assert set(result.verdicts.values()) <= {"A", "B"}
        assert result.raw_output is not None
        assert json.loads(result.raw_output) == dict(result.verdicts)
        assert result.extra["finish_reason"] == "stop"
    assert hf_judge.config()["constrained"] is True


def test_force_prefix_with_constraint_is_kept_in_raw_output(tiny_qwen2_vl: Path) -> None:
    hf_judge = build_judge(
        "hf:" + str(tiny_qwen2_vl) + "#constrained",
        JudgeOptions(max_tokens=120, local=LocalSettings(force_prefix=PREFIX)),
    )
    assert hf_judge.config()["constrained"] is True
    assert hf_judge.config()["force_prefix"] == PREFIX
    results = judge(hf_judge, both_orders(make_cases()[:1]))
    for result in results:
        assert result.raw_output is not None and result.raw_output.startswith(PREFIX)
        assert result.failure is None
        assert set(result.verdicts) == set(DIMENSIONS)


def test_force_prefix_alone_steers_the_continuation(tiny_llava: Path) -> None:
    plain = build_judge("hf:" + str(tiny_llava), JudgeOptions(max_tokens=6))
    steered = build_judge("hf:" + str(tiny_llava), JudgeOptions(max_tokens=6, local=LocalSettings(force_prefix=PREFIX)))
    requests = both_orders(make_cases()[:1])
    plain_results, steered_results = judge(plain, requests), judge(steered, requests)
    for result in steered_results:
        assert result.raw_output is not None and result.raw_output.startswith(PREFIX)
        assert result.prompt_tokens is not None
    # the prefix is part of the prompt the model reads
    assert steered_results[0].prompt_tokens > plain_results[0].prompt_tokens  # type: ignore[operator]
    assert steered.fingerprint() != plain.fingerprint()


def test_force_prefix_that_leaves_the_skeleton_is_refused(tiny_qwen2_vl: Path) -> None:
    with pytest.raises(ValueError, match="not the start of the verdict skeleton"):
        build_judge(
            "hf:" + str(tiny_qwen2_vl), JudgeOptions(local=LocalSettings(force_prefix="Answer:", constrained=True))
        )


def test_batch_of_three_equals_three_singles_under_greedy_decoding(tiny_vlm: tuple[str, Path]) -> None:
    family, path = tiny_vlm
    cases = make_cases()
    extra_case = Case(
        case_id="png-2",
        image=ImageRef.from_bytes(png_bytes((30, 200, 60), (40, 90), pattern="square"), name="green.png"),
        question="Any fracture?",
        response_1="No.",
        response_2="A displaced fracture of the distal radius is visible near the wrist joint.",
    )
    requests = [
        JudgeRequest(cases[0], Order.ORIGINAL),
        JudgeRequest(cases[1], Order.SWAPPED),
        JudgeRequest(extra_case, Order.ORIGINAL),
    ]
    hf_judge = build_judge("hf:" + str(path), JudgeOptions(max_tokens=10, batch_size=3))
    batched = judge(hf_judge, requests)
    singles = [judge(hf_judge, [request])[0] for request in requests]
    # prompts differ in length, so the batch really was left-padded
    assert len({r.prompt_tokens for r in batched}) > 1
    assert [r.raw_output for r in batched] == [r.raw_output for r in singles], family
    assert [r.prompt_tokens for r in batched] == [r.prompt_tokens for r in singles]


def test_sampling_is_reproducible_with_a_seed(tiny_qwen2_vl: Path) -> None:
    options = JudgeOptions(max_tokens=10, temperature=1.0, top_p=0.95, seed=7)
    hf_judge = build_judge("hf:" + str(tiny_qwen2_vl), options)
    requests = both_orders(make_cases()[:1])
    first, second = judge(hf_judge, requests), judge(hf_judge, requests)
    assert [r.raw_output for r in first] == [r.raw_output for r in second]
    sampling = hf_judge.config()["sampling"]
    assert sampling["do_sample"] is True and sampling["temperature"] == 1.0 and sampling["top_p"] == 0.95
    greedy = build_judge("hf:" + str(tiny_qwen2_vl), JudgeOptions(max_tokens=10))
    assert greedy.fingerprint() != hf_judge.fingerprint()


def test_a_bad_image_fails_its_request_only(tiny_qwen2_vl: Path) -> None:
    good = make_cases()[0]
    broken = Case(
        case_id="broken",
        image=ImageRef.from_bytes(b"this is not an image", name="broken.png"),
        question="?",
        response_1="a",
        response_2="b",
    )
    no_image = Case(case_id="text-only", image=ImageRef.empty(), question="Q?", response_1="x", response_2="y")
    hf_judge = build_judge(
        "hf:" + str(tiny_qwen2_vl), JudgeOptions(max_tokens=5, local=LocalSettings(constrained=False))
    )
    results = judge(
        hf_judge,
        [
            JudgeRequest(good, Order.ORIGINAL),
            JudgeRequest(broken, Order.ORIGINAL),
            JudgeRequest(no_image, Order.ORIGINAL),
        ],
    )
    assert results[1].failure is not None and "image could not be loaded" in results[1].failure
    assert results[1].raw_output is None
    for result in (results[0], results[2]):
        assert result.raw_output  # generated, then failed to parse
        assert result.prompt_tokens is not None
    # the case without an image has no image tokens in its prompt
    assert results[2].prompt_tokens < results[0].prompt_tokens  # type: ignore[operator]


def test_generation_does_not_block_the_event_loop(tiny_qwen2_vl: Path) -> None:
    hf_judge = build_judge("hf:" + str(tiny_qwen2_vl), JudgeOptions(max_tokens=64, batch_size=4))
    requests = both_orders(make_cases())

    async def scenario() -> tuple[int, float]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.002)

        task = asyncio.create_task(ticker())
        start = time.perf_counter()
        await hf_judge.judge_batch(requests)
        elapsed = time.perf_counter() - start
        done.set()
        await task
        return ticks, elapsed

    ticks, elapsed = asyncio.run(scenario())
    assert elapsed > 0.02
    assert ticks >= 5, f"the loop ticked {ticks} times during {elapsed:.2f}s of generation"


def test_config_and_metadata_describe_the_judge(tiny_qwen2_5_vl: Path) -> None:
    hf_judge = build_judge("hf:" + str(tiny_qwen2_5_vl), JudgeOptions(template="pairwise-cot", max_tokens=33))
    config = hf_judge.config()
    template = load_template("pairwise-cot")
    assert config["model"] == str(tiny_qwen2_5_vl.resolve())
    assert config["template"] == "pairwise-cot" and config["template_sha256"] == template.sha256
    assert config["dtype"] == "float32"
    assert config["sampling"]["max_new_tokens"] == 33 and config["sampling"]["do_sample"] is False
    assert config["adapter"] is None and config["constrained"] is False
    assert config["chat_template_sha256"]
    metadata = hf_judge.metadata()
    assert metadata["device"] == "cpu"
    assert 10_000 < metadata["parameter_count"] < 1_000_000
    assert metadata["processor_class"].endswith("WithoutVideo")  # torchvision is absent here
    assert hf_judge.batch_size == 4 and hf_judge.needs_images


def test_hf_fingerprints_equal_those_before_the_settings_were_typed(tiny_qwen2_vl: Path) -> None:
    # computed on commit 787aae5 (constrained decoding then came from JudgeOptions.extra), with the
    # model's path replaced, since the tiny model lives in a temporary directory
    def without_path(hf_judge: Any, suffix: str) -> str:
        return config_hash({**hf_judge.config(), "model": "<tiny-qwen2-vl>", "spec": f"hf:<tiny-qwen2-vl>{suffix}"})

    sampled = JudgeOptions(
        seed=5,
        max_tokens=64,
        temperature=0.7,
        top_p=0.8,
        batch_size=2,
        local=LocalSettings(device="cpu", dtype="float32", force_prefix=PREFIX),
    )
    suffixed = build_judge(f"hf:{tiny_qwen2_vl}#constrained", sampled)
    assert without_path(suffixed, "#constrained") == "5b65c6dd9106de1dc4a92523e2e5f3598ce5631a449b84a737a0e250f66073da"
    constrained = build_judge(f"hf:{tiny_qwen2_vl}", JudgeOptions(local=LocalSettings(device="cpu", constrained=True)))
    assert without_path(constrained, "") == "5c2161697166cd0dde235cdbdd75f108a85f3df30a495b3beb6678a5a966f988"


def test_lora_adapter_loads_and_changes_the_fingerprint(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft")
    torch = pytest.importorskip("torch")
    base_model, processor = load_vlm(str(tiny_qwen2_vl))
    torch.manual_seed(1)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft.get_peft_model(base_model, lora).save_pretrained(tmp_path / "adapter")
    base = build_judge("hf:" + str(tiny_qwen2_vl), JudgeOptions(max_tokens=4))
    adapted = build_judge(
        "hf:" + str(tiny_qwen2_vl), JudgeOptions(max_tokens=4, local=LocalSettings(adapter=str(tmp_path / "adapter")))
    )
    assert isinstance(adapted.model.generator.model, peft.PeftModel)
    assert adapted.fingerprint() != base.fingerprint()
    assert adapted.config()["adapter_sha256"]
    assert adapted.metadata()["parameter_count"] > base.metadata()["parameter_count"]
    # the adapter's weights are active: the same input gives different logits
    text, images = base.model.generator.render_prompt(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "image": load_image(make_cases()[0].image)},
                    {"type": "text", "text": "hi"},
                ],
            }
        ]
    )
    inputs = processor(text=[text], images=images, return_tensors="pt")
    with torch.no_grad():
        base_logits = base.model.generator.model(**inputs).logits
        adapted_logits = adapted.model.generator.model(**inputs).logits
    assert not torch.allclose(base_logits, adapted_logits)
    results = judge(adapted, both_orders(make_cases()[:1]))
    assert all(r.raw_output for r in results)


def test_the_generator_writes_free_text_for_any_conversation_without_the_verdict_template(
    tiny_qwen2_vl: Path,
) -> None:
    generator = VLMGenerator.load(str(tiny_qwen2_vl), device="cpu")
    text_only = [{"role": "user", "content": "Describe a normal chest radiograph in one sentence."}]
    with_image = [
        {"role": "system", "content": "You are a radiologist."},
        {
            "role": "user",
            "content": [
                {"type": "image", "image": load_image(make_cases()[0].image)},
                {"type": "text", "text": "Which organ is shown?"},
            ],
        },
    ]
    prompt, images = generator.render_prompt(text_only)
    assert images == [] and "radiograph" in prompt
    assert not any(d in prompt for d in DIMENSIONS), "nothing of the judge's template is added"
    greedy = GenerationSettings(max_new_tokens=7)
    first = generator.generate([text_only, with_image], greedy)
    assert [g.finish_reason in ("stop", "length") for g in first] == [True, True]
    assert all(0 < g.completion_tokens <= 7 for g in first)
    assert first[1].prompt_tokens > first[0].prompt_tokens  # the image's tokens are counted
    assert generator.generate([text_only, with_image], greedy) == first
    # sampling draws different answers under different seeds (a pool of responses to one question)
    sampled = {
        generator.generate([text_only], GenerationSettings(max_new_tokens=7, temperature=1.0, seed=seed))[0].text
        for seed in range(4)
    }
    assert len(sampled) > 1


def test_text_only_model_is_refused_clearly(tiny_text_llama: Path) -> None:
    with pytest.raises(ModelLoadError, match="is not an image-text-to-text model; medrewardbench hf: judges need"):
        build_judge("hf:" + str(tiny_text_llama))


def test_unknown_path_is_a_clear_error(tmp_path: Path) -> None:
    pytest.importorskip("transformers")  # without it, the missing extra is the error
    with pytest.raises(ModelLoadError, match="cannot load the model config"):
        load_vlm(str(tmp_path / "nowhere"))


def test_missing_transformers_names_the_hf_extra(tiny_llava: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingExtraError) as caught:
        load_vlm(str(tiny_llava))
    assert caught.value.extra == "hf"
    assert install_command("hf") in str(caught.value)
    assert "transformers" in str(caught.value)


def test_missing_peft_names_the_hf_extra(tiny_llava: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(MissingExtraError, match=r"\[hf\]'$") as caught:
        load_vlm(str(tiny_llava), adapter="/some/adapter")
    assert caught.value.module == "peft"


def test_missing_torch_in_a_fresh_interpreter_names_the_hf_extra(tiny_llava: Path) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from medrewardbench.judges.registry import build_judge\n"
        "from medrewardbench.errors import MissingExtraError\n"
        "try:\n"
        f"    build_judge({'hf:' + str(tiny_llava)!r})\n"
        "except MissingExtraError as exc:\n"
        "    print('EXTRA', exc.extra, exc)\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert "EXTRA hf" in completed.stdout, completed.stderr
    assert "[hf]'" in completed.stdout


def test_resolve_device_and_dtype() -> None:
    torch = pytest.importorskip("torch")
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("CPU") == "cpu"
    assert resolve_dtype("auto", "cpu") is torch.float32
    assert resolve_dtype("bf16", "cpu") is torch.bfloat16
    assert resolve_dtype("torch.float16", "cpu") is torch.float16
    with pytest.raises(ModelLoadError, match="unknown dtype"):
        resolve_dtype("float8", "cpu")


def test_verdict_constraint_allows_only_the_skeleton(tiny_qwen2_vl: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_qwen2_vl))
    eos = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    constraint = VerdictConstraint(tokenizer, eos)
    skeleton = verdict_skeleton()
    assert constraint.consumed(skeleton) == len(skeleton)
    assert constraint.consumed('{"accuracy": "C"') is None
    first = {tokenizer.decode([t]) for t in constraint.allowed_token_ids("")}
    assert first and all('{"accuracy": "A'.startswith(s) or '{"accuracy": "B'.startswith(s) for s in first)
    slot = {tokenizer.decode([t]) for t in constraint.allowed_token_ids('{"accuracy": "')}
    assert slot and all(s[0] in "AB" for s in slot)
    assert constraint.allowed_token_ids(skeleton) == eos


def test_tiny_model_builds_are_deterministic_and_small(tiny_qwen2_vl: Path, tmp_path: Path) -> None:
    from medrewardbench.testing.tiny_models import build_tiny_qwen2_vl

    again = build_tiny_qwen2_vl(tmp_path / "again")
    for name in ("model.safetensors", "tokenizer.json", "config.json", "preprocessor_config.json"):
        assert (again / name).read_bytes() == (tiny_qwen2_vl / name).read_bytes(), name
    assert sum(f.stat().st_size for f in again.iterdir()) < 2_000_000
