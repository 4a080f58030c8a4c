"""``train``: one call that turns labelled cases into a trained judge or reward model, with a card.

    benchmark = load_benchmark("demo").labeled()
    fold = split_fold(benchmark, 5, 0)
    result = train("sft", "Qwen/Qwen2-VL-2B-Instruct", benchmark, "runs/sft-0", TrainConfig(max_steps=100), fold=fold)
    options = JudgeOptions().with_local(adapter=result.judge_adapter)
    evaluate(fold.evaluation, [result.judge_spec], "runs/eval-0", options=options)

The trained model always evaluates through the ordinary judges: an SFT or DPO adapter as
``hf:BASE`` with ``adapter=OUT``, a reward model as ``rm:OUT``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from medrewardbench.data.benchmark import Benchmark
from medrewardbench.dimensions import Order
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.models.identity import resolve_model_name
from medrewardbench.prompts import load_template
from medrewardbench.train.card import TrainingCard, library_versions
from medrewardbench.train.config import METHODS, TrainConfig
from medrewardbench.train.examples import judge_examples, reward_pairs
from medrewardbench.train.folds import FoldSplit
from medrewardbench.train.progress import TrainProgress

logger = logging.getLogger(__name__)

__all__ = ["HELDOUT_FILE", "TrainResult", "train", "train_data_hash"]

HELDOUT_FILE = "heldout_cases.jsonl"
"""Written beside a fold's model: its held-out cases as canonical data, ready for ``eval --data``."""


@dataclass(frozen=True)
class TrainResult:
    """A finished training run.

    Attributes:
        method: ``sft``, ``dpo`` or ``rm``.
        output_dir: the adapter or reward model directory (holds ``training_card.json``).
        card: the training card.
        judge_spec: the spec that evaluates the result (``hf:BASE`` or ``rm:OUT``).
        judge_adapter: the adapter option to pass with ``judge_spec`` (None for reward models).
    """

    method: str
    output_dir: Path
    card: TrainingCard
    judge_spec: str
    judge_adapter: str | None


