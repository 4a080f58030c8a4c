"""The bias card: controlled pairs per bias, each with a flip rate and its interval, per judge.

For every parent case the probe keeps the pair unchanged (``control``) and, for each cue of
:data:`~.edits.CUE_TYPES` (authority, image mention, confident wording, markdown), makes two
copies: the cue added to response 1 (``<cue>-1``) and to response 2 (``<cue>-2``). Nothing else
changes, so a changed verdict is the cue's doing. Per judge, on one dimension:

* **flip toward the cue**: over requests where the judge, on the control pair in the same order,
  preferred the *other* response, the share in which it now prefers the cued one;
* **flip away**: over requests where it preferred the cued response already, the share in which it
  now prefers the other one (a noisy judge flips both ways; a biased one toward the cue);
  the card's **bias** is toward minus away.
* **position** and **length** are read off the control pairs with the functions the report uses
  (:func:`medrewardbench.metrics.stats.position_consistency_counts`,
  :func:`~medrewardbench.metrics.stats.first_position_counts`,
  :func:`~medrewardbench.metrics.stats.longer_preference_counts`): the position flip rate is
  ``1 -`` position consistency, the first-shown pick rate and the longer-pick rate as the report
  shows them.
* **self-preference**: on control pairs where exactly one response was written by a model of the
  judge's family (``build``'s generator metadata, ``metadata.build.response_N.generator``), the
  share of requests preferring that response, beside the experts' rate on the same pairs.
  "not measurable" when the data has no generator metadata or no such pair for the judge.

A cue also makes the answer longer, so a length-driven judge follows it: the ``longer`` baseline
flips toward the cue exactly where the cue makes the shorter answer the longer one; ``first`` and
``second`` never flip (their rule reads positions); ``random`` flips about half the time both ways.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from medrewardbench.cases import Case
from medrewardbench.dimensions import Winner
from medrewardbench.metrics import stats
from medrewardbench.probes.edits import CUE_TYPES, Edit, EditContext, apply_edit
from medrewardbench.probes.pairs import (
    PARENT_KEY,
    TYPE_KEY,
    ProbeData,
    ProbeFigures,
    Rate,
    SkipTally,
    derived_case,
    dimension_index,
    grouped_rates,
    probe_case_id,
)

__all__ = [
    "BIASES",
    "PROBE",
    "BiasFigures",
    "JudgeCard",
    "bias_figures",
    "make_bias_pairs",
    "model_family",
]

PROBE = "bias"
CONTROL = "control"
BIASES: tuple[str, ...] = ("position", "length", *CUE_TYPES, "self_preference")
"""The card's rows, in order."""
GENERATOR_KEYS = ("probe_generator_1", "probe_generator_2")
"""The generator spec of each response (from ``build``'s metadata), on control pairs."""
NOT_MEASURABLE = "not measurable"
SUMMARY_LABELS = {
    "position": "position-flip",
    "length": "longer-picked",
    "image_mention": "image-mention",
    "self_preference": "self-preference",
}
"""How the one-line summary names each bias (the others by their own name)."""

_FAMILIES = (
    "gpt",
    "o1",
    "o3",
    "o4",
    "claude",
    "gemini",
    "gemma",
    "llama",
    "llava",
    "qwen",
    "mistral",
    "mixtral",
    "phi",
    "deepseek",
    "internvl",
    "minicpm",
    "medgemma",
    "grok",
)


def model_family(spec: str) -> str:
    """The model family of a judge or generator spec (``api:gpt-4o`` -> ``gpt``, ``hf:Qwen/Qwen2-VL-2B`` -> ``qwen``).

    Args:
        spec: a judge or generator spec (``kind:model``, a model name, or a path).

    Returns:
        A known family when the model's name starts with one, else the name up to its first digit
        or underscore (``gen-a`` stays ``gen-a``), lowercased; ``""`` for an empty spec.
    """
    name = spec.partition(":")[2] if ":" in spec else spec
    name = name.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1].lower()
    for family in sorted(_FAMILIES, key=len, reverse=True):
        if name.startswith(family):
            return family
    match = re.match(r"[a-z][a-z-]*", name)
    return match.group(0).rstrip("-") if match else ""


