"""``annotate pick``: pairs from a judge's run into an annotation project, with the slice's design.

The K cases the judge was least sure of and a uniform random slice of R from the rest
(:func:`medrewardbench.metrics.selection.pick_design`) are read again from the run's data source
and become items of a new project, or are added to an existing one (its annotators get a share
of them at once). Each picked item carries the design in ``metadata.selection`` (run, judge
fingerprint, K, R, seed, pool size, stratum), which the canonical export writes out with the
doctors' labels; the whole design, with the case ids of both strata, goes to the project's audit
log as ``selection.pick``. No schema change is needed.

An existing project must hold cases of the same data only, and no other slice: one project, one
design, so that the labels that come back are estimated under the design they were drawn by.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from medrewardbench.annotate.config import AnnotateError, InvalidInput
from medrewardbench.annotate.db import ImageBlob, Item, utcnow
from medrewardbench.annotate.security import public_id
from medrewardbench.annotate.service import Project, create_project
from medrewardbench.annotate.services.base import Identity, audit, require_admin
from medrewardbench.annotate.services.creation import _case_payload, _image_digest, _read_images
from medrewardbench.cases import Case
from medrewardbench.errors import DataError, DataProblem
from medrewardbench.metrics.analysis import LoadedRun
from medrewardbench.metrics.confidence import case_verdicts
from medrewardbench.metrics.corrected import load_single_run
from medrewardbench.metrics.selection import METADATA_KEY, SelectionDesign, pick_design

__all__ = [
    "PickResult",
    "add_picked_cases",
    "design_from_run",
    "load_pick_run",
    "pick_new_project",
    "picked_cases",
    "project_selection",
]

load_pick_run = load_single_run
"""The one stored run a judge spec or run id names (:func:`medrewardbench.metrics.corrected.load_single_run`)."""

AUDIT_ACTION = "selection.pick"


@dataclass(frozen=True)
class PickResult:
    """What a pick did to a project.

    Attributes:
        design: the slice.
        added: items created.
        tagged: items the project already had, now marked with the design.
    """

    design: SelectionDesign
    added: int
    tagged: int


def design_from_run(run: LoadedRun, *, least_confident: int, random: int, seed: int, ranked_by: str) -> SelectionDesign:
    """The slice of one run (see :func:`medrewardbench.metrics.selection.pick_design`).

    Args:
        run: the loaded run.
        least_confident: K.
        random: R.
        seed: the seed.
        ranked_by: ``mean`` or a dimension.

    Returns:
        The design, with the run's judge and data fingerprints.
    """
    return pick_design(
        case_verdicts(run.data),
        least_confident=least_confident,
        random=random,
        seed=seed,
        ranked_by=ranked_by,
        judge_fingerprint=run.record.judge_fingerprint,
        data_hash=run.record.data_hash,
    )


def picked_cases(run: LoadedRun, design: SelectionDesign) -> list[Case]:
    """The picked cases, read again from the run's data source, each with ``metadata.selection``.

    Expert labels the source may hold are dropped: the doctors label the pairs blind.

    Args:
        run: the run the design was drawn from.
        design: the slice.

    Returns:
        The least-confident cases first, then the random slice.

    Raises:
        DataError: the source cannot be read, or lacks some of the cases (it changed since the run).
    """
    from medrewardbench.data.sources import find_cases

    source = run.record.dataset_source
    wanted = [*design.least_confident_ids, *design.random_ids]
    try:
        found = find_cases(source, wanted)
    except (DataError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(
            [
                DataProblem(
                    source, f"run {run.record.run_id}'s data source cannot be read now to copy the pairs ({reason})"
                )
            ]
        ) from exc
    missing = [cid for cid in wanted if cid not in found]
    if missing:
        raise DataError(
            [
                DataProblem(source, "the run's data source no longer holds this case (was it changed?)", case_id=cid)
                for cid in missing[:20]
            ]
        )
    cases = []
    for cid in wanted:
        case = found[cid]
        metadata = {**dict(case.metadata), METADATA_KEY: design.case_metadata(cid)}
        cases.append(
            dataclasses.replace(case, labels={}, metadata=metadata, annotations=(), adjudications=(), label_sources={})
        )
    return cases


def _record(project: Project, design: SelectionDesign, added: int, tagged: int) -> None:
    with project.db.write() as s:
        audit(
            s,
            Identity.command_line(),
            AUDIT_ACTION,
            "project",
            None,
            {**design.to_json(), "added": added, "tagged": tagged},
        )


def pick_new_project(
    directory: str | Path,
    cases: Sequence[Case],
    design: SelectionDesign,
    **options: Any,
) -> Project:
    """Create a project whose items are the picked cases.

    Args:
        directory: the new project's directory.
        cases: :func:`picked_cases`.
        design: their design.
        **options: the options of :func:`medrewardbench.annotate.service.create_project`
            (``per_case``, ``db_url``, ``seed``, ``name``, ``guidelines``, ...).

    Returns:
        The open project.
    """
    from medrewardbench.data.canonical import write_canonical

    with tempfile.TemporaryDirectory(prefix="medrewardbench-pick-") as tmp:
        source = write_canonical(cases, Path(tmp) / "picked.jsonl", embed_images=True)
        project = create_project(directory, cases=str(source), **options)
    _record(project, design, len(cases), 0)
    return project


def project_selection(project: Project) -> dict[str, Any] | None:
    """The design the project's items carry, if any (its ``metadata.selection`` without the stratum)."""
    with project.db.read() as s:
        for payload in s.scalars(select(Item.payload).where(Item.role == "primary")):
            found = (payload.get("metadata") or {}).get(METADATA_KEY)
            if isinstance(found, dict):
                return {k: v for k, v in found.items() if k != "stratum"}
    return None


