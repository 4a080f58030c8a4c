"""``build report``: where a project stands, and what the difficulty filter dropped.

Computed with SQL aggregates and a chunked pass over the decisions, so it runs in bounded memory
on any project. It holds:

* per source and organ system: questions, with a reference answer, decided, kept, dropped,
  kept unscored (no reference), not decided yet (imported after the last filter run);
* per filter model: answers scored, correct, failed (counted wrong);
* the response pool: per generator, answers stored, failed, missing for the kept questions;
* the pairs: how many, per generator; the labels: annotators, labels, labelled pairs, and once
  labels are attached, per dimension how often the experts' majority preferred the longer response
  (``longer_wins``), the figure ``build pairs --length-balance`` aims to keep near 50 %.

:func:`write_report` writes ``report.md`` (all of it), ``report.csv`` (the per-group table) and
``decisions.csv`` (one row per decided question: id, source, organ system, kept, correct, scored
models, failed answers, reason).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from medrewardbench.curation.store import BuildStore, StoredDecision
from medrewardbench.data.annotations import release_labels
from medrewardbench.dimensions import DIMENSIONS
from medrewardbench.utils.outdir import prepare_output_dir

__all__ = ["GROUP_COLUMNS", "BuildReport", "build_report", "report_markdown", "write_report"]

GROUP_COLUMNS: tuple[str, ...] = (
    "source",
    "organ_system",
    "questions",
    "with_reference",
    "decided",
    "kept",
    "dropped",
    "kept_unscored",
    "undecided",
)


@dataclass
class BuildReport:
    """A project's state (see the module docstring)."""

    project: str
    groups: list[dict[str, Any]] = field(default_factory=list)
    filter: dict[str, Any] | None = None
    models: list[dict[str, Any]] = field(default_factory=list)
    pool: list[dict[str, Any]] = field(default_factory=list)
    pairs: int = 0
    pair_generators: dict[str, int] = field(default_factory=dict)
    labels: int = 0
    labelled_pairs: int = 0
    annotators: list[str] = field(default_factory=list)
    longer_wins: dict[str, dict[str, int]] = field(default_factory=dict)
    """dimension -> {"longer": n, "shorter": n} over labelled pairs of unequal length."""
    orphan_labels: int = 0

    @property
    def totals(self) -> dict[str, int]:
        """The group table's columns summed over every group."""
        return {c: sum(int(g[c]) for g in self.groups) for c in GROUP_COLUMNS[2:]}


def _groups(store: BuildStore) -> list[dict[str, Any]]:
    return [{**asdict(g), "undecided": g.questions - g.decided} for g in store.group_counts()]


def _decisions(store: BuildStore) -> Iterator[StoredDecision]:
    """Every decision, in question-id order, read chunk by chunk."""
    for chunk in store.iter_decisions():
        yield from chunk


def _longer_wins(store: BuildStore) -> tuple[dict[str, dict[str, int]], int]:
    tally = {dim: {"longer": 0, "shorter": 0} for dim in DIMENSIONS}
    labelled = 0
    for chunk in store.iter_pairs():
        labels = store.labels_for([p.pair_id for p in chunk])
        decided = store.adjudications_for([p.pair_id for p in chunk])
        for pair in chunk:
            rows = labels.get(pair.pair_id)
            if not rows:
                continue
            labelled += 1
            if len(pair.text_1) == len(pair.text_2):
                continue
            longer = 1 if len(pair.text_1) > len(pair.text_2) else 2
            released = release_labels(rows, decided.get(pair.pair_id, ()))
            for dim, winner in released.labels.items():
                tally[dim]["longer" if winner == longer else "shorter"] += 1
    return {d: t for d, t in tally.items() if t["longer"] + t["shorter"]}, labelled


def build_report(store: BuildStore, project: str = "") -> BuildReport:
    """Gather a project's state (see the module docstring).

    Args:
        store: the project's store.
        project: how the report names the project.

    Returns:
        The report.
    """
    report = BuildReport(project or str(store.path.parent))
    report.groups = _groups(store)
    active = store.active_filter()
    if active is not None:
        report.filter = {"fingerprint": active[0], **active[1]}
        tallies: dict[str, dict[str, int]] = {}
        for decision in _decisions(store):
            for entry in decision.evidence:
                tally = tallies.setdefault(entry["generator"], {"answers": 0, "correct": 0, "failed": 0})
                tally["answers"] += 1
                tally["correct"] += int(bool(entry.get("correct")))
                tally["failed"] += int(entry.get("how") == "failed" or "failure" in entry)
        report.models = [{"generator": spec, **counts} for spec, counts in tallies.items()]
    kept_only = active is not None
    covered = store.distinct_hashes(kept_only=kept_only, with_reference=False)
    for fp, spec in store.pool():
        stored, failed = store.generation_counts(fp, kept_only=kept_only, with_reference=False)
        report.pool.append(
            {"generator": spec, "answers": stored - failed, "failed": failed, "missing": covered - stored}
        )
    report.pairs = store.count_pairs()
    report.pair_generators = store.pair_generator_counts()
    report.labels = store.count_labels()
    report.annotators = store.annotators()
    report.orphan_labels = store.orphan_labels()
    if report.labels:
        report.longer_wins, report.labelled_pairs = _longer_wins(store)
    return report


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return lines


