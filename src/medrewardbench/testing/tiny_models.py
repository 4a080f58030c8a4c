"""Tiny random-weight vision-language models, built offline for tests and demos.

Each builder writes a complete model directory (weights, config, tokenizer, image processor,
chat template) that :func:`medrewardbench.models.loading.load_vlm` loads back, in a few seconds
and under 2 MB. The weights are random but seeded, so two builds are identical and a greedy
generation is reproducible. They answer with nonsense, which is exactly what tests of failure
accounting need; constrained decoding (see :mod:`medrewardbench.models.constraints`) turns that nonsense
into parseable verdicts.

The tokenizer is a byte-level BPE trained on a few hundred strings (medical words, JSON
punctuation, the six dimension names and the letters ``A`` and ``B``), so every text is
encodable and a verdict JSON object takes a few dozen tokens.

Requires the ``hf`` extra (torch, transformers, tokenizers).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import require

logger = logging.getLogger(__name__)

__all__ = [
    "LLAVA_CHAT_TEMPLATE",
    "QWEN_CHAT_TEMPLATE",
    "build_tiny_llava",
    "build_tiny_qwen2_5_vl",
    "build_tiny_qwen2_vl",
    "build_tiny_text_llama",
    "train_tiny_tokenizer",
]

QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
LLAVA_SPECIAL_TOKENS: tuple[str, ...] = ("<unk>", "<s>", "</s>", "<pad>", "<image>")

#: The Qwen2-VL chat template, reduced to what the judges use (text and image parts).
QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or part['type'] == 'image_url' %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: A LLaVA-1.5 style template ("USER: <image>\n... ASSISTANT:").
LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}\n"
    "{% else %}"
    "{{ 'USER: ' if message['role'] == 'user' else 'ASSISTANT: ' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or part['type'] == 'image_url' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '</s>' if message['role'] == 'assistant' else '' }}\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)

# fmt: off
_MEDICAL_WORDS: tuple[str, ...] = (
    "patient", "image", "chest", "lung", "heart", "brain", "abdomen", "liver", "kidney", "bone",
    "fracture", "lesion", "mass", "nodule", "opacity", "effusion", "pneumonia", "edema", "tumor",
    "carcinoma", "benign", "malignant", "biopsy", "radiograph", "x-ray", "CT", "MRI", "ultrasound",
    "scan", "contrast", "axial", "sagittal", "coronal", "left", "right", "upper", "lower", "lobe",
    "finding", "diagnosis", "differential", "treatment", "follow-up", "recommend", "normal",
    "abnormal", "consistent", "with", "suggests", "likely", "unlikely", "shows", "there", "is",
    "no", "evidence", "of", "the", "a", "an", "and", "or", "in", "on", "at", "for", "to", "this",
    "answer", "question", "response", "better", "worse", "because", "more", "less", "clinical",
    "retina", "fundus", "microaneurysm", "hemorrhage", "stenosis", "aneurysm", "infarct",
    "hepatic", "renal", "cardiac", "pulmonary", "pleural", "thoracic", "cervical", "lumbar",
    "spine", "pelvis", "femur", "tibia", "humerus", "wrist", "ankle", "foot", "hand", "breast",
    "mammogram", "calcification", "oral", "cavity", "tooth", "eye", "stomach", "colon", "bowel",
    "gastrointestinal", "histology", "tissue", "cell", "stain", "physician", "doctor", "senior",
    "reviewing", "assistant", "criteria", "criterion", "compare", "decide", "reason", "sentence",
)
# fmt: on
_DIMENSION_TEXT = ", ".join(DIMENSIONS)


def _training_corpus() -> list[str]:
    """A few hundred deterministic strings covering the vocabulary the judges meet."""
    corpus: list[str] = []
    words = list(_MEDICAL_WORDS)
    for i, word in enumerate(words):
        following = words[(i * 7 + 3) % len(words)]
        corpus.append(f"The {word} {following} is {'A' if i % 2 else 'B'}.")
        corpus.append(f"{word.capitalize()}: {following}; {words[(i * 11 + 5) % len(words)]}")
    letters = ("A", "B")
    for i in range(64):
        verdict = {d: letters[(i >> k) & 1] for k, d in enumerate(DIMENSIONS)}
        verdict["reason"] = f"{words[i % len(words)]} {words[(i * 3) % len(words)]}"
        corpus.append(json.dumps(verdict))
        corpus.append(json.dumps(verdict, indent=2))
    for dimension in DIMENSIONS:
        corpus.append(f'"{dimension}": "A", "{dimension}": "B"')
        corpus.append(f"- {dimension}: which answer is better? A or B")
    corpus += [
        "[Answer A]",
        "[End of Answer A]",
        "[Answer B]",
        "[End of Answer B]",
        "Question:",
        "Look at the medical image and read the question and the two candidate answers.",
        _DIMENSION_TEXT,
        "```json",
        "```",
        "{}",
        "[]",
        '{"": ""}',
        "0123456789",
        "?!.,:;()[]{}'\"-_/",
        "abcdefghijklmnopqrstuvwxyz",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "USER: ASSISTANT: system user assistant",
    ]
    return corpus


def train_tiny_tokenizer(
    special_tokens: tuple[str, ...],
    *,
    vocab_size: int = 640,
    chat_template: str,
    **token_roles: str,
) -> Any:
    """Train a byte-level BPE tokenizer offline and wrap it in ``PreTrainedTokenizerFast``.

    Args:
        special_tokens: tokens added as special (never split, ids ``0..n-1``).
        vocab_size: target vocabulary size including the special tokens and the 256 bytes.
        chat_template: the Jinja chat template stored with the tokenizer.
        **token_roles: ``eos_token``, ``pad_token``, ``bos_token``, ``unk_token`` values.

    Returns:
        A ``PreTrainedTokenizerFast``.
    """
    tokenizers = require("tokenizers", "hf", "building a tiny tokenizer")
    transformers = require("transformers", "hf", "building a tiny tokenizer")
    models, pre_tokenizers, decoders, trainers = (
        tokenizers.models,  # type: ignore[attr-defined]
        tokenizers.pre_tokenizers,  # type: ignore[attr-defined]
        tokenizers.decoders,  # type: ignore[attr-defined]
        tokenizers.trainers,  # type: ignore[attr-defined]
    )
    tokenizer = tokenizers.Tokenizer(models.BPE())  # type: ignore[attr-defined]
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_training_corpus(), trainer=trainer)
    wrapped = transformers.PreTrainedTokenizerFast(  # type: ignore[attr-defined]
        tokenizer_object=tokenizer, **token_roles
    )
    wrapped.chat_template = chat_template
    return wrapped


def _seed(seed: int) -> None:
    torch: Any = require("torch", "hf", "building a tiny model")
    torch.manual_seed(seed)


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _build_tiny_qwen_family(path: str | Path, *, version: str, seed: int) -> Path:
    transformers: Any = require("transformers", "hf", "building a tiny model")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tiny_tokenizer(
        QWEN_SPECIAL_TOKENS,
        chat_template=QWEN_CHAT_TEMPLATE,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in QWEN_SPECIAL_TOKENS}
    head_dim = 16
    text_config: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 4096,
        # mrope_section must sum to head_dim / 2
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    assert text_config["hidden_size"] // text_config["num_attention_heads"] == head_dim
    common: dict[str, Any] = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": True,
    }
    if version == "2":
        vision_config: dict[str, Any] = {
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": 32,
            "mlp_ratio": 2,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        }
        config = transformers.Qwen2VLConfig(text_config=text_config, vision_config=vision_config, **common)
        model_class = transformers.Qwen2VLForConditionalGeneration
    else:
        vision_config = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "out_hidden_size": 32,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 56,
            "fullatt_block_indexes": [1],
        }
        config = transformers.Qwen2_5_VLConfig(text_config=text_config, vision_config=vision_config, **common)
        model_class = transformers.Qwen2_5_VLForConditionalGeneration
    _seed(seed)
    model = model_class(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.bos_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    image_processor = transformers.Qwen2VLImageProcessorPil(
        size={"shortest_edge": 56 * 56, "longest_edge": 112 * 112},
        patch_size=14,
        temporal_patch_size=2,
        merge_size=2,
    )
    image_processor.save_pretrained(out)
    (out / "chat_template.jinja").write_text(QWEN_CHAT_TEMPLATE, encoding="utf-8")
    processor_class = "Qwen2VLProcessor" if version == "2" else "Qwen2_5_VLProcessor"
    _write_json(out / "processor_config.json", {"processor_class": processor_class})
    logger.info("built tiny Qwen%s-VL at %s", "2" if version == "2" else "2.5", out)
    return out


def tiny_llama_config(tokenizer: Any, *, num_hidden_layers: int, **overrides: Any) -> Any:
    """The tiny Llama text configuration every builder here shares (32 hidden, 2 heads, 1 KV head).

    Args:
        tokenizer: the tiny tokenizer (vocabulary size and special token ids come from it).
        num_hidden_layers: decoder layers.
        overrides: further ``LlamaConfig`` fields (pad token, labels, positions, ...).

    Returns:
        A ``transformers.LlamaConfig``.
    """
    import transformers

    settings: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    settings.update(overrides)
    return transformers.LlamaConfig(**settings)


def build_tiny_qwen2_vl(path: str | Path, *, seed: int = 0) -> Path:
    """Build a tiny random Qwen2-VL (vision tower + Qwen2 text model) and save it to ``path``.

    Args:
        path: directory to write; created when missing.
        seed: torch seed for the random weights.

    Returns:
        The directory, loadable with :func:`medrewardbench.models.loading.load_vlm`.
    """
    return _build_tiny_qwen_family(path, version="2", seed=seed)


def build_tiny_qwen2_5_vl(path: str | Path, *, seed: int = 0) -> Path:
    """Build a tiny random Qwen2.5-VL and save it to ``path`` (see :func:`build_tiny_qwen2_vl`)."""
    return _build_tiny_qwen_family(path, version="2.5", seed=seed)


def build_tiny_llava(path: str | Path, *, seed: int = 0) -> Path:
    """Build a tiny random LLaVA (CLIP vision tower + Llama text model) and save it to ``path``.

    Args:
        path: directory to write; created when missing.
        seed: torch seed for the random weights.

    Returns:
        The directory; it round-trips through ``AutoProcessor`` / ``AutoModelForImageTextToText``.
    """
    transformers: Any = require("transformers", "hf", "building a tiny model")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tiny_tokenizer(
        LLAVA_SPECIAL_TOKENS,
        chat_template=LLAVA_CHAT_TEMPLATE,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    image_size, patch_size = 28, 14
    vision_config = transformers.CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=patch_size,
        projection_dim=32,
    )
    text_config = tiny_llama_config(
        tokenizer, num_hidden_layers=2, max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id
    )
    image_seq_length = (image_size // patch_size) ** 2
    config = transformers.LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=image_token_id,
        image_seq_length=image_seq_length,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        projector_hidden_act="gelu",
        tie_word_embeddings=True,
    )
    _seed(seed)
    model = transformers.LlavaForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.save_pretrained(out)
    image_processor = transformers.LlavaImageProcessorPil(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
    )
    processor = transformers.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch_size,
        vision_feature_select_strategy="default",
        chat_template=LLAVA_CHAT_TEMPLATE,
        image_token="<image>",
        num_additional_image_tokens=1,
    )
    processor.save_pretrained(out)
    logger.info("built tiny LLaVA at %s", out)
    return out


def build_tiny_text_llama(path: str | Path, *, seed: int = 0) -> Path:
    """Build a tiny text-only ``LlamaForCausalLM`` (for tests of the "not a VLM" error)."""
    transformers: Any = require("transformers", "hf", "building a tiny model")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tiny_tokenizer(
        LLAVA_SPECIAL_TOKENS,
        chat_template=LLAVA_CHAT_TEMPLATE,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    config = tiny_llama_config(tokenizer, num_hidden_layers=1, pad_token_id=tokenizer.pad_token_id)
    _seed(seed)
    transformers.LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
