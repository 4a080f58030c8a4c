"""The per-case viewer of the HTML report: every case, what each judge received and answered.

Unlike the gallery (:mod:`~medrewardbench.report.gallery`: the cases judges got wrong, up to a
number per judge, rendered as HTML), the viewer holds **every** case of the data set for every
judge, so that it stays quick at 1,026 cases x 32 judges:

- the data is one compact JSON document (:func:`viewer_data`) embedded in a
  ``<script type="application/json">`` block, read by ``viewer.js`` only when the viewer is
  opened, which renders one page of cases at a time (:data:`PAGE_SIZE`);
- each image is embedded once, as a small JPEG thumbnail keyed by the hash of its content
  (:data:`THUMBNAIL_SIDE`): cases that share an image share the entry;
- a prompt is not stored per request: each judge's template (as named in its run config) is
  stored once, and the page fills its placeholders with the case's question and the responses in
  the order shown, in one pass, as :meth:`~medrewardbench.prompts.PromptTemplate.render_user_text`
  does. A judge whose template cannot be loaded (a path that moved, a baseline without a prompt)
  carries a note saying so instead.

Verdicts are the parsed ones the metrics used (``RunData.verdicts``), per order in source terms
(1 = response 1); raw outputs are cut at :data:`RAW_LIMIT` characters.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from medrewardbench.cases import Case
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.evaluation.store import StoredJudgment
from medrewardbench.metrics.analysis import LoadedRun, judge_labels
from medrewardbench.metrics.core import RunData
from medrewardbench.metrics.loading import load_judged_cases
from medrewardbench.report.gallery import case_image

PAGE_SIZE = 25
"""Cases per page of the viewer."""
THUMBNAIL_SIDE = 160
"""Longest side in pixels of an image in the viewer (embedded once per distinct image)."""
RAW_LIMIT = 4000
"""Characters of a judge's raw output kept per request; the rest is cut with a note."""
SCHEMA = "medrewardbench.viewer/1"
MAX_CELLS = 100_000
"""The most cases x judges the viewer embeds (1,026 x 32 is 32,832); a larger report leaves it out
(:func:`fits`), since every judge's raw output in both orders is in the page."""
COMPRESS_ABOVE = 2_000_000
"""Bytes of JSON above which the page embeds the document gzipped (base64)."""


