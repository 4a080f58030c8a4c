"""Loading local transformers vision-language models (and their processors) for judging and training.

:func:`load_vlm` is the one entry point: a Hub id or a local directory in, ``(model, processor)``
out, on the requested device and dtype, with an optional LoRA adapter applied. It is shared by the
``hf:`` judges, the OpenAI-compatible server (:mod:`medrewardbench.serve`), reward models and
training recipes.

Two traps it guards against:

* A text-only model (``LlamaForCausalLM``) cannot judge images. It is refused with a clear error
  instead of a deep transformers traceback or, worse, a judge that never looks at the image.
* The Qwen2-VL family's processor wants a video processor, which needs torchvision. Without
  torchvision ``AutoProcessor`` either fails or quietly returns only the tokenizer, and the model
  then never receives ``pixel_values``. The processor is then built explicitly from the tokenizer
  and the PIL image processor, and a probe checks that an image really turns into ``pixel_values``.

torch and transformers are imported lazily; a missing one raises
:class:`~medrewardbench.errors.MissingExtraError` naming the ``hf`` extra.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path
from typing import Any

from medrewardbench.errors import MedRewardBenchError, require

logger = logging.getLogger(__name__)

__all__ = [
    "QWEN_VL_MODEL_TYPES",
    "ModelLoadError",
    "check_processor_sees_images",
    "load_processor",
    "load_vlm",
    "resolve_device",
    "resolve_dtype",
]

#: model types whose processor needs the torchvision-free workaround
QWEN_VL_MODEL_TYPES: tuple[str, ...] = ("qwen2_vl", "qwen2_5_vl")

_DTYPE_ALIASES: dict[str, str] = {
    "float32": "float32",
    "fp32": "float32",
    "float": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
}


class ModelLoadError(MedRewardBenchError, ValueError):
    """A model, processor or adapter cannot be loaded, or cannot be used as an image judge."""


def _torch() -> Any:
    return require("torch", "hf", "local transformers models (hf: judges)")


def _transformers() -> Any:
    return require("transformers", "hf", "local transformers models (hf: judges)")


def resolve_device(device: str = "auto") -> str:
    """Turn ``"auto"`` into ``"cuda"`` when a GPU is visible, else ``"cpu"``; other values pass.

    Args:
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ...

    Returns:
        A device string torch understands.
    """
    value = (device or "auto").strip().lower()
    if value != "auto":
        return value
    torch = _torch()
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str = "auto", device: str = "cpu") -> Any:
    """Turn a dtype name into a ``torch.dtype``.

    Args:
        dtype: ``"auto"`` (bfloat16 on CUDA when supported, float16 on older GPUs, float32
            elsewhere), or a name such as ``"float32"``, ``"bf16"``, ``"fp16"``.
        device: the resolved device (see :func:`resolve_device`).

    Returns:
        The torch dtype.

    Raises:
        ModelLoadError: for an unknown dtype name.
    """
    torch = _torch()
    value = (dtype or "auto").strip().lower()
    if value == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if value.startswith("torch."):
        value = value[len("torch.") :]
    canonical = _DTYPE_ALIASES.get(value)
    if canonical is None:
        raise ModelLoadError(
            f"unknown dtype {dtype!r}; expected auto or one of {', '.join(sorted(set(_DTYPE_ALIASES)))}"
        )
    return getattr(torch, canonical)


def _load_config(name_or_path: str) -> Any:
    transformers = _transformers()
    try:
        return transformers.AutoConfig.from_pretrained(name_or_path)
    except (OSError, ValueError) as exc:
        hint = ""
        if not Path(name_or_path).exists():
            hint = (
                " (it is not a local directory; a Hub id needs network access or a copy in the local "
                "Hugging Face cache, and HF_HUB_OFFLINE=1 forbids downloads)"
            )
        raise ModelLoadError(f"cannot load the model config of {name_or_path!r}{hint}: {exc}") from exc


def _not_a_vlm_error(name_or_path: str, model_type: str, detail: str = "") -> ModelLoadError:
    return ModelLoadError(
        f"{name_or_path!r} (model_type {model_type!r}) is not an image-text-to-text model; "
        "medrewardbench hf: judges need a vision-language model that AutoModelForImageTextToText "
        "can load (for example Qwen2-VL, Qwen2.5-VL, LLaVA, Idefics, PaliGemma, Gemma 3)"
        + (f": {detail}" if detail else "")
    )


def _is_image_text_to_text(config: Any) -> bool:
    transformers = _transformers()
    mapping = transformers.models.auto.modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    return getattr(config, "model_type", None) in mapping


@cache
def _no_video_processor_class(base_name: str) -> Any:
    """A subclass of a Qwen-VL processor that has no video processor (so no torchvision).

    ``ProcessorMixin`` derives its sub-processors from the ``__init__`` signature, so leaving
    ``video_processor`` out of the signature is what removes it.
    """
    transformers = _transformers()
    base = getattr(transformers, base_name)
    mixin = transformers.ProcessorMixin

    def __init__(  # becomes a method
        self: Any, image_processor: Any = None, tokenizer: Any = None, chat_template: Any = None, **kwargs: Any
    ) -> None:
        self.image_token = getattr(tokenizer, "image_token", "<|image_pad|>")
        self.video_token = getattr(tokenizer, "video_token", "<|video_pad|>")
        self.image_token_id = getattr(tokenizer, "image_token_id", None) or tokenizer.convert_tokens_to_ids(
            self.image_token
        )
        self.video_token_id = getattr(tokenizer, "video_token_id", None) or tokenizer.convert_tokens_to_ids(
            self.video_token
        )
        mixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    return type(f"{base_name}WithoutVideo", (base,), {"__init__": __init__, "__module__": __name__})


def _read_chat_template(name_or_path: str, tokenizer: Any) -> str | None:
    """The chat template shipped with a model: ``chat_template.jinja``/``.json`` or the tokenizer's."""
    hub = require("huggingface_hub", "hf", "local transformers models (hf: judges)")
    for filename in ("chat_template.jinja", "chat_template.json"):
        local = Path(name_or_path) / filename
        path: str | None = str(local) if local.is_file() else None
        if path is None and not Path(name_or_path).exists():
            try:
                path = hub.hf_hub_download(name_or_path, filename)  # type: ignore[attr-defined]
            except Exception:  # absent file or offline: try the next source
                path = None
        if path is None:
            continue
        text = Path(path).read_text("utf-8")
        if filename.endswith(".json"):
            import json

            text = json.loads(text).get("chat_template", "")
        if text:
            return text
    template = getattr(tokenizer, "chat_template", None)
    return template if isinstance(template, str) and template else None


