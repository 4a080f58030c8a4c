"""A Bradley-Terry trainer for image+text reward models (TRL's RewardTrainer is text-only).

The model is :class:`~medrewardbench.models.reward.VLMRewardModel`: a vision-language
backbone (LoRA adapter, frozen or fully trained) and a linear head per dimension on the hidden
state of the last real token. Each training pair is a case's two responses, scored separately with
the case's image and question; per head and labelled dimension the loss is

    -log sigmoid(r_chosen - r_rejected)

averaged over the labelled (pair, head) entries of a micro-batch. A single-head model is trained on
one dimension's labels (``single_head_dimension``, default ``overall``).

The loop is plain PyTorch: AdamW with separate learning rates for the backbone and the head, a
transformers scheduler with linear warm-up, gradient accumulation and clipping, a reshuffle per
epoch from the seed, and checkpoints (complete reward model directories) every ``save_steps``.
"""

from __future__ import annotations

import logging
import math
import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import require
from medrewardbench.models.reward import RewardItem, VLMRewardModel
from medrewardbench.train.config import TrainConfig, lora_target_modules
from medrewardbench.train.examples import ImageCache, RewardPair
from medrewardbench.train.progress import TrainProgress
from medrewardbench.train.recipes import (
    PRECISION_DTYPES,
    RecipeOutcome,
    performance_summary,
    reset_peak_memory,
    resolve_precision,
)

logger = logging.getLogger(__name__)

__all__ = ["bradley_terry_loss", "pair_accuracy", "reward_heads", "run_reward_model"]


def reward_heads(config: TrainConfig) -> tuple[str, ...]:
    """The heads a configuration asks for: every dimension, or the single-head dimension."""
    return DIMENSIONS if config.heads == "multi" else (config.single_head_dimension,)


def bradley_terry_loss(rewards_1: Any, rewards_2: Any, targets: Any) -> Any:
    """Mean Bradley-Terry loss over the labelled entries.

    Args:
        rewards_1: (B, H) rewards of response_1.
        rewards_2: (B, H) rewards of response_2.
        targets: (B, H) +1 (response_1 preferred), -1 (response_2 preferred), 0 (no label).

    Returns:
        A scalar tensor: ``mean(-logsigmoid(t * (r1 - r2)))`` over entries with ``t != 0``
        (0 when there are none).
    """
    torch: Any = require("torch", "train", "reward model training")
    mask = (targets != 0).to(rewards_1.dtype)
    margins = targets.to(rewards_1.dtype) * (rewards_1 - rewards_2)
    losses = -torch.nn.functional.logsigmoid(margins) * mask
    return losses.sum() / mask.sum().clamp(min=1.0)


def _items(pairs: Sequence[RewardPair], images: ImageCache) -> list[RewardItem]:
    firsts = [RewardItem(p.question, p.response_1, images.get(p.image)) for p in pairs]
    seconds = [RewardItem(p.question, p.response_2, images.get(p.image)) for p in pairs]
    return firsts + seconds


def pair_accuracy(
    model: VLMRewardModel, pairs: Sequence[RewardPair], *, batch_size: int = 8, images: ImageCache | None = None
) -> dict[str, Any]:
    """How often the model ranks the experts' choice higher, per head and pooled (ties are wrong).

    Args:
        model: the reward model.
        pairs: labelled pairs.
        batch_size: pairs per forward pass.
        images: an image cache to reuse.

    Returns:
        ``{"pooled": float, "n": int, "by_head": {head: float}}`` (NaN-free: heads without a label
        are left out).
    """
    cache = images or ImageCache()
    correct = [0] * len(model.heads)
    counted = [0] * len(model.heads)
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        scores = model.score(_items(chunk, cache))
        for offset, pair in enumerate(chunk):
            first, second = scores[offset], scores[offset + len(chunk)]
            for h, target in enumerate(pair.targets):
                if target == 0:
                    continue
                counted[h] += 1
                margin = target * (first[h] - second[h])
                correct[h] += int(margin > 0)
    total = sum(counted)
    return {
        "pooled": sum(correct) / total if total else None,
        "n": total,
        "by_head": {head: correct[h] / counted[h] for h, head in enumerate(model.heads) if counted[h]},
    }


