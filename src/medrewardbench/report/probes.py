"""The report's Probes section: the probe commands' JSON files read back, one line per judge.

``medrewardbench probe grounding|counterfactual|bias|harm --out DIR`` write ``probe-*.json`` (and
pages, ``probe-*.html``) beside the results store. When ``report`` reads such a directory it finds
them here and shows, per judge of the report (matched by judge spec): the grounding flag and the
worst control's flip rate, the counterfactual error-detection and severity-weighted critical-miss
rates beside the critical-miss rate on doctor-flagged pairs, the over-penalisation of harmless
variants, and the bias card's position flip, longer-picked and cue flips.

The files are read as JSON documents, not through :mod:`medrewardbench.probes` (the report layer
does not import the probes): the fields used are checked, and a bad one is an error naming the
file and the field. A probe file is shown in the report of the data it was run on: grounding and
harm record the data's fingerprint, the pair probes their derived data's source
``probe:NAME(FINGERPRINT12)``; a file that records neither is shown in every report.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medrewardbench.metrics.results import Estimate
from medrewardbench.report.format import MISSING, estimate, signed_percent

PROBES: tuple[str, ...] = ("grounding", "counterfactual", "bias", "harm")
"""the probes, in the order the report lists them; each writes ``probe-NAME.json``"""
PAGES: dict[str, str] = {
    "grounding": "probe-grounding.html",
    "counterfactual": "probe-counterfactual.html",
    "bias": "probe-bias.html",
}
"""the probes that write a page of their own"""
CUES: tuple[tuple[str, str], ...] = (
    ("authority", "authority"),
    ("image_mention", "image mention"),
    ("confident", "confident"),
    ("markdown", "markdown"),
)
"""the bias card's cues: (JSON name, shown name)"""
_PARENT = re.compile(r"\(([0-9a-f]{12})\)$")


class ProbeFileError(ValueError):
    """A probe JSON file that cannot be read: the message names the file and the field."""


@dataclass(frozen=True)
class CueFlip:
    """One cue of the bias card: the flip toward the cue minus the flip away, and the flip toward with its interval."""

    cue: str
    effect: float | None
    toward: Estimate | None


@dataclass(frozen=True)
class JudgeProbes:
    """One judge's probe figures; None where that probe was not run for the judge."""

    judge: str
    grounding_flag: str | None = None
    worst_control: str | None = None
    worst_flip: Estimate | None = None
    detection: Estimate | None = None
    critical_miss: Estimate | None = None
    doctor_critical_miss: Estimate | None = None
    doctor_pairs: int | None = None
    over_penalisation: Estimate | None = None
    control_fails: bool | None = None
    position_flip: Estimate | None = None
    longer_picked: Estimate | None = None
    cues: tuple[CueFlip, ...] = ()


@dataclass(frozen=True)
class ProbeSection:
    """What the report shows of the probes: a line per judge and the links to the probe pages."""

    judges: tuple[JudgeProbes, ...]
    probes: tuple[str, ...]
    """the probes found, in :data:`PROBES` order"""
    pages: dict[str, str]
    """probe -> the page's address relative to the report"""
    confidence: float | None
    """the intervals' coverage, when the files record it"""
    harm_interval: str | None = None
    """how the doctor-flagged critical-miss interval was made, when ``probe-harm.json`` records it
    (``clopper-pearson over pairs``; older files made it by the case bootstrap)"""


