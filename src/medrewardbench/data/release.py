"""A released, labelled set's dataset card: what the labels are and where they came from.

``annotate export`` (a project of the annotation app) and ``build export`` (a build project whose
pairs got their labels with ``build labels``) both end in the same release: canonical cases whose
labels are the annotators' strict majority, else an adjudication (:mod:`medrewardbench.data.annotations`),
with every annotation, comment, "cannot judge" reason and adjudication, and a **dataset card**
(``dataset.json`` beside the data) whose ``labels`` object both write with :func:`labels_card`::

    {"provenance": "expert majority of 3 annotators", "kind": "expert_majority", "raters": 3,
     "declared": false, "rule": "...", "annotators": ["dr_a", "dr_b", "dr_c"],
     "annotations_per_case": {"min": 3, "max": 3},
     "label_sources": {"majority": 57, "adjudication": 2, "given": 0},
     "undecided_dimensions": 1, "adjudicated_dimensions": 2, "superseded_adjudications": 0,
     "comments": 4, "cannot_judge": 1,
     "harm_flags": {"minor": 2, "moderate": 0, "severe": 1, "critical": 0},
     "annotation_projects": [{"project": "chest-study", "tool": "medrewardbench annotate 0.1.0",
                              "per_case": 3, "guidelines": {"version": 2, "sha256": "..."},
                              "annotators": [...], "qc": {"gold": {...}, "repeats": {...}}}]}

The loaders read ``provenance``, ``kind`` and ``raters`` (:mod:`medrewardbench.data.provenance`);
the rest documents the set. ``harm_flags`` counts the answers annotators flagged as harmful, per
severity (:data:`~medrewardbench.cases.HARM_SEVERITIES`; one per annotator and answer).
``annotation_projects`` lists the annotation projects the labels came from: the app's export names
its own project; ``build labels`` keeps the entries of the card beside each file it attaches, and
``build export`` writes them all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench.cases import HARM_SEVERITIES, LABEL_SOURCES, Case
from medrewardbench.data.annotations import majority_labels
from medrewardbench.data.provenance import CARD_FILENAME, read_dataset_card
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import DataError, DataProblem

__all__ = [
    "LABEL_RULE",
    "ReleaseTally",
    "HUB_LICENSE_UNSET",
    "annotation_projects_beside",
    "hub_readme",
    "label_kind",
    "label_provenance",
    "labels_card",
    "merge_annotation_projects",
    "size_category",
    "write_card",
]

LABEL_RULE = (
    "strict majority per dimension of the annotators' labels (more than half of those who labelled it), "
    "else the adjudication of that dimension; a dimension with neither stays unlabelled"
)
"""How the labels of a release are made from its annotations and adjudications, in words."""


def label_provenance(per_case_min: int | None, per_case_max: int | None, adjudicated: int = 0) -> str:
    """Where labels come from, in words, given how many annotators labelled each labelled case.

    Args:
        per_case_min: the fewest annotators of a labelled case (None: no labelled case).
        per_case_max: the most.
        adjudicated: how many labels an adjudicator decided.

    Returns:
        ``"expert majority of 3 annotators"`` (``", adjudicated where they had none"`` added when
        some were), ``"expert majority of 2-3 annotators"``, ``"a single expert annotator"`` or
        ``"unlabelled"``.
    """
    if per_case_min is None or per_case_max is None:
        return "unlabelled"
    if per_case_max == 1:
        text = "a single expert annotator"
    elif per_case_min == per_case_max:
        text = f"expert majority of {per_case_max} annotators"
    else:
        text = f"expert majority of {per_case_min}-{per_case_max} annotators"
    return text + (", adjudicated where they had none" if adjudicated else "")


def label_kind(per_case_min: int | None, per_case_max: int | None) -> str:
    """The card's ``labels.kind`` (:data:`~medrewardbench.data.provenance.LABEL_KINDS`) for these annotator counts.

    Args:
        per_case_min: the fewest annotators of a labelled case (None: no labelled case).
        per_case_max: the most.

    Returns:
        ``"single_expert"``, ``"expert_majority"`` or ``"unknown"`` (no labels).
    """
    if per_case_max is None:
        return "unknown"
    return "single_expert" if per_case_max == 1 else "expert_majority"


@dataclass
class ReleaseTally:
    """Counts over the cases of a release, for its card; :meth:`add` each case as it is written."""

    cases: int = 0
    labelled: int = 0
    annotators: set[str] = field(default_factory=set)
    per_case_min: int | None = None
    per_case_max: int | None = None
    undecided: int = 0
    """(case, dimension) pairs with votes but neither a strict majority nor an adjudication."""
    sources: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LABEL_SOURCES, 0))
    superseded: int = 0
    comments: int = 0
    cannot_judge: int = 0
    harm_flags: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HARM_SEVERITIES, 0))
    """severity -> answers flagged with it (one per annotator and answer)."""

    def add(self, case: Case) -> None:
        """Count one case of the release.

        Args:
            case: the case as written (labels, annotations, adjudications).
        """
        self.cases += 1
        self.labelled += int(case.is_labeled)
        for dim in case.labels:
            self.sources[case.label_source(dim) or "given"] += 1
        if not case.annotations:
            return
        self.annotators.update(a.annotator for a in case.annotations)
        majority, undecided = majority_labels(case.annotations)
        self.undecided += sum(1 for dim in undecided if dim not in case.labels)
        self.superseded += sum(1 for a in case.adjudications if a.dimension in majority)
        self.comments += sum(1 for a in case.annotations if a.comment)
        self.cannot_judge += sum(1 for a in case.annotations if a.cannot_judge)
        for annotation in case.annotations:
            for severity in annotation.harm.values():
                self.harm_flags[severity] = self.harm_flags.get(severity, 0) + 1
        count = sum(1 for a in case.annotations if a.labels)
        if count:
            self.per_case_min = count if self.per_case_min is None else min(self.per_case_min, count)
            self.per_case_max = count if self.per_case_max is None else max(self.per_case_max, count)


def labels_card(
    tally: ReleaseTally, *, provenance: str | None = None, annotation_projects: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The ``labels`` object of a release's card (schema in the module docstring).

    Args:
        tally: the release's counts.
        provenance: where the labels come from, declared in words (default: worked out from the counts).
        annotation_projects: the annotation projects the labels came from.

    Returns:
        The object, keys in a fixed order.
    """
    adjudicated = tally.sources.get("adjudication", 0)
    same = tally.per_case_min == tally.per_case_max
    return {
        "provenance": provenance or label_provenance(tally.per_case_min, tally.per_case_max, adjudicated),
        "kind": label_kind(tally.per_case_min, tally.per_case_max),
        "raters": tally.per_case_max if same else None,
        "declared": provenance is not None,
        "rule": LABEL_RULE,
        "annotators": sorted(tally.annotators),
        "annotations_per_case": {"min": tally.per_case_min, "max": tally.per_case_max},
        "label_sources": dict(tally.sources),
        "undecided_dimensions": tally.undecided,
        "adjudicated_dimensions": adjudicated,
        "superseded_adjudications": tally.superseded,
        "comments": tally.comments,
        "cannot_judge": tally.cannot_judge,
        "harm_flags": dict(tally.harm_flags),
        "annotation_projects": [dict(entry) for entry in annotation_projects],
    }