def _build_qwen_vl_processor(name_or_path: str, model_type: str) -> Any:
    """Build a Qwen2-VL / Qwen2.5-VL processor from its parts, without a video processor."""
    transformers = _transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(name_or_path)
    image_processor = transformers.Qwen2VLImageProcessorPil.from_pretrained(name_or_path)
    chat_template = _read_chat_template(name_or_path, tokenizer)
    base_name = "Qwen2VLProcessor" if model_type == "qwen2_vl" else "Qwen2_5_VLProcessor"
    processor_class = _no_video_processor_class(base_name)
    logger.info("built %s for %s (torchvision is not installed)", processor_class.__name__, name_or_path)
    return processor_class(image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template)


def load_processor(name_or_path: str, model_type: str | None = None) -> Any:
    """Load the multimodal processor of a model and check that it turns images into pixels.

    Args:
        name_or_path: Hub id or local directory.
        model_type: the config's ``model_type`` when already known.

    Returns:
        A transformers ``ProcessorMixin`` with an image processor and a tokenizer.

    Raises:
        ModelLoadError: when no processor with an image processor can be built, or when an image
            does not reach ``pixel_values``.
    """
    transformers = _transformers()
    if model_type is None:
        model_type = getattr(_load_config(name_or_path), "model_type", "")
    needs_workaround = model_type in QWEN_VL_MODEL_TYPES and not transformers.utils.is_torchvision_available()
    processor: Any = None
    if needs_workaround:
        processor = _build_qwen_vl_processor(name_or_path, model_type)
    else:
        try:
            processor = transformers.AutoProcessor.from_pretrained(name_or_path)
        except (OSError, ValueError, ImportError) as exc:
            raise ModelLoadError(f"cannot load the processor of {name_or_path!r}: {exc}") from exc
    if getattr(processor, "image_processor", None) is None or getattr(processor, "tokenizer", None) is None:
        raise ModelLoadError(
            f"the processor of {name_or_path!r} is a {type(processor).__name__} without an image processor "
            "and a tokenizer, so images would never reach the model"
        )
    if not getattr(processor, "chat_template", None):
        template = getattr(processor.tokenizer, "chat_template", None)
        if template:
            processor.chat_template = template
        else:
            raise ModelLoadError(
                f"{name_or_path!r} ships no chat template; medrewardbench needs one to place the image "
                "and the prompt (add chat_template.jinja to the model directory)"
            )
    check_processor_sees_images(processor, name_or_path)
    return processor