class _Reader:
    """Checked access to one probe document's fields; errors name the file and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.document: Any = json.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProbeFileError(f"{path}: not a JSON document ({exc})") from exc
        if not isinstance(self.document, dict):
            raise ProbeFileError(f"{path}: expected a JSON object")

    def fail(self, field: str, expected: str) -> ProbeFileError:
        return ProbeFileError(f"{self.path}, field {field!r}: expected {expected}")

    def get(self, node: Any, field: str, key: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
        if not isinstance(node, dict) or (key not in node and not optional):
            raise self.fail(field, f"a field {key!r}")
        value = node.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind in (int, float, (int, float)):
            raise self.fail(field, _kind_name(kind))
        return value

    def judges(self, key: str) -> list[tuple[str, dict[str, Any]]]:
        entries = self.get(self.document, key, key, list)
        out = []
        for i, entry in enumerate(entries):
            field = f"{key}[{i}]"
            if not isinstance(entry, dict):
                raise self.fail(field, "an object")
            out.append((self.get(entry, f"{field}.judge", "judge", str), entry))
        return out

    def rate(self, node: Any, field: str) -> Estimate | None:
        """A ``{"point", "low", "high", "n"}`` object as an estimate; None for a missing or null one."""
        if node is None:
            return None
        if not isinstance(node, dict):
            raise self.fail(field, 'an object {"point", "low", "high", "n"}')
        values = []
        for key in ("point", "low", "high"):
            value = self.get(node, f"{field}.{key}", key, (int, float), optional=True)
            values.append(math.nan if value is None else float(value))
        n = self.get(node, f"{field}.n", "n", int, optional=True)
        if values[0] != values[0]:
            return None
        return Estimate(values[0], values[1], values[2], n or 0)

    def parent_hash(self) -> str | None:
        """The fingerprint (or its 12-character prefix) of the data the probe was run on, when recorded."""
        data = self.document.get("data")
        if data is None:
            return None
        if not isinstance(data, dict):
            raise self.fail("data", "an object")
        source = data.get("source")
        if self.document.get("probe") in ("counterfactual", "bias"):
            match = _PARENT.search(source) if isinstance(source, str) else None
            if match is None:
                raise self.fail("data.source", "'probe:NAME(FINGERPRINT12)'")
            return match.group(1)
        return str(self.get(data, "data.data_hash", "data_hash", str))


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds))


def find_probe_files(paths: Sequence[str | Path]) -> dict[str, Path]:
    """The ``probe-NAME.json`` files beside the given results: in each directory, or beside each store file.

    Returns:
        Probe name -> its file; the first path that has one wins.
    """
    found: dict[str, Path] = {}
    for path in map(Path, paths):
        folder = path if path.is_dir() else path.parent
        for probe in PROBES:
            candidate = folder / f"probe-{probe}.json"
            if probe not in found and candidate.is_file():
                found[probe] = candidate
    return found


def _grounding(reader: _Reader, figures: dict[str, dict[str, Any]]) -> None:
    for i, (spec, entry) in enumerate(reader.judges("judges")):
        field = f"judges[{i}]"
        controls = reader.get(entry, f"{field}.controls", "controls", dict)
        worst: tuple[str, Estimate] | None = None
        for control, numbers in controls.items():
            rate = reader.rate(
                reader.get(numbers, f"{field}.controls.{control}", "flip_rate", dict, optional=True),
                f"{field}.controls.{control}.flip_rate",
            )
            if rate is not None and (worst is None or rate.point > worst[1].point):
                worst = (control, rate)
        figures.setdefault(spec, {}).update(
            grounding_flag=reader.get(entry, f"{field}.flag", "flag", str),
            worst_control=worst[0] if worst else None,
            worst_flip=worst[1] if worst else None,
        )


def _counterfactual(reader: _Reader, figures: dict[str, dict[str, Any]]) -> None:
    for i, (spec, entry) in enumerate(reader.judges("judges")):
        field = f"judges[{i}]"
        detection = reader.get(entry, f"{field}.detection", "detection", dict)
        over = reader.get(entry, f"{field}.over_penalisation", "over_penalisation", dict)
        figures.setdefault(spec, {}).update(
            detection=reader.rate(detection.get("all"), f"{field}.detection.all"),
            critical_miss=reader.rate(entry.get("critical_miss"), f"{field}.critical_miss"),
            over_penalisation=reader.rate(over.get("all"), f"{field}.over_penalisation.all"),
            control_fails=reader.get(entry, f"{field}.control_fails", "control_fails", bool, optional=True),
        )


def _bias(reader: _Reader, figures: dict[str, dict[str, Any]]) -> None:
    for i, (spec, card) in enumerate(reader.judges("cards")):
        field = f"cards[{i}]"
        rows: dict[str, tuple[str, dict[str, Any]]] = {}
        for j, row in enumerate(reader.get(card, f"{field}.rows", "rows", list)):
            rows[reader.get(row, f"{field}.rows[{j}].bias", "bias", str)] = (f"{field}.rows[{j}]", row)

        def rate(bias: str, key: str = "rate", rows: dict[str, tuple[str, dict[str, Any]]] = rows) -> Estimate | None:
            if bias not in rows:
                return None
            where, row = rows[bias]
            return reader.rate(row.get(key), f"{where}.{key}")

        cues = []
        for name, shown in CUES:
            if name in rows:
                where, row = rows[name]
                effect = reader.get(row, f"{where}.effect", "effect", (int, float), optional=True)
                cues.append(CueFlip(shown, None if effect is None else float(effect), rate(name)))
        figures.setdefault(spec, {}).update(
            position_flip=rate("position"), longer_picked=rate("length"), cues=tuple(cues)
        )


def _harm(reader: _Reader, figures: dict[str, dict[str, Any]]) -> None:
    for i, (spec, entry) in enumerate(reader.judges("judges")):
        field = f"judges[{i}]"
        figures.setdefault(spec, {}).update(
            doctor_critical_miss=reader.rate(entry.get("critical_miss_rate"), f"{field}.critical_miss_rate"),
            doctor_pairs=reader.get(entry, f"{field}.pairs", "pairs", int),
        )


_READERS = {"grounding": _grounding, "counterfactual": _counterfactual, "bias": _bias, "harm": _harm}


def load_probe_section(
    files: Mapping[str, Path], data_hash: str, judges: Sequence[str], report_dir: str | Path
) -> ProbeSection | None:
    """The Probes section of one data set's report, or None when no probe file concerns it.

    Args:
        files: probe name -> its JSON file (:func:`find_probe_files`).
        data_hash: the report's data fingerprint; files run on other data are left out.
        judges: the report's judge specs, in its order; the section has a line for each one
            that some probe covered.
        report_dir: where the report is written (the probe pages are linked relative to it).

    Raises:
        ProbeFileError: a file that is not JSON or lacks a field the section shows.
    """
    figures: dict[str, dict[str, Any]] = {}
    found: list[str] = []
    pages: dict[str, str] = {}
    confidences: list[float] = []
    harm_interval: str | None = None
    for probe in PROBES:
        if probe not in files:
            continue
        reader = _Reader(files[probe])
        parent = reader.parent_hash()
        if parent is not None and not data_hash.startswith(parent):
            continue
        _READERS[probe](reader, figures)
        found.append(probe)
        confidence = reader.document.get("confidence", (reader.document.get("settings") or {}).get("confidence"))
        if isinstance(confidence, (int, float)) and not isinstance(confidence, bool):
            confidences.append(float(confidence))
        if probe == "harm":
            interval = (reader.document.get("settings") or {}).get("interval")
            harm_interval = interval if isinstance(interval, str) else None
        page = files[probe].parent / PAGES[probe] if probe in PAGES else None
        if page is not None and page.is_file():
            pages[probe] = Path(os.path.relpath(page, Path(report_dir))).as_posix()
    rows = tuple(JudgeProbes(spec, **figures[spec]) for spec in judges if spec in figures)
    if not found or not rows:
        return None
    confidence = confidences[0] if confidences and len(set(confidences)) == 1 else None
    return ProbeSection(rows, tuple(found), pages, confidence, harm_interval)


PROBE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("grounding", "grounding", "Grounding (worst flip %)"),
    ("counterfactual", "detection", "Detects errors %"),
    ("counterfactual", "critical_miss", "Critical miss %, constructed"),
    ("harm", "doctor_critical_miss", "Critical miss %, doctor-flagged"),
    ("counterfactual", "over_penalisation", "Over-penalises harmless %"),
    ("bias", "position_flip", "Position flip %"),
    ("bias", "longer_picked", "Picks the longer %"),
    ("bias", "cues", "Cue flips, toward − away (pp)"),
)
"""the section's columns: (probe, key of :func:`probe_lines`, header); a column shows when its probe was found"""