def _prune_checkpoints(out_dir: Path, keep: int) -> None:
    checkpoints = sorted(
        (p for p in out_dir.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    for stale in checkpoints[: max(0, len(checkpoints) - keep)]:
        shutil.rmtree(stale, ignore_errors=True)


def run_reward_model(
    base_model: str,
    pairs: Sequence[RewardPair],
    out_dir: str | Path,
    config: TrainConfig,
    progress: TrainProgress | None = None,
    *,
    training_summary: dict[str, Any] | None = None,
) -> RecipeOutcome:
    """Train an image+text reward model with the Bradley-Terry loss and save it.

    Args:
        base_model: Hub id or directory of an image-text-to-text model.
        pairs: reward pairs whose targets follow :func:`reward_heads` of ``config``.
        out_dir: the reward model directory to write (and ``checkpoint-N`` directories in it).
        config: hyperparameters (``heads``, ``backbone``, learning rates, steps, LoRA...).
        progress: progress receiver.
        training_summary: stored in the reward model card's ``training`` field.

    Returns:
        Losses, training accuracy and throughput for the training card.

    Raises:
        ValueError: no pairs.
    """
    torch: Any = require("torch", "train", "reward model training")
    transformers: Any = require("transformers", "train", "reward model training")
    if not pairs:
        raise ValueError("rm: no training pairs (no case has a label for the reward heads)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    heads = reward_heads(config)
    device, precision = resolve_precision(config)
    reset_peak_memory(device)
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    model = VLMRewardModel.create(
        base_model,
        heads,
        device=device,
        dtype=PRECISION_DTYPES[precision],
        backbone=config.backbone,
        lora_r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        lora_targets=lora_target_modules(config.lora_targets),
        seed=config.seed,
    )
    if config.gradient_checkpointing and config.backbone != "frozen":
        base = model.backbone.get_base_model() if hasattr(model.backbone, "get_base_model") else model.backbone
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if hasattr(base, "enable_input_require_grads"):
            base.enable_input_require_grads()
    backbone_parameters = model.backbone_parameters()
    trainable = model.head_parameters() + backbone_parameters
    groups: list[dict[str, Any]] = [{"params": model.head_parameters(), "lr": config.resolved_head_learning_rate("rm")}]
    if backbone_parameters:
        groups.append({"params": backbone_parameters, "lr": config.resolved_learning_rate("rm")})
    optimizer = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    micro_per_epoch = math.ceil(len(pairs) / config.batch_size)
    steps_per_epoch = max(1, math.ceil(micro_per_epoch / config.grad_accum))
    total_steps = config.max_steps if config.max_steps > 0 else max(1, math.ceil(config.epochs * steps_per_epoch))
    warmup = math.ceil(total_steps * config.warmup_ratio)
    scheduler = transformers.get_scheduler(
        config.lr_scheduler, optimizer, num_warmup_steps=warmup, num_training_steps=total_steps
    )
    targets_all = torch.tensor([p.targets for p in pairs], dtype=torch.float32)
    images = ImageCache()
    shuffler = random.Random(config.seed)
    queue: list[int] = []
    epoch = 0

    def next_batch() -> list[int]:
        nonlocal queue, epoch
        if not queue:
            queue = list(range(len(pairs)))
            shuffler.shuffle(queue)
            epoch += 1
        batch, queue = queue[: config.batch_size], queue[config.batch_size :]
        return batch

    history: list[dict[str, Any]] = []
    all_losses: list[float] = []
    description = f"rm {Path(base_model).name}"
    if progress is not None:
        progress.start(description, total_steps)
    logger.info(
        "rm: %d pairs, %d head(s), %s backbone, %d steps on %s (%s)",
        len(pairs),
        len(heads),
        config.backbone,
        total_steps,
        device,
        precision,
    )
    model.train()
    started = time.perf_counter()
    window: list[float] = []
    tokens = 0
    for step in range(1, total_steps + 1):
        optimizer.zero_grad(set_to_none=True)
        step_loss = 0.0
        for _ in range(config.grad_accum):
            indices = next_batch()
            chunk = [pairs[i] for i in indices]
            items = _items(chunk, images)
            batch = model.encode(items)
            tokens += int(batch["attention_mask"].sum())
            rewards = model.rewards_from_batch(batch)
            n = len(chunk)
            loss = bradley_terry_loss(rewards[:n], rewards[n:], targets_all[indices].to(rewards.device))
            (loss / config.grad_accum).backward()
            step_loss += float(loss.detach()) / config.grad_accum
        torch.nn.utils.clip_grad_norm_(trainable, config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        all_losses.append(step_loss)
        window.append(step_loss)
        if step % config.logging_steps == 0 or step == total_steps:
            history.append({"step": step, "loss": sum(window) / len(window)})
            window = []
        if progress is not None:
            progress.step(step, step_loss)
        if config.save_steps > 0 and step % config.save_steps == 0 and step < total_steps:
            model.save(out / f"checkpoint-{step}", training={"step": step, **(training_summary or {})})
            _prune_checkpoints(out, config.save_total_limit)
    performance = performance_summary(started, total_steps, config, device, tokens)
    accuracy = (
        pair_accuracy(model, pairs, batch_size=max(1, config.batch_size), images=images)
        if config.train_accuracy
        else None
    )
    losses = {
        "first": all_losses[0],
        "final": history[-1]["loss"],
        "mean": sum(all_losses) / len(all_losses),
        "history": history,
        "epochs_seen": epoch,
    }
    metrics = {"train_pair_accuracy": accuracy}
    model.save(out, training={**(training_summary or {}), "losses": {k: losses[k] for k in ("first", "final")}})
    summary = {"losses": losses, "metrics": metrics, "performance": performance}
    if progress is not None:
        progress.finish(summary)
    return RecipeOutcome(losses=losses, metrics=metrics, performance=performance, n_examples=len(pairs))
