"""The training card: a JSON file written beside every trained model.

``training_card.json`` records what is needed to trust and reproduce a trained judge or reward
model: the method, the base model, the data (source, name and fingerprint
:meth:`~medrewardbench.data.benchmark.Benchmark.data_hash` of the labelled data before the split,
plus a fingerprint of the training cases alone), the fold (K, index, seed and the held-out case
ids, so any later evaluation can check that it is not scoring training cases), every
hyperparameter, the final losses, throughput and library versions.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from medrewardbench.errors import MedRewardBenchError

__all__ = [
    "CARD_FILE",
    "CARD_FORMAT",
    "TrainingCard",
    "TrainingOverlap",
    "library_versions",
    "read_training_card",
    "training_overlap",
]

CARD_FILE = "training_card.json"
CARD_FORMAT = "medrewardbench-training-card"
CARD_VERSION = 1


@dataclass(frozen=True)
class TrainingCard:
    """Everything about one training run (see the module docstring).

    Attributes:
        method: ``sft``, ``dpo`` or ``rm``.
        base_model: Hub id or resolved local path of the base model.
        output: the model directory (adapter or reward model) this card describes.
        data: ``source``, ``name``, ``data_hash`` (the data as loaded), ``labelled_data_hash``,
            ``train_data_hash``, ``train_case_ids``,
            ``n_train_cases``, ``n_train_examples``, ``skipped_case_ids``, ``orders``.
        fold: ``k``, ``index``, ``seed``, ``eval_case_ids``... or None when trained on everything.
        hyperparameters: the :class:`~medrewardbench.train.config.TrainConfig` values used.
        losses: ``first``, ``final`` (last logged), ``mean`` (over the run), ``history``.
        metrics: other final figures (DPO reward accuracies, RM training accuracy...).
        performance: wall time, steps, examples per second, peak GPU memory.
        judge: how to evaluate the result (``spec`` and ``adapter``).
        versions: library versions.
    """

    method: str
    base_model: str
    output: str
    data: Mapping[str, Any]
    fold: Mapping[str, Any] | None
    hyperparameters: Mapping[str, Any]
    losses: Mapping[str, Any]
    metrics: Mapping[str, Any] = field(default_factory=dict)
    performance: Mapping[str, Any] = field(default_factory=dict)
    judge: Mapping[str, Any] = field(default_factory=dict)
    versions: Mapping[str, str] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The card as written to the model directory."""
        return {
            "format": CARD_FORMAT,
            "version": CARD_VERSION,
            "method": self.method,
            "base_model": self.base_model,
            "output": self.output,
            "data": dict(self.data),
            "fold": dict(self.fold) if self.fold is not None else None,
            "hyperparameters": dict(self.hyperparameters),
            "losses": dict(self.losses),
            "metrics": dict(self.metrics),
            "performance": dict(self.performance),
            "judge": dict(self.judge),
            "versions": dict(self.versions),
            "created_at": self.created_at,
        }

    def write(self, directory: str | Path) -> Path:
        """Write ``training_card.json`` into ``directory``; returns its path."""
        path = Path(directory) / CARD_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str) + "\n", "utf-8")
        return path

    @property
    def eval_case_ids(self) -> tuple[str, ...]:
        """The held-out case ids of the fold (empty when trained on everything)."""
        if not self.fold:
            return ()
        return tuple(self.fold.get("eval_case_ids", ()))

    @property
    def train_case_ids(self) -> tuple[str, ...]:
        """The ids of the cases the model was trained on."""
        return tuple(self.data.get("train_case_ids", ()))


def read_training_card(directory: str | Path) -> TrainingCard:
    """Read the card of a trained model directory.

    Raises:
        MedRewardBenchError: no card, or not a training card.
    """
    path = Path(directory) / CARD_FILE
    try:
        payload = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MedRewardBenchError(f"cannot read the training card {path}: {exc}") from exc
    if not isinstance(payload, Mapping) or payload.get("format") != CARD_FORMAT:
        raise MedRewardBenchError(f"{path} is not a {CARD_FORMAT} file")
    return TrainingCard(
        method=str(payload["method"]),
        base_model=str(payload["base_model"]),
        output=str(payload.get("output", str(Path(directory)))),
        data=payload.get("data") or {},
        fold=payload.get("fold"),
        hyperparameters=payload.get("hyperparameters") or {},
        losses=payload.get("losses") or {},
        metrics=payload.get("metrics") or {},
        performance=payload.get("performance") or {},
        judge=payload.get("judge") or {},
        versions=payload.get("versions") or {},
        created_at=float(payload.get("created_at", 0.0)),
    )


def library_versions(
    names: Sequence[str] = ("medrewardbench", "torch", "transformers", "trl", "peft"),
) -> dict[str, str]:
    """Installed versions of the libraries that shape a training run (absent ones are left out)."""
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


@dataclass(frozen=True)
class TrainingOverlap:
    """Evaluated cases that a trained model saw in training."""

    model_dir: Path
    overlapping: tuple[str, ...]
    """the evaluated case ids listed among the card's training cases, in evaluation order"""
    n_evaluated: int
    heldout_cases_file: str | None
    """the held-out cases the card names (trained with --folds/--fold), if any"""


def training_overlap(model_dir: str | Path, case_ids: Sequence[str]) -> TrainingOverlap | None:
    """Which of the cases about to be evaluated the model in ``model_dir`` was trained on.

    Args:
        model_dir: an adapter or reward-model directory; it may hold no training card at all.
        case_ids: the evaluated cases.

    Returns:
        The overlap when the directory holds a readable training card listing at least one of the
        cases; None otherwise (no card, an unreadable one, or no shared case).
    """
    directory = Path(model_dir).expanduser()
    if not (directory / CARD_FILE).is_file():
        return None
    try:
        card = read_training_card(directory)
    except MedRewardBenchError:
        return None
    trained = set(card.train_case_ids)
    shared = tuple(case_id for case_id in case_ids if case_id in trained)
    if not shared:
        return None
    heldout = card.data.get("heldout_cases_file")
    return TrainingOverlap(directory, shared, len(case_ids), str(heldout) if heldout else None)