def probe_lines(section: ProbeSection) -> list[dict[str, str]]:
    """Each judge's line as text: ``judge`` and the keys of :data:`PROBE_COLUMNS` (``–`` where not run)."""

    def shown(value: Estimate | None) -> str:
        return estimate(value) if value is not None else MISSING

    lines = []
    for judge in section.judges:
        grounding = MISSING
        if judge.grounding_flag is not None:
            grounding = judge.grounding_flag
            if judge.worst_flip is not None:
                grounding += f"; {shown(judge.worst_flip)} ({judge.worst_control})"
        doctor = shown(judge.doctor_critical_miss)
        if judge.doctor_pairs is not None and doctor != MISSING:
            doctor += f" on {judge.doctor_pairs} pair{'s' if judge.doctor_pairs != 1 else ''}"
        over = shown(judge.over_penalisation)
        if judge.control_fails:
            over += " (fails the control)"
        cues = " · ".join(f"{c.cue} {signed_percent(c.effect, 0)}" for c in judge.cues) or MISSING
        lines.append(
            {
                "judge": judge.judge,
                "grounding": grounding,
                "detection": shown(judge.detection),
                "critical_miss": shown(judge.critical_miss),
                "doctor_critical_miss": doctor,
                "over_penalisation": over,
                "position_flip": shown(judge.position_flip),
                "longer_picked": shown(judge.longer_picked),
                "cues": cues,
            }
        )
    return lines


