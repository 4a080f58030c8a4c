"""``build export``: the labelled set, as canonical cases or in the reference layout, with a dataset card.

* ``canonical`` (``--out FILE.jsonl|.json|.parquet``): one row per pair, in sampling order, with
  the pair's texts, the image embedded (builtin images stay references), the question's fields and
  metadata (``metadata.build`` says which generator wrote each response), ``annotations`` (each
  annotator's labels in source order, the order they were shown, their seconds, comment and
  "cannot judge" reason), ``adjudications`` (as ``build labels`` attached them), ``labels`` (the
  strict majority per dimension, else the adjudication:
  :func:`~medrewardbench.data.annotations.release_labels`) and ``label_sources``. A dimension with
  neither stays unlabelled and is counted as undecided. This is the release ``annotate export``
  writes from the same labels: nothing is recomputed over an adjudication.
* ``reference`` (``--out DIR``): ``DIR/pair_gt_all/{organ}.jsonl`` and
  ``DIR/pair_gt_all/parquet/{organ}.parquet`` (:mod:`medrewardbench.data.reference_writer`), the
  published layout that the reference code reads, with the same labels; the layout has no place
  for annotations (the card still describes them). It is written one organ system at a time.

* ``hub`` (``--out DIR``): a folder to push to the Hugging Face Hub as a dataset repository
  (``medrewardbench push DIR OWNER/NAME``): ``DIR/data/test-NNNNN-of-MMMMM.parquet`` with the
  ``datasets`` features (``image`` an ``Image``; per-annotator labels, adjudications, comments and
  label sources as nested columns: :mod:`medrewardbench.data.hub_folder`), ``DIR/README.md`` (the
  dataset card with the YAML header the Hub reads: licence, languages, task, size, ``configs``, the
  labels' provenance: :func:`medrewardbench.data.release.hub_readme`) and ``DIR/dataset.json``.
  ``--license`` and ``--language`` fill the header.

``labelled_only`` leaves out the pairs without any label. ``medrewardbench eval --data OUT`` reads
either export.

* ``questions`` (``--out FILE.jsonl``): the questions the difficulty filter kept (every question
  when no filter ran), in the questions format (:mod:`medrewardbench.data.questions`), images
  embedded, with ``metadata.build`` = the source, the id there and the filter's reason. This is the
  file ``medrewardbench annotate init --questions`` starts a screening project from, so clinicians
  can screen the survivors; its export (``--format questions --accepted-only``) imports into a new
  build project. No dataset card is written for it.

**The dataset card**: ``dataset.json`` next to the data (in the canonical file's directory, or in
``DIR``), which loaders never read as cases. A JSON object::

    {"name": ..., "created_by": "medrewardbench build 0.1.0", "format": "canonical",
     "files": ["labelled.jsonl"], "cases": 120, "labelled_cases": 118,
     "labels": {...},
     "construction": {"sources": [...], "filter": {...}, "pool": [...], "pairs": {...}}}

``labels`` is :func:`medrewardbench.data.release.labels_card`, the same object ``annotate export``
writes: the provenance (by default ``"expert majority of N annotators"``, ``", adjudicated where
they had none"`` added when an adjudication decided a label; ``--provenance TEXT`` declares it
instead, and ``declared`` is then true), ``kind`` and ``raters`` from the annotator counts, where
the labels came from, the comments and "cannot judge" counts, and ``annotation_projects``: the
annotation projects (name, guidelines version, quality control) named by the cards of the files
``build labels`` attached. The loaders read this card (:mod:`medrewardbench.data.provenance`):
``eval`` states the provenance in every report. The card holds no time stamp: the same project and
options give a byte-identical export, card included.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medrewardbench import __version__
from medrewardbench.cases import Adjudication, Annotation, Case
from medrewardbench.curation.labels import ANNOTATION_PROJECTS_KEY
from medrewardbench.curation.pairs import pair_case
from medrewardbench.curation.store import BuildError, BuildStore, StoredPair
from medrewardbench.data.annotations import release_labels
from medrewardbench.data.canonical import CANONICAL_SUFFIXES, DATASET_CARD_FILENAME
from medrewardbench.data.release import ReleaseTally, label_kind, label_provenance, labels_card, write_card

__all__ = ["EXPORT_FORMATS", "ExportSummary", "export_dataset", "label_kind", "label_provenance"]

EXPORT_FORMATS: tuple[str, ...] = ("canonical", "reference", "questions", "hub")
CREATED_BY = f"medrewardbench build {__version__}"


@dataclass
class ExportSummary:
    """What an export wrote."""

    format: str
    paths: list[Path]
    card: Path
    tally: ReleaseTally = field(default_factory=ReleaseTally)

    @property
    def cases(self) -> int:
        """Cases (or questions) written."""
        return self.tally.cases

    @property
    def labelled(self) -> int:
        """Cases with at least one label."""
        return self.tally.labelled

    @property
    def undecided(self) -> int:
        """(case, dimension) pairs with votes but neither a strict majority nor an adjudication."""
        return self.tally.undecided

    @property
    def adjudicated(self) -> int:
        """Labels an adjudication decided."""
        return self.tally.sources.get("adjudication", 0)

    @property
    def annotators(self) -> set[str]:
        """Everyone whose labels the export holds."""
        return self.tally.annotators


def _labelled_cases(
    store: BuildStore, summary: ExportSummary, labelled_only: bool, organ: str | None
) -> Iterator[Case]:
    for chunk in store.iter_pairs(organ=organ):
        questions = store.questions_by_id(sorted({p.qid for p in chunk}))
        images = store.images(questions.values())
        ids = [p.pair_id for p in chunk]
        labels = store.labels_for(ids)
        decided = store.adjudications_for(ids)
        for pair in chunk:
            case = _case(pair, questions, images, labels.get(pair.pair_id, []), decided.get(pair.pair_id, []))
            if labelled_only and not case.annotations and not case.adjudications:
                continue
            summary.tally.add(case)
            yield case


def _case(
    pair: StoredPair,
    questions: dict[str, Any],
    images: dict[str, Any],
    annotations: list[Annotation],
    adjudications: list[Adjudication],
) -> Case:
    question = questions.get(pair.qid)
    if question is None:
        raise BuildError(f"pair {pair.pair_id!r}: its question {pair.qid!r} is missing from the project")
    build = pair.metadata.get("build", {})
    first = (pair.generator_1, build.get("response_1", {}).get("generator", ""), pair.text_1)
    second = (pair.generator_2, build.get("response_2", {}).get("generator", ""), pair.text_2)
    case, _ = pair_case(question, images[pair.qid], pair.pair_id, first, second, int(build.get("seed", 0)))
    if not annotations and not adjudications:
        return case
    released = release_labels(annotations, adjudications)
    return dataclasses.replace(
        case,
        labels=released.labels,
        annotations=tuple(annotations),
        adjudications=tuple(adjudications),
        label_sources=released.sources,
    )


def _card(
    store: BuildStore,
    summary: ExportSummary,
    name: str,
    files: list[str],
    provenance: str | None,
) -> dict[str, Any]:
    active = store.active_filter()
    return {
        "name": name,
        "created_by": CREATED_BY,
        "format": summary.format,
        "files": files,
        "cases": summary.cases,
        "labelled_cases": summary.labelled,
        "labels": labels_card(
            summary.tally, provenance=provenance, annotation_projects=store.get_meta(ANNOTATION_PROJECTS_KEY) or []
        ),
        "construction": {
            "sources": [
                {"name": s["name"], "location": s["location"], "questions": s["questions"]} for s in store.sources()
            ],
            "filter": None if active is None else active[1],
            "pool": [spec for _, spec in store.pool()],
            "pairs": store.get_meta("pairs"),
        },
    }


_SET_ASIDE = ".pair_gt_all.replaced"
"""Where a reference export keeps the earlier ``pair_gt_all/`` until the new one is complete."""


def _check_target(fmt: str, target: Path, force: bool) -> None:
    """Refuse, before any work, an output that cannot be written or that holds an earlier export.

    Args:
        fmt: the export format (an unknown one is left to the caller's message).
        target: ``--out``.
        force: the files of an earlier export may be replaced.

    Raises:
        OutputDirError: a directory where a file belongs (or the reverse), a path below a file,
            a directory that does not accept new files.
        BuildError: a file suffix the format cannot write, or files that exist without ``force``.
    """
    from medrewardbench.data.reference import GT_DIR
    from medrewardbench.utils.outdir import check_output_dir, check_output_file

    if fmt not in EXPORT_FORMATS:
        return
    if fmt == "hub":
        from medrewardbench.data.hub_folder import HUB_DATA_DIR, HUB_README

        check_output_dir(target)
        card = target / DATASET_CARD_FILENAME
        replaced = [target / HUB_DATA_DIR, target / HUB_README, card]
        if any(p.exists() for p in replaced[:2]) and not _written_by_build(card):
            raise BuildError(
                f"--out {target}: {target} holds a data/ folder or README.md not written by 'build export'; "
                "choose another"
            )
    elif fmt == "reference":
        check_output_dir(target)
        card = target / DATASET_CARD_FILENAME
        replaced = [target / GT_DIR, card]
    else:
        if fmt == "questions" and target.suffix.lower() != ".jsonl":
            raise BuildError(f"--out {target}: a questions export is a .jsonl file")
        if fmt == "canonical" and target.suffix.lower() not in CANONICAL_SUFFIXES:
            raise BuildError(f"--out {target}: a canonical export needs a {', '.join(CANONICAL_SUFFIXES)} file")
        check_output_file(target)
        card = target.parent / DATASET_CARD_FILENAME
        replaced = [target, card] if fmt == "canonical" else [target]
    if card.is_dir() or (fmt == "reference" and replaced[0].exists() and not replaced[0].is_dir()):
        clash = card if card.is_dir() else replaced[0]
        raise BuildError(f"--out {target}: {clash} is in the way of the export; move it or choose another --out")
    if fmt == "reference" and replaced[0].is_dir() and not _written_by_build(card):
        raise BuildError(f"--out {target}: {replaced[0]} exists and was not written by 'build export'; choose another")
    existing = [str(path) for path in replaced if path.exists()]
    if existing and not force:
        them = "it" if len(existing) == 1 else "them"
        raise BuildError(
            f"--out {target}: {' and '.join(existing)} exist{'s' if len(existing) == 1 else ''} already "
            f"(an earlier export); --force replaces {them}"
        )


def _written_by_build(card: Path) -> bool:
    try:
        found = json.loads(card.read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and str(found.get("created_by", "")).startswith("medrewardbench build")


def _set_aside_path(target: Path) -> Path:
    return target / _SET_ASIDE


def _set_aside(gt: Path) -> None:
    """Move an earlier reference export out of the way, to be dropped once the new one is complete."""
    aside = _set_aside_path(gt.parent)
    shutil.rmtree(aside, ignore_errors=True)  # left by an export that was killed
    gt.rename(aside)


def _restore_set_aside(target: Path) -> None:
    """A reference export failed: its partial files go, the earlier export comes back."""
    from medrewardbench.data.reference import GT_DIR

    aside = _set_aside_path(target)
    if aside.is_dir():
        shutil.rmtree(target / GT_DIR, ignore_errors=True)
        aside.rename(target / GT_DIR)


def export_dataset(
    store: BuildStore,
    fmt: str,
    out: str | Path,
    *,
    name: str | None = None,
    provenance: str | None = None,
    labelled_only: bool = False,
    force: bool = False,
    license: str | None = None,
    languages: Sequence[str] = ("en",),
) -> ExportSummary:
    """Write the labelled set and its card (formats and card in the module docstring).

    Args:
        store: the project's store.
        fmt: ``canonical``, ``reference``, ``questions`` or ``hub``.
        out: a canonical file, or the reference layout's or the Hub folder's directory.
        name: the data set's name in the card (default: the output's stem or directory name).
        provenance: where the labels come from, declared (default: worked out from the annotations).
        labelled_only: leave out the pairs without labels.
        force: replace the files of an earlier export (the data and its card).
        license: the Hub licence identifier for the ``hub`` format's README (None: ``unknown``).
        languages: the languages (ISO 639-1) for the ``hub`` format's README.

    Returns:
        What was written.

    Raises:
        BuildError: an unknown format, no pairs, a reference export over a directory that holds
            another data set, files of an earlier export without ``force``, or a pair the
            reference layout cannot hold (no image).
        OutputDirError: an output that cannot be written (a directory where a file belongs, a
            path below a file, no permission); checked before any work.
        ValueError: an unsupported canonical suffix.
    """
    target = Path(out)
    _check_target(fmt, target, force)
    try:
        summary = _export(store, fmt, target, name=name, provenance=provenance, labelled_only=labelled_only)
        if fmt == "hub":
            _write_readme(summary, license, languages)
    except BaseException:
        if fmt == "reference":
            _restore_set_aside(target)
        raise
    if fmt == "reference":
        shutil.rmtree(_set_aside_path(target), ignore_errors=True)
    return summary


def _export(
    store: BuildStore,
    fmt: str,
    out: str | Path,
    *,
    name: str | None = None,
    provenance: str | None = None,
    labelled_only: bool = False,
) -> ExportSummary:
    """The export itself, once :func:`export_dataset` has checked the target."""
    from medrewardbench.data.canonical import write_canonical
    from medrewardbench.data.reference import GT_DIR
    from medrewardbench.data.reference_writer import write_reference

    if fmt not in EXPORT_FORMATS:
        raise BuildError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "questions":
        return _export_questions(store, Path(out))
    if store.count_pairs() == 0:
        raise BuildError("the project has no pairs to export; run 'build pairs' first")
    target = Path(out)
    if fmt == "canonical":
        if target.suffix.lower() not in CANONICAL_SUFFIXES:
            raise BuildError(f"--out {target}: a canonical export needs a {', '.join(CANONICAL_SUFFIXES)} file")
        card = target.parent / DATASET_CARD_FILENAME
        summary = ExportSummary(fmt, [target], card)
        write_canonical(_labelled_cases(store, summary, labelled_only, None), target, embed_images=True)
        files = [target.name]
        default_name = target.stem
    elif fmt == "hub":
        from medrewardbench.data.hub_folder import write_hub_data

        card = target / DATASET_CARD_FILENAME
        summary = ExportSummary(fmt, [], card)
        summary.paths = write_hub_data(_labelled_cases(store, summary, labelled_only, None), target)
        files = [p.relative_to(target).as_posix() for p in summary.paths]
        default_name = target.resolve().name
    else:
        gt = target / GT_DIR
        card = target / DATASET_CARD_FILENAME
        if gt.exists():
            written_here = card.is_file() and json.loads(card.read_text("utf-8")).get("created_by", "").startswith(
                "medrewardbench build"
            )
            if not written_here:
                raise BuildError(f"--out {target}: {gt} exists and was not written by 'build export'; choose another")
            _set_aside(gt)
        summary = ExportSummary(fmt, [], card)
        for organ in store.pair_organs():
            cases = list(_labelled_cases(store, summary, labelled_only, organ))
            if not cases:
                continue
            try:
                summary.paths.extend(write_reference(cases, target))
            except ValueError as exc:
                raise BuildError(f"the reference layout cannot hold this set: {exc}") from exc
        summary.paths.sort(key=lambda p: (p.suffix != ".jsonl", str(p)))
        files = [p.relative_to(target).as_posix() for p in summary.paths]
        default_name = target.resolve().name
    card.parent.mkdir(parents=True, exist_ok=True)
    write_card(card, _card(store, summary, name or default_name, files, provenance))
    return summary


def _write_readme(summary: ExportSummary, license: str | None, languages: Sequence[str]) -> None:
    """The hub format's README.md, from the dataset card just written (written aside, then moved into place)."""
    from medrewardbench.data.hub_folder import HUB_DATA_DIR, HUB_README, HUB_SPLIT
    from medrewardbench.data.release import hub_readme

    card = json.loads(summary.card.read_text("utf-8"))
    text = hub_readme(
        card, data_files=f"{HUB_DATA_DIR}/{HUB_SPLIT}-*.parquet", split=HUB_SPLIT, license=license, languages=languages
    )
    readme = summary.card.parent / HUB_README
    tmp = readme.with_name(f".{readme.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, readme)
    finally:
        tmp.unlink(missing_ok=True)
    summary.paths.append(readme)


def _image_value(image: Any) -> Any:
    if image.kind == "none":
        return None
    if image.kind == "builtin":
        return {"builtin": image.location}
    return {"bytes": base64.b64encode(image.raw_bytes()).decode("ascii"), "path": image.location or None}


def _export_questions(store: BuildStore, out: Path) -> ExportSummary:
    """The kept questions in the questions format, one chunk at a time (see the module docstring)."""
    from medrewardbench.data.questions import Question, question_record

    if out.suffix.lower() != ".jsonl":
        raise BuildError(f"--out {out}: a questions export is a .jsonl file")
    kept_only = store.active_filter() is not None
    summary = ExportSummary("questions", [out], out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as handle:
            for chunk in store.iter_questions(kept_only=kept_only):
                images = store.images(chunk)
                for stored in chunk:
                    decision = store.decision(stored.qid) if kept_only else None
                    build = {"source": stored.source, "source_id": stored.source_id}
                    if decision is not None:
                        build["filter"] = decision["reason"]
                    question = Question(
                        question_id=stored.qid,
                        image=images[stored.qid],
                        question=stored.question,
                        reference_answer=stored.reference_answer,
                        answer_type=stored.answer_type,
                        organ_system=stored.organ_system,
                        department=stored.department,
                        modality=stored.modality,
                        source_dataset=stored.source_dataset,
                        metadata={**stored.metadata, "build": build},
                    )
                    record = question_record(question, _image_value(question.image))
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                    summary.tally.cases += 1
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return summary
