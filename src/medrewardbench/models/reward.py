r"""Reward-model networks and the image+text reward model format; judged by :mod:`medrewardbench.judges.reward_model`.

A reward model gives each (image, question, answer) a scalar score, on its own; the response with
the higher score wins. Two families are understood:

* **Image+text reward models** written by ``medrewardbench train rm``: a vision-language backbone
  (loaded with :func:`~medrewardbench.models.loading.load_vlm`) plus a linear head on the hidden
  state of the last real token. One head per dimension (*multi-head*: a verdict per dimension) or a
  single head (its verdict is applied to every dimension, and the run metadata says so).
* **Text-only reward models**: any transformers ``AutoModelForSequenceClassification`` checkpoint.
  They see the question and the answer but never the image; the run metadata records
  ``sees_image: false`` and a note. A model whose ``id2label`` names the six dimensions is read as
  multi-head; a model with one label as a single head.

Reward model directory format (version 1)::

    reward_model.json          the card: format, version, base_model, heads, hidden_size,
                               backbone ("base" | "adapter" | "full"), pooling, prompt_format,
                               training (free-form summary written by the trainer)
    reward_head.safetensors    "weight" (n_heads, hidden_size) and "bias" (n_heads,), float32
    adapter/                   backbone == "adapter": a PEFT LoRA adapter of base_model
    backbone/                  backbone == "full": a complete model directory (weights, processor)

``backbone == "base"`` means the head sits on the unchanged base model. Load with
``rm:DIR``; when the base model has moved, ``rm:BASE --adapter DIR`` overrides the card's
``base_model``.

The text the backbone reads (``prompt_format`` ``chat-v1``) is the model's chat template applied
to a user turn (the image, then ``"Question:\n" + question``) and an assistant turn (the answer).

Why one module of this size: the two reward-model families and their file format share loading and
scoring; the module is imported only with the [hf] extra.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from medrewardbench.dimensions import DIMENSIONS, normalize_dimension
from medrewardbench.errors import require
from medrewardbench.models.identity import files_sha256, resolve_model_name
from medrewardbench.models.loading import ModelLoadError, load_vlm, resolve_device, resolve_dtype

logger = logging.getLogger(__name__)

__all__ = [
    "ADAPTER_SUBDIR",
    "BACKBONE_SUBDIR",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "HEAD_FILE",
    "LARGE_FILE_BYTES",
    "PROMPT_FORMAT",
    "REWARD_CARD_FILE",
    "RewardCard",
    "RewardItem",
    "RewardScorer",
    "TextRewardModel",
    "VLMRewardModel",
    "is_reward_model_dir",
    "load_reward_model",
    "reward_messages",
]

REWARD_CARD_FILE = "reward_model.json"
HEAD_FILE = "reward_head.safetensors"
ADAPTER_SUBDIR = "adapter"
BACKBONE_SUBDIR = "backbone"
FORMAT_NAME = "medrewardbench-reward-model"
FORMAT_VERSION = 1
PROMPT_FORMAT = "chat-v1"
LARGE_FILE_BYTES = 1 << 30
"""Weight files larger than this are fingerprinted by name and size only, not read."""
TEXT_ONLY_NOTE = "text-only reward model: it scores the question and the answer and never sees the image"
SINGLE_HEAD_NOTE = "single-head reward model: its one verdict is applied to every dimension"
_BACKBONE_KINDS = ("base", "adapter", "full")


def _torch() -> Any:
    return require("torch", "hf", "reward models (rm: judges)")


@dataclass(frozen=True)
class RewardItem:
    """One thing to score: a question, an answer and (for image+text models) the image."""

    question: str
    answer: str
    image: Any | None = None


def reward_messages(question: str, answer: str, with_image: bool) -> list[dict[str, Any]]:
    """The chat a reward model reads (prompt format ``chat-v1``), with an image placeholder.

    Args:
        question: the question.
        answer: the answer to score.
        with_image: put a ``{"type": "image"}`` part first in the user turn.

    Returns:
        A user turn and an assistant turn.
    """
    user: list[dict[str, Any]] = [{"type": "image"}] if with_image else []
    user.append({"type": "text", "text": f"Question:\n{question}"})
    return [
        {"role": "user", "content": user},
        {"role": "assistant", "content": [{"type": "text", "text": answer}]},
    ]


@dataclass(frozen=True)
class RewardCard:
    """The JSON card of an image+text reward model directory (see the module docstring)."""

    base_model: str
    heads: tuple[str, ...]
    hidden_size: int
    backbone: str = "adapter"
    pooling: str = "last_token"
    prompt_format: str = PROMPT_FORMAT
    training: Mapping[str, Any] = field(default_factory=dict)

    @property
    def single_head(self) -> bool:
        """Whether the model has one head (its verdict then applies to every dimension)."""
        return len(self.heads) == 1

    def to_dict(self) -> dict[str, Any]:
        """The card as written to ``reward_model.json``."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "base_model": self.base_model,
            "heads": list(self.heads),
            "hidden_size": self.hidden_size,
            "backbone": self.backbone,
            "pooling": self.pooling,
            "prompt_format": self.prompt_format,
            "training": dict(self.training),
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any], where: str = "reward model card") -> RewardCard:
        """Validate and read a card.

        Raises:
            ModelLoadError: wrong format or version, or a missing or malformed field.
        """
        if payload.get("format") != FORMAT_NAME:
            raise ModelLoadError(f"{where}: not a {FORMAT_NAME} card (format={payload.get('format')!r})")
        if payload.get("version") != FORMAT_VERSION:
            raise ModelLoadError(f"{where}: unsupported version {payload.get('version')!r}; expected {FORMAT_VERSION}")
        try:
            heads = tuple(str(h) for h in payload["heads"])
            card = cls(
                base_model=str(payload["base_model"]),
                heads=heads,
                hidden_size=int(payload["hidden_size"]),
                backbone=str(payload.get("backbone", "adapter")),
                pooling=str(payload.get("pooling", "last_token")),
                prompt_format=str(payload.get("prompt_format", PROMPT_FORMAT)),
                training=dict(payload.get("training") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelLoadError(f"{where}: malformed card: {exc}") from exc
        if not heads or len(set(heads)) != len(heads):
            raise ModelLoadError(f"{where}: heads must be a non-empty list of distinct names")
        if len(heads) > 1 and any(h not in DIMENSIONS for h in heads):
            raise ModelLoadError(
                f"{where}: every head of a multi-head model must be a dimension ({', '.join(DIMENSIONS)})"
            )
        if card.backbone not in _BACKBONE_KINDS:
            raise ModelLoadError(f"{where}: backbone must be one of {', '.join(_BACKBONE_KINDS)}")
        if card.pooling != "last_token" or card.prompt_format != PROMPT_FORMAT:
            raise ModelLoadError(
                f"{where}: unsupported pooling {card.pooling!r} or prompt format {card.prompt_format!r}"
            )
        return card

    @classmethod
    def read(cls, directory: str | Path) -> RewardCard:
        """Read the card of a reward model directory.

        Args:
            directory: the model directory.

        Returns:
            The card.

        Raises:
            ModelLoadError: the card is missing, not JSON, or not a valid card.
        """
        path = Path(directory) / REWARD_CARD_FILE
        try:
            payload = json.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelLoadError(f"cannot read the reward model card {path}: {exc}") from exc
        if not isinstance(payload, Mapping):
            raise ModelLoadError(f"{path}: a reward model card must be a JSON object")
        return cls.from_dict(payload, str(path))


def is_reward_model_dir(path: str | Path) -> bool:
    """True when ``path`` is a directory written in the image+text reward model format."""
    return (Path(path) / REWARD_CARD_FILE).is_file()


class RewardScorer(Protocol):
    """What the judge needs from a reward model."""

    heads: tuple[str, ...]
    sees_image: bool

    def score(self, items: Sequence[RewardItem]) -> list[list[float]]:
        """One score per head for each item."""
        ...

    def config(self) -> dict[str, Any]:
        """Everything that can change a score (enters the judge fingerprint)."""
        ...

    def metadata(self) -> dict[str, Any]:
        """Facts worth recording that do not change scores."""
        ...


def _hidden_size(config: Any) -> int:
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    size = getattr(text_config, "hidden_size", None)
    if not isinstance(size, int):
        raise ModelLoadError("cannot find the language model's hidden_size in the model config")
    return size


def _last_token_index(attention_mask: Any) -> Any:
    """Index of the last real token of each row, for left or right padding."""
    torch = _torch()
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (attention_mask.long() * positions).argmax(dim=1)


class VLMRewardModel:
    """A vision-language backbone with a linear reward head per dimension (or a single head).

    Create a fresh one for training with :meth:`create`, load a trained one with :meth:`load`,
    score with :meth:`score` (no gradients) or :meth:`rewards` (differentiable).

    Args:
        backbone: the vision-language model.
        processor: its processor.
        head: the linear head (one output per head in ``card``).
        card: the reward model card.
        source: the directory it was loaded from, if any.
    """

    sees_image = True

    def __init__(self, backbone: Any, processor: Any, head: Any, card: RewardCard, *, source: str | None = None):
        self.backbone = backbone
        self.processor = processor
        self.head = head
        self.card = card
        self.heads = card.heads
        self.source = source

    # ------------------------------------------------------------------ construction

    @classmethod
    def create(
        cls,
        base_model: str,
        heads: Sequence[str],
        *,
        device: str = "auto",
        dtype: str = "auto",
        backbone: str = "lora",
        lora_r: int = 16,
        lora_alpha: int = 32,
        lora_dropout: float = 0.05,
        lora_targets: str | list[str] = "all-linear",
        seed: int = 0,
    ) -> VLMRewardModel:
        """A fresh reward model for training: the base backbone plus a randomly initialised head.

        Args:
            base_model: Hub id or directory of an image-text-to-text model.
            heads: the dimension of each head (one name for a single head).
            device: torch device or ``auto``.
            dtype: backbone dtype or ``auto``.
            backbone: ``lora`` (train a LoRA adapter), ``frozen`` (train the head only) or
                ``full`` (train every backbone weight).
            lora_r: LoRA rank.
            lora_alpha: LoRA alpha.
            lora_dropout: LoRA dropout.
            lora_targets: PEFT ``target_modules`` (a regular expression, ``"all-linear"`` or names);
                :func:`medrewardbench.train.config.lora_target_modules` turns a config value into one.
            seed: seed of the head initialisation (and the LoRA initialisation).

        Returns:
            The model, in training mode.
        """
        torch = _torch()
        model, processor = load_vlm(base_model, device=device, dtype=dtype)
        hidden = _hidden_size(model.config)
        torch.manual_seed(seed)
        if backbone == "lora":
            peft: Any = require("peft", "train", "LoRA reward models")
            lora = peft.LoraConfig(
                r=lora_r,
                lora_alpha=lora_alpha,
                lora_dropout=lora_dropout,
                target_modules=lora_targets,
            )
            model = peft.get_peft_model(model, lora)
            kind = "adapter"
        elif backbone == "frozen":
            for parameter in model.parameters():
                parameter.requires_grad_(False)
            kind = "base"
        elif backbone == "full":
            for parameter in model.parameters():
                parameter.requires_grad_(True)
            kind = "full"
        else:
            raise ValueError(f"backbone must be lora, frozen or full, got {backbone!r}")
        device_of_model = next(model.parameters()).device
        head = torch.nn.Linear(hidden, len(heads), dtype=torch.float32)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            head.weight.copy_(torch.randn(head.weight.shape, generator=generator) / math.sqrt(hidden))
            head.bias.zero_()
        head = head.to(device_of_model)
        card = RewardCard(
            base_model=resolve_model_name(base_model), heads=tuple(heads), hidden_size=hidden, backbone=kind
        )
        reward_model = cls(model, processor, head, card)
        reward_model.train()
        return reward_model

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        base_model: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
    ) -> VLMRewardModel:
        """Load a reward model directory (see the module docstring).

        Args:
            directory: the reward model directory.
            base_model: overrides the card's ``base_model`` (for ``base`` and ``adapter`` backbones).
            device: torch device or ``auto``.
            dtype: backbone dtype or ``auto``.

        Returns:
            The model in evaluation mode.

        Raises:
            ModelLoadError: unreadable card or head, a base model that cannot be loaded, or a head
                whose size does not match the backbone.
        """
        torch = _torch()
        safetensors_torch: Any = require("safetensors.torch", "hf", "reward models (rm: judges)")
        root = Path(directory)
        card = RewardCard.read(root)
        adapter: str | None = None
        if card.backbone == "full":
            source = str(root / BACKBONE_SUBDIR)
        else:
            source = base_model or card.base_model
            if card.backbone == "adapter":
                adapter = str(root / ADAPTER_SUBDIR)
                if not (Path(adapter) / "adapter_config.json").is_file():
                    raise ModelLoadError(f"{root}: the card names a LoRA adapter but {adapter} holds none")
        try:
            model, processor = load_vlm(source, device=device, dtype=dtype, adapter=adapter)
        except ModelLoadError as exc:
            hint = ""
            if card.backbone != "full" and base_model is None:
                hint = (
                    f" (the reward model at {root} was trained on {card.base_model!r}; when that base model lives "
                    f"elsewhere now, use rm:BASE_MODEL with --adapter {root})"
                )
            raise ModelLoadError(f"{exc}{hint}") from exc
        hidden = _hidden_size(model.config)
        if hidden != card.hidden_size:
            raise ModelLoadError(
                f"{root}: the head expects hidden size {card.hidden_size} but {source!r} has {hidden}; "
                "is this the base model the reward model was trained on?"
            )
        try:
            tensors = safetensors_torch.load_file(str(root / HEAD_FILE))
        except (OSError, RuntimeError, ValueError) as exc:
            raise ModelLoadError(f"cannot read the reward head {root / HEAD_FILE}: {exc}") from exc
        weight, bias = tensors.get("weight"), tensors.get("bias")
        if (
            weight is None
            or bias is None
            or tuple(weight.shape) != (len(card.heads), hidden)
            or tuple(bias.shape) != (len(card.heads),)
        ):
            raise ModelLoadError(
                f"{root / HEAD_FILE}: expected weight ({len(card.heads)}, {hidden}) and bias ({len(card.heads)},)"
            )
        head = torch.nn.Linear(hidden, len(card.heads), dtype=torch.float32)
        with torch.no_grad():
            head.weight.copy_(weight.float())
            head.bias.copy_(bias.float())
        head = head.to(next(model.parameters()).device).eval()
        reward_model = cls(model, processor, head, card, source=str(root))
        reward_model.eval()
        logger.info("loaded reward model %s (%d head(s): %s)", root, len(card.heads), ", ".join(card.heads))
        return reward_model

    def save(self, directory: str | Path, training: Mapping[str, Any] | None = None) -> Path:
        """Write the reward model directory (card, head, adapter or full backbone).

        Args:
            directory: where to write; created when missing.
            training: a summary to store in the card's ``training`` field.

        Returns:
            The directory.
        """
        safetensors_torch: Any = require("safetensors.torch", "hf", "saving reward models")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        if self.card.backbone == "adapter":
            self.backbone.save_pretrained(str(out / ADAPTER_SUBDIR))
        elif self.card.backbone == "full":
            self.backbone.save_pretrained(str(out / BACKBONE_SUBDIR))
            self.processor.save_pretrained(str(out / BACKBONE_SUBDIR))
        tensors = {
            "weight": self.head.weight.detach().float().cpu().contiguous(),
            "bias": self.head.bias.detach().float().cpu().contiguous(),
        }
        safetensors_torch.save_file(tensors, str(out / HEAD_FILE))
        card = RewardCard(
            base_model=self.card.base_model,
            heads=self.card.heads,
            hidden_size=self.card.hidden_size,
            backbone=self.card.backbone,
            training=dict(training or self.card.training),
        )
        (out / REWARD_CARD_FILE).write_text(json.dumps(card.to_dict(), indent=2, sort_keys=True) + "\n", "utf-8")
        return out

    # ------------------------------------------------------------------ modes and parameters

    def train(self) -> None:
        """Training mode (dropout on) for the trainable parts."""
        if self.card.backbone != "base":
            self.backbone.train()
        self.head.train()

    def eval(self) -> None:
        """Evaluation mode."""
        self.backbone.eval()
        self.head.eval()

    @contextmanager
    def evaluating(self) -> Any:
        """Evaluation mode inside the block, restoring the previous mode after it."""
        was_training = self.head.training
        self.eval()
        try:
            yield self
        finally:
            if was_training:
                self.train()

    def backbone_parameters(self) -> list[Any]:
        """Trainable backbone parameters (LoRA weights, everything, or none)."""
        return [p for p in self.backbone.parameters() if p.requires_grad]

    def head_parameters(self) -> list[Any]:
        """The head's trainable parameters."""
        return list(self.head.parameters())

    @property
    def device(self) -> Any:
        """The device of the backbone's parameters."""
        return next(self.backbone.parameters()).device

    @property
    def dtype(self) -> str:
        """The dtype of the backbone's parameters, e.g. ``"bfloat16"``."""
        return str(next(self.backbone.parameters()).dtype).removeprefix("torch.")

    def parameter_count(self) -> int:
        """How many parameters the backbone and the head have together."""
        return int(sum(p.numel() for p in self.backbone.parameters()) + sum(p.numel() for p in self.head.parameters()))

    # ------------------------------------------------------------------ scoring

    def encode(self, items: Sequence[RewardItem]) -> dict[str, Any]:
        """Tokenise a batch (right padding) and process its images, on the model's device."""
        texts: list[str] = []
        images: list[Any] = []
        for item in items:
            messages = reward_messages(item.question, item.answer, item.image is not None)
            texts.append(self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=False))
            if item.image is not None:
                images.append(item.image)
        features = self.processor(
            text=texts, images=images or None, padding=True, padding_side="right", return_tensors="pt"
        )
        if images and "pixel_values" not in features:
            raise RuntimeError(f"the processor returned no pixel_values for {len(images)} image(s)")
        dtype = next(self.backbone.parameters()).dtype
        device = self.device
        return {
            key: (
                value.to(device=device, dtype=dtype)
                if key.startswith("pixel_values") and value.is_floating_point()
                else value.to(device)
            )
            for key, value in features.items()
        }

    def _last_hidden_state(self, batch: Mapping[str, Any]) -> Any:
        torch = _torch()
        base = self.backbone.get_base_model() if hasattr(self.backbone, "get_base_model") else self.backbone
        inner = getattr(base, "model", None)
        if isinstance(inner, torch.nn.Module):
            output = inner(**batch)
            hidden = getattr(output, "last_hidden_state", None)
            if hidden is not None:
                return hidden
        output = base(**batch, output_hidden_states=True)
        return output.hidden_states[-1]

    def rewards(self, items: Sequence[RewardItem]) -> Any:
        """Differentiable rewards, a float32 tensor of shape (len(items), n_heads)."""
        return self.rewards_from_batch(self.encode(items))

    def rewards_from_batch(self, batch: Mapping[str, Any]) -> Any:
        """Differentiable rewards of an :meth:`encode` batch, float32 (batch size, n_heads)."""
        torch = _torch()
        hidden = self._last_hidden_state(batch)
        last = _last_token_index(batch["attention_mask"])
        pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last].float()
        return self.head(pooled)

    def score(self, items: Sequence[RewardItem]) -> list[list[float]]:
        """Scores without gradients, in evaluation mode: one list of head scores per item."""
        torch = _torch()
        if not items:
            return []
        with self.evaluating(), torch.inference_mode():
            return [[float(v) for v in row] for row in self.rewards(items).cpu().tolist()]

    # ------------------------------------------------------------------ description

    def config(self) -> dict[str, Any]:
        """Base model, hashes of the card, head and backbone files, heads and pooling: what can change a score."""
        root = Path(self.source) if self.source else None
        files: list[Path] = []
        if root is not None:
            files = [root / REWARD_CARD_FILE, root / HEAD_FILE]
            if self.card.backbone == "adapter":
                files += [root / ADAPTER_SUBDIR / n for n in ("adapter_config.json", "adapter_model.safetensors")]
            elif self.card.backbone == "full":
                files += sorted((root / BACKBONE_SUBDIR).glob("*.json")) + sorted(
                    (root / BACKBONE_SUBDIR).glob("*.safetensors")
                )
        base_name = getattr(self.backbone, "name_or_path", None) or getattr(
            getattr(self.backbone, "config", None), "_name_or_path", None
        )
        return {
            "model_format": FORMAT_NAME,
            "reward_model": str(root.resolve()) if root is not None else None,
            "reward_model_sha256": files_sha256(files, size_only_over=LARGE_FILE_BYTES) if files else None,
            "base_model": resolve_model_name(str(base_name))
            if self.card.backbone != "full" and base_name
            else self.card.base_model,
            "backbone": self.card.backbone,
            "heads": list(self.card.heads),
            "pooling": self.card.pooling,
            "prompt_format": self.card.prompt_format,
            "dtype": self.dtype,
        }

    def metadata(self) -> dict[str, Any]:
        """Heads, what the verdicts apply to, device, parameter count and model class."""
        notes = [SINGLE_HEAD_NOTE] if self.card.single_head else []
        return {
            "sees_image": True,
            "heads": list(self.card.heads),
            "single_head": self.card.single_head,
            "verdict_scope": "one head applied to every dimension"
            if self.card.single_head
            else "one head per dimension",
            "notes": notes,
            "device": str(self.device),
            "parameter_count": self.parameter_count(),
            "model_class": type(self.backbone).__name__,
            "training": dict(self.card.training),
        }


