"""SFT and DPO of vision-language judges with TRL and a PEFT LoRA adapter.

Both recipes load the base model with :func:`~medrewardbench.models.loading.load_vlm` (so the
Qwen2-VL processor workaround applies), build conversational prompt-completion rows whose prompt
is exactly the evaluation prompt (:mod:`medrewardbench.train.examples`), and train a LoRA adapter:

* SFT: TRL's ``SFTTrainer``; the loss falls on the verdict JSON only (``completion_only_loss``).
* DPO: TRL's ``DPOTrainer``; the reference model is the base model with the adapter switched off,
  so the first loss is ln 2.

Settings that TRL needs for vision-language data: ``max_length=None`` (truncation would cut image
tokens), ``gradient_checkpointing`` only when asked for, ``use_cpu`` when training on the CPU,
``report_to="none"`` (no trackers). The output directory receives the adapter and the processor;
``checkpoint-N`` directories appear when ``save_steps`` > 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.errors import require
from medrewardbench.models.loading import load_vlm, resolve_device
from medrewardbench.train.config import TrainConfig, lora_target_modules
from medrewardbench.train.examples import ImageCache, JudgeExample, dpo_rows, sft_rows
from medrewardbench.train.progress import TrainProgress, trainer_callback

logger = logging.getLogger(__name__)

__all__ = [
    "PRECISION_DTYPES",
    "RecipeOutcome",
    "performance_summary",
    "reset_peak_memory",
    "resolve_precision",
    "run_dpo",
    "run_sft",
]


@dataclass(frozen=True)
class RecipeOutcome:
    """What a training recipe reports back for the training card."""

    losses: Mapping[str, Any]
    metrics: Mapping[str, Any] = field(default_factory=dict)
    performance: Mapping[str, Any] = field(default_factory=dict)
    n_examples: int = 0


def resolve_precision(config: TrainConfig) -> tuple[str, str]:
    """The device and precision a run will use.

    Returns:
        ``(device, precision)`` with precision ``bf16``, ``fp16`` or ``fp32``; ``auto`` becomes bf16
        on a GPU that supports it, fp16 on an older GPU and fp32 on the CPU.
    """
    device = resolve_device(config.device)
    precision = config.precision
    if precision == "auto":
        if device.startswith("cuda"):
            torch: Any = require("torch", "train", "training")
            precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        else:
            precision = "fp32"
    if precision in ("bf16", "fp16") and not device.startswith("cuda"):
        logger.warning("precision %s on %s: using fp32 instead", precision, device)
        precision = "fp32"
    return device, precision


PRECISION_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _loss_summary(log_history: Sequence[Mapping[str, Any]], mean_loss: float | None) -> dict[str, Any]:
    history = [
        {"step": int(entry["step"]), "loss": float(entry["loss"])}
        for entry in log_history
        if "loss" in entry and "step" in entry
    ]
    return {
        "first": history[0]["loss"] if history else None,
        "final": history[-1]["loss"] if history else None,
        "mean": mean_loss,
        "history": history,
    }


def reset_peak_memory(device: str) -> None:
    """Start a fresh peak-memory count on a CUDA device (several folds may train in one process)."""
    torch: Any = require("torch", "train", "training")
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def performance_summary(
    started: float, global_step: int, config: TrainConfig, device: str, tokens: int | None = None
) -> dict[str, Any]:
    """Wall time, steps, examples and tokens per second, and the peak GPU memory of a run.

    Args:
        started: ``time.perf_counter()`` when the training loop started.
        global_step: optimizer steps done.
        config: the run's settings (batch size and accumulation give the examples seen).
        device: the device trained on.
        tokens: input tokens processed (padding excluded), when known.
    """
    torch: Any = require("torch", "train", "training")
    wall = time.perf_counter() - started
    seen = global_step * config.batch_size * config.grad_accum
    out: dict[str, Any] = {
        "wall_s": round(wall, 3),
        "steps": global_step,
        "examples_seen": seen,
        "examples_per_s": round(seen / wall, 4) if wall > 0 else None,
        "tokens_seen": tokens,
        "tokens_per_s": round(tokens / wall, 1) if tokens and wall > 0 else None,
        "device": device,
        "precision": resolve_precision(config)[1],
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        out["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 3)
        out["gpu"] = torch.cuda.get_device_name()
    return out


def _common_arguments(config: TrainConfig, method: str, out_dir: Path, device: str, precision: str) -> dict[str, Any]:
    return {
        "output_dir": str(out_dir),
        "num_train_epochs": config.epochs,
        "max_steps": config.max_steps if config.max_steps > 0 else -1,
        "per_device_train_batch_size": config.batch_size,
        "gradient_accumulation_steps": config.grad_accum,
        "learning_rate": config.resolved_learning_rate(method),
        "lr_scheduler_type": config.lr_scheduler,
        "warmup_steps": config.warmup_ratio,
        "weight_decay": config.weight_decay,
        "max_grad_norm": config.max_grad_norm,
        "logging_steps": config.logging_steps,
        "save_strategy": "steps" if config.save_steps > 0 else "no",
        "save_steps": config.save_steps if config.save_steps > 0 else 500,
        "save_total_limit": config.save_total_limit,
        "seed": config.seed,
        "data_seed": config.seed,
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "use_cpu": device == "cpu",
        "report_to": "none",
        "disable_tqdm": True,
        **_checkpointing_argument(config.gradient_checkpointing),
        "max_length": None,
        "dataloader_num_workers": 0,
    }


def _checkpointing_argument(enabled: bool) -> dict[str, bool]:
    """The gradient checkpointing argument under the name this transformers takes.

    Transformers 5 renamed ``gradient_checkpointing`` to ``activation_checkpointing`` (the old name is deprecated).
    """
    import dataclasses

    transformers: Any = require("transformers", "train", "training")
    names = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    return {"activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing": enabled}


def _lora_config(config: TrainConfig) -> Any:
    peft: Any = require("peft", "train", "LoRA training")
    return peft.LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=lora_target_modules(config.lora_targets),
        task_type="CAUSAL_LM",
    )


def _run_trl(
    method: str,
    base_model: str,
    examples: Sequence[JudgeExample],
    out_dir: Path,
    config: TrainConfig,
    progress: TrainProgress | None,
) -> RecipeOutcome:
    datasets: Any = require("datasets", "train", "training")
    trl: Any = require("trl", "train", "training")
    if not examples:
        raise ValueError(f"{method}: no training examples (every case lacked a full set of labels?)")
    device, precision = resolve_precision(config)
    reset_peak_memory(device)
    model, processor = load_vlm(base_model, device=device, dtype=PRECISION_DTYPES[precision])
    images = ImageCache()
    rows = sft_rows(examples, images) if method == "sft" else dpo_rows(examples, images)
    dataset = datasets.Dataset.from_list(rows)
    arguments = _common_arguments(config, method, out_dir, device, precision)
    callbacks = [trainer_callback(progress, f"{method} {Path(base_model).name}")] if progress is not None else []
    if method == "sft":
        args = trl.SFTConfig(**arguments, completion_only_loss=True)
        trainer = trl.SFTTrainer(
            model=model,
            args=args,
            train_dataset=dataset,
            processing_class=processor,
            peft_config=_lora_config(config),
            callbacks=callbacks,
        )
    else:
        args = trl.DPOConfig(**arguments, beta=config.beta)
        trainer = trl.DPOTrainer(
            model=model,
            args=args,
            train_dataset=dataset,
            processing_class=processor,
            peft_config=_lora_config(config),
            callbacks=callbacks,
        )
    # with tqdm disabled the Trainer prints every log dict to stdout; progress goes to ``progress`` instead
    transformers: Any = require("transformers", "train", "training")
    trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
    logger.info("%s: %d examples, %s on %s (%s)", method, len(rows), Path(base_model).name, device, precision)
    started = time.perf_counter()
    output = trainer.train()
    logged_tokens = [entry["num_tokens"] for entry in trainer.state.log_history if "num_tokens" in entry]
    tokens = int(logged_tokens[-1]) if logged_tokens else None
    performance = performance_summary(started, int(trainer.state.global_step), config, device, tokens)
    out_dir.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(out_dir))
    losses = _loss_summary(trainer.state.log_history, float(output.training_loss))
    metrics: dict[str, Any] = {}
    if method == "dpo":
        logged = [entry for entry in trainer.state.log_history if "rewards/accuracies" in entry]
        if logged:
            last = logged[-1]
            metrics = {
                "rewards_accuracy": float(last["rewards/accuracies"]),
                "rewards_margin": float(last.get("rewards/margins", float("nan"))),
            }
    elif trainer.state.log_history:
        accuracy = [e["mean_token_accuracy"] for e in trainer.state.log_history if "mean_token_accuracy" in e]
        if accuracy:
            metrics = {"mean_token_accuracy": float(accuracy[-1])}
    summary = {"losses": losses, "metrics": metrics, "performance": performance}
    if progress is not None:
        progress.finish(summary)
    del trainer, model
    return RecipeOutcome(losses=losses, metrics=metrics, performance=performance, n_examples=len(rows))


def run_sft(
    base_model: str,
    examples: Sequence[JudgeExample],
    out_dir: str | Path,
    config: TrainConfig,
    progress: TrainProgress | None = None,
) -> RecipeOutcome:
    """Supervised fine-tuning of a LoRA adapter on the verdict JSON targets.

    Args:
        base_model: Hub id or directory of an image-text-to-text model.
        examples: judge examples (see :func:`medrewardbench.train.examples.judge_examples`).
        out_dir: where the adapter (and checkpoints) go.
        config: hyperparameters.
        progress: progress receiver.

    Returns:
        Losses, metrics and throughput for the training card.
    """
    return _run_trl("sft", base_model, examples, Path(out_dir), config, progress)


def run_dpo(
    base_model: str,
    examples: Sequence[JudgeExample],
    out_dir: str | Path,
    config: TrainConfig,
    progress: TrainProgress | None = None,
) -> RecipeOutcome:
    """DPO of a LoRA adapter: correct verdict (chosen) against the flipped one (rejected).

    Arguments and result as :func:`run_sft`.
    """
    return _run_trl("dpo", base_model, examples, Path(out_dir), config, progress)