def _share(part: int, whole: int) -> str:
    return "-" if whole == 0 else f"{part / whole:.1%}"


def report_markdown(report: BuildReport, store: BuildStore | None = None, examples: int = 20) -> str:
    """The report as markdown.

    Args:
        report: the report.
        store: the project's store; when given, up to ``examples`` dropped questions are listed.
        examples: how many dropped questions to list.

    Returns:
        The markdown text.
    """
    lines = [f"# Build report: {report.project}", ""]
    lines += ["## Questions and the difficulty filter", ""]
    if report.filter is None:
        lines += ["No filter has run yet (`build filter`).", ""]
    else:
        models = ", ".join(m["spec"] for m in report.filter.get("models", []))
        grader = report.filter.get("grader")
        lines += [
            f"Kept when at most **{report.filter['max_correct']}** of the models answered correctly. Models: {models}."
            + (f" Grader of open answers: {grader['spec']}." if grader else ""),
            "",
        ]
    rows = [[g[c] for c in GROUP_COLUMNS] for g in report.groups]
    totals = report.totals
    rows.append(["**all**", "", *[totals[c] for c in GROUP_COLUMNS[2:]]])
    lines += _table(list(GROUP_COLUMNS), rows) + [""]
    if report.models:
        lines += ["### Filter models", ""]
        lines += _table(
            ["generator", "answers", "correct", "share correct", "failed (counted wrong)"],
            [
                [m["generator"], m["answers"], m["correct"], _share(m["correct"], m["answers"]), m["failed"]]
                for m in report.models
            ],
        )
        lines.append("")
    if store is not None and report.filter is not None:
        dropped = []
        for decision in _decisions(store):
            if not decision.kept:
                dropped.append([decision.qid, decision.source, decision.organ_system, decision.reason])
                if len(dropped) >= examples:
                    break
        if dropped:
            lines += [f"### Dropped questions (first {len(dropped)}; all in decisions.csv)", ""]
            lines += _table(["id", "source", "organ_system", "reason"], dropped) + [""]
    lines += ["## Response pool", ""]
    if report.pool:
        lines += _table(
            ["generator", "answers", "failed", "missing"],
            [[p["generator"], p["answers"], p["failed"], p["missing"]] for p in report.pool],
        )
    else:
        lines.append("No generator yet (`build responses`).")
    lines += ["", "## Pairs and labels", ""]
    lines.append(f"Pairs: {report.pairs}." + (" Responses per generator: " if report.pair_generators else ""))
    if report.pair_generators:
        lines[-1] += ", ".join(f"{spec} {n}" for spec, n in report.pair_generators.items()) + "."
    lines.append(
        f"Labels: {report.labels} from {len(report.annotators)} annotator(s)"
        + (f" ({', '.join(report.annotators)})" if report.annotators else "")
        + (f" on {report.labelled_pairs} pairs." if report.labels else ".")
    )
    if report.orphan_labels:
        lines.append(f"{report.orphan_labels} label(s) belong to pairs that are no longer sampled.")
    if report.longer_wins:
        lines += ["", "How often the experts' majority preferred the longer response:", ""]
        lines += _table(
            ["dimension", "longer", "shorter", "longer wins"],
            [
                [dim, t["longer"], t["shorter"], _share(t["longer"], t["longer"] + t["shorter"])]
                for dim, t in report.longer_wins.items()
            ],
        )
    return "\n".join(lines).rstrip() + "\n"


@contextmanager
def _replacing(path: Path) -> Iterator[IO[str]]:
    """A text file written next to ``path`` and moved over it when complete: a failure leaves the old one."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as handle:
            yield handle
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_report(report: BuildReport, store: BuildStore, out_dir: str | Path) -> list[Path]:
    """Write ``report.md``, ``report.csv`` and ``decisions.csv`` into ``out_dir``.

    Each file is written next to its name and moved into place when complete, so a failure (a
    full disk) leaves the earlier report's files as they were.

    Args:
        report: the report.
        store: the project's store (decisions.csv is streamed from it).
        out_dir: the directory (created when missing).

    Returns:
        The files written.

    Raises:
        OutputDirError: ``out_dir`` is a file, lies below one, or cannot be written.
    """
    out = prepare_output_dir(out_dir)
    markdown = out / "report.md"
    with _replacing(markdown) as handle:
        handle.write(report_markdown(report, store))
    groups = out / "report.csv"
    with _replacing(groups) as handle:
        writer = csv.DictWriter(handle, fieldnames=list(GROUP_COLUMNS))
        writer.writeheader()
        writer.writerows(report.groups)
    decisions = out / "decisions.csv"
    with _replacing(decisions) as handle:
        writer_rows = csv.writer(handle)
        writer_rows.writerow(["id", "source", "organ_system", "kept", "correct", "models", "failed", "reason"])
        for d in _decisions(store):
            writer_rows.writerow(
                [d.qid, d.source, d.organ_system, int(d.kept), d.correct, len(d.evidence), d.failed, d.reason]
            )
    return [markdown, groups, decisions]
