"""Local models shared by the judges, the server and training: loading, generation, reward networks.

* :mod:`~medrewardbench.models.loading`: :func:`load_vlm` (a Hub id or directory to model and processor);
* :mod:`~medrewardbench.models.generation`: :class:`VLMGenerator`, chat conversations to text;
* :mod:`~medrewardbench.models.constraints`: constrained decoding of the verdict JSON skeleton;
* :mod:`~medrewardbench.models.reward`: image+text and text-only reward models, their file format;
* :mod:`~medrewardbench.models.identity`: resolved model names and file digests for fingerprints.

Nothing here knows of judges: :mod:`medrewardbench.judges` builds on these. torch, transformers
and peft are imported only when a model is loaded (the ``hf`` extra).
"""

from medrewardbench.models.constraints import CONSTRAINED_SUFFIX, VerdictConstraint, verdict_skeleton
from medrewardbench.models.generation import DEFAULT_MAX_NEW_TOKENS, Generation, GenerationSettings, VLMGenerator
from medrewardbench.models.identity import adapter_sha256, files_sha256, resolve_model_name
from medrewardbench.models.loading import ModelLoadError, load_vlm, resolve_device, resolve_dtype
from medrewardbench.models.reward import RewardItem, TextRewardModel, VLMRewardModel, load_reward_model

__all__ = [
    "CONSTRAINED_SUFFIX",
    "DEFAULT_MAX_NEW_TOKENS",
    "Generation",
    "GenerationSettings",
    "ModelLoadError",
    "RewardItem",
    "TextRewardModel",
    "VLMGenerator",
    "VLMRewardModel",
    "VerdictConstraint",
    "adapter_sha256",
    "files_sha256",
    "load_reward_model",
    "load_vlm",
    "resolve_device",
    "resolve_dtype",
    "resolve_model_name",
    "verdict_skeleton",
]
