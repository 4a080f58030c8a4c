"""Creating a project: the items from canonical cases (pairs) or a questions file (screening), with their images.

Every image is read and decoded once, so a broken one is reported now rather than in front of a
doctor; all problems are reported together. Images are copied into the database, so the project
does not depend on the source files afterwards. A half-made project leaves no files behind.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.annotate.config import (
    CONFIG_FILE,
    DB_FILE,
    SECRET_FILE,
    AnnotateError,
    InvalidInput,
    ProjectConfig,
    write_config,
)
from medrewardbench.annotate.db import Database, ImageBlob, Item, ProjectRow, migrate, utcnow
from medrewardbench.annotate.guidelines import default_guidelines
from medrewardbench.annotate.security import public_id
from medrewardbench.annotate.services.base import Identity, audit
from medrewardbench.cases import Case, ImageRef
from medrewardbench.errors import DataError, DataProblem, ImageError

NewItem = tuple[str, str, str, ImageRef, dict[str, Any], dict[str, Any] | None]
"""(role, kind, external id, image, payload, gold labels) of an item to create."""


@dataclass(frozen=True)
class NewProject:
    """What a new project is made of (the options of :func:`create_project_database`)."""

    mode: str
    per_case: int
    seed: int
    repeat_share: float
    name: str | None
    guidelines: str | None


def create_project_database(
    directory: str | Path,
    *,
    cases: str | None = None,
    questions: str | Path | None = None,
    per_case: int = 3,
    db_url: str | None = None,
    gold: str | None = None,
    repeat_share: float = 0.0,
    seed: int = 0,
    name: str | None = None,
    guidelines: str | None = None,
) -> ProjectConfig:
    """Create a project's directory and database (see :func:`medrewardbench.annotate.service.create_project`).

    Returns:
        The new project's configuration.

    Raises:
        InvalidInput: both or neither of cases and questions, or bad numbers.
        DataError: a problem in the input files, or a file without any case (cases, gold).
        AnnotateError: the directory already holds a project.
    """
    if (cases is None) == (questions is None):
        raise InvalidInput("give either --cases (pairs to label) or --questions (questions to screen)")
    if per_case < 1:
        raise InvalidInput("--per-case must be at least 1")
    if not 0.0 <= repeat_share <= 1.0:
        raise InvalidInput("--repeat-share must be between 0 and 1")
    mode = "pairs" if cases is not None else "screening"
    if mode == "screening" and (gold is not None or repeat_share > 0):
        raise InvalidInput("gold cases and repeats apply to pairs, not to question screening")
    problems: list[DataProblem] = []
    items = _collect_items(cases, questions, gold, problems)
    blobs = _read_images(items, problems, cases if cases is not None else str(questions))
    if problems:
        raise DataError(problems)
    root = Path(directory)
    config = write_config(root, db_url)
    try:
        migrate(config.db_url)
        db = Database(config.db_url)
        try:
            _store(db, config, root, NewProject(mode, per_case, seed, repeat_share, name, guidelines), items, blobs)
        finally:
            db.dispose()
    except BaseException:
        # a half-made project must not block a second try
        leftovers = [CONFIG_FILE, SECRET_FILE]
        if config.stored_url is None:
            leftovers += [DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"]
        for leftover in leftovers:
            (root / leftover).unlink(missing_ok=True)
        raise
    return config


def _collect_items(
    cases: str | None, questions: str | Path | None, gold: str | None, problems: list[DataProblem]
) -> list[NewItem]:
    """The items to create, in input order; problems are added to ``problems``."""
    from medrewardbench.annotate.questions import read_questions
    from medrewardbench.data import load_benchmark

    items: list[NewItem] = []
    if cases is not None:
        for role, source in (("primary", cases), ("gold", gold)):
            if source is None:
                continue
            benchmark = load_benchmark(source)
            if not benchmark.cases:
                what = "gold cases" if role == "gold" else "cases to label"
                problems.append(DataProblem(source, f"holds no {what}"))
            for case in benchmark.cases:
                gold_labels = {dim: int(v) for dim, v in case.labels.items()} if role == "gold" else None
                if role == "gold" and not gold_labels:
                    problems.append(
                        DataProblem(source, "a gold case needs labels", case_id=case.case_id, field="labels")
                    )
                items.append((role, "pair", case.case_id, case.image, _case_payload(case), gold_labels))
    else:
        assert questions is not None
        for question in read_questions(questions):
            items.append(("primary", "question", question.question_id, question.image, question.payload(), None))
    primary_ids = {external for role, _, external, *_ in items if role == "primary"}
    for role, _, external, *_ in items:
        if role == "gold" and external in primary_ids:
            problems.append(
                DataProblem(
                    str(gold), "a gold case has the id of a case to label; give it another id", case_id=external
                )
            )
    return items


def _store(
    db: Database,
    config: ProjectConfig,
    root: Path,
    new: NewProject,
    items: Sequence[NewItem],
    blobs: dict[str, tuple[str, str | None, bytes]],
) -> None:
    """Write the project row, the images and the items in one transaction, with the audit entry."""
    with db.write() as s:
        if s.get(ProjectRow, 1) is not None:
            raise AnnotateError(f"the database {config.db_url.split('@')[-1]} already holds a project")
        s.add(
            ProjectRow(
                id=1,
                name=new.name or root.absolute().name,
                mode=new.mode,
                per_case=new.per_case,
                seed=new.seed,
                repeat_share=new.repeat_share,
                guidelines=new.guidelines if new.guidelines is not None else default_guidelines(new.mode),
                created_at=utcnow(),
            )
        )
        image_ids: dict[str, int] = {}
        for digest, (blob_name, builtin, data) in blobs.items():
            row = ImageBlob(sha256=digest, name=blob_name, builtin=builtin, data=data)
            s.add(row)
            s.flush()
            image_ids[digest] = row.id
        now = utcnow()
        for role, kind, external, image, payload, gold_labels in items:
            image_digest = _image_digest(image)
            s.add(
                Item(
                    public_id=public_id(),
                    kind=kind,
                    role=role,
                    external_id=external,
                    image_id=image_ids[image_digest] if image_digest is not None else None,
                    payload=payload,
                    gold_labels=gold_labels,
                    created_at=now,
                )
            )
        audit(
            s,
            Identity.command_line(),
            "project.create",
            "project",
            None,
            {
                "mode": new.mode,
                "items": sum(1 for i in items if i[0] == "primary"),
                "gold": sum(1 for i in items if i[0] == "gold"),
                "per_case": new.per_case,
                "repeat_share": new.repeat_share,
                "seed": new.seed,
            },
        )


def _case_payload(case: Case) -> dict[str, Any]:
    return {
        "question": case.question,
        "response_1": case.response_1,
        "response_2": case.response_2,
        "organ_system": case.organ_system,
        "department": case.department,
        "modality": case.modality,
        "source_dataset": case.source_dataset,
        "question_type": case.question_type,
        "body_part": case.body_part,
        "metadata": dict(case.metadata),
    }


def _image_digest(image: ImageRef) -> str | None:
    return None if image.kind == "none" else image.content_hash()


def _read_images(
    items: Sequence[NewItem], problems: list[DataProblem], source: str
) -> dict[str, tuple[str, str | None, bytes]]:
    from medrewardbench.images import load_image

    blobs: dict[str, tuple[str, str | None, bytes]] = {}
    for _role, _kind, external, image, _payload, _gold in items:
        if image.kind == "none":
            continue
        try:
            data = image.raw_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if digest not in blobs:
                load_image(image)
                if image.kind == "builtin":
                    blob_name, builtin = image.location.split(":", 1)[1], image.location
                elif image.kind == "path":
                    blob_name, builtin = os.path.basename(image.location), None
                else:
                    blob_name, builtin = image.location, None
                blobs[digest] = (blob_name[:255], builtin, data)
        except ImageError as exc:
            problems.append(DataProblem(source, str(exc), case_id=external, field="image"))
    return blobs
