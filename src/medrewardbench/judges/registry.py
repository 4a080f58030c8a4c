"""Spec strings to judges: one table, one line per backend kind.

A spec is ``KIND:NAME`` (``baseline:longer``, ``api:gpt-4o``, ``hf:Qwen/Qwen2-VL-2B-Instruct``,
``rm:/path/to/reward-model``). Builders are imported lazily, so a missing optional dependency only
matters for the backend that needs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from medrewardbench.errors import JudgeSpecError
from medrewardbench.judges.base import Judge
from medrewardbench.models.options import JudgeOptions

__all__ = ["BASELINE_SPECS", "JudgeOptions", "build_judge", "known_kinds", "register", "split_spec"]


Builder = Callable[[str, JudgeOptions], Judge]

#: kind -> "module:function". Adding a backend is one new module and one line here.
_BUILDERS: dict[str, str] = {
    "baseline": "medrewardbench.judges.baselines:build",
    "instant": "medrewardbench.judges.baselines:build_instant",
    "api": "medrewardbench.judges.api:build",
    "hf": "medrewardbench.judges.hf:build",
    "rm": "medrewardbench.judges.reward_model:build",
    "reference": "medrewardbench.judges.reference_outputs:build",
}

BASELINE_SPECS: tuple[str, ...] = (
    "baseline:random",
    "baseline:first",
    "baseline:second",
    "baseline:longer",
    "baseline:shorter",
)


def register(kind: str, target: str) -> None:
    """Register (or replace) the builder for a spec kind, as ``"module:function"``."""
    _BUILDERS[kind] = target


def known_kinds() -> list[str]:
    """The judge kinds that can be built (the part of a spec before the colon), sorted."""
    return sorted(_BUILDERS)


def split_spec(spec: str) -> tuple[str, str]:
    """Split ``KIND:NAME`` into its parts.

    Raises:
        JudgeSpecError: when the kind is missing or unknown.
    """
    kind, sep, name = spec.partition(":")
    if not sep or not kind:
        raise JudgeSpecError(
            f"judge spec {spec!r} has no kind; expected KIND:NAME with KIND one of {', '.join(known_kinds())}"
        )
    if kind not in _BUILDERS:
        raise JudgeSpecError(f"unknown judge kind {kind!r} in {spec!r}; known kinds: {', '.join(known_kinds())}")
    return kind, name


def build_judge(spec: str, options: JudgeOptions | None = None) -> Judge:
    """Build the judge a spec names.

    Args:
        spec: ``KIND:NAME``.
        options: shared settings; defaults when None.

    Returns:
        A ready judge whose ``spec`` attribute is the given spec.
    """
    kind, name = split_spec(spec)
    module_name, _, function_name = _BUILDERS[kind].partition(":")
    module = importlib.import_module(module_name)
    builder: Builder = getattr(module, function_name)
    return builder(name, options or JudgeOptions())