def train_data_hash(benchmark: Benchmark) -> str:
    """A fingerprint of the training cases alone: their ids, texts and labels (no image bytes).

    The full data fingerprint (:meth:`Benchmark.data_hash`, which includes the images) is taken
    once over all labelled cases; this one pins down which of them a fold trained on.
    """
    digest = hashlib.sha256()
    for case in benchmark.cases:
        labels = sorted(case.labels.items())
        digest.update(json.dumps([case.case_id, case.text_hash(), labels]).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def train(
    method: str,
    base_model: str,
    benchmark: Benchmark,
    out_dir: str | Path,
    config: TrainConfig | None = None,
    *,
    fold: FoldSplit | None = None,
    data_hash: str | None = None,
    progress: TrainProgress | None = None,
) -> TrainResult:
    """Train a judge (``sft``, ``dpo``) or a reward model (``rm``) and write its training card.

    Args:
        method: ``sft``, ``dpo`` or ``rm``.
        base_model: Hub id or directory of an image-text-to-text model.
        benchmark: the data as loaded (its unlabelled cases are ignored). With ``fold``, the fold
            must have been split from its labelled cases; only ``fold.train`` is trained on.
        out_dir: the output directory (adapter or reward model, checkpoints, training card).
        config: hyperparameters; defaults when None.
        fold: the cross-validation fold; None trains on every labelled case.
        data_hash: ``benchmark.data_hash()`` when already computed (the card's data fingerprint,
            equal to the data hash an ``eval`` run of the same source records).
        progress: progress receiver.

    Returns:
        The result, with the judge spec that evaluates it.

    Raises:
        MedRewardBenchError: unknown method, no labelled case, a fold from other data.
        ModelLoadError: the base model cannot be loaded.
    """
    if method not in METHODS:
        raise MedRewardBenchError(f"unknown training method {method!r}; expected one of {', '.join(METHODS)}")
    config = config or TrainConfig()
    labelled = benchmark.labeled()
    if not labelled.cases:
        raise MedRewardBenchError(f"{benchmark.source}: no labelled case to train on")
    if fold is not None:
        known = set(labelled.case_ids())
        if any(case.case_id not in known for case in fold.train.cases):
            raise MedRewardBenchError("the fold was not split from this benchmark")
        training = fold.train.labeled()
    else:
        training = labelled
    if config.max_cases > 0:
        training = training.select(limit=config.max_cases)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    orders = Order.parse_selection(config.orders)
    fingerprint = data_hash or benchmark.data_hash()
    data = {
        "source": benchmark.source,
        "name": benchmark.name,
        "data_hash": fingerprint,
        "labelled_data_hash": fingerprint if len(labelled) == len(benchmark) else labelled.data_hash(),
        "train_data_hash": train_data_hash(training),
        "n_labelled_cases": len(labelled),
        "n_train_cases": len(training),
        "train_case_ids": list(training.case_ids()),
        "orders": [order.value for order in orders],
    }
    summary = {"method": method, "data_hash": fingerprint, "fold": None if fold is None else [fold.k, fold.index]}
    if method == "rm":
        from medrewardbench.train.reward import reward_heads, run_reward_model

        heads = reward_heads(config)
        pairs = reward_pairs(training.cases, heads)
        data["heads"] = list(heads)
        data["n_train_examples"] = len(pairs)
        data["note"] = "a reward model scores each response alone, so presentation order plays no role"
        outcome = run_reward_model(base_model, pairs, out, config, progress, training_summary=summary)
        judge_spec, judge_adapter = f"rm:{out}", None
    else:
        from medrewardbench.train.recipes import run_dpo, run_sft

        template = load_template(config.template)
        if template.name != "pairwise":
            logger.warning(
                "template %s: the training targets are the verdict JSON alone (the experts wrote no reasoning), "
                "so a template that asks for reasoning first teaches the judge to skip it",
                template.name,
            )
        examples, skipped = judge_examples(training.cases, orders, template)
        data["n_train_examples"] = len(examples)
        data["skipped_case_ids"] = skipped
        data["template"] = {"name": template.name, "sha256": template.sha256}
        runner = run_sft if method == "sft" else run_dpo
        outcome = runner(base_model, examples, out, config, progress)
        judge_spec, judge_adapter = f"hf:{base_model}", str(out)
    hyperparameters = config.as_dict()
    hyperparameters["learning_rate"] = config.resolved_learning_rate(method)
    if method == "rm":
        hyperparameters["head_learning_rate"] = config.resolved_head_learning_rate(method)
    if fold is not None:
        from medrewardbench.data.canonical import write_canonical
        from medrewardbench.data.provenance import write_dataset_card

        heldout_path = write_canonical(fold.evaluation.cases, out / HELDOUT_FILE)
        data["heldout_cases_file"] = str(heldout_path.resolve())
        if benchmark.labels.declared:  # the held-out cases keep their labels' provenance (eval reads the card)
            write_dataset_card(out, f"{benchmark.name} (fold {fold.index} of {fold.k}, held out)", benchmark.labels)
    card = TrainingCard(
        method=method,
        base_model=resolve_model_name(base_model),
        output=str(out.resolve()),
        data=data,
        fold=fold.as_dict() if fold is not None else None,
        hyperparameters=hyperparameters,
        losses=outcome.losses,
        metrics=outcome.metrics,
        performance=outcome.performance,
        judge={"spec": judge_spec, "adapter": judge_adapter, "template": config.template if method != "rm" else None},
        versions=library_versions(),
    )
    card.write(out)
    logger.info(
        "%s: trained on %d case(s) (%d examples); loss %s -> %s; written to %s",
        method,
        len(training),
        outcome.n_examples,
        outcome.losses.get("first"),
        outcome.losses.get("final"),
        out,
    )
    return TrainResult(method=method, output_dir=out, card=card, judge_spec=judge_spec, judge_adapter=judge_adapter)