def check_processor_sees_images(processor: Any, name: str = "model") -> None:
    """Probe a processor with a small image and fail loudly when it yields no ``pixel_values``.

    Raises:
        ModelLoadError: when the chat template drops the image or the processor ignores it.
    """
    from PIL import Image

    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "probe"}]}]
    try:
        text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        features = processor(text=[text], images=[Image.new("RGB", (64, 64), (128, 64, 32))], return_tensors="pt")
    except Exception as exc:  # any failure here means images cannot be judged
        raise ModelLoadError(f"the processor of {name} cannot process an image: {exc}") from exc
    if "pixel_values" not in features:
        raise ModelLoadError(
            f"the processor of {name} ({type(processor).__name__}) returned no pixel_values for an image; "
            "the model would judge without seeing it"
        )


def load_vlm(
    name_or_path: str,
    device: str = "auto",
    dtype: str = "auto",
    adapter: str | None = None,
) -> tuple[Any, Any]:
    """Load a vision-language model and its processor, ready for generation.

    Args:
        name_or_path: Hub id (from the local cache when offline) or local directory.
        device: ``"auto"`` (CUDA when available, else CPU) or a torch device string.
        dtype: ``"auto"`` (bfloat16 on CUDA, float32 on CPU) or a dtype name.
        adapter: optional directory (or Hub id) of a PEFT LoRA adapter to apply.

    Returns:
        ``(model, processor)``: the model in eval mode on the device; the processor's probe has
        confirmed that images reach ``pixel_values``.

    Raises:
        MissingExtraError: torch, transformers or (with an adapter) peft is not installed.
        ModelLoadError: unknown path, a model that is not image-text-to-text, an unusable
            processor or adapter.
    """
    transformers = _transformers()
    resolved_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, resolved_device)
    config = _load_config(name_or_path)
    model_type = str(getattr(config, "model_type", ""))
    if not _is_image_text_to_text(config):
        architectures = ", ".join(getattr(config, "architectures", None) or []) or "unknown architecture"
        raise _not_a_vlm_error(name_or_path, model_type, architectures)
    processor = load_processor(name_or_path, model_type)
    try:
        model = transformers.AutoModelForImageTextToText.from_pretrained(name_or_path, dtype=torch_dtype)
    except ValueError as exc:
        if "Unrecognized configuration class" in str(exc):
            raise _not_a_vlm_error(name_or_path, model_type, str(exc)) from exc
        raise ModelLoadError(f"cannot load the model {name_or_path!r}: {exc}") from exc
    except OSError as exc:
        raise ModelLoadError(f"cannot load the model {name_or_path!r}: {exc}") from exc
    if adapter:
        peft = require("peft", "hf", "LoRA adapters for hf: judges")
        try:
            model = peft.PeftModel.from_pretrained(model, adapter)  # type: ignore[attr-defined]
        except (OSError, ValueError, KeyError) as exc:
            raise ModelLoadError(f"cannot load the adapter {adapter!r} onto {name_or_path!r}: {exc}") from exc
    model = model.to(resolved_device)
    model.eval()
    logger.info(
        "loaded %s (%s) on %s as %s%s",
        name_or_path,
        type(model).__name__,
        resolved_device,
        str(torch_dtype).removeprefix("torch."),
        f" with adapter {adapter}" if adapter else "",
    )
    return model, processor
