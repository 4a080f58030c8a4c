"""Every way to reach a model, shared by the judges, the build generators, the server and training.

* :mod:`~medrewardbench.models.api`: models behind an OpenAI-compatible API (the chat client, one
  request's path, retries, images as data URLs);
* :mod:`~medrewardbench.models.local`: :class:`LocalModel`, a local transformers model and how it
  decodes, as ``hf:`` judges and ``hf:`` generators use it;
* :mod:`~medrewardbench.models.loading`: :func:`load_vlm` (a Hub id or directory to model and processor);
* :mod:`~medrewardbench.models.generation`: :class:`VLMGenerator`, chat conversations to text;
* :mod:`~medrewardbench.models.constraints`: constrained decoding of the verdict JSON skeleton;
* :mod:`~medrewardbench.models.reward`: image+text and text-only reward models, their file format;
* :mod:`~medrewardbench.models.options`: :class:`JudgeOptions`, the settings every model back end
  reads (seed, concurrency, batch size, sampling; ``api`` and ``local`` sections);
* :mod:`~medrewardbench.models.backend`: :class:`Backend`, the spec, config, fingerprint and life
  cycle a judge and a generator share;
* :mod:`~medrewardbench.models.identity`: :func:`config_hash` (fingerprints), resolved model names
  and file digests.

Nothing here knows of judges or generators: :mod:`medrewardbench.judges` (a prompt, a model and a
parser) and :mod:`medrewardbench.curation.generators` (a prompt and a model) build on these. Served
models are API models whose server a sweep starts (:mod:`medrewardbench.sweep.served`).
:mod:`~medrewardbench.models.logprobs` holds token log-probabilities in one shape for every back end
(read from an API's ``logprobs``, recorded from a local model's logits by
:mod:`~medrewardbench.models.token_logprobs`) and reads a verdict's probability from them; reward
models give scores (:mod:`~medrewardbench.models.reward`).
torch, transformers and peft are imported only when a model is loaded (the ``hf`` extra), and
``openai`` only when an API client is made (the ``api`` extra).
"""

from medrewardbench.models.constraints import CONSTRAINED_SUFFIX, VerdictConstraint, verdict_skeleton
from medrewardbench.models.generation import DEFAULT_MAX_NEW_TOKENS, Generation, GenerationSettings, VLMGenerator
from medrewardbench.models.identity import adapter_sha256, config_hash, files_sha256, resolve_model_name
from medrewardbench.models.loading import ModelLoadError, load_vlm, resolve_device, resolve_dtype
from medrewardbench.models.local import LocalModel
from medrewardbench.models.options import ApiSettings, JudgeOptions, LocalSettings
from medrewardbench.models.reward import RewardItem, TextRewardModel, VLMRewardModel, load_reward_model

__all__ = [
    "CONSTRAINED_SUFFIX",
    "DEFAULT_MAX_NEW_TOKENS",
    "ApiSettings",
    "Generation",
    "GenerationSettings",
    "JudgeOptions",
    "LocalModel",
    "LocalSettings",
    "ModelLoadError",
    "RewardItem",
    "TextRewardModel",
    "VLMGenerator",
    "VLMRewardModel",
    "VerdictConstraint",
    "adapter_sha256",
    "config_hash",
    "files_sha256",
    "load_reward_model",
    "load_vlm",
    "resolve_device",
    "resolve_dtype",
    "resolve_model_name",
    "verdict_skeleton",
]
