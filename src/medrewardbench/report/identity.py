"""A judge named the way shared result formats need it: which model, and what pins its outputs.

A run's stored configuration says what the judge was; :func:`judge_identity` turns it into a
Hugging Face style model id, the developer, and the pin: a Hub revision (``model_revision`` of
``hf:``/``rm:`` judges), a dated API snapshot (``gpt-4o-2024-08-06``, ``claude-3-5-sonnet-20241022``),
the package version for a baseline rule, or ``pinned: false`` with the reason (an API alias such as
``gpt-4o``: :data:`UNPINNED_API`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from medrewardbench import __version__

__all__ = ["UNPINNED_API", "JudgeIdentity", "judge_identity", "slug"]

BENCHMARK = "medrewardbench"
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_DATED = re.compile(r"(?:^|[-_@:])(?:20\d{2}-\d{2}-\d{2}|20\d{6}|\d{4})(?:$|[-_:])")
"""A dated snapshot in a model name: 2024-08-06, 20241022, -0613 or -2411 (a version such as -002 is not a date)."""
_PROVIDERS = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "generativelanguage.googleapis.com": "google",
    "api.mistral.ai": "mistralai",
    "api.together.xyz": "together",
    "openrouter.ai": "openrouter",
}
UNPINNED_API = "unpinned API model: the provider may change what this name serves"


def slug(text: str) -> str:
    """A name made safe for a file or folder name (letters, digits, ``._-``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._") or "unnamed"


@dataclass(frozen=True)
class JudgeIdentity:
    """A judge, named the way shared result formats need it: who, which model, and what pins it.

    Attributes:
        name: the judge's label in the reports.
        model_id: the model in Hugging Face form (``OWNER/NAME``; ``openai/gpt-4o`` for an API model).
        developer: who provides the model (``openai``, a Hub owner, ``local``, ``medrewardbench``).
        pinned: whether the outputs came from a fixed snapshot of the model.
        pin: the revision hash or dated snapshot; None when unpinned.
        how: how it is pinned, or why it is not.
        deployment: ``self_deployed``, ``externally_managed`` or ``unknown`` (Every Eval Ever's terms).
        availability: ``open_weights``, ``closed_weights`` or ``unknown``.
    """

    name: str
    model_id: str
    developer: str
    pinned: bool
    pin: str | None
    how: str
    deployment: str = "unknown"
    availability: str = "unknown"

    def details(self) -> dict[str, str]:
        """The identity as string key-value pairs (Every Eval Ever's ``additional_details``)."""
        return {
            "deployment_type": self.deployment,
            "model_availability": self.availability,
            "pinned": "true" if self.pinned else "false",
            "pin": self.pin or "",
            "pinned_how": self.how,
        }


def judge_identity(label: str, spec: str, config: Mapping[str, Any]) -> JudgeIdentity:
    """Name a stored run's judge with what pins it (rules in the module docstring).

    Args:
        label: the judge's label.
        spec: the judge spec (``api:gpt-4o``, ``hf:OWNER/NAME``, ``baseline:longer``, ...).
        config: the run's stored configuration.

    Returns:
        The identity.
    """
    kind = str(config.get("kind") or spec.partition(":")[0])
    model = str(config.get("model") or spec.partition(":")[2] or spec)
    if kind in {"baseline", "instant"}:
        return JudgeIdentity(
            label, f"{BENCHMARK}/{slug(spec)}", BENCHMARK, True, __version__,
            f"a rule of medrewardbench {__version__}, no model", "self_deployed", "open_weights",
        )  # fmt: skip
    revision = config.get("model_revision")
    if kind in {"hf", "rm"} or "model_revision" in config:
        local = model.startswith("/")
        model_id = f"local/{slug(Path(model).name)}" if local else model
        developer = "local" if local else model.split("/")[0]
        if isinstance(revision, str) and _HEX40.match(revision):
            return JudgeIdentity(label, model_id, developer, True, revision, "Hub revision", "self_deployed",
                                 "open_weights")  # fmt: skip
        why = "local model directory without a recorded Hub revision" if local else "no Hub revision recorded"
        return JudgeIdentity(label, model_id, developer, False, None, why, "self_deployed", "open_weights")
    if kind == "api":
        host = urlparse(str(config.get("base_url") or "")).hostname or ""
        developer = _PROVIDERS.get(host, "local" if host in {"127.0.0.1", "localhost", "::1"} else host or "api")
        deployment = "self_deployed" if developer == "local" else "externally_managed"
        model_id = model if "/" in model else f"{developer}/{model}"
        if _DATED.search(model):
            return JudgeIdentity(label, model_id, developer, True, model, "dated API snapshot", deployment)
        return JudgeIdentity(label, model_id, developer, False, None, UNPINNED_API, deployment)
    if kind == "lmms-eval":
        return _lmms_eval_identity(label, config)
    return JudgeIdentity(label, f"{kind}/{slug(model)}", kind, False, None, f"{kind} judge: no revision recorded")


def _lmms_eval_identity(label: str, config: Mapping[str, Any]) -> JudgeIdentity:
    """An ``import-lmms-eval`` run: the model and its revision come from lmms-eval's ``--model_args``."""
    args = dict(part.split("=", 1) for part in str(config.get("model_args") or "").split(",") if "=" in part)
    name = args.get("pretrained") or args.get("model") or args.get("model_version") or str(config.get("model"))
    model_id = name if "/" in name else f"lmms-eval/{slug(name)}"
    developer = name.split("/")[0] if "/" in name else "lmms-eval"
    revision = args.get("revision", "")
    if _HEX40.match(revision):
        return JudgeIdentity(label, model_id, developer, True, revision, "Hub revision (lmms-eval --model_args)")
    if _DATED.search(name):
        return JudgeIdentity(label, model_id, developer, True, name, "dated API snapshot")
    return JudgeIdentity(
        label, model_id, developer, False, None,
        "lmms-eval model without a pinned revision; add revision=COMMIT to --model_args",
    )  # fmt: skip