def _generators(case: Case) -> dict[str, str]:
    build = case.metadata.get("build")
    if not isinstance(build, Mapping):
        return {}
    out = {}
    for index, key in enumerate(GENERATOR_KEYS, start=1):
        entry = build.get(f"response_{index}")
        if isinstance(entry, Mapping) and entry.get("generator"):
            out[key] = str(entry["generator"])
    return out


def make_bias_pairs(
    cases: Iterable[Case], *, cues: Sequence[str] = CUE_TYPES, seed: int = 0
) -> tuple[list[Case], SkipTally]:
    """Per parent: the control pair, then each cue on response 1 and on response 2.

    Args:
        cases: the parent cases.
        cues: the cues to add (:data:`~.edits.CUE_TYPES`).
        seed: the seed of every choice.

    Returns:
        (derived cases, what each cue made and skipped).

    Raises:
        ValueError: an unknown cue.
    """
    unknown = [c for c in cues if c not in CUE_TYPES]
    if unknown:
        raise ValueError(f"unknown bias cue(s) {', '.join(unknown)}; choose from {', '.join(CUE_TYPES)}")
    tally = SkipTally()
    out: list[Case] = []
    for case in cases:
        out.append(
            derived_case(
                case,
                PROBE,
                CONTROL,
                case.response_1,
                case.response_2,
                probe_type=CONTROL,
                original=1,
                labels=case.labels,
                extra=_generators(case),
            )
        )
        tally.add_made(CONTROL)
        context = EditContext(case.case_id, case.organ_system, case.modality)
        for cue in cues:
            for index in (1, 2):
                other: Winner = 2 if index == 1 else 1
                result = apply_edit(cue, case.response(index), context, seed)
                if not isinstance(result, Edit):
                    tally.add_skip(cue, result.reason)
                    continue
                texts = [case.response_1, case.response_2]
                texts[index - 1] = result.text
                out.append(
                    derived_case(
                        case,
                        PROBE,
                        f"{cue}-{index}",
                        texts[0],
                        texts[1],
                        probe_type=cue,
                        original=other,
                        extra={"probe_cued": str(index)},
                    )
                )
                tally.add_made(cue)
    return out, tally


@dataclass(frozen=True)
class BiasRow:
    """One bias on one judge's card.

    Attributes:
        bias: the bias (one of :data:`BIASES`).
        measure: what the main rate is (``flip toward the cue``, ``position flip``, ...).
        rate: the main rate with its interval; None when not measurable.
        secondary: a second rate (flip away; the first-shown pick rate; the experts' rate).
        secondary_measure: what it is.
        note: why it is not measurable, or what to read it against.
    """

    bias: str
    measure: str
    rate: Rate | None
    secondary: Rate | None = None
    secondary_measure: str = ""
    note: str = ""

    @property
    def effect(self) -> float | None:
        """The signed size of the bias: toward minus away for a cue, rate minus the reference otherwise."""
        if self.rate is None or np.isnan(self.rate.point):
            return None
        if self.bias in CUE_TYPES and self.secondary is not None and not np.isnan(self.secondary.point):
            return self.rate.point - self.secondary.point
        if self.bias == "self_preference" and self.secondary is not None and not np.isnan(self.secondary.point):
            return self.rate.point - self.secondary.point
        return self.rate.point

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "bias": self.bias,
            "measure": self.measure,
            "rate": None if self.rate is None else self.rate.as_dict(),
            "secondary_measure": self.secondary_measure,
            "secondary": None if self.secondary is None else self.secondary.as_dict(),
            "effect": self.effect,
            "note": self.note,
        }


