"""Training judges and reward models on labelled cases, and measuring them on held-out cases.

* :func:`train`: SFT or DPO of a LoRA adapter with TRL, or a Bradley-Terry image+text reward model;
  writes the model and a training card (:mod:`medrewardbench.train.card`).
* :func:`assign_folds` / :func:`split_fold`: K folds by case, stratified by organ system.
* :func:`cross_validate`: train every fold, evaluate each on its held-out cases through the normal
  ``hf:`` / ``rm:`` judges, and compare the pooled held-out accuracy with the untuned base model's.
* :mod:`medrewardbench.cli.train`: the ``train`` and ``cv`` CLI commands.

Everything heavy (torch, transformers, trl, peft, datasets) is imported only when training starts;
the ``train`` extra installs it (``pip install 'medrewardbench[train]'``).
"""

from medrewardbench.train.api import TrainResult, train, train_data_hash
from medrewardbench.train.card import CARD_FILE, TrainingCard, read_training_card
from medrewardbench.train.config import METHODS, ConfigError, TrainConfig
from medrewardbench.train.cv import CVResult, cross_validate
from medrewardbench.train.examples import JudgeExample, RewardPair, judge_examples, reward_pairs, verdict_json
from medrewardbench.train.folds import FoldError, FoldSplit, assign_folds, split_fold
from medrewardbench.train.progress import RecordingProgress, TrainProgress

__all__ = [
    "CARD_FILE",
    "METHODS",
    "CVResult",
    "ConfigError",
    "FoldError",
    "FoldSplit",
    "JudgeExample",
    "RecordingProgress",
    "RewardPair",
    "TrainConfig",
    "TrainProgress",
    "TrainResult",
    "TrainingCard",
    "assign_folds",
    "cross_validate",
    "judge_examples",
    "read_training_card",
    "reward_pairs",
    "split_fold",
    "train",
    "train_data_hash",
    "verdict_json",
]