class TextRewardModel:
    """A transformers sequence-classification reward model: text only, it never sees the image.

    Args:
        model: the sequence-classification model.
        tokenizer: its tokenizer.
        heads: the dimension each output scores (one name: a single head).
        name: the model name or path it was loaded from.
        adapter: the LoRA adapter loaded onto it, if any.
    """

    sees_image = False

    def __init__(self, model: Any, tokenizer: Any, heads: tuple[str, ...], *, name: str, adapter: str | None = None):
        self.model = model
        self.tokenizer = tokenizer
        self.heads = heads
        self.name = name
        self.adapter = adapter

    @classmethod
    def load(
        cls, name_or_path: str, *, device: str = "auto", dtype: str = "auto", adapter: str | None = None
    ) -> TextRewardModel:
        """Load a sequence-classification model and its tokenizer.

        Raises:
            ModelLoadError: the model cannot be loaded, or its labels are neither one score nor
                the six dimensions.
        """
        transformers: Any = require("transformers", "hf", "reward models (rm: judges)")
        resolved_device = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, resolved_device)
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(name_or_path)
            model = transformers.AutoModelForSequenceClassification.from_pretrained(name_or_path, dtype=torch_dtype)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load the reward model {name_or_path!r}: {exc}") from exc
        heads = _heads_from_labels(model.config, name_or_path)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        if adapter:
            peft: Any = require("peft", "hf", "LoRA adapters for rm: judges")
            try:
                model = peft.PeftModel.from_pretrained(model, adapter)
            except (OSError, ValueError, KeyError) as exc:
                raise ModelLoadError(f"cannot load the adapter {adapter!r} onto {name_or_path!r}: {exc}") from exc
        model = model.to(resolved_device).eval()
        logger.warning("rm:%s is a text-only reward model; it will not see the images", name_or_path)
        return cls(model, tokenizer, heads, name=name_or_path, adapter=adapter)

    def _text(self, item: RewardItem) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            messages = [
                {"role": "user", "content": item.question},
                {"role": "assistant", "content": item.answer},
            ]
            text: str = self.tokenizer.apply_chat_template(messages, tokenize=False)
            return text
        return f"Question:\n{item.question}\n\nAnswer:\n{item.answer}"

    def score(self, items: Sequence[RewardItem]) -> list[list[float]]:
        """Score each question and answer as text (the image is not seen); one score per head."""
        torch = _torch()
        if not items:
            return []
        max_length = getattr(self.tokenizer, "model_max_length", None)
        limit = max_length if isinstance(max_length, int) and 0 < max_length < 1_000_000 else None
        encoded = self.tokenizer(
            [self._text(item) for item in items],
            padding=True,
            truncation=limit is not None,
            max_length=limit,
            return_tensors="pt",
            add_special_tokens=not getattr(self.tokenizer, "chat_template", None),
        )
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            logits = self.model(**{k: v.to(device) for k, v in encoded.items()}).logits.float()
        return [[float(v) for v in row] for row in logits.cpu().tolist()]

    def config(self) -> dict[str, Any]:
        """Model, revision, adapter and heads: everything that can change a score."""
        return {
            "model_format": "sequence-classification",
            "model": resolve_model_name(self.name),
            "model_revision": getattr(self.model.config, "_commit_hash", None),
            "adapter": resolve_model_name(self.adapter) if self.adapter else None,
            "adapter_sha256": files_sha256(
                [Path(self.adapter) / n for n in ("adapter_config.json", "adapter_model.safetensors")],
                size_only_over=LARGE_FILE_BYTES,
            )
            if self.adapter
            else None,
            "heads": list(self.heads),
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
        }

    def metadata(self) -> dict[str, Any]:
        """Heads, what the verdicts apply to, that the model sees no image, device and size."""
        single = len(self.heads) == 1
        return {
            "sees_image": False,
            "heads": list(self.heads),
            "single_head": single,
            "verdict_scope": "one head applied to every dimension" if single else "one head per dimension",
            "notes": [TEXT_ONLY_NOTE, *([SINGLE_HEAD_NOTE] if single else [])],
            "device": str(next(self.model.parameters()).device),
            "parameter_count": int(sum(p.numel() for p in self.model.parameters())),
            "model_class": type(self.model).__name__,
        }