def add_picked_cases(
    project: Project, cases: Sequence[Case], design: SelectionDesign, pool: Sequence[str], actor: Identity | None = None
) -> PickResult:
    """Add the picked cases to an existing pairs project; its queues are rebalanced in the same transaction.

    A picked case the project already holds (same id) is marked with the design rather than added twice.

    Args:
        project: the open project.
        cases: :func:`picked_cases`.
        design: their design.
        pool: every case id of the run's data (the project may hold only these).
        actor: who does it (default: the command line).

    Returns:
        What was added.

    Raises:
        InvalidInput: a screening project.
        AnnotateError: the project holds cases of other data, or another slice.
        DataError: an image that cannot be read.
    """
    who = actor if actor is not None else Identity.command_line()
    require_admin(who)
    if not project.is_pairs:
        raise InvalidInput(f"{project.config.directory} screens questions; pairs are picked into a pairs project")
    existing = project_selection(project)
    if existing is not None and existing.get("design") != design.design_id:
        raise AnnotateError(
            f"{project.config.directory} already holds the slice {existing.get('design')} of run "
            f"{existing.get('run_id')}; one project holds one design: pick into a new project"
        )
    pool_ids = set(pool)
    with project.db.read() as s:
        held = {item.external_id: item.id for item in s.scalars(select(Item).where(Item.role == "primary"))}
    foreign = sorted(cid for cid in held if cid not in pool_ids)
    if foreign:
        raise AnnotateError(
            f"{project.config.directory} holds {len(foreign)} case(s) that are not in the data of run "
            f"{design.run_id} (e.g. {foreign[0]!r}); pick into a new project"
        )
    new = [case for case in cases if case.case_id not in held]
    problems: list[DataProblem] = []
    items = [("primary", "pair", c.case_id, c.image, _case_payload(c), None) for c in new]
    blobs = _read_images(items, problems, "the run's data source")
    if problems:
        raise DataError(problems)
    tagged = 0
    with project.db.write() as s:
        known = {sha: blob_id for sha, blob_id in s.execute(select(ImageBlob.sha256, ImageBlob.id))}
        for digest, (blob_name, builtin, data) in blobs.items():
            if digest not in known:
                row = ImageBlob(sha256=digest, name=blob_name, builtin=builtin, data=data)
                s.add(row)
                s.flush()
                known[digest] = row.id
        now = utcnow()
        for case in new:
            image_digest = _image_digest(case.image)
            s.add(
                Item(
                    public_id=public_id(),
                    kind="pair",
                    role="primary",
                    external_id=case.case_id,
                    image_id=known[image_digest] if image_digest is not None else None,
                    payload=_case_payload(case),
                    gold_labels=None,
                    created_at=now,
                )
            )
        for case in cases:
            if case.case_id in held:
                item = s.get(Item, held[case.case_id])
                assert item is not None
                payload = dict(item.payload)
                payload["metadata"] = {**dict(payload.get("metadata") or {}), METADATA_KEY: case.metadata[METADATA_KEY]}
                item.payload = payload
                tagged += 1
        s.flush()
        audit(s, who, AUDIT_ACTION, "project", None, {**design.to_json(), "added": len(new), "tagged": tagged})
        project.assignments.rebalance_in(s, who)
    return PickResult(design=design, added=len(new), tagged=tagged)