def _template(config: Mapping[str, Any]) -> dict[str, Any]:
    """A judge's prompt as its run config names it: system and user text, or a note why not."""
    name = config.get("template")
    if not name:
        return {"name": None, "note": "this judge sends no prompt (a rule or a reward model scores the pair)"}
    from medrewardbench.prompts import load_template

    try:
        template = load_template(str(name))
    except (MedRewardBenchError, OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return {"name": str(name), "note": f"the prompt cannot be reconstructed: template {name!r} ({first})"}
    out: dict[str, Any] = {"name": str(name), "system": template.system, "user": template.user}
    if config.get("structured"):
        out["note"] = "sent with a JSON schema for the verdicts (structured output)"
    return out


def _dimensions(values: Sequence[int]) -> list[int]:
    return [int(v) if v > 0 else 0 for v in values]


def _clip(text: str | None) -> str | None:
    if text is None or len(text) <= RAW_LIMIT:
        return text
    return text[:RAW_LIMIT] + f"\n[… {len(text) - RAW_LIMIT} more characters not shown]"


def fits(bundles: Sequence[LoadedRun]) -> bool:
    """Whether the viewer of these runs stays within :data:`MAX_CELLS` cases x judges."""
    return not bundles or bundles[0].data.n_cases * len(bundles) <= MAX_CELLS


def viewer_data(bundles: Sequence[LoadedRun]) -> dict[str, Any]:
    """Every case with every judge's request and answer, read from the runs' stores and data source.

    Args:
        bundles: loaded runs on one data set.

    Returns:
        The viewer's document (:func:`viewer_from_parts`).
    """
    if not bundles:
        return viewer_from_parts([], {}, None, [])
    loaded = load_judged_cases(bundles, set(bundles[0].data.case_ids))
    configs = [b.record.config if isinstance(b.record.config, Mapping) else {} for b in bundles]
    return viewer_from_parts([b.data for b in bundles], loaded.judgments, loaded.cases, configs, notes=loaded.notes)


def viewer_from_parts(
    runs: Sequence[RunData],
    judgments: Mapping[str, Mapping[tuple[str, str], StoredJudgment]],
    cases: Mapping[str, Case] | None,
    configs: Sequence[Mapping[str, Any]],
    *,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """Assemble the viewer's JSON document.

    Args:
        runs: runs on one data set.
        judgments: run id -> (case id, order) -> stored judgment (raw outputs and failures).
        cases: case id -> case (texts and images), or None when the source could not be loaded.
        configs: each run's stored config (its ``template`` rebuilds the prompt).
        notes: notes about the whole viewer (why texts are missing).

    Returns:
        ``{"schema", "page_size", "dimensions", "judges": [{label, orders, template}], "images":
        {hash: data URI}, "notes", "cases": [{id, organ, q, r1, r2, img, labels, j}]}``; ``labels``
        and each verdict list hold one number per dimension (0: none, 1 or 2: the response in source
        order); ``j`` holds per judge (in ``judges`` order) per order it ran ``[verdicts, raw output,
        failure]``.
    """
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "page_size": PAGE_SIZE,
        "dimensions": list(DIMENSIONS),
        "judges": [],
        "images": {},
        "notes": list(notes),
        "cases": [],
    }
    if not runs:
        return document
    first = runs[0]
    document["judges"] = [
        {"label": label, "orders": [o.value for o in run.orders], "template": _template(config)}
        for label, run, config in zip(judge_labels(runs), runs, configs, strict=True)
    ]
    organ = first.groups.get("organ_system", ("unknown",) * first.n_cases)
    images: dict[str, str] = document["images"]
    by_reference: dict[str, str | None] = {}
    for i, case_id in enumerate(first.case_ids):
        case = None if cases is None else cases.get(case_id)
        image_key = None
        if case is not None and case.image.kind != "none":
            reference = repr(case.image)
            if reference not in by_reference:
                by_reference[reference] = _thumbnail(case, images)
            image_key = by_reference[reference]
        per_judge = []
        for run in runs:
            stored = judgments.get(run.run_id, {})
            entries = []
            for order in run.orders:
                judgment = stored.get((case_id, order.value))
                verdict_row = run.verdicts[i, 0 if order.value == "original" else 1]
                entries.append(
                    [
                        _dimensions(verdict_row.tolist()),
                        None if judgment is None else _clip(judgment.raw_output),
                        None if judgment is None else judgment.failure,
                    ]
                )
            per_judge.append(entries)
        document["cases"].append(
            {
                "id": case_id,
                "organ": organ[i],
                "q": None if case is None else case.question,
                "r1": None if case is None else case.response_1,
                "r2": None if case is None else case.response_2,
                "img": image_key,
                "labels": _dimensions(first.labels[i].tolist()),
                "j": per_judge,
            }
        )
    return document


def _thumbnail(case: Case, images: dict[str, str]) -> str | None:
    """Embed a case's image once (keyed by a hash of its thumbnail); None when it cannot be read."""
    try:
        uri = case_image(case.image, modality=case.modality, max_side=THUMBNAIL_SIDE).uri
    except (MedRewardBenchError, OSError, ValueError):
        return None
    digest = hashlib.sha256(uri.encode("ascii")).hexdigest()[:16]
    images.setdefault(digest, uri)
    return digest


def viewer_payload(data: Mapping[str, Any]) -> tuple[str, str]:
    """The viewer's document as the page embeds it: ``(encoding, text)``.

    Up to :data:`COMPRESS_ABOVE` bytes it is plain JSON (``"json"``, :func:`viewer_json`); above,
    gzip in base64 (``"gzip"``), which the page inflates with the browser's own
    ``DecompressionStream`` when the viewer is opened: judges' raw outputs are most of the
    document at scale and shrink several times.
    """
    text = viewer_json(data)
    raw = text.encode("utf-8")
    if len(raw) <= COMPRESS_ABOVE:
        return "json", text
    return "gzip", base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def viewer_json(data: Mapping[str, Any]) -> str:
    """The viewer's document as the page embeds it: compact JSON that cannot close its ``<script>``."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c")  # "<" only occurs inside strings, where this escape reads the same