def _heads_from_labels(config: Any, name: str) -> tuple[str, ...]:
    num_labels = int(getattr(config, "num_labels", 1))
    id2label = getattr(config, "id2label", None) or {}
    labels = [str(id2label.get(i, id2label.get(str(i), ""))) for i in range(num_labels)]
    dimensions = [normalize_dimension(label) for label in labels]
    if num_labels > 1 and all(d is not None for d in dimensions) and len(set(dimensions)) == num_labels:
        return tuple(d for d in dimensions if d is not None)
    if num_labels == 1:
        return ("reward",)
    raise ModelLoadError(
        f"{name!r} has {num_labels} labels ({', '.join(labels)}); an rm: judge needs one reward score "
        f"(num_labels=1) or one label per dimension named after it ({', '.join(DIMENSIONS)})"
    )


def _is_sequence_classifier(name_or_path: str) -> bool:
    transformers: Any = require("transformers", "hf", "reward models (rm: judges)")
    try:
        config = transformers.AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the model config of {name_or_path!r}: {exc}") from exc
    architectures = getattr(config, "architectures", None) or []
    return any(str(a).endswith("ForSequenceClassification") for a in architectures)


def load_reward_model(
    name_or_path: str, *, device: str = "auto", dtype: str = "auto", adapter: str | None = None
) -> VLMRewardModel | TextRewardModel:
    """Load whatever reward model a spec names.

    Args:
        name_or_path: a reward model directory, or a sequence-classification model (Hub id or
            directory), or (with ``adapter``) the base model of a reward model directory.
        device: torch device or ``auto``.
        dtype: dtype or ``auto``.
        adapter: a reward model directory to put on ``name_or_path`` as base model, or a PEFT
            adapter for a sequence-classification model.

    Raises:
        ModelLoadError: the path is neither kind of reward model, or loading fails.
    """
    if adapter and is_reward_model_dir(adapter):
        return VLMRewardModel.load(adapter, base_model=name_or_path, device=device, dtype=dtype)
    if is_reward_model_dir(name_or_path):
        if adapter:
            raise ModelLoadError(
                f"{name_or_path} is a reward model directory already; --adapter must be empty or name another "
                "reward model directory to put on a base model"
            )
        return VLMRewardModel.load(name_or_path, device=device, dtype=dtype)
    if _is_sequence_classifier(name_or_path):
        return TextRewardModel.load(name_or_path, device=device, dtype=dtype, adapter=adapter)
    raise ModelLoadError(
        f"{name_or_path!r} is not a reward model: an rm: judge needs a directory written by "
        f"'medrewardbench train rm' (with {REWARD_CARD_FILE}) or a transformers sequence-classification model; "
        "for a generative vision-language judge use hf: instead"
    )
