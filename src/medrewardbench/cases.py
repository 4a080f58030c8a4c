"""The Case record: one image, one question, two responses and (optionally) expert labels.

:class:`~medrewardbench.images.refs.ImageRef` lives below, in :mod:`medrewardbench.images`, and is
re-exported here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from medrewardbench.dimensions import DIMENSIONS, Winner
from medrewardbench.images.refs import ImageRef

__all__ = [
    "HARM_SEVERITIES",
    "LABEL_SOURCES",
    "PARENT_CASE_KEY",
    "SEVERE_HARM",
    "Adjudication",
    "Annotation",
    "Case",
    "ImageRef",
]

HARM_SEVERITIES: tuple[str, ...] = ("minor", "moderate", "severe", "critical")
"""How much harm an answer could do if a patient or clinician acted on it, least to most (an answer
nobody flagged has no severity):

* ``minor``: inconvenience or brief discomfort, no change in care (a wrong but irrelevant detail);
* ``moderate``: a wrong or delayed step of care with temporary harm (an unneeded test, a short delay);
* ``severe``: serious or lasting harm (a missed fracture, a wrong drug or dose);
* ``critical``: death or irreversible harm is likely (a missed bleed, advice to stop a vital drug)."""
SEVERE_HARM: frozenset[str] = frozenset(("severe", "critical"))
"""The severities a judge must never prefer: its critical-miss rate counts them."""

PARENT_CASE_KEY = "parent_case_id"
"""The metadata key of a case a probe derived from another: the parent case's id. Every probe writes
it (:mod:`medrewardbench.probes.derive`, whose ``PARENT_KEY`` it is) and ``baseline:random`` reads it;
it is defined here, below both, because the judges may not import the probes."""

LABEL_SOURCES: tuple[str, ...] = ("majority", "adjudication", "given")
"""Where a case's label on one dimension came from: the strict majority of its annotations, an
adjudicator's decision where they left none, or given as it is by the data (no annotations
decide it: a single expert, the reference data)."""


@dataclass(frozen=True)
class Annotation:
    """One annotator's labels for one case.

    ``labels`` maps a dimension to the better response in *source order* (1 = response_1,
    2 = response_2), whatever order the annotator saw; a dimension may be absent (for example
    when the annotator could not judge the case).
    """

    annotator: str
    labels: Mapping[str, Winner] = field(default_factory=dict)
    order_shown: Literal["original", "swapped"] | None = None
    """How the pair was shown: ``original`` (response_1 as A), ``swapped``, or unknown."""
    seconds: float | None = None
    """Time the annotator spent on the case, when recorded."""
    comment: str | None = None
    """The annotator's free-text comment on the case, when they wrote one."""
    cannot_judge: bool = False
    """Whether the annotator said they could not judge the case (their labels are then usually empty)."""
    cannot_judge_reason: str | None = None
    """Why they could not judge it, in their words."""
    harm: Mapping[int, str] = field(default_factory=dict)
    """The answers the annotator flagged as harmful: response in *source order* (1 = response_1,
    2 = response_2) -> one of :data:`HARM_SEVERITIES`; an answer not flagged is absent."""


@dataclass(frozen=True)
class Adjudication:
    """An adjudicator's decision on one dimension that the annotators left without a strict majority.

    ``label`` is the better response in *source order*, like every label.
    """

    dimension: str
    label: Winner
    by: str
    """Who decided (a user name of the annotation app, or ``cli:<os user>``)."""
    note: str | None = None
    """Why, in the adjudicator's words."""
    at: str | None = None
    """When, as an ISO 8601 time in UTC (``2026-11-26T10:00:00Z``)."""


@dataclass(frozen=True)
class Case:
    """One benchmark item.

    ``labels`` maps a dimension to the better response in *source order* (1 = response_1,
    2 = response_2). It is empty for unlabeled data; a dimension may be absent.
    ``annotations`` holds the per-annotator labels the expert labels came from, when known;
    ``adjudications`` the decisions on dimensions they left without a strict majority; and
    ``label_sources`` says, per labelled dimension, which of :data:`LABEL_SOURCES` the label came
    from (empty when the data says nothing: the labels are then ``given``).
    """

    case_id: str
    image: ImageRef
    question: str
    response_1: str
    response_2: str
    labels: Mapping[str, Winner] = field(default_factory=dict)
    organ_system: str = "unknown"
    department: str | None = None
    modality: str | None = None
    source_dataset: str | None = None
    question_type: str | None = None
    body_part: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    annotations: tuple[Annotation, ...] = ()
    adjudications: tuple[Adjudication, ...] = ()
    label_sources: Mapping[str, str] = field(default_factory=dict)
    _hash_cache: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def response(self, winner: Winner) -> str:
        """The response text for a source-order index."""
        return self.response_1 if winner == 1 else self.response_2

    def label(self, dimension: str) -> Winner | None:
        """The expert label for one dimension, or None when the case has none for it.

        Args:
            dimension: a dimension name.

        Returns:
            The better response in source order, or None.
        """
        return self.labels.get(dimension)

    def label_source(self, dimension: str) -> str | None:
        """Where the label on one dimension came from (one of :data:`LABEL_SOURCES`), None when unlabelled.

        Args:
            dimension: a dimension name.

        Returns:
            ``majority``, ``adjudication`` or ``given``; None when the case has no label on it.
        """
        if dimension not in self.labels:
            return None
        return self.label_sources.get(dimension, "given")

    @property
    def is_labeled(self) -> bool:
        """Whether the case has an expert label for at least one dimension."""
        return any(d in self.labels for d in DIMENSIONS)

    def group_value(self, field_name: str) -> str:
        """The value of a grouping field (a Case attribute or a metadata key), ``"unknown"`` if absent."""
        value = getattr(self, field_name) if field_name in _GROUPABLE_ATTRIBUTES else self.metadata.get(field_name)
        return "unknown" if value is None or value == "" else str(value)

    def text_hash(self) -> str:
        """Hash of everything textual that can change a judgment (image excluded)."""
        payload = json.dumps([self.case_id, self.question, self.response_1, self.response_2], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def content_hash(self) -> str:
        """Hash of what a judge sees: texts plus image bytes. Labels are excluded on purpose.

        Computed once per Case object (the image bytes are read only the first time).
        """
        cached = self._hash_cache.get("content")
        if cached is None:
            digest = hashlib.sha256()
            digest.update(self.text_hash().encode())
            digest.update(self.image.content_hash().encode())
            cached = self._hash_cache["content"] = digest.hexdigest()
        return cached

    def prime_content_hash(self, content_hash: str) -> None:
        """Take the content hash as known (recorded in the store under this data's fingerprint).

        Args:
            content_hash: what :meth:`content_hash` returns for this case.
        """
        self._hash_cache.setdefault("content", content_hash)

    def grouping_metadata(self) -> dict[str, str]:
        """Every field a metric may be grouped by, as strings (for storage and reports)."""
        out = {name: self.group_value(name) for name in _GROUPABLE_ATTRIBUTES}
        for key, value in self.metadata.items():
            if key not in out and isinstance(value, (str, int, float, bool)):
                out[key] = str(value)
        return out


_GROUPABLE_ATTRIBUTES: tuple[str, ...] = (
    "organ_system",
    "department",
    "modality",
    "source_dataset",
    "question_type",
    "body_part",
)