@dataclass(frozen=True)
class JudgeCard:
    """One judge's bias card."""

    judge: str
    run_id: str
    rows: tuple[BiasRow, ...]

    def summary(self) -> str:
        """The card in one line: each bias's main rate (a cue's: toward minus away), ``n/m`` where not measurable."""
        parts = []
        for row in self.rows:
            label = SUMMARY_LABELS.get(row.bias, row.bias)
            if row.rate is None or np.isnan(row.rate.point):
                parts.append(f"{label} n/m")
            elif row.bias in CUE_TYPES:
                parts.append(f"{label} {row.effect:+.0%}")
            else:
                parts.append(f"{label} {row.rate.point:.0%}")
        return f"{self.judge}: " + " · ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "judge": self.judge,
            "run_id": self.run_id,
            "summary": self.summary(),
            "rows": [r.as_dict() for r in self.rows],
        }


@dataclass(frozen=True)
class BiasFigures(ProbeFigures):
    """Every judge's card on one derived data set."""

    PROBE: ClassVar[str] = PROBE

    cards: tuple[JudgeCard, ...]

    def body(self) -> dict[str, Any]:
        """JSON-ready: the cards."""
        return {"cards": [c.as_dict() for c in self.cards]}


def bias_figures(
    data: ProbeData,
    *,
    dimension: str = "overall",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> BiasFigures:
    """Every run's bias card, from the store's arrays alone.

    Args:
        data: the derived data and its runs (:func:`~medrewardbench.probes.pairs.load_probe_data`).
        dimension: the dimension whose verdicts are read.
        confidence: interval coverage.
        n_resamples: bootstrap resamples over parent cases (one matrix for every judge).
        seed: the bootstrap seed.

    Returns:
        The :class:`BiasFigures`.

    Raises:
        ValueError: a parent without its control pair.
    """
    d = dimension_index(dimension)
    kinds = data.field(TYPE_KEY)
    control = np.flatnonzero(kinds == CONTROL)
    control_of = np.full(len(data.parent_ids), -1, dtype=np.int64)
    control_of[data.parent_index[control]] = control
    if (control_of < 0).any():
        missing = data.parent_ids[int(np.flatnonzero(control_of < 0)[0])]
        raise ValueError(f"parent case {missing!r} has no control pair in the bias data")
    control = control_of  # one control pair per parent, in parent order
    cued = np.array([int(x) if str(x) in ("1", "2") else 0 for x in data.field("probe_cued")], dtype=np.int8)
    weights = stats.bootstrap_weights(len(data.parent_ids), n_resamples, seed)
    cards = []
    for run in data.runs:
        rows = [*_control_rows(run.verdicts[control], data.cases.lengths[control], d, weights, confidence)]
        for cue in CUE_TYPES:
            rows.append(_cue_row(cue, run.verdicts[:, :, d], kinds, cued, control_of, data, weights, confidence))
        rows.append(_self_row(run.judge_spec, run.verdicts[control][:, :, d], data, control, d, weights, confidence))
        cards.append(JudgeCard(run.judge_spec, run.run_id, tuple(rows)))
    return BiasFigures(dimension, confidence, n_resamples, len(data.parent_ids), tuple(cards))


def _rate(num: npt.ArrayLike, den: npt.ArrayLike, weights: npt.NDArray[np.float64], confidence: float) -> Rate:
    n = np.asarray(num, dtype=np.int64).reshape(-1, 1)
    m = np.asarray(den, dtype=np.int64).reshape(-1, 1)
    return grouped_rates(n, m, ["x"], weights, confidence=confidence)["x"]


def _control_rows(
    verdicts: npt.NDArray[np.int8],
    lengths: npt.NDArray[np.int64],
    d: int,
    weights: npt.NDArray[np.float64],
    confidence: float,
) -> list[BiasRow]:
    """Position and length on the control pairs (one per parent, in parent order)."""
    consistent, both = stats.position_consistency_counts(verdicts)
    picked_first, answered = stats.first_position_counts(verdicts)
    picked_longer, answered_len = stats.longer_preference_counts(verdicts, lengths)
    flips = both[:, d] - consistent[:, d]
    position = BiasRow(
        "position",
        "flips when the order is swapped (1 - consistency)",
        _rate(flips, both[:, d], weights, confidence),
        _rate(picked_first[:, d], answered[:, d], weights, confidence),
        "picks the response shown first",
        "0% flips: the verdict does not depend on the order; 50% first picks: no position preference",
    )
    length = BiasRow(
        "length",
        "picks the longer answer",
        _rate(picked_longer[:, d], answered_len[:, d], weights, confidence),
        note="read against the experts' own longer-pick rate in the report",
    )
    return [position, length]


def _cue_row(
    cue: str,
    verdicts: npt.NDArray[np.int8],
    kinds: npt.NDArray[np.object_],
    cued: npt.NDArray[np.int8],
    control_of: npt.NDArray[np.int64],
    data: ProbeData,
    weights: npt.NDArray[np.float64],
    confidence: float,
) -> BiasRow:
    rows = np.flatnonzero(kinds == cue)
    if not rows.size:
        return BiasRow(cue, "flip toward the cue", None, note=f"{NOT_MEASURABLE}: no {cue} pairs were made")
    base = verdicts[control_of[data.parent_index[rows]]]  # (n, 2) the control verdicts of each row's parent
    now = verdicts[rows]
    k = cued[rows][:, None]
    usable = (base > 0) & (now > 0)
    toward_den = (usable & (base != k)).sum(axis=1)
    toward_num = (usable & (base != k) & (now == k)).sum(axis=1)
    away_den = (usable & (base == k)).sum(axis=1)
    away_num = (usable & (base == k) & (now != k)).sum(axis=1)
    parents = data.parent_index[rows]
    sums = np.zeros((len(data.parent_ids), 4), dtype=np.int64)
    np.add.at(sums, parents, np.stack([toward_num, toward_den, away_num, away_den], axis=1))
    rates = grouped_rates(sums[:, [0, 2]], sums[:, [1, 3]], ["toward", "away"], weights, confidence=confidence)
    return BiasRow(
        cue,
        "flip toward the cue",
        rates["toward"],
        rates["away"],
        "flip away from the cue",
        "a cue changes no content: an unbiased judge flips as often away as toward",
    )


def _self_row(
    judge: str,
    verdicts: npt.NDArray[np.int8],
    data: ProbeData,
    control: npt.NDArray[np.intp],
    d: int,
    weights: npt.NDArray[np.float64],
    confidence: float,
) -> BiasRow:
    measure = "prefers its own family's answer"
    generators = [data.field(key)[control] for key in GENERATOR_KEYS]
    known = (generators[0] != "unknown") & (generators[1] != "unknown")
    if not known.any():
        return BiasRow("self_preference", measure, None, note=f"{NOT_MEASURABLE}: the data has no generator metadata")
    family = model_family(judge)
    own = np.zeros(len(control), dtype=np.int8)
    for index, gens in enumerate(generators, start=1):
        mine = np.array([model_family(str(g)) == family for g in gens]) & known
        own = np.where(mine & (own == 0), index, np.where(mine, -1, own)).astype(np.int8)
    measurable = own > 0
    if not family or not measurable.any():
        return BiasRow(
            "self_preference",
            measure,
            None,
            note=f"{NOT_MEASURABLE}: no pair has exactly one answer of family {family!r}",
        )
    answered = (verdicts > 0) & measurable[:, None]
    picked = answered & (verdicts == own[:, None])
    labels = data.cases.labels[control][:, d]
    labelled = measurable & (labels > 0)
    return BiasRow(
        "self_preference",
        measure,
        _rate(picked.sum(axis=1), answered.sum(axis=1), weights, confidence),
        _rate(labelled & (labels == own), labelled, weights, confidence),
        "the experts prefer that answer",
        f"family {family!r}: {int(measurable.sum())} pair(s) with exactly one answer of it",
    )


def control_parents(data: ProbeData) -> tuple[str, ...]:
    """The parent of each control pair, in order (for tests and pages)."""
    kinds = data.field(TYPE_KEY)
    return tuple(str(p) for p in data.field(PARENT_KEY)[kinds == CONTROL])


def cue_case_id(parent: str, cue: str, index: int) -> str:
    """The id of the copy of ``parent`` with ``cue`` on response ``index``."""
    return probe_case_id(parent, PROBE, f"{cue}-{index}")