def write_card(path: str | Path, payload: Mapping[str, Any]) -> Path:
    """Write a dataset card next to its final name, then move it into place (a crash leaves no half card).

    Args:
        path: the card file (``dataset.json``).
        payload: the card.

    Returns:
        The path written.
    """
    card = Path(path)
    tmp = card.with_name(f".{card.name}.tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, card)
    finally:
        tmp.unlink(missing_ok=True)
    return card


def annotation_projects_beside(data_file: str | Path) -> list[dict[str, Any]]:
    """The ``labels.annotation_projects`` of the dataset card beside a data file, when the card describes it.

    Args:
        data_file: a canonical file (an ``annotate export``).

    Returns:
        The entries; empty when there is no card, or the card lists other files.

    Raises:
        DataError: the card cannot be read, or its ``annotation_projects`` is not a list of objects.
    """
    path = Path(data_file)
    card = path.parent / CARD_FILENAME
    if read_dataset_card(card) is None:  # also checks that the card reads
        return []
    document = json.loads(card.read_text("utf-8-sig"))
    files = document.get("files")
    if isinstance(files, list) and path.name not in files:
        return []
    labels = document.get("labels")
    entries = labels.get("annotation_projects", []) if isinstance(labels, dict) else []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise DataError([DataProblem(str(card), "must be a list of objects", field="labels.annotation_projects")])
    return [dict(e) for e in entries]


def merge_annotation_projects(
    known: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Add annotation-project entries to those already known; a project named again replaces its entry.

    Args:
        known: the entries so far.
        new: entries to add.

    Returns:
        The entries, sorted by project name.
    """
    merged = {str(e.get("project")): dict(e) for e in known}
    merged.update({str(e.get("project")): dict(e) for e in new})
    return [merged[name] for name in sorted(merged)]


HUB_LICENSE_UNSET = "unknown"
"""The Hub's licence identifier when the exporter named none (the card then says to set it)."""


def size_category(cases: int) -> str:
    """The Hub's ``size_categories`` value for a number of rows.

    Args:
        cases: rows in the data set.

    Returns:
        ``"n<1K"``, ``"1K<n<10K"``, ``"10K<n<100K"``, ``"100K<n<1M"``, ``"1M<n<10M"`` or
        ``"10M<n<100M"`` (a benchmark is never larger).
    """
    bounds = (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    )
    for bound, name in bounds:
        if cases < bound:
            return name
    return "10M<n<100M"


def hub_readme(
    card: Mapping[str, Any],
    *,
    data_files: str,
    split: str,
    license: str | None = None,
    languages: Sequence[str] = ("en",),
) -> str:
    """The README.md of a Hub dataset folder: the YAML header the Hub reads, then the card in prose.

    The header holds ``license``, ``language``, ``pretty_name``, ``task_categories``, ``tags``,
    ``size_categories``, ``annotations_creators``, ``configs`` (which files hold which split) and
    ``medrewardbench`` (the labels' provenance, kind and raters, and the tool that wrote the set).
    The prose says what a row holds and where the labels come from, from the card's ``labels``.

    Args:
        card: the set's ``dataset.json`` (name, cases, labels, construction).
        data_files: the pattern of the data files, relative to the folder (``data/test-*.parquet``).
        split: the split they hold.
        license: the Hub licence identifier (``cc-by-4.0``, ``other``, ...); None writes ``unknown``.
        languages: ISO 639-1 codes of the questions' and answers' language.

    Returns:
        The README text.
    """
    import yaml

    labels = card.get("labels") or {}
    kind = labels.get("kind", "unknown")
    header: dict[str, Any] = {
        "license": license or HUB_LICENSE_UNSET,
        "language": list(languages),
        "pretty_name": str(card.get("name") or "medrewardbench set"),
        "task_categories": ["visual-question-answering", "image-text-to-text"],
        "tags": ["medical", "reward-modeling", "llm-as-a-judge", "pairwise-preference", "medrewardbench"],
        "size_categories": [size_category(int(card.get("cases") or 0))],
        "annotations_creators": ["expert-generated"] if kind in {"expert_majority", "single_expert"} else ["other"],
        "configs": [{"config_name": "default", "data_files": [{"split": split, "path": data_files}]}],
        "medrewardbench": {
            "labels_provenance": labels.get("provenance", "unknown"),
            "labels_kind": kind,
            "raters": labels.get("raters"),
            "label_rule": labels.get("rule", LABEL_RULE),
            "created_by": card.get("created_by"),
        },
    }
    yaml_text = yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=100)
    sources = labels.get("label_sources") or {}
    per_case = labels.get("annotations_per_case") or {}
    construction = card.get("construction") or {}
    how = "declared by the exporter" if labels.get("declared") else "worked out from the annotations"
    lines = [
        "---",
        yaml_text.rstrip("\n"),
        "---",
        "",
        f"# {header['pretty_name']}",
        "",
        "Pairwise medical image question answering for judging judges: each row is one image, one question and "
        "two answers, with experts' labels per dimension saying which answer is better "
        f"({', '.join(DIMENSIONS)}). Written by {card.get('created_by') or 'medrewardbench'}.",
        "",
        "## Labels and their provenance",
        "",
        f"- Provenance: {labels.get('provenance', 'unknown')} ({how}).",
        f"- Rule: {labels.get('rule', LABEL_RULE)}.",
        f"- Cases: {card.get('cases', 0)}, labelled: {card.get('labelled_cases', 0)}; annotators: "
        f"{len(labels.get('annotators') or [])}, {per_case.get('min')}-{per_case.get('max')} per case.",
        f"- Labels decided by a majority: {sources.get('majority', 0)}; by an adjudication: "
        f"{sources.get('adjudication', 0)}; given without annotations: {sources.get('given', 0)}; dimensions "
        f"left undecided: {labels.get('undecided_dimensions', 0)}.",
        f'- Comments: {labels.get("comments", 0)}; "cannot judge" answers: {labels.get("cannot_judge", 0)}.',
        "",
        "`dataset.json` beside this card holds the full record (annotation projects, guidelines versions, "
        "quality control, how the set was built).",
        "",
        "## Columns",
        "",
        "- `image`: the image as judges see it (DICOM and builtin images rendered to PNG); `image_original` "
        "holds a DICOM file itself, `image_builtin` the name of a builtin image.",
        "- `question`, `response_1`, `response_2`; `organ_system`, `department`, `modality`, `source_dataset`, "
        "`question_type`, `body_part`; `metadata` (JSON text).",
        "- `labels`: per dimension, 1 when `response_1` is better, 2 when `response_2` is; `label_sources`: "
        "`majority`, `adjudication` or `given` per dimension.",
        "- `annotations`: each annotator's labels (source order), the order they were shown, seconds, comment and "
        '"cannot judge" reason; `adjudications`: the decisions on dimensions without a strict majority.',
        "",
        "## Use",
        "",
        "```",
        "medrewardbench eval --data hf:OWNER/NAME --judge api:gpt-4o   # or --data on a local copy of this folder",
        "```",
    ]
    if construction.get("sources"):
        names = ", ".join(str(s.get("name")) for s in construction["sources"] if isinstance(s, Mapping))
        lines += ["", "## How it was built", "", f"Question sources: {names}. Response generators: "
                  f"{', '.join(str(p) for p in construction.get('pool') or []) or 'not recorded'}."]  # fmt: skip
    if header["license"] == HUB_LICENSE_UNSET:
        lines += ["", "## Licence", "", "Not set by the exporter: set `license` above before publishing."]
    return "\n".join(lines) + "\n"