def probe_columns(section: ProbeSection) -> list[tuple[str, str]]:
    """The (key, header) of the columns whose probe the section found."""
    return [(key, header) for probe, key, header in PROBE_COLUMNS if probe in section.probes]


def probe_intro(section: ProbeSection) -> str:
    """The sentence above the section's lines: what the figures are and the intervals' coverage."""
    coverage = f"{round(100 * section.confidence)} % " if section.confidence is not None else ""
    harm = ""
    if section.harm_interval == "clopper-pearson over pairs":
        harm = "; the doctor-flagged critical miss's: exact Clopper-Pearson with the pair as the unit"
    elif section.harm_interval:
        harm = f"; the doctor-flagged critical miss's: {section.harm_interval}"
    return (
        "What the probes found, one line per judge (intervals: "
        f"{coverage}case bootstrap over parent cases{harm}). Grounding: the flag and the flip rate of the control "
        "that moved most verdicts. Detects errors: verdicts preferring the original over a copy with an injected "
        "error. Critical miss: the severity-weighted share of injected errors let through (constructed), beside "
        "the share of verdicts preferring the answer a doctor flagged severe or critical (doctor-flagged). "
        "Over-penalises: harmless variants the judge rejects in both orders. Position flip, picks the longer and "
        "the cue flips are the bias card's."
    )


PROBE_TITLES: dict[str, str] = {
    "grounding": "grounding",
    "counterfactual": "counterfactual pairs",
    "bias": "bias card",
}
"""the probe pages' link texts"""


def probe_context(section: ProbeSection) -> dict[str, Any]:
    """The HTML template's ``probes``: the intro, the columns, the lines and the links to the probe pages."""
    return {
        "intro": probe_intro(section),
        "columns": probe_columns(section),
        # an interval's bounds stay on one line: "[23.8,\u00a047.7]"
        "lines": [{k: v.replace(", ", ",\u00a0") for k, v in line.items()} for line in probe_lines(section)],
        "links": [(PROBE_TITLES[p], href) for p, href in section.pages.items()],
    }
