"""What every model-backed worker shares: a judge and a generator are both a :class:`Backend`.

A back end has a ``spec`` (the string the user typed, ``api:gpt-4o``), a ``kind``, the batch size
and concurrency its caller should use, a :meth:`Backend.config` holding everything that can change
its outputs and, hashed, its :meth:`Backend.fingerprint`, run facts in :meth:`Backend.metadata`
that do not change outputs, and :meth:`Backend.aclose` to release clients or models.
:class:`~medrewardbench.judges.base.Judge` adds ``judge_batch``;
:class:`~medrewardbench.curation.generators.TextGenerator` adds ``generate_batch``.
"""

from __future__ import annotations

import abc
from typing import Any

from medrewardbench.models.identity import config_hash

__all__ = ["Backend"]


class Backend(abc.ABC):
    """The identity and life cycle of a judge or a generator.

    Subclasses set ``spec`` and describe everything that can change an output in :meth:`config`;
    secrets never go into it.
    """

    spec: str
    kind: str = "model"
    #: how many requests one batch call should receive
    batch_size: int = 1
    #: how many batches may be in flight at once
    concurrency: int = 1

    def config(self) -> dict[str, Any]:
        """Everything that can change this back end's outputs (model, template, sampling, seed)."""
        return {"spec": self.spec}

    def metadata(self) -> dict[str, Any]:
        """Facts about the run worth recording that do not change outputs."""
        return {}

    def fingerprint(self) -> str:
        """SHA-256 over :meth:`config`, the identity of this back end's outputs."""
        return config_hash(self.config())

    async def aclose(self) -> None:
        """Release clients, servers or models."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"
